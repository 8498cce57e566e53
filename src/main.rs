use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = groundwork::cli::Cli::parse();
    let env = groundwork::paths::process_env();
    let _log = groundwork::cli::init_logging(&env);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(groundwork::cli::run(cli, env)) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
