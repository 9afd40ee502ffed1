//! Links: the push path to whoever runs a dispatch, and the one place each push's fate is
//! decided. A worker link pushes to a worker connection; a peer link relays to another node.
//!
//! Both keep a table of what they sent without an answer, under a short mutex never held
//! across an `.await`: whichever of the answer, the dispatch's own end (deadline, cancel) and
//! the link's close takes an entry first wins.

mod peer;
mod worker;

pub use peer::{PeerLink, RelayEntry};
pub use worker::{PushEntry, Release, WorkerLink};

/// Why a push did not reach the link's queue; either way nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The outbound queue is full; the worker or peer stays connected.
    #[error("outbound queue is full")]
    Backpressure,
    /// The connection is closed, so the push never left.
    #[error("connection is closed")]
    Closed,
}

/// What ending a push for the dispatch's own reason decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The push ended here; `Cancel` was sent and the entry stays until the other side lets go.
    Ended,
    /// The push ended while held, before it was sent: nothing reached the other side.
    Unsent,
    /// The answer or the link's close decided it first.
    TooLate,
}

/// What a link did with an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyFate {
    /// It answered a live push.
    Delivered,
    /// It answered a push that had already ended.
    Late,
    /// It matched no push held on this link.
    Unknown,
}
