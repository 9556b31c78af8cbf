//! `ofnode`: the daemon (`ofnode run`) and the CLI for its control socket.

use std::process::ExitCode;

use clap::Parser;
use ofnode::cli::{self, Cli, Command};

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
    let is_daemon = matches!(cli.command, Command::Run(_) | Command::Controller(_));
    // A client command makes one request: worker threads would only add thread starts and
    // cross-thread wake-ups (1.3-2.7 ms of an `ofnode status`, docs/cli-profile.md).
    let mut builder = if is_daemon {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ofnode: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    if is_daemon {
        init_logging();
    }
    let result = runtime.block_on(cli::run(cli)).map_err(|e| e.to_string());
    if is_daemon {
        // The daemon has stopped in order; a background task still blocked (a netlink
        // read, say) must not hold the exit up.
        runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("ofnode: {message}");
            ExitCode::FAILURE
        }
    }
}
