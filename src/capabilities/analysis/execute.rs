//! Running code for `analysis_execute_code` (SPEC §9.1, §9.2): the per-call and
//! per-session limits, starting the run's sandbox worker on first need, and what an
//! execution returns to the model and records in the state.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use super::{AnalysisRun, MAX_RECURSION, NO_OUTPUT};
use crate::capabilities::kit::search;
use crate::capabilities::state::{Execution, SANDBOX_BUCKET};
use crate::engine::capability::{ToolOutcome, ToolOutput};
use crate::sandbox::ExecLimits;
use crate::sandbox::host::{ExecResult, Sandbox, default_worker};
use crate::sandbox::vfs::Corpus;

macro_rules! text {
    ($name:ident, $file:literal) => {
        fn $name() -> &'static str {
            include_str!(concat!("../../../assets/prompts/capabilities/", $file)).trim_end()
        }
    };
}

text!(code_description, "analysis_code_description.txt");
text!(execution_limit_text, "execution_limit.txt");
text!(restarted_text, "sandbox_restarted.txt");
text!(iteration_hint_text, "iteration_hint.txt");

/// The note added to stderr when the sandbox session was lost (SPEC §9.2).
pub fn restarted_note() -> &'static str {
    restarted_text()
}

/// The failure text of an execution (SPEC §9.1 step 6).
pub fn failure_text(stderr: &str, stdout: &str) -> String {
    let hint = if stderr.contains("TextIOWrapper") && stderr.contains("not iterable") {
        format!("\n\n{}", iteration_hint_text())
    } else {
        String::new()
    };
    format!("{stderr}{hint}\n\nOutput: {stdout}")
}

pub(super) fn execute_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": code_description()}
        },
        "required": ["code"],
        "additionalProperties": false
    })
}

impl AnalysisRun {
    fn limits(&self) -> ExecLimits {
        let a = &self.config.analysis;
        let per_call = Duration::from_secs_f64(a.code_timeout.max(0.0));
        let total = per_call * a.max_executions.max(1) as u32;
        ExecLimits {
            time_limit_ms: per_call.as_millis() as u64,
            session_remaining_ms: total.saturating_sub(self.compute_used).as_millis() as u64,
            max_memory: (a.max_memory_mb as u64) << 20,
            max_recursion: MAX_RECURSION,
            max_output_chars: a.max_output_chars as u64,
        }
    }

    /// Runs `code` in the run's sandbox, starting one if needed. A forced stop (time
    /// limit, memory, a lost worker) gives a failed result whose stderr says the
    /// session restarted.
    pub(super) async fn run_code(&mut self, code: &str) -> anyhow::Result<ExecResult> {
        let limits = self.limits();
        let time_limit =
            Duration::from_millis(limits.time_limit_ms.min(limits.session_remaining_ms));
        if time_limit.is_zero() {
            let total = Duration::from_millis(limits.time_limit_ms)
                * self.config.analysis.max_executions.max(1) as u32;
            return Ok(ExecResult {
                success: false,
                stdout: String::new(),
                stderr: crate::sandbox::session_budget_message(total),
                reset: false,
            });
        }
        if self.sandbox.is_none() {
            let store = self.store.get().await?;
            let worker = match &self.worker {
                Some(w) => w.clone(),
                None => default_worker().context("cannot locate the sandbox worker")?,
            };
            let sandbox = Sandbox::spawn(&worker)
                .await
                .with_context(|| format!("cannot start the sandbox worker {}", worker.display()))?;
            let corpus = Corpus::new(store, self.state.document_filter.clone());
            self.sandbox = Some((sandbox, corpus));
        }
        let code_timeout = self.config.analysis.code_timeout;
        let Some((sandbox, corpus)) = self.sandbox.as_mut() else {
            bail!("no sandbox");
        };
        corpus.begin_execution(code_timeout);
        let started = Instant::now();
        let outcome = sandbox.exec(code, &limits, corpus, time_limit).await;
        self.compute_used += started.elapsed();
        let found = corpus.take_results();
        search::merge_results(&mut self.state, SANDBOX_BUCKET, &found);
        let mut result = match outcome {
            Ok(result) => result,
            Err(lost) => {
                self.sandbox = None;
                ExecResult {
                    success: false,
                    stdout: String::new(),
                    stderr: lost.0,
                    reset: true,
                }
            }
        };
        if result.reset {
            result.stderr = format!("{}\n{}", result.stderr, restarted_note());
        }
        Ok(result)
    }

    pub(super) async fn execute(
        &mut self,
        args: &Map<String, Value>,
    ) -> anyhow::Result<ToolOutcome> {
        self.execute_count += 1;
        if self.execute_count > self.max_executions() {
            return Ok(ToolOutcome::Failed(execution_limit_text().to_string()));
        }
        let code = args
            .get("code")
            .and_then(Value::as_str)
            .context("analysis_execute_code needs a string `code`")?
            .to_string();
        let result = self.run_code(&code).await?;
        if result.success || !result.stdout.is_empty() {
            self.state.evidence.note_evidence(self.epoch)?;
        }
        self.state
            .executions
            .get_or_insert_with(Vec::new)
            .push(Execution {
                code,
                stdout: result.stdout.clone(),
                stderr: result.stderr.clone(),
                success: result.success,
            });
        if !result.success {
            return Ok(ToolOutcome::Failed(failure_text(
                &result.stderr,
                &result.stdout,
            )));
        }
        Ok(ToolOutcome::Ok(ToolOutput::text(
            if result.stdout.is_empty() {
                NO_OUTPUT.to_string()
            } else {
                result.stdout
            },
        )))
    }
}
