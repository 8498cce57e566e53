//! The app's filesystem work: completions of the path prompt's typed path, what Enter
//! there chooses, and reading (and re-encoding) an image to attach. The Runtime runs
//! these off the UI task for `Effect::ListPaths`, `Effect::ResolvePath` and
//! `Effect::AttachImage`; `App::update` never calls them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::messages::BinaryContent;

use super::{PathOutcome, PathPurpose};

const IMAGE_EXTS: &[&str] = &["png", "jpg", "jpeg", "gif", "bmp", "webp", "tif", "tiff"];

/// Directory entries completing the typed path: folders, and files fitting the purpose.
pub fn complete(typed: &str, purpose: PathPurpose) -> Vec<String> {
    let (dir, prefix) = match typed.rfind('/') {
        Some(i) => (typed[..=i].to_string(), typed[i + 1..].to_string()),
        None => ("./".to_string(), typed.to_string()),
    };
    let mut out: BTreeMap<String, ()> = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || !name.starts_with(&prefix) {
                continue;
            }
            let path = format!("{dir}{name}");
            let is_dir = e.path().is_dir();
            let ext = Path::new(&name)
                .extension()
                .map(|x| x.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let fits = match purpose {
                PathPurpose::AttachImage => IMAGE_EXTS.contains(&ext.as_str()),
                PathPurpose::Open | PathPurpose::SaveAs => ext == "json",
            };
            if is_dir {
                out.insert(format!("{path}/"), ());
            } else if fits {
                out.insert(path, ());
            }
        }
    }
    out.into_keys().take(200).collect()
}

/// What Enter chooses: the typed path, or (when it is a directory) the highlighted
/// entry; a chosen directory is entered rather than finished.
pub fn resolve(typed: &str, highlighted: Option<&str>) -> PathOutcome {
    let chosen = if Path::new(typed).is_dir() {
        highlighted.map(String::from)
    } else {
        Some(typed.to_string())
    };
    match chosen {
        Some(p) if Path::new(&p).is_dir() => PathOutcome::Directory(p),
        Some(p) => PathOutcome::File(PathBuf::from(p)),
        None => PathOutcome::Nothing,
    }
}

/// Reads an image file, checks it decodes, and re-encodes it as JPEG for the prompt. The
/// Runtime runs it off the UI task for `Effect::AttachImage`; `update` never does.
pub fn attach_image(path: &std::path::Path) -> Result<BinaryContent, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let img = image::load_from_memory(&bytes)
        .map_err(|e| format!("{} is not an image: {e}", path.display()))?;
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img.to_rgb8())
        .write_to(&mut out, image::ImageFormat::Jpeg)
        .map_err(|e| format!("cannot encode {}: {e}", path.display()))?;
    Ok(BinaryContent::from_bytes(&out.into_inner(), "image/jpeg"))
}
