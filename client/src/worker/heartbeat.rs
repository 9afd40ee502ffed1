//! A pushed request's heartbeat: `Progress` frames its handler sends the node while it runs.

use bytes::Bytes;
use lintel_transport::{Outbound, SendError};
use lintel_wire::{Frame, Progress};

/// Tells the node that a pushed request still runs, with optional details for its producer.
/// A request with a heartbeat timeout needs one at least that often; each restarts the node's
/// timer. Clones share the connection, so it can be moved into spawned tasks and blocking
/// threads, as a [`CancelSignal`](super::CancelSignal) can.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// The connection the request was pushed on and its correlation; `None` outside a worker.
    to: Option<(Outbound, u64)>,
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
    /// The connection's queue is full or the connection closed; this one was dropped.
    #[error("the connection could not take the heartbeat now")]
    NotSent,
}

impl Heartbeat {
    /// A heartbeat for the push `correlation` on `outbound`.
    pub(super) fn new(outbound: Outbound, correlation: u64) -> Self {
        Self {
            to: Some((outbound, correlation)),
        }
    }

    /// Sends `details` (at most [`Progress::MAX_DETAILS`] bytes; empty is a heartbeat alone)
    /// without waiting: a heartbeat the queue has no room for is dropped, never queued.
    ///
    /// # Errors
    /// [`HeartbeatError`] says why nothing was sent.
    pub fn beat(&self, details: impl Into<Bytes>) -> Result<(), HeartbeatError> {
        let Some((outbound, correlation)) = &self.to else {
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
        match outbound.try_send(progress) {
            Ok(()) => Ok(()),
            Err(SendError::Unsupported { .. }) => Err(HeartbeatError::Unsupported),
            Err(_) => Err(HeartbeatError::NotSent),
        }
    }
}
