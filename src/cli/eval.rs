//! `groundwork eval QUESTIONS --arm 'NAME: FLAGS' ... --out DIR`: parses the arms (`ask`'s
//! own flags, by the same clap definitions, and the arms of a TOML experiment file),
//! composes each arm's model and agents, shows a progress bar per arm and hands the plan
//! to [`crate::eval::run`]. Ctrl-C stops cleanly: the questions in flight are not recorded.

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Parser as _;

use crate::config::Config;
use crate::engine::cancel::CancelToken;
use crate::engine::discover::ModelChoice;
use crate::eval::{self, ArmEntry, Progress, Settings};
use crate::host::compose::Composer;

use super::args::{ArmFlags, EvalArgs, GlobalArgs};
use super::context::{CmdContext, model_overrides};

/// An arm's `ask` flags as settings; flags that do not belong to an arm are refused.
pub(super) fn parse_flags(name: &str, flags: &str) -> Result<Settings, String> {
    let words = shlex::split(flags)
        .ok_or_else(|| format!("arm '{name}': unbalanced quotes in `{flags}`"))?;
    let f = ArmFlags::try_parse_from(words).map_err(|e| {
        let text = e.to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        format!("arm '{name}': {first}")
    })?;
    let g = &f.global;
    if !g.db.is_empty()
        || g.session.is_some()
        || g.embed_url.is_some()
        || g.embed_model.is_some()
        || g.embed_dim.is_some()
    {
        return Err(format!(
            "arm '{name}': --db, --session and the --embed flags apply to the whole experiment, not to an arm"
        ));
    }
    Ok(f.settings())
}

/// `NAME: FLAGS` (the flags may be empty: `policy:`).
pub(super) fn parse_arm(spec: &str) -> Result<(String, Settings), String> {
    let Some((name, flags)) = spec.split_once(':') else {
        return Err(format!(
            "--arm '{spec}': write it as 'NAME: FLAGS', e.g. 'base: --no-policy'"
        ));
    };
    let name = name.trim();
    eval::experiment::check_name(name)?;
    Ok((name.to_string(), parse_flags(name, flags)?))
}

fn entry_settings(e: ArmEntry) -> Result<(String, Settings), String> {
    eval::experiment::check_name(&e.name)?;
    let from_flags = match &e.flags {
        Some(f) => parse_flags(&e.name, f)?,
        None => Settings::default(),
    };
    Ok((e.name, from_flags.overlay(e.settings)))
}

