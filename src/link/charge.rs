//! A relay charged against what a peer announced free, held until the relay ends.
//!
//! The charge sits below the registry so a waiter's grant can be a relay as well as a local
//! slot; the peer's view that counts the charges lives in the cluster.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::peer::PeerLink;
use crate::epoch::Epoch;

/// One relay charged to a group of a peer's workers; [`Charge::release`] takes it back, once.
///
/// It holds the group's counter itself, so taking it back needs neither the view's lock nor
/// a lookup; a group the peer stopped announcing took its charges with it.
#[derive(Debug)]
pub struct Charge {
    charged: Arc<AtomicU32>,
    /// The charged group's worker node label.
    node: Option<String>,
}

impl Charge {
    /// Charges one relay to the group counted by `charged`, whose workers carry `node`.
    pub(crate) fn new(charged: &Arc<AtomicU32>, node: Option<String>) -> Self {
        charged.fetch_add(1, Ordering::AcqRel);
        Self {
            charged: Arc::clone(charged),
            node,
        }
    }

    /// The charged group's worker node label.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// Takes the relay back from its group's count; call once.
    pub(crate) fn release(&self) {
        // Never below zero: `fetch_update` with a checked subtraction stops at it.
        let _ = self
            .charged
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// A relay charged against a peer's announced capacity; dropping it takes the charge back.
#[derive(Debug)]
pub struct RemoteSlot {
    link: PeerLink,
    charge: Charge,
    /// The mesh's changes, touched when the charge is taken back.
    changes: Arc<Epoch>,
}

impl RemoteSlot {
    /// `charge` on the peer behind `link`; dropping it touches `changes`.
    pub(crate) fn new(link: PeerLink, charge: Charge, changes: Arc<Epoch>) -> Self {
        Self {
            link,
            charge,
            changes,
        }
    }

    /// The peer's link.
    pub fn link(&self) -> &PeerLink {
        &self.link
    }

    /// The node label of the charged group's workers, if they have one.
    pub fn node(&self) -> Option<&str> {
        self.charge.node()
    }
}

impl Drop for RemoteSlot {
    fn drop(&mut self) {
        self.charge.release();
        // The peer's announced free slots do not change when our own relay ends, so this is
        // the only wake a waiting dispatch gets for the slot.
        self.changes.touch();
    }
}
