//! How a subcommand fails: a message on stderr and a failing exit code.
//!
//! Exit codes: 0 success; 1 the command could not do its work (no connection, a refusal, a bad
//! config, a worker stopped for good); 2 a command line clap refused; 10 to 18 `dispatch`'s
//! outcome classes (see `dispatch`), 16 also when a draining node turned the command away.

use std::process::ExitCode;

/// The exit code of the `draining` outcome, and of a command a draining node turned away.
pub(super) const DRAINING: u8 = 16;

/// Prints `error: ...` to stderr and fails with exit code 1.
pub(super) fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

/// Prints `error: ...` to stderr and fails with exit code 2, as for a command line clap refused.
pub(super) fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}
