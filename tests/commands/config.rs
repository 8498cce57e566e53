//! The config file fixtures: every `tests/configs/good/*.toml` loads, and every
//! `tests/configs/bad/*.toml` fails with one exact line naming the file, the line and
//! the key (never the text of the line: an API key on a bad line is not echoed).

use std::path::{Path, PathBuf};

use groundwork::config::{Config, ModelOverrides, ThemeName};
use std::process::Command;

fn dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs")
        .join(kind)
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir(kind))
        .unwrap_or_else(|e| panic!("tests/configs/{kind}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// Everything the workbench checks at start-up: the file, then its key bindings.
fn load(path: &Path) -> Result<Config, String> {
    let config = Config::load_file(path).map_err(|e| e.to_string())?;
    groundwork::tui::keymap_from_config(&config.tui, path).map_err(|e| e.to_string())?;
    Ok(config)
}

/// The text every fixture secret starts with; no error may show it.
const LEAK: &str = "sk-live-LEAK";

/// The top-level keys a config file may have.
const TOP: &str = "one of `storage`, `processing`, `search`, `embeddings`, `qa`, `analysis`, `prompts`, `model`, `tui`, `collections`, `judge`";

/// Each bad fixture with the line, the key and what its one-line error says.
const BAD: &[(&str, usize, Option<&str>, &str)] = &[
    (
        "api_key_then_bad_value.toml",
        3,
        Some("model.timeout_secs"),
        "invalid type: a string, expected u64",
    ),
    (
        "api_key_unquoted.toml",
        3,
        Some("model.api_key"),
        "string values must be quoted, expected literal string",
    ),
    (
        "api_key_unterminated.toml",
        2,
        Some("model.api_key"),
        "invalid basic string, expected <redacted>",
    ),
    (
        "api_key_wrong_type.toml",
        2,
        Some("model.api_key"),
        "invalid type: sequence, expected a string",
    ),
    (
        "bad_key_binding.toml",
        5,
        Some("tui.keys.help"),
        "unknown key 'ctrl-nope'",
    ),
    ("bad_syntax.toml", 1, None, "unclosed table, expected `]`"),
    (
        "bad_theme.toml",
        2,
        Some("tui.theme"),
        "unknown variant `blue`, expected one of `auto`, `dark`, `light`",
    ),
    (
        "bad_url.toml",
        3,
        Some("model.base_url"),
        "\"ftp://models.example.com\" is not an http(s) URL",
    ),
    (
        "collection_bad_name.toml",
        3,
        Some("collections.my-papers"),
        "'my-papers' is not a valid collection name (a letter or _, then letters, digits or _)",
    ),
    (
        "collection_empty_path.toml",
        2,
        Some("collections.manuals"),
        "the database path is empty",
    ),
    (
        "collection_not_a_string.toml",
        5,
        Some("collections.manuals"),
        "invalid type: integer `7`, expected a string",
    ),
    (
        "conflicting_bindings.toml",
        3,
        Some("tui.keys.quit"),
        "key 'ctrl-p' is bound to both quit and palette",
    ),
    (
        "missing_tokenizer.toml",
        4,
        Some("model.tokenizer"),
        "/nonexistent/groundwork/tokenizer.json is not a file (a tokenizer.json, or one of o200k_base, o200k, o200k_harmony, cl100k_base, cl100k, p50k_base, p50k, r50k_base, r50k)",
    ),
    (
        "plain_global_key.toml",
        2,
        Some("tui.keys.help"),
        "'x' cannot be global; use a Ctrl, Alt, Esc or function key",
    ),
    (
        "reranker_bad_url.toml",
        3,
        Some("search.reranker.url"),
        "\"127.0.0.1:8000/v1\" is not an http(s) URL",
    ),
    (
        "section_not_a_table.toml",
        1,
        Some("search"),
        "invalid type: integer `5`, expected a table",
    ),
    (
        "unknown_action.toml",
        2,
        Some("tui.keys.fly"),
        "unknown action 'fly'",
    ),
    (
        "unknown_analysis.toml",
        3,
        Some("analysis.timeout"),
        "unknown key `timeout` in [analysis]; expected one of `max_executions`, `code_timeout`, `max_output_chars`, `max_memory_mb`, `model`",
    ),
    (
        "unknown_analysis_model.toml",
        2,
        Some("analysis.model.visual"),
        "unknown key `visual` in [analysis.model]; expected `vision`",
    ),
    (
        "unknown_embeddings.toml",
        2,
        Some("embeddings.batch_size"),
        "unknown key `batch_size` in [embeddings]; expected `model`",
    ),
    (
        "unknown_embeddings_model.toml",
        5,
        Some("embeddings.model.dimensions"),
        "unknown key `dimensions` in [embeddings.model]; expected one of `provider`, `name`, `vector_dim`, `base_url`",
    ),
    (
        "unknown_layout.toml",
        2,
        Some("storage.layout"),
        "unknown variant `0.9`, expected one of `0.77`, `0.77.0`, `0.101`, `0.101.1`",
    ),
    (
        "unknown_model.toml",
        3,
        Some("model.temperature"),
        "unknown key `temperature` in [model]; expected one of `base_url`, `model`, `api_key`, `timeout_secs`, `total_timeout_secs`, `connect_timeout_secs`, `max_retries`, `retry_base_delay_ms`, `stream`, `max_tokens`, `max_response_bytes`, `tokenizer`",
    ),
    (
        "unknown_prompts.toml",
        3,
        Some("prompts.system"),
        "unknown key `system` in [prompts]; expected `domain_preamble`",
    ),
    (
        "unknown_qa.toml",
        3,
        Some("qa.max_search"),
        "unknown key `max_search` in [qa]; expected `max_searches` or `model`",
    ),
    (
        "unknown_qa_model.toml",
        3,
        Some("qa.model.name"),
        "unknown key `name` in [qa.model]; expected `vision`",
    ),
    (
        "unknown_reranker.toml",
        3,
        Some("search.reranker.top_n"),
        "unknown key `top_n` in [search.reranker]; expected one of `url`, `model`, `timeout_secs`, `api_key`",
    ),
    (
        "unknown_search.toml",
        3,
        Some("search.max_context_char"),
        "unknown key `max_context_char` in [search]; expected one of `limit`, `max_context_chars`, `vector_refine_factor`, `reranker`",
    ),
    (
        "unknown_storage.toml",
        3,
        Some("storage.vacuum_retention_seconds"),
        "unknown key `vacuum_retention_seconds` in [storage]; expected `data_dir` or `layout`",
    ),
    (
        "unknown_top_level.toml",
        5,
        Some("colours"),
        "unknown top-level key `colours`; expected TOP",
    ),
    (
        "unknown_top_level_key.toml",
        2,
        Some("verbose"),
        "unknown top-level key `verbose`; expected TOP",
    ),
    (
        "unknown_tui.toml",
        2,
        Some("tui.them"),
        "unknown key `them` in [tui]; expected `theme` or `keys`",
    ),
    (
        "wrong_type.toml",
        5,
        Some("search.limit"),
        "invalid type: a string, expected usize",
    ),
    (
        "wrong_type_model.toml",
        3,
        Some("model.stream"),
        "invalid type: a string, expected a boolean",
    ),
    (
        "zero_chunk_size.toml",
        3,
        Some("processing.chunk_size"),
        "a chunk must hold at least one token",
    ),
    (
        "zero_timeout.toml",
        3,
        Some("model.timeout_secs"),
        "timeouts must be at least one second",
    ),
];

/// The one line `file`'s error must be.
fn expected_line(file: &Path, line: usize, key: Option<&str>, message: &str) -> String {
    let key = key.map(|k| format!(", key `{k}`")).unwrap_or_default();
    format!(
        "invalid config file {}, line {line}{key}: {}",
        file.display(),
        message.replace("TOP", TOP)
    )
}

#[test]
fn every_good_config_loads() {
    let good = fixtures("good");
    assert!(good.len() >= 5, "{good:?}");
    for path in good {
        let config = load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(config.path.as_deref(), Some(path.as_path()));
    }
}

#[test]
fn the_reranker_config_loads_and_flags_override_it() {
    let path = dir("good").join("reranker.toml");
    let c = load(&path).unwrap();
    let r = c
        .app
        .search
        .reranker
        .clone()
        .expect("[search.reranker] read");
    assert_eq!(c.app.search.limit, 4);
    assert_eq!(
        (r.url.as_str(), r.model.as_str(), r.timeout_secs),
        ("http://127.0.0.1:8000/v1", "bge-reranker-v2-m3", 20)
    );
    assert_eq!(
        r.api_key.as_ref().unwrap().expose(),
        "rk-fixture-secret-1234"
    );
    // The key is never printed or serialized (a capability spec, a saved state).
    assert!(!format!("{c:?}").contains("rk-fixture"), "{c:?}");
    let dumped = serde_json::to_string(&c.app).unwrap();
    assert!(dumped.contains("bge-reranker-v2-m3"), "{dumped}");
    assert!(!dumped.contains("rk-fixture"), "{dumped}");

    let env = [(
        "GROUNDWORK_RERANKER_API_KEY".to_string(),
        "rk-env-secret-5678".to_string(),
    )]
    .into_iter()
    .collect();
    let flags = ModelOverrides {
        reranker_url: Some("http://127.0.0.1:9/v1".into()),
        reranker_model: Some("jina-reranker-v3".into()),
        ..Default::default()
    };
    let c = Config::load(Some(&path), &env, &flags).unwrap();
    let r = c.app.search.reranker.unwrap();
    assert_eq!(
        (r.url.as_str(), r.model.as_str(), r.timeout_secs),
        ("http://127.0.0.1:9/v1", "jina-reranker-v3", 20)
    );
    assert_eq!(r.api_key.unwrap().expose(), "rk-env-secret-5678");
    // No reranker anywhere: none; a model alone is refused with one line.
    let empty = dir("good").join("empty.toml");
    let none = Config::load(Some(&empty), &Default::default(), &Default::default()).unwrap();
    assert_eq!(none.app.search.reranker, None);
    let alone = ModelOverrides {
        reranker_model: Some("bge".into()),
        ..Default::default()
    };
    let err = Config::load(Some(&empty), &Default::default(), &alone)
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs a reranker URL"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn the_tokenizer_is_an_encoding_or_a_file_beside_the_config() {
    use groundwork::config::TokenizerSetting;
    let c = load(&dir("good").join("tokenizer_encoding.toml")).unwrap();
    assert_eq!(
        c.model.tokenizer,
        Some(TokenizerSetting::Encoding("o200k_base".into()))
    );
    let c = load(&dir("good").join("tokenizer_file.toml")).unwrap();
    assert_eq!(
        c.model.tokenizer,
        Some(TokenizerSetting::File(dir("good").join("tokenizer.json")))
    );
    let c = load(&dir("good").join("empty.toml")).unwrap();
    assert_eq!(c.model.tokenizer, None);
}

#[test]
fn the_full_config_sets_every_section() {
    let path = dir("good").join("full.toml");
    let c = load(&path).unwrap();
    let a = &c.app;
    assert_eq!(
        a.storage.data_dir.as_deref(),
        Some(Path::new("/srv/groundwork/data"))
    );
    assert_eq!(a.storage.layout, groundwork::config::StoreLayout::V0101);
    assert_eq!(
        a.processing,
        groundwork::config::ProcessingConfig {
            chunker_type: groundwork::config::ChunkerType::Hybrid,
            chunk_size: 200,
            chunking_merge_peers: false,
        }
    );
    assert_eq!(
        (
            a.search.limit,
            a.search.max_context_chars,
            a.search.vector_refine_factor
        ),
        (8, 8000, 40)
    );
    let e = a.embeddings.model.as_ref().unwrap();
    assert_eq!(
        (e.provider.as_str(), e.name.as_str(), e.vector_dim),
        ("openai", "nomic-embed-text", 768)
    );
    assert_eq!(e.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
    assert_eq!(a.qa.max_searches, 6);
    assert!(a.qa.model.vision);
    assert_eq!(
        (
            a.analysis.max_executions,
            a.analysis.max_output_chars,
            a.analysis.max_memory_mb
        ),
        (10, 20000, 256)
    );
    assert_eq!(a.analysis.code_timeout, 30.0);
    assert_eq!(a.analysis.model.as_ref().map(|m| m.vision), Some(false));
    assert!(a.prompts.domain_preamble.contains("maintenance manuals"));
    let m = &c.model;
    assert_eq!(
        (m.base_url.as_str(), m.model.as_str()),
        ("https://llm.example.com/v1", "qwen3-32b")
    );
    assert_eq!(m.api_key.as_ref().unwrap().expose(), "sk-fixture-full-0000");
    assert_eq!(
        (m.timeout_secs, m.total_timeout_secs, m.connect_timeout_secs),
        (90, Some(900), 5)
    );
    assert_eq!(
        (m.max_retries, m.retry_base_delay_ms, m.stream),
        (3, 250, false)
    );
    assert_eq!(
        (m.max_tokens, m.max_response_bytes),
        (Some(4096), 4_194_304)
    );
    assert!(c.endpoint_named && c.model_named);
    assert_eq!(c.tui.theme, ThemeName::Light);
    assert_eq!(c.tui.keys["help"], ["f1", "f10"]);
    assert_eq!(c.tui.line_of("palette"), 59);
    // The key never shows in Debug output.
    assert!(!format!("{c:?}").contains("sk-fixture"), "{c:?}");
}

#[test]
fn an_empty_config_is_the_defaults() {
    let c = load(&dir("good").join("empty.toml")).unwrap();
    assert_eq!(c.app, Default::default());
    assert_eq!(c.model, Default::default());
    assert_eq!(c.tui, Default::default());
    assert!(!c.endpoint_named && !c.model_named);
}

#[test]
fn collections_are_read_in_name_order() {
    let c = load(&dir("good").join("collections.toml")).unwrap();
    assert_eq!(
        c.collections.0,
        [
            ("manuals".to_string(), "~/kb/manuals.lancedb".to_string()),
            ("papers".to_string(), "/srv/kb/papers.lancedb".to_string())
        ]
    );
    assert!(
        load(&dir("good").join("empty.toml"))
            .unwrap()
            .collections
            .is_empty()
    );
}

#[test]
fn every_bad_config_fails_with_one_exact_line() {
    let bad = fixtures("bad");
    let named: Vec<&str> = BAD.iter().map(|b| b.0).collect();
    let files: Vec<String> = bad
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files, named,
        "every bad fixture has an expected error, and only those"
    );
    for (name, line, key, message) in BAD {
        let path = dir("bad").join(name);
        let err = load(&path).err().unwrap_or_else(|| panic!("{name} loaded"));
        assert_eq!(err, expected_line(&path, *line, *key, message), "{name}");
        assert!(!err.contains('\n'), "{err}");
        assert!(!err.contains(LEAK), "{err}");
    }
}

#[test]
fn groundwork_config_names_the_file_everywhere() {
    let path = dir("good").join("local_llama.toml");
    let env: groundwork::paths::Env = [
        ("GROUNDWORK_CONFIG".to_string(), path.display().to_string()),
        ("HOME".to_string(), "/nonexistent".to_string()),
    ]
    .into();
    assert_eq!(groundwork::config::file_path(&env), path);
    let c = Config::from_env(&env, &ModelOverrides::default()).unwrap();
    assert_eq!(c.app.search.limit, 10);
    assert_eq!(c.model.model, "qwen3");
    // The model section alone reads the same file, with the environment over it.
    let mut env = env;
    env.insert("GROUNDWORK_MODEL".into(), "from-env".into());
    let o = ModelOverrides {
        max_tokens: Some(7),
        ..Default::default()
    };
    let m = groundwork::config::ModelConfig::load(Some(&path), &env, &o).unwrap();
    assert_eq!((m.model.as_str(), m.max_tokens), ("from-env", Some(7)));
    assert_eq!(m.base_url, "http://127.0.0.1:8080/v1");
}

/// The binary prints the one line after `error: ` and exits non-zero, before it does
/// anything else; an API key on the bad line is not echoed.
#[test]
fn the_cli_prints_the_one_line_and_fails() {
    let home = tempfile::tempdir().unwrap();
    for (name, line, key, message) in BAD
        .iter()
        .filter(|b| ["unknown_model.toml", "api_key_unquoted.toml"].contains(&b.0))
    {
        let path = dir("bad").join(name);
        let out = Command::new(env!("CARGO_BIN_EXE_groundwork"))
            .args(["--db", "x.lancedb", "info"])
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("GROUNDWORK_CONFIG", &path)
            .env_remove("HAIKU_RAG_DB")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.trim_end(),
            format!("error: {}", expected_line(&path, *line, *key, message)),
            "{name}"
        );
        assert!(!stderr.contains(LEAK), "{stderr}");
        assert!(out.stdout.is_empty(), "{name}");
    }
}
