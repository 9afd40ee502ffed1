//! How a subcommand fails: a message on stderr and a failing exit code.

use std::process::ExitCode;

/// Prints `error: ...` to stderr and fails.
pub(super) fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}
