//! A pushed request's heartbeat: `Progress` frames its handler sends the node while it runs.

use bytes::Bytes;
use lintel_transport::{Outbound, SendError};
use lintel_wire::{Frame, Progress};
use tokio::sync::watch;

/// The worker's current connection, `None` while it has none: what a heartbeat is sent on, so
/// heartbeats of a request outlive the connection it was pushed on.
pub(super) type Link = watch::Receiver<Option<Outbound>>;

/// Tells the node that a pushed request still runs, with optional details for its producer.
/// A request with a heartbeat timeout needs one at least that often; each restarts the node's
/// timer. It goes out on the worker's current connection, which after a resumed session is
/// not the one the request was pushed on. Clones can be moved into spawned tasks and blocking
/// threads, as a [`CancelSignal`](super::CancelSignal) can.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// The worker's current connection and the request's correlation; `None` outside a worker.
    to: Option<(Link, u64)>,
}

/// Why a heartbeat was not sent. None is fatal: the request still runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeartbeatError {
    /// The request was made with [`Request::new`](super::Request::new), not pushed by a node.
    #[error("the request was not pushed by a node")]
    NotPushed,
    /// The node reads no `Progress`: it lists neither `progress` nor `heartbeat-timeout`.
    #[error("the node reads no Progress")]
    Unsupported,
    /// The details are longer than a `Progress` carries.
    #[error("details of {len} bytes, more than {max}")]
    TooLarge {
        /// The details' length.
        len: usize,
        /// [`Progress::MAX_DETAILS`].
        max: usize,
    },
    /// The connection's queue is full, or the worker has no connection now (it is
    /// reconnecting); this one was dropped.
    #[error("the connection could not take the heartbeat now")]
    NotSent,
}

impl Heartbeat {
    /// A heartbeat for the push `correlation`, sent on whatever connection `link` holds.
    pub(super) fn new(link: Link, correlation: u64) -> Self {
        Self {
            to: Some((link, correlation)),
        }
    }

    /// Sends `details` (at most [`Progress::MAX_DETAILS`] bytes; empty is a heartbeat alone)
    /// without waiting: a heartbeat the queue has no room for is dropped, never queued.
    ///
    /// # Errors
    /// [`HeartbeatError`] says why nothing was sent.
    pub fn beat(&self, details: impl Into<Bytes>) -> Result<(), HeartbeatError> {
        let Some((link, correlation)) = &self.to else {
            return Err(HeartbeatError::NotPushed);
        };
        let details = details.into();
        if details.len() > Progress::MAX_DETAILS {
            return Err(HeartbeatError::TooLarge {
                len: details.len(),
                max: Progress::MAX_DETAILS,
            });
        }
        let progress = Frame::from(Progress {
            correlation: *correlation,
            details,
        });
        // Cloned so the watch's read lock is not held while queueing.
        let Some(outbound) = link.borrow().clone() else {
            return Err(HeartbeatError::NotSent);
        };
        match outbound.try_send(progress) {
            Ok(()) => Ok(()),
            Err(SendError::Unsupported { .. }) => Err(HeartbeatError::Unsupported),
            Err(_) => Err(HeartbeatError::NotSent),
        }
    }
}
