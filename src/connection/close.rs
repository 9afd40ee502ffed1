//! How a connection ends: quietly, or after one last frame.

use std::time::Duration;

use lintel_wire::{CodecError, ErrorCode, ErrorFrame, Frame, Goodbye, Ping};
use tokio::task::JoinHandle;

use crate::shared::Shared;
use lintel_transport::keepalive::Tick;
use lintel_transport::{is_frame_timeout, FrameReader, Outbound};

/// How long a closing connection may take to flush its last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How a connection ends.
#[derive(Debug)]
pub(crate) enum Close {
    /// Just close (the peer left, or said goodbye).
    Quietly,
    /// Send this frame, then close. Boxed: a close is rare, a `Result` carrying it is not.
    With(Box<Frame>),
    /// Drop every queued frame not yet started, send this frame, then close: for a peer that
    /// reads too slowly to be sent what is queued.
    Shed(Box<Frame>),
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

    /// The close of a connection that read too slowly: `Error{SlowConsumer}`, after dropping
    /// what was queued for it.
    pub(super) fn slow_consumer(reason: impl Into<String>) -> Self {
        Close::Shed(Box::new(Frame::Error(ErrorFrame {
            code: ErrorCode::SlowConsumer,
            reason: reason.into(),
        })))
    }

    /// The close for a frame (named as [`Frame::name`] names it) not allowed in `state`.
    pub(super) fn unexpected(frame: &str, state: &str) -> Self {
        Close::error(
            ErrorCode::UnexpectedFrame,
            format!("{frame} is not allowed {state}"),
        )
    }

    /// This close as a connection speaking `version` can read it: version 1 knows no
    /// `FrameTimeout`, so it is closed without the frame, and no `SlowConsumer`, so it is told
    /// `Goodbye` with the reason.
    pub(super) fn for_version(self, version: u16) -> Self {
        match &self {
            Close::Shed(frame) if version < 2 => match &**frame {
                Frame::Error(error) if error.code == ErrorCode::SlowConsumer => {
                    Close::Shed(Box::new(Frame::Goodbye(Goodbye {
                        reason: format!("slow consumer: {}", error.reason),
                    })))
                }
                _ => self,
            },
            Close::With(frame)
                if version < 2
                    && matches!(&**frame, Frame::Error(error) if error.code == ErrorCode::FrameTimeout) =>
            {
                Close::Quietly
            }
            _ => self,
        }
    }

    /// The ping a keep-alive tick asks for (none for an overdue one), or the
    /// `Error{LivenessTimeout}` close once too many went unanswered.
    pub(super) fn unless_pinged(tick: Tick) -> Result<Option<Ping>, Self> {
        match tick {
            Tick::Ping(ping) => Ok(Some(ping)),
            Tick::Overdue => Ok(None),
            Tick::Dead { missed } => Err(Close::error(
                ErrorCode::LivenessTimeout,
                format!("{missed} pings in a row went unanswered"),
            )),
        }
    }

    /// The close owed for a read error: bad bytes get an `Error` frame, a dead socket nothing.
    pub(super) fn read_failed(err: CodecError) -> Self {
        match err {
            CodecError::Decode(err) => Close::error(err.error_code(), err.to_string()),
            CodecError::Truncated { .. } => Close::error(ErrorCode::Malformed, err.to_string()),
            ref err if is_frame_timeout(err) => Close::error(
                ErrorCode::FrameTimeout,
                "a frame took longer than frame_timeout_ms to arrive",
            ),
            CodecError::Foreign(foreign) => Close::error(
                ErrorCode::Malformed,
                format!("{foreign} where a lintel frame should start"),
            ),
            CodecError::Encode(_) | CodecError::Io(_) => Close::Quietly,
        }
    }
}

/// Sends the closing frame, if any, and waits a bounded time for the writer to flush.
pub(super) async fn finish(
    shared: &Shared,
    close: Close,
    outbound: Outbound,
    writer: JoinHandle<std::io::Result<()>>,
) {
    if let Close::With(frame) | Close::Shed(frame) = &close {
        match &**frame {
            Frame::Error(error) => shared.connection_counts.error(error.code),
            Frame::HelloRefused(refusal) => shared.connection_counts.refused("hello", refusal.code),
            _ => {}
        }
    }
    let flush = async {
        match close {
            Close::With(frame) => outbound.close_with(*frame).await,
            Close::Shed(frame) => {
                if outbound.discard_and_close_with(&frame).is_err() {
                    outbound.close();
                }
            }
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
}

/// Reads and drops what the other side still sends, until it closes or a grace passes, so a
/// closing frame is not lost to the reset that closing on unread input would send.
pub(super) async fn linger(reader: &mut FrameReader) {
    let drain = async { while let Some(Ok(_)) = reader.next_frame().await {} };
    let _ = tokio::time::timeout(CLOSE_GRACE, drain).await;
}

/// The next frame; the end of the stream or bad bytes become the close they call for.
pub(super) async fn next(reader: &mut FrameReader) -> Result<Frame, Close> {
    match reader.next_owned().await {
        None => Err(Close::Quietly),
        Some(Err(err)) => Err(Close::read_failed(err)),
        Some(Ok(frame)) => Ok(frame),
    }
}
