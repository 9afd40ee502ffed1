//! The async runtime each command runs on, sized by `--threads`.

use std::io;

use tokio::runtime::{Builder, Runtime};

/// Threads used when none are asked for. One runtime thread per process measured fastest at
/// both 1 and 256 requests in flight on the 2-core machine the README reports on.
pub(super) const DEFAULT_THREADS: usize = 1;

/// A current-thread runtime for one thread, a multi-thread runtime of `threads` otherwise;
/// 0 means [`DEFAULT_THREADS`].
pub(super) fn build(threads: usize) -> io::Result<Runtime> {
    let threads = if threads == 0 { DEFAULT_THREADS } else { threads };
    if threads == 1 {
        Builder::new_current_thread().enable_all().build()
    } else {
        Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
}
