//! The poppler-utils subprocesses behind the PDF parser: running a tool, and reading the
//! fonts layout (`pdftohtml -xml`), the embedded images (`pdfimages`) and the page rasters
//! (`pdftoppm`) they write into a temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::super::{IngestError, PageImage};

pub(super) fn err(name: &str, detail: impl Into<String>) -> IngestError {
    IngestError::Pdf {
        name: name.to_string(),
        detail: detail.into(),
    }
}

pub(super) fn run(
    name: &str,
    cmd: &str,
    args: &[&std::ffi::OsStr],
) -> Result<Vec<u8>, IngestError> {
    let out = Command::new(cmd).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            err(name, format!("{cmd} not found (install poppler-utils)"))
        } else {
            err(name, format!("cannot run {cmd}: {e}"))
        }
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let msg = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("failed");
        return Err(err(name, format!("{cmd}: {}", msg.trim())));
    }
    Ok(out.stdout)
}

/// `pdftohtml -xml -zoom 1` (fonts of every run, boxes of every image): the XML text.
pub(super) fn font_layout(name: &str, path: &Path, dir: &Path) -> Result<String, IngestError> {
    let out = dir.join("layout");
    run(
        name,
        "pdftohtml",
        &[
            "-xml".as_ref(),
            "-zoom".as_ref(),
            "1".as_ref(),
            "-q".as_ref(),
            "-nodrm".as_ref(),
            "-fmt".as_ref(),
            "png".as_ref(),
            path.as_os_str(),
            out.as_os_str(),
        ],
    )?;
    let xml = dir.join("layout.xml");
    std::fs::read_to_string(&xml).map_err(|source| IngestError::Io {
        name: xml.display().to_string(),
        source,
    })
}

/// Embedded images: (page, PNG bytes), in page/number order, masks skipped.
pub(super) fn extract_images(
    name: &str,
    path: &Path,
    dir: &Path,
) -> Result<Vec<(i64, Vec<u8>)>, IngestError> {
    let list = String::from_utf8_lossy(&run(
        name,
        "pdfimages",
        &["-list".as_ref(), path.as_os_str()],
    )?)
    .into_owned();
    // page num type ...
    let mut wanted = std::collections::HashMap::new();
    for line in list.lines().skip(2) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 3 {
            continue;
        }
        if let (Ok(page), Ok(num)) = (cols[0].parse::<i64>(), cols[1].parse::<u64>())
            && cols[2] == "image"
        {
            wanted.insert(num, page);
        }
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let prefix = dir.join("img");
    run(
        name,
        "pdfimages",
        &[
            "-png".as_ref(),
            "-p".as_ref(),
            path.as_os_str(),
            prefix.as_os_str(),
        ],
    )?;
    let mut out = Vec::new();
    for (file, parts) in numbered_files(dir, "img-")? {
        // img-PPP-NNN.png
        if parts.len() != 2 {
            continue;
        }
        let (page, num) = (parts[0] as i64, parts[1]);
        if wanted.get(&num) == Some(&page) {
            let data = std::fs::read(&file).map_err(|source| IngestError::Io {
                name: file.display().to_string(),
                source,
            })?;
            out.push(((page, num), data));
        }
    }
    out.sort_by_key(|(k, _)| *k);
    Ok(out.into_iter().map(|((p, _), d)| (p, d)).collect())
}

/// Page rasters at 72 dpi.
pub(super) fn rasterize(
    name: &str,
    path: &Path,
    dir: &Path,
) -> Result<Vec<PageImage>, IngestError> {
    let prefix = dir.join("page");
    run(
        name,
        "pdftoppm",
        &[
            "-png".as_ref(),
            "-r".as_ref(),
            "72".as_ref(),
            path.as_os_str(),
            prefix.as_os_str(),
        ],
    )?;
    let mut pages = Vec::new();
    for (file, parts) in numbered_files(dir, "page-")? {
        let Some(&page_no) = parts.first() else {
            continue;
        };
        let png = std::fs::read(&file).map_err(|source| IngestError::Io {
            name: file.display().to_string(),
            source,
        })?;
        let (width, height) = image::ImageReader::new(std::io::Cursor::new(&png))
            .with_guessed_format()
            .ok()
            .and_then(|r| r.into_dimensions().ok())
            .ok_or_else(|| {
                err(
                    name,
                    format!("pdftoppm wrote an unreadable PNG for page {page_no}"),
                )
            })?;
        pages.push(PageImage {
            page_no: page_no as i64,
            png,
            width,
            height,
        });
    }
    pages.sort_by_key(|p| p.page_no);
    Ok(pages)
}

/// `<prefix>N[-M...].png` files in `dir` with their numbers.
fn numbered_files(dir: &Path, prefix: &str) -> Result<Vec<(PathBuf, Vec<u64>)>, IngestError> {
    let rd = std::fs::read_dir(dir).map_err(|source| IngestError::Io {
        name: dir.display().to_string(),
        source,
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let fname = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = fname
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(".png"))
        else {
            continue;
        };
        let nums: Option<Vec<u64>> = rest.split('-').map(|n| n.parse().ok()).collect();
        if let Some(nums) = nums {
            out.push((e.path(), nums));
        }
    }
    out.sort();
    Ok(out)
}
