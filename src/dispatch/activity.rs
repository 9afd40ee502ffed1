//! A count of work in progress, held by guards, with a wait for the count to reach zero.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Work in progress, and a wake for when none is left.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    count: AtomicUsize,
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
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
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
        if self.activity.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.activity.idle.notify_waiters();
        }
    }
}
