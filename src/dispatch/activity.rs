//! A count of work in progress, held by guards, with a wait for the count to reach zero.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Work in progress, and a wake for when none is left.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    count: AtomicUsize,
    /// Callers inside [`Activity::idle`]: the last guard to drop wakes only when there are any.
    waiting: AtomicUsize,
    idle: Notify,
}

impl Activity {
    /// Counts one piece of work until the guard drops, even by unwinding.
    pub(crate) fn enter(self: &Arc<Self>) -> Active {
        let count = self.count.fetch_add(1, Ordering::AcqRel) + 1;
        Active {
            activity: Arc::clone(self),
            count,
        }
    }

    /// Work in progress now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Resolves once nothing is in progress.
    pub(crate) async fn idle(&self) {
        // Counted before the count is read (both `SeqCst`), so a guard that drops the count to
        // zero after that read sees this waiter and wakes it.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _left = Waiting(&self.waiting);
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One caller inside [`Activity::idle`], uncounted when it leaves, even by being dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One piece of work counted by an [`Activity`]; the last to drop wakes [`Activity::idle`].
#[derive(Debug)]
pub(crate) struct Active {
    activity: Arc<Activity>,
    /// Work in progress including this one, when it entered.
    count: usize,
}

impl Active {
    /// Work in progress including this one, when it entered.
    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let last = self.activity.count.fetch_sub(1, Ordering::SeqCst) == 1;
        if last && self.activity.waiting.load(Ordering::SeqCst) > 0 {
            self.activity.idle.notify_waiters();
        }
    }
}
