//! The signal a handler's own work watches: the push was cancelled, its deadline passed, or
//! the handler's task ended.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

/// Fires when the node cancels the push, when the request's deadline passes, or once the
/// handler has answered or been dropped. Clones share it; it can be moved into spawned tasks
/// and blocking threads, which stop when [`CancelSignal::is_cancelled`] turns true or
/// [`CancelSignal::cancelled`] resolves.
#[derive(Debug, Clone, Default)]
pub struct CancelSignal {
    token: CancellationToken,
    /// The request's deadline, on this machine's monotonic clock.
    deadline: Option<Instant>,
}

impl CancelSignal {
    /// A signal fired by `token`, or at `deadline_unix_ms` (milliseconds since the Unix epoch,
    /// read against this machine's clock).
    pub(super) fn new(token: CancellationToken, deadline_unix_ms: Option<u64>) -> Self {
        let deadline = deadline_unix_ms.map(|ms| {
            let at = UNIX_EPOCH + Duration::from_millis(ms);
            let left = at.duration_since(SystemTime::now()).unwrap_or_default();
            Instant::now() + left
        });
        Self { token, deadline }
    }

    /// True once the push is cancelled, its deadline passed, or its handler has finished.
    /// Cheap enough to call in a loop of blocking work.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled() || self.deadline.is_some_and(|at| Instant::now() >= at)
    }

    /// Resolves when [`CancelSignal::is_cancelled`] turns true. Cancel-safe.
    pub async fn cancelled(&self) {
        match self.deadline {
            None => self.token.cancelled().await,
            Some(at) => {
                tokio::select! {
                    () = self.token.cancelled() => {}
                    () = tokio::time::sleep_until(at.into()) => {}
                }
            }
        }
    }
}
