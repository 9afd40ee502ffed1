//! What became of a push or relay, shared by both kinds of link.

use lintel_transport::SendError;

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

impl PushError {
    /// Why the outbound queue refused a push or relay. A frame it could not encode counts as
    /// back-pressure: admission bounds every request below the frame limit, so it is a bug,
    /// logged, and the dispatch still gets a refusal rather than silence.
    pub(super) fn from_send(err: SendError) -> Self {
        match err {
            SendError::Closed => PushError::Closed,
            SendError::Full | SendError::Overflow => PushError::Backpressure,
            SendError::TooLarge { .. }
            | SendError::Unencodable { .. }
            | SendError::Unsupported { .. } => {
                tracing::error!(error = %err, "a push or relay could not be encoded");
                PushError::Backpressure
            }
        }
    }
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