pub(super) async fn eval(ctx: &CmdContext, global: &GlobalArgs, a: EvalArgs) -> Result<ExitCode> {
    if let Some(dir) = &a.from_reviews {
        let table = eval::review::ReviewTable::load(dir).map_err(|e| anyhow::anyhow!(e.0))?;
        let (set, n) = eval::review::reviewed_set(&table);
        {
            use std::io::Write as _;
            let mut out = crate::errors::stdout();
            out.write_all(set.as_bytes())?;
            out.flush()?;
        }
        crate::errors::say!(
            "{n} reviewed question(s) of {} written as a question set",
            dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // A gate that cannot be read is refused before anything runs.
    let gate = a
        .gate
        .as_deref()
        .map(eval::gate::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let experiment = match &a.experiment {
        Some(p) => eval::experiment::load(p).map_err(anyhow::Error::msg)?,
        None => eval::Experiment::default(),
    };
    let mut arms: Vec<(String, Settings)> = Vec::new();
    for e in experiment.arms {
        arms.push(entry_settings(e).map_err(anyhow::Error::msg)?);
    }
    for spec in &a.arms {
        arms.push(parse_arm(spec).map_err(anyhow::Error::msg)?);
    }
    if arms.is_empty() {
        bail!(
            "no arms: give --arm 'NAME: FLAGS' (e.g. --arm 'base: --no-policy' --arm 'policy:') or --experiment FILE"
        );
    }
    for (i, (name, _)) in arms.iter().enumerate() {
        if arms[..i].iter().any(|(n, _)| n == name) {
            bail!("two arms are named '{name}'");
        }
    }
    let Some(questions) = a.questions.clone().or(experiment.questions) else {
        bail!("no questions: give a questions file (JSONL or one question a line)");
    };
    let Some(out) = a.out.clone().or(experiment.out) else {
        bail!("no output folder: give --out DIR (or `out` in the experiment file)");
    };
    let entries = eval::questions::load(&questions)?;
    let jobs = a.jobs.map(|j| j as usize).or(experiment.jobs).unwrap_or(2);

    let store = Arc::new(ctx.open_store().await?);
    let mut plan_arms = Vec::new();
    for (name, settings) in arms {
        let (composer, model_name) = arm_composer(ctx, global, &name, &settings, &store).await?;
        plan_arms.push(eval::Arm {
            name,
            settings,
            composer,
            model_name,
            knowledge_bases: vec![super::context::knowledge_base_of(None, &store).await],
        });
    }

    let bars = indicatif::MultiProgress::with_draw_target(if std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    });
    let style = indicatif::ProgressStyle::with_template(
        "{prefix:>12} {bar:30} {pos}/{len} {msg} {elapsed}",
    )
    .expect("static template");
    let arm_bars: Vec<indicatif::ProgressBar> = plan_arms
        .iter()
        .map(|arm| {
            let b = bars.add(indicatif::ProgressBar::new(entries.len() as u64));
            b.set_style(style.clone());
            b.set_prefix(arm.name.clone());
            b
        })
        .collect();
    let failed_counts: Vec<std::sync::atomic::AtomicUsize> =
        plan_arms.iter().map(|_| Default::default()).collect();
    let on_progress = |p: Progress| match p {
        Progress::Arm { arm, done, .. } => arm_bars[arm].set_position(done as u64),
        Progress::Recorded { arm, status } => {
            let b = &arm_bars[arm];
            b.inc(1);
            if status == eval::results::FAILED {
                let n = failed_counts[arm].fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                b.set_message(format!("{n} failed"));
            }
        }
    };

    // One judge for every arm, so their verdicts compare.
    let judge: Option<Arc<dyn crate::engine::chat::ChatModel>> = if a.verify {
        let config = ctx.config.judge.endpoint(
            &ctx.config.model,
            a.judge_url.as_deref(),
            a.judge_model.as_deref(),
            None,
        )?;
        Some(Arc::new(crate::model::OpenAiModel::new(config)?))
    } else {
        None
    };
    let cancel = CancelToken::new();
    let on_ctrl_c = super::cancel_on_ctrl_c(&cancel);
    let plan = eval::Plan {
        entries,
        arms: plan_arms,
        out: out.clone(),
        jobs,
        fail_fast: a.fail_fast,
        retry_failed: a.retry_failed,
        judge,
    };
    let summary = eval::run(plan, &on_progress, cancel.clone()).await;
    on_ctrl_c.abort();
    for b in &arm_bars {
        b.abandon();
    }
    let summary = summary?;
    {
        use std::io::Write as _;
        write!(crate::errors::stdout(), "{}", summary.report_markdown)?;
    }
    let report = out.join("report.md");
    let counts = format!(
        "{} run now, {} already recorded, {} failed",
        summary.ran, summary.skipped, summary.failed
    );
    if summary.stopped && a.fail_fast && summary.failed > 0 {
        crate::errors::say!(
            "eval stopped at the first failure (--fail-fast; {counts}); run the same command again to continue. Report so far: {}",
            report.display()
        );
        return Ok(ExitCode::from(2));
    }
    if summary.stopped {
        crate::errors::say!(
            "eval stopped ({counts}); the questions in flight were not recorded: run the same command again to continue. Report so far: {}",
            report.display()
        );
        return Ok(ExitCode::from(130));
    }
    crate::errors::say!("eval done ({counts}); report: {}", report.display());
    if summary.failed > 0 {
        return Ok(ExitCode::from(2));
    }
    if let Some(gate) = &gate {
        let short = eval::gate::check(&summary.report, gate);
        if !short.is_empty() {
            for line in &short {
                crate::errors::say!("gate: {line}");
            }
            return Ok(ExitCode::from(3));
        }
        crate::errors::say!(
            "gate: every arm meets {}",
            a.gate.as_deref().unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The composer of an arm's agents and its model's name: the arm's model flags over the
/// command line's, the model chosen as every command chooses it, the arm's configuration
/// overrides (`eval`'s arms, `replay`'s changes).
pub(super) async fn arm_composer(
    ctx: &CmdContext,
    global: &GlobalArgs,
    name: &str,
    settings: &Settings,
    store: &Arc<crate::store::Store>,
) -> Result<(Composer, String)> {
    settings
        .options()
        .map_err(|e| anyhow::anyhow!("arm '{name}': {e}"))?;
    let (model, model_name, config) =
        arm_model(&ctx.env, &model_overrides(global), name, settings).await?;
    let composer = Composer::new(
        Some(model),
        Some(store.clone()),
        settings.apply(config.app.clone()),
    );
    Ok((composer, model_name))
}

/// An arm's model: its model flags over `base`, chosen as every command chooses one.
pub(super) async fn arm_model(
    env: &crate::paths::Env,
    base: &crate::config::ModelOverrides,
    name: &str,
    settings: &Settings,
) -> Result<(Arc<dyn crate::engine::chat::ChatModel>, String, Config)> {
    let config = Config::from_env(env, &settings.model_overrides(base))?;
    let choice = crate::engine::discover::choose_model_for(
        &config,
        env,
        &crate::engine::discover::candidates(env),
        &|note| crate::errors::say!("{note}"),
    )
    .await;
    let model_config = match choice {
        ModelChoice::None(hint) => bail!("arm '{name}': {hint}"),
        ModelChoice::Discovered(c, found) => {
            crate::errors::say!(
                "arm '{name}': using {} at {} (found {})",
                c.model,
                c.base_url,
                found.server
            );
            c
        }
        ModelChoice::Configured(c) => c,
    };
    let model_name = model_config.model.clone();
    let model: Arc<dyn crate::engine::chat::ChatModel> =
        Arc::new(crate::model::OpenAiModel::new(model_config)?);
    Ok((model, model_name, config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_take_ask_flags_and_refuse_the_rest() {
        let (name, s) = parse_arm("base: --no-policy --search-limit 3 --model 'm 1'").unwrap();
        assert_eq!(name, "base");
        assert_eq!(s.policy, Some(false));
        assert_eq!(s.search_limit, Some(3));
        assert_eq!(s.model.as_deref(), Some("m 1"));
        assert_eq!(parse_arm("policy:").unwrap().1, Settings::default());
        assert_eq!(
            parse_arm("x: --no-polcy").unwrap_err(),
            "arm 'x': unexpected argument '--no-polcy' found"
        );
        assert!(
            parse_arm("x: --db other")
                .unwrap_err()
                .contains("whole experiment")
        );
        assert!(
            parse_arm("--no-policy")
                .unwrap_err()
                .contains("'NAME: FLAGS'")
        );
        assert!(
            parse_arm("x: --search-limit 0")
                .unwrap_err()
                .contains("at least 1")
        );
    }
}
