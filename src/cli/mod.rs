//! The command line: one module per subcommand, parsed with clap.

mod bench;
mod demo;
mod dispatch;
mod exit;
mod histogram;
mod loadgen;
mod logging;
mod progress;
mod runtime;
mod serve;
mod signal;
mod status;
mod tls;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use logging::LogFormat;

/// lintel: a push-dispatch message-bus node.
#[derive(Debug, Parser)]
#[command(name = "lintel", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Runtime threads: 1 runs everything on one thread, N > 1 a pool of N; 0 or absent takes
    /// the default: one for `serve` and `worker`, one per core for the rest (see the README).
    #[arg(long, global = true, env = "LINTEL_THREADS")]
    threads: Option<usize>,
    /// Log lines on stderr: text, or one JSON object per line.
    #[arg(
        long,
        global = true,
        env = "LINTEL_LOG_FORMAT",
        value_enum,
        default_value_t
    )]
    log_format: LogFormat,
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
    logging::init(cli.log_format, default_log_filter(&cli.command));
    // `serve` reads its config file before the runtime exists: the file may choose the threads.
    let (command, config_threads) = match cli.command {
        Command::Serve(args) => match serve::load(args) {
            Ok(serve::Loaded::Serve(config)) => {
                let threads = config.threads;
                (Loaded::Serve(config), threads)
            }
            Ok(serve::Loaded::Printed) => return ExitCode::SUCCESS,
            Err(code) => return code,
        },
        other => (Loaded::Other(Box::new(other)), 0),
    };
    let threads = cli.threads.unwrap_or(config_threads);
    let default = match &command {
        Loaded::Serve(_) => runtime::Fallback::One,
        Loaded::Other(command) if matches!(**command, Command::Worker(_)) => runtime::Fallback::One,
        Loaded::Other(_) => runtime::Fallback::PerCore,
    };
    let runtime = match runtime::build(threads, default) {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        match command {
            Loaded::Serve(config) => serve::run(*config).await,
            Loaded::Other(command) => match *command {
                Command::Serve(_) => ExitCode::FAILURE,
                Command::Worker(args) => worker::run(args).await,
                Command::Dispatch(args) => dispatch::run(args).await,
                Command::Status(args) => status::run(args).await,
                Command::Demo(args) => demo::run(args).await,
                Command::Bench(args) => bench::run(args).await,
            },
        }
    })
}

/// A subcommand ready to run: `serve` with its config loaded.
enum Loaded {
    Serve(Box<crate::config::NodeConfig>),
    Other(Box<Command>),
}

/// `serve` and `worker` run until stopped and log what they do; the one-shot commands print
/// their result and only warnings and errors besides.
fn default_log_filter(command: &Command) -> &'static str {
    match command {
        Command::Serve(_) | Command::Worker(_) => "info",
        Command::Dispatch(_) | Command::Status(_) | Command::Demo(_) | Command::Bench(_) => "warn",
    }
}
