//! Where and how logs go: stderr through tracing, as text or one JSON object per line.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// `--log-format` values: `text` lines, coloured only when stderr is a terminal, or `json`,
/// one object per line for log shippers. Variants carry no doc comment so that `--help` stays
/// one line per flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the subscriber: `RUST_LOG` when set and valid, `default_filter` otherwise.
pub(super) fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // A closed stderr costs the log lines, never a task: tracing's report of the failed write
    // would itself be a write to stderr, which panics.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
}
