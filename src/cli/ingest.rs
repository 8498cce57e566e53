//! `groundwork ingest` and the first-run demo database: ingesting files with a progress
//! bar on stderr.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::ingest::pipeline::{self, Outcome};
use crate::paths;
use crate::store::Store;

use super::args::IngestArgs;
use super::context::{CmdContext, open_or_create};

/// On first run the default database is built from the bundled demo corpus, with a
/// progress bar. Returns whether it was created now.
pub async fn ensure_demo_db(ctx: &CmdContext) -> Result<bool> {
    if std::path::Path::new(&ctx.db).exists() {
        return Ok(false);
    }
    let corpus_dir = paths::data_dir(&ctx.env).join("demo");
    let docs = crate::host::demo::write_corpus(&corpus_dir)
        .with_context(|| format!("cannot write the demo corpus to {}", corpus_dir.display()))?;
    crate::errors::say!(
        "first run: building the demo knowledge base in {} from the bundled corpus",
        ctx.db
    );
    let started = std::time::Instant::now();
    let store = open_or_create(ctx, &ctx.db).await?;
    let report = ingest_with_bar(
        &store,
        &docs,
        &crate::host::demo::ingest_options(&corpus_dir),
    )
    .await?;
    crate::errors::say!(
        "demo knowledge base ready: {} documents, {} chunks in {:.1}s",
        docs.len() - report.failed().len(),
        report.chunks_written(),
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// The bar on stderr: files done of all, the time ticking, and what the file in hand is
/// doing (parsing; embedding, chunks done of all and the time left at the rate so far;
/// writing), then the indexes.
struct BarProgress {
    bar: indicatif::ProgressBar,
    /// When the file in hand started embedding.
    embedding_since: std::sync::Mutex<Option<std::time::Instant>>,
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What is said of a file at `stage`; `since` when its embedding started.
fn stage_message(name: &str, stage: pipeline::Stage, since: Option<std::time::Duration>) -> String {
    match stage {
        pipeline::Stage::Parsing => format!("{name}: parsing"),
        pipeline::Stage::Embedding { done, total } => {
            let left = since
                .filter(|_| done > 0 && done < total)
                .map(|t| {
                    let secs = t.as_secs_f64() * (total - done) as f64 / done as f64;
                    format!(", about {} left", duration_words(secs))
                })
                .unwrap_or_default();
            format!("{name}: embedding {done}/{total} chunks{left}")
        }
        pipeline::Stage::Writing => format!("{name}: writing"),
    }
}

/// `40 s`, `3 min 5 s`.
fn duration_words(secs: f64) -> String {
    let s = secs.round() as u64;
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}

impl pipeline::Progress for BarProgress {
    fn start(&self, total: usize) {
        self.bar.set_length(total as u64);
    }
    fn stage(&self, path: &std::path::Path, stage: pipeline::Stage) {
        let since = {
            let mut since = self
                .embedding_since
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match stage {
                pipeline::Stage::Embedding { done: 0, .. } => {
                    *since = Some(std::time::Instant::now());
                    None
                }
                pipeline::Stage::Embedding { .. } => since.map(|s| s.elapsed()),
                _ => None,
            }
        };
        self.bar
            .set_message(stage_message(&file_name(path), stage, since));
    }
    fn file_done(&self, f: &pipeline::FileOutcome) {
        let name = file_name(&f.path);
        match &f.outcome {
            Outcome::Failed { error } => self.bar.println(format!("skipped {error}")),
            Outcome::Unchanged { .. } => self.bar.set_message(format!("{name} (unchanged)")),
            _ => self.bar.set_message(format!("{name}: done")),
        }
        self.bar.inc(1);
    }
    fn indexing(&self) {
        self.bar.set_message("updating the indexes");
    }
}

/// Ingests `paths` with a progress bar on stderr.
async fn ingest_with_bar(
    store: &Store,
    paths: &[PathBuf],
    options: &pipeline::IngestOptions,
) -> Result<pipeline::IngestReport> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {bar:30} {pos}/{len} files {elapsed} {wide_msg}",
        )
        .expect("static template"),
    );
    // The clock and the spinner move while a long file is parsed or embedded.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    let progress = BarProgress {
        bar: bar.clone(),
        embedding_since: std::sync::Mutex::new(None),
    };
    let report = pipeline::ingest_paths_with(store, paths, &progress, options).await;
    bar.finish_and_clear();
    Ok(report?)
}

pub(super) async fn ingest(ctx: &CmdContext, a: IngestArgs) -> Result<ExitCode> {
    let db = ctx.databases.one(a.collection.as_deref(), "ingest")?;
    let store = open_or_create(ctx, &db).await?;
    let started = std::time::Instant::now();
    let options = pipeline::IngestOptions {
        hybrid: super::context::hybrid_chunking(ctx),
        ..Default::default()
    };
    let report = ingest_with_bar(&store, &a.paths, &options).await?;
    let secs = started.elapsed().as_secs_f64();
    let added = report.count(|o| matches!(o, Outcome::Added { .. }));
    let replaced = report.count(|o| matches!(o, Outcome::Replaced { .. }));
    let unchanged = report.count(|o| matches!(o, Outcome::Unchanged { .. }));
    let failed = report.failed();
    writeln!(
        crate::errors::stdout(),
        "{added} added, {replaced} updated, {unchanged} unchanged, {} failed; {} chunks in {secs:.1}s",
        failed.len(),
        report.chunks_written()
    )?;
    for f in &failed {
        if let Outcome::Failed { error } = &f.outcome {
            crate::errors::say!("failed: {error}");
        }
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::pipeline::Stage;
    use std::time::Duration;

    #[test]
    fn a_files_stage_is_said_with_the_time_left_at_the_rate_so_far() {
        assert_eq!(
            stage_message("a.pdf", Stage::Parsing, None),
            "a.pdf: parsing"
        );
        assert_eq!(
            stage_message(
                "a.pdf",
                Stage::Embedding {
                    done: 0,
                    total: 400
                },
                None
            ),
            "a.pdf: embedding 0/400 chunks"
        );
        // 100 of 400 in 20 s: 60 s for the other 300.
        assert_eq!(
            stage_message(
                "a.pdf",
                Stage::Embedding {
                    done: 100,
                    total: 400
                },
                Some(Duration::from_secs(20))
            ),
            "a.pdf: embedding 100/400 chunks, about 1 min 0 s left"
        );
        assert_eq!(
            stage_message(
                "a.pdf",
                Stage::Embedding {
                    done: 300,
                    total: 400
                },
                Some(Duration::from_secs(30))
            ),
            "a.pdf: embedding 300/400 chunks, about 10 s left"
        );
        assert_eq!(
            stage_message("a.pdf", Stage::Writing, None),
            "a.pdf: writing"
        );
    }
}
