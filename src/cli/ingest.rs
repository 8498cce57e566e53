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

struct BarProgress(indicatif::ProgressBar);

impl pipeline::Progress for BarProgress {
    fn start(&self, total: usize) {
        self.0.set_length(total as u64);
    }
    fn file_done(&self, f: &pipeline::FileOutcome) {
        let name = f
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match &f.outcome {
            Outcome::Failed { error } => self.0.println(format!("skipped {error}")),
            Outcome::Unchanged { .. } => self.0.set_message(format!("{name} (unchanged)")),
            _ => self.0.set_message(name),
        }
        self.0.inc(1);
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
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {wide_msg}")
            .expect("static template"),
    );
    let report =
        pipeline::ingest_paths_with(store, paths, &BarProgress(bar.clone()), options).await;
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
