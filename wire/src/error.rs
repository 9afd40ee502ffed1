//! Errors of the framing layer, one enum per direction.

use crate::foreign::Foreign;
use crate::kind::FrameKind;
use crate::message::ErrorCode;

/// Why bytes from the network are not a frame.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The length prefix exceeds the maximum; nothing was allocated for it.
    #[error("frame body of {len} bytes exceeds the maximum of {max}")]
    Oversize { len: usize, max: usize },
    /// The body is empty or does not start with a valid varint.
    #[error("frame body has no valid frame kind")]
    MissingKind,
    /// The frame kind is not one this version knows.
    #[error("unknown frame kind {discriminant}")]
    UnknownKind { discriminant: u32 },
    /// The body of a known kind did not decode.
    #[error("malformed {kind} frame: {source}")]
    Malformed {
        kind: FrameKind,
        #[source]
        source: postcard::Error,
    },
    /// The body decoded but bytes were left over.
    #[error("{kind} frame has {extra} trailing bytes")]
    TrailingBytes { kind: FrameKind, extra: usize },
    /// A kind of a later version than the connection's, read by a reader told the version.
    #[error("{kind} is a frame of version {}, not of the connection's version {version}", kind.version())]
    KindTooNew { kind: FrameKind, version: u16 },
}

impl DecodeError {
    /// The code a node sends in its `Error` frame before closing.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            DecodeError::Oversize { .. } => ErrorCode::Oversize,
            DecodeError::UnknownKind { .. } => ErrorCode::UnknownFrameKind,
            DecodeError::MissingKind
            | DecodeError::Malformed { .. }
            | DecodeError::TrailingBytes { .. } => ErrorCode::Malformed,
            DecodeError::KindTooNew { .. } => ErrorCode::UnexpectedFrame,
        }
    }
}

/// Why a frame could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The encoded body would exceed the maximum frame length.
    #[error("encoded {kind} frame of {len} bytes exceeds the maximum of {max}")]
    Oversize {
        kind: FrameKind,
        len: usize,
        max: usize,
    },
    /// Serialization failed.
    #[error("cannot encode {kind} frame: {source}")]
    Serialize {
        kind: FrameKind,
        #[source]
        source: postcard::Error,
    },
    /// The message holds a field that `kind`, the kind a connection of `version` carries it as,
    /// has no room for: refused, never dropped (but for the two drops PROTOCOL.md allows: a
    /// version-2 push's or relay's priority and fairness, [`crate::Register::carried_at`]).
    #[error("a {kind} frame of version {version} cannot carry `{field}`")]
    Unsupported {
        kind: FrameKind,
        field: &'static str,
        version: u16,
    },
    /// No kind of the message is known to a connection of `version`.
    #[error("{kind} is a frame of version {}, not of the connection's version {version}", kind.version())]
    KindTooNew { kind: FrameKind, version: u16 },
    /// `kind` came after version 3 and the reader did not list `feature`.
    #[error("{kind} needs the feature `{feature}`, which the reader did not list")]
    NotListed {
        kind: FrameKind,
        feature: &'static str,
    },
}

/// Errors of the `tokio_util` codec: framing errors plus the transport's I/O errors.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The stream ended in the middle of a frame.
    #[error("stream ended mid-frame with {buffered} bytes buffered")]
    Truncated { buffered: usize },
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The other side speaks another protocol; recognised where a frame should start.
    #[error("the other side speaks {0}, not lintel frames")]
    Foreign(Foreign),
}
