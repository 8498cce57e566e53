use std::process::ExitCode;

use clap::Parser;

/// Counts live bytes only in the sandbox worker, where it enforces the program's
/// memory limit; in the workbench itself it is the system allocator.
#[global_allocator]
static ALLOC: groundwork::sandbox::alloc::WorkerAlloc = groundwork::sandbox::alloc::WorkerAlloc;

fn main() -> ExitCode {
    groundwork::timing::start();
    // The analysis sandbox worker (`groundwork __sandbox-worker`): no CLI, no runtime.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(groundwork::sandbox::WORKER_ARG))
    {
        return groundwork::sandbox::worker::run();
    }
    let cli = match groundwork::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return groundwork::cli::usage_error(e),
    };
    if cli.ends_soon() {
        groundwork::sandbox::alloc::keep_freed_memory();
    }
    let env = groundwork::paths::process_env();
    // Secrets are known before anything can print or log them.
    groundwork::errors::register_env(&env);
    for value in env.values() {
        groundwork::errors::register_url_passwords(value);
    }
    for arg in std::env::args_os() {
        groundwork::errors::register_url_passwords(&arg.to_string_lossy());
    }
    if let Ok(text) = std::fs::read_to_string(groundwork::config::file_path(&env)) {
        groundwork::errors::register_config_text(&text);
        groundwork::errors::register_url_passwords(&text);
    }
    let _log = groundwork::cli::init_logging(&env);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            say(format_args!("error: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(groundwork::cli::run(cli, env)) {
        Ok(code) => code,
        // The reader of a pipe stopped reading (`| head`): quietly, with the status a
        // program stopped by SIGPIPE has.
        Err(e) if groundwork::errors::is_broken_pipe(&e) => ExitCode::from(141),
        Err(e) => {
            let line = groundwork::errors::render(&e);
            tracing::error!("{line}");
            say(format_args!("error: {line}"));
            ExitCode::FAILURE
        }
    }
}

/// One line on standard error, through the redactor.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(groundwork::errors::stderr(), "{line}");
}
