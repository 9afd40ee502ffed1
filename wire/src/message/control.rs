//! Liveness, cancel, drain, close and protocol errors.

use serde::{Deserialize, Serialize};

/// Abandon the request with this correlation id on this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cancel {
    pub correlation: u64,
}

/// Liveness probe; the receiver answers `Pong` with the same nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    pub nonce: u64,
}

/// Answer to a `Ping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    pub nonce: u64,
}

/// Finish in-flight work within `grace_ms` and take no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drain {
    pub grace_ms: u64,
}

/// A draining worker has no work in flight any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drained {
    /// Replies the worker sent while draining.
    pub completed: u64,
}

/// The sender is closing cleanly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goodbye {
    pub reason: String,
}

impl Goodbye {
    /// The reason a node gives a worker another registration of its deployment and instance
    /// id replaced: the worker should not come back as that instance.
    pub const SUPERSEDED: &'static str = "superseded";
}

/// Why a side closes a connection. Codes are appended, never renumbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// A frame body did not decode.
    Malformed,
    /// A length prefix exceeded the maximum frame length.
    Oversize,
    /// A frame kind this side does not know.
    UnknownFrameKind,
    /// A frame not allowed in the connection's role or state.
    UnexpectedFrame,
    /// No `Hello` arrived within the handshake timeout.
    HandshakeTimeout,
    /// Too many pings went unanswered.
    LivenessTimeout,
    /// A capacity update stated zero.
    ZeroCapacity,
    /// Reserved: a version-1 node that shuts down says `Goodbye` instead.
    ShuttingDown,
    /// A peer announced more pools or groups than the receiver holds. On client connections
    /// the node refuses work over its bounds instead (`RegisterRefused`, a `Refused` outcome).
    LimitExceeded,
    /// Version 2: a frame took longer than the node's `frame_timeout_ms` to arrive once its
    /// first byte had.
    FrameTimeout,
    /// Version 2: the receiver's outbound queue stayed over its byte budget past the node's
    /// `slow_consumer_grace_ms`, or what it was owed passed the queue's ceiling.
    SlowConsumer,
    /// Version 3: a frame needs what the receiver does not implement (a critical extension,
    /// a feature it did not list).
    Unsupported,
}

/// Version 3, peer to peer: the sender has answered every relay it handled on this link; a
/// relay of the receiver's without an answer was never handled and never will be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Farewell {
    pub reason: String,
}

/// A protocol violation; the sender closes the connection after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorFrame {
    pub code: ErrorCode,
    pub reason: String,
}
