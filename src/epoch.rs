//! A change counter tasks can wait on, costing one atomic add per change while nobody waits.
//!
//! A waiter notes the epoch before it looks at the state, then waits for the epoch to move
//! past it, so no change between the look and the wait is missed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

/// A counter of changes with a wake for whoever waits on it.
#[derive(Debug, Default)]
pub struct Epoch {
    epoch: AtomicU64,
    /// Set by a waiter before it sleeps; the next change clears it and wakes every waiter.
    armed: AtomicBool,
    notify: Notify,
}

impl Epoch {
    /// The number of changes so far; note it before looking at what the epoch guards.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Records a change and wakes the waiters, if any.
    pub fn touch(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if self.armed.swap(false, Ordering::SeqCst) {
            self.notify.notify_waiters();
        }
    }

    /// Resolves to the epoch now once a change happened after epoch `seen`; owning its epoch,
    /// it can be kept pinned across turns of a loop, registered as a waiter once. Cancel-safe.
    pub async fn after(&self, seen: u64) -> u64 {
        let mut seen = seen;
        self.changed(&mut seen).await;
        seen
    }

    /// Resolves once a change happened after epoch `seen`, and moves `seen` to the epoch now.
    /// Cancel-safe: nothing changes until it resolves.
    pub async fn changed(&self, seen: &mut u64) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            self.armed.store(true, Ordering::SeqCst);
            let now = self.epoch();
            if now != *seen {
                *seen = now;
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_change_after_the_noted_epoch_wakes_the_waiter() {
        let epoch = Arc::new(Epoch::default());
        let mut seen = epoch.epoch();
        epoch.touch();
        // The change came before the wait started: it is still seen.
        tokio::time::timeout(Duration::from_secs(5), epoch.changed(&mut seen))
            .await
            .expect("an earlier change is seen");
        let waiter = {
            let epoch = Arc::clone(&epoch);
            tokio::spawn(async move { epoch.changed(&mut seen).await })
        };
        tokio::task::yield_now().await;
        epoch.touch();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter wakes")
            .expect("waiter task");
    }
}
