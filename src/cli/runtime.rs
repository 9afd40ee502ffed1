//! The async runtime each command runs on, sized by `--threads`.
//!
//! Defaults were chosen by measurement on a 2-core machine with every process on its own
//! (`lintel serve`, `lintel worker`, `lintel bench --workers 0`): each carries as much at 256
//! requests in flight on one thread as on two, for less CPU, and avoids cross-thread wake-ups.
//! Commands that host a node or workers beside their load generator take every core.

use std::io;

use tokio::runtime::{Builder, Runtime};

/// How many runtime threads a command takes when none are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fallback {
    /// One thread: the node, workers and a load generator on its own.
    One,
    /// One per core: commands that host a node or workers beside their load generator.
    PerCore,
}

/// A current-thread runtime for one thread, a multi-thread runtime of `threads` otherwise;
/// 0 takes `default`.
pub(super) fn build(threads: usize, default: Fallback) -> io::Result<Runtime> {
    match (threads, default) {
        (1, _) | (0, Fallback::One) => Builder::new_current_thread().enable_all().build(),
        (0, Fallback::PerCore) => Builder::new_multi_thread().enable_all().build(),
        (threads, _) => Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build(),
    }
}
