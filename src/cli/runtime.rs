//! The async runtime each command runs on, sized by `--threads`.
//!
//! Defaults were chosen by measurement on a 2-core machine with every process on its own
//! (`lintel serve`, `lintel worker`, `lintel bench`): the node and a worker lose nothing at 256
//! requests in flight on one thread and avoid cross-thread wake-ups at one in flight, while the
//! load generator needs every core at 256 in flight.

use std::io;

use tokio::runtime::{Builder, Runtime};

/// How many runtime threads a command takes when none are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fallback {
    /// One thread: the node and workers, which mostly wait on sockets.
    One,
    /// One per core: commands that generate load or host a whole demo.
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
