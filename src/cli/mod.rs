//! The command line: one module per subcommand, parsed with clap.

mod bench;
mod demo;
mod dispatch;
mod exit;
mod loadgen;
mod serve;
mod signal;
mod status;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// lintel: a push-dispatch message-bus node.
#[derive(Debug, Parser)]
#[command(name = "lintel", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a node.
    Serve(serve::Args),
    /// Run a worker with the built-in `echo` and `sleep` activities.
    Worker(worker::Args),
    /// Dispatch one request and print its result.
    Dispatch(dispatch::Args),
    /// Show a node's pools, workers and waiting dispatches.
    Status(status::Args),
    /// Start a node and echo workers on loopback, push dispatches, print throughput and latency.
    Demo(demo::Args),
    /// Load a running node: latency percentiles, throughput and outcome counts.
    Bench(bench::Args),
}

/// Parses the command line, runs the subcommand and maps its result to an exit code.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Worker(args) => worker::run(args).await,
            Command::Dispatch(args) => dispatch::run(args).await,
            Command::Status(args) => status::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Bench(args) => bench::run(args).await,
        }
    })
}

/// Logs go to stderr through tracing, filtered by `RUST_LOG` (default `info`).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
