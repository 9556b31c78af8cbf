//! `ofnode`: the daemon (`ofnode run`) and the CLI for its control socket.

use std::process::ExitCode;

use clap::Parser;
use ofnode::cli::{self, Cli, Command};
use ofnode::daemon;

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("OFNODE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ofnode: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Run(args) => {
            init_logging();
            let result = runtime
                .block_on(daemon::run(*args))
                .map_err(|e| e.to_string());
            // The daemon has stopped in order; a background task still blocked (a netlink
            // read, say) must not hold the exit up.
            runtime.shutdown_timeout(std::time::Duration::from_secs(2));
            return exit_code(result);
        }
        command => runtime
            .block_on(cli::run_client(command))
            .map_err(|e| e.to_string()),
    };
    exit_code(result)
}

fn exit_code(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ofnode: {message}");
            ExitCode::FAILURE
        }
    }
}
