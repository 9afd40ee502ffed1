//! The command line: one module per subcommand, parsed with clap.

mod advice;
mod bench;
mod connect;
mod demo;
mod dispatch;
mod exit;
mod extras;
mod histogram;
mod input;
mod layers;
mod loadgen;
mod logging;
mod progress;
mod runtime;
mod serve;
mod signal;
mod status;
mod tls;
mod watch;
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
    /// the default: one for `serve`, `worker` and `bench --workers 0`, one per core for the rest
    /// (see the README).
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
    /// Run a worker with the built-in `echo`, `sleep` and `headers` activities.
    Worker(worker::Args),
    /// Dispatch one request and print its result.
    Dispatch(dispatch::Args),
    /// Show a node's pools, workers and waiting dispatches.
    Status(status::Args),
    /// Print a node's lifecycle events, one JSON object per line, until stopped.
    Watch(watch::Args),
    /// Start a node and echo workers on loopback, push dispatches, print throughput and latency.
    Demo(demo::Args),
    /// Load a running node: latency percentiles, throughput and outcome counts.
    Bench(bench::Args),
}

/// The runtime threads `command` takes when none are asked for: one for a process that is a
/// single piece (a node, a worker, a load generator alone), every core for one that hosts several.
fn default_threads(command: &Command) -> runtime::Fallback {
    match command {
        Command::Serve(_) | Command::Worker(_) => runtime::Fallback::One,
        Command::Bench(args) if args.workers == 0 => runtime::Fallback::One,
        _ => runtime::Fallback::PerCore,
    }
}

/// Parses the command line, runs the subcommand and maps its result to an exit code.
pub(crate) fn run() -> ExitCode {
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
        Loaded::Other(command) => default_threads(command),
    };
    let runtime = match runtime::build(threads, default) {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        match command {
            Loaded::Serve(config) => serve::run(*config).await,
            Loaded::Other(command) => match *command {
                Command::Serve(_) => ExitCode::FAILURE,
                Command::Worker(args) => worker::run(args).await,
                Command::Dispatch(args) => dispatch::run(args).await,
                Command::Status(args) => status::run(args).await,
                Command::Watch(args) => watch::run(args).await,
                Command::Demo(args) => demo::run(args).await,
                Command::Bench(args) => bench::run(args).await,
            },
        }
    });
    // A name lookup still running (getaddrinfo cannot be cancelled) is left behind rather
    // than holding up the exit.
    runtime.shutdown_timeout(LEFT_BEHIND);
    code
}

/// How long the exit waits for blocking work still running, such as a peer name's lookup.
const LEFT_BEHIND: std::time::Duration = std::time::Duration::from_millis(500);

/// A subcommand ready to run: `serve` with its config loaded.
enum Loaded {
    Serve(Box<lintel::config::NodeConfig>),
    Other(Box<Command>),
}

/// `serve` and `worker` run until stopped and log what they do; the one-shot commands print
/// their result and only warnings and errors besides.
fn default_log_filter(command: &Command) -> &'static str {
    match command {
        Command::Serve(_) | Command::Worker(_) => "info",
        Command::Dispatch(_)
        | Command::Status(_)
        | Command::Watch(_)
        | Command::Demo(_)
        | Command::Bench(_) => "warn",
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{default_threads, runtime::Fallback, Cli};

    fn fallback_of(args: &[&str]) -> Fallback {
        let cli = Cli::try_parse_from(std::iter::once("lintel").chain(args.iter().copied()));
        match cli {
            Ok(cli) => default_threads(&cli.command),
            Err(err) => panic!("{args:?} does not parse: {err}"),
        }
    }

    #[test]
    fn a_process_that_is_one_piece_runs_on_one_thread() {
        assert_eq!(fallback_of(&["serve"]), Fallback::One);
        let worker = ["worker", "--namespace", "n", "--activity", "echo"];
        assert_eq!(fallback_of(&worker), Fallback::One);
        assert_eq!(fallback_of(&["bench", "--workers", "0"]), Fallback::One);
    }

    #[test]
    fn a_process_that_hosts_workers_beside_its_load_takes_every_core() {
        assert_eq!(fallback_of(&["bench"]), Fallback::PerCore);
        assert_eq!(fallback_of(&["bench", "--workers", "2"]), Fallback::PerCore);
        assert_eq!(fallback_of(&["demo"]), Fallback::PerCore);
    }
}
