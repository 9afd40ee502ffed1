//! One accepted connection: handshake, then the loop of its role, then an orderly close.

mod handshake;
mod producer;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use lintel_client::transport;
use lintel_wire::{CodecError, ErrorCode, ErrorFrame, Frame, FrameKind, Goodbye, Role};
use tokio::net::TcpStream;

use crate::node::Shared;

/// How long a closing connection may take to flush its last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How a connection ends.
#[derive(Debug)]
pub(crate) enum Close {
    /// Just close (the peer left, or said goodbye).
    Quietly,
    /// Send this frame, then close. Boxed: a close is rare, a `Result` carrying it is not.
    With(Box<Frame>),
}

impl Close {
    fn error(code: ErrorCode, reason: impl Into<String>) -> Self {
        Close::With(Box::new(Frame::Error(ErrorFrame {
            code,
            reason: reason.into(),
        })))
    }

    fn goodbye(reason: &str) -> Self {
        Close::With(Box::new(Frame::Goodbye(Goodbye {
            reason: reason.into(),
        })))
    }

    fn unexpected(kind: FrameKind, state: &str) -> Self {
        Close::error(
            ErrorCode::UnexpectedFrame,
            format!("{kind} is not allowed {state}"),
        )
    }

    /// The close owed for a read error: bad bytes get an `Error` frame, a dead socket nothing.
    fn read_failed(err: CodecError) -> Self {
        match err {
            CodecError::Decode(err) => Close::error(err.error_code(), err.to_string()),
            CodecError::Truncated { .. } => Close::error(ErrorCode::Malformed, err.to_string()),
            CodecError::Encode(_) | CodecError::Io(_) => Close::Quietly,
        }
    }
}

/// Serves connection `pid` until it closes; every path ends in the same orderly close.
pub(crate) async fn serve(shared: Arc<Shared>, stream: TcpStream, pid: u64) {
    let config = &shared.config;
    let (mut reader, outbound, writer) =
        transport::split(stream, config.max_frame_len, config.outbound_queue);
    // The handshake and the closing flush run once each; boxed, they stay out of the task that
    // every idle connection keeps for its whole life.
    let close = match Box::pin(handshake::accept(&shared, &mut reader, &outbound, pid)).await {
        Ok(Role::Worker) => worker::serve(&shared, pid, &mut reader, &outbound).await,
        Ok(Role::Producer) => producer::serve(&shared, &mut reader, &outbound).await,
        Ok(Role::Peer) => Close::Quietly,
        Err(close) => close,
    };
    if let Close::With(frame) = &close {
        if let Frame::Error(error) = &**frame {
            tracing::debug!(pid, code = ?error.code, reason = %error.reason, "closing on protocol error");
        }
    }
    let flush = async {
        match close {
            Close::With(frame) => outbound.close_with(*frame).await,
            Close::Quietly => outbound.close(),
        }
    };
    let _ = Box::pin(tokio::time::timeout(CLOSE_GRACE, flush)).await;
    drop(outbound);
    let mut writer = writer;
    if tokio::time::timeout(CLOSE_GRACE, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
    tracing::debug!(pid, "connection closed");
}
