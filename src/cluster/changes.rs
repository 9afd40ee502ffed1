//! A subscription to one of the mesh's change counters (links up or down, members learned).
//!
//! It stands where a `tokio::sync::watch` receiver would: a `watch` parks each waiter on one of
//! eight notifiers picked at random, so waiters wake in a different order in every run. Here they
//! wake in the order they began to wait, and a simulation of the mesh replays exactly.

use std::sync::Arc;

use crate::epoch::Epoch;

/// Why a wait for a change ended without one. Nothing ends it today: the counter lives as long
/// as any subscription to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the mesh is gone")]
pub struct MeshGone;

/// Sees every change to one counter made after it was taken.
#[derive(Debug)]
pub struct Changes {
    epoch: Arc<Epoch>,
    seen: u64,
}

impl Changes {
    /// A subscription that has seen every change to `epoch` so far.
    pub(super) fn new(epoch: &Arc<Epoch>) -> Self {
        Self {
            seen: epoch.epoch(),
            epoch: Arc::clone(epoch),
        }
    }

    /// The counter and the epoch this subscription saw, for a wait kept across turns of a
    /// loop with [`Epoch::after`].
    pub(crate) fn into_parts(self) -> (Arc<Epoch>, u64) {
        (self.epoch, self.seen)
    }

    /// Resolves once the counter changed after the last change this subscription saw.
    /// Cancel-safe: a change that lands while another branch wins is seen by the next call.
    ///
    /// # Errors
    /// Never today; [`MeshGone`] is there so callers treat an end as a reason to stop.
    pub async fn changed(&mut self) -> Result<(), MeshGone> {
        self.epoch.changed(&mut self.seen).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_subscription_sees_changes_after_it_was_taken_and_not_before() {
        let epoch = Arc::new(Epoch::default());
        epoch.touch();
        let mut changes = Changes::new(&epoch);
        let quiet = tokio::time::timeout(Duration::from_millis(20), changes.changed()).await;
        assert!(
            quiet.is_err(),
            "a change before the subscription is not seen"
        );
        epoch.touch();
        tokio::time::timeout(Duration::from_secs(5), changes.changed())
            .await
            .expect("a later change is seen")
            .expect("never gone");
    }
}
