//! How a connection ends: quietly, or after one last frame.

use lintel_wire::{CodecError, ErrorCode, ErrorFrame, Frame, FrameKind, Goodbye};

/// How a connection ends.
#[derive(Debug)]
pub(crate) enum Close {
    /// Just close (the peer left, or said goodbye).
    Quietly,
    /// Send this frame, then close. Boxed: a close is rare, a `Result` carrying it is not.
    With(Box<Frame>),
}

impl Close {
    pub(super) fn error(code: ErrorCode, reason: impl Into<String>) -> Self {
        Close::With(Box::new(Frame::Error(ErrorFrame {
            code,
            reason: reason.into(),
        })))
    }

    pub(super) fn goodbye(reason: &str) -> Self {
        Close::With(Box::new(Frame::Goodbye(Goodbye {
            reason: reason.into(),
        })))
    }

    pub(super) fn unexpected(kind: FrameKind, state: &str) -> Self {
        Close::error(
            ErrorCode::UnexpectedFrame,
            format!("{kind} is not allowed {state}"),
        )
    }

    /// The close owed for a read error: bad bytes get an `Error` frame, a dead socket nothing.
    pub(super) fn read_failed(err: CodecError) -> Self {
        match err {
            CodecError::Decode(err) => Close::error(err.error_code(), err.to_string()),
            CodecError::Truncated { .. } => Close::error(ErrorCode::Malformed, err.to_string()),
            CodecError::Encode(_) | CodecError::Io(_) => Close::Quietly,
        }
    }
}
