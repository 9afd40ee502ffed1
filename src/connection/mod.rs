//! One accepted connection: handshake, then the loop of its role, then an orderly close.

mod close;
mod flights;
mod foreign;
mod handshake;
mod peer;
mod producer;
mod report;
mod subscriptions;
mod worker;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use lintel_wire::{Frame, Role};
use tokio::task::JoinHandle;

use crate::shared::Shared;
use close::Close;
use lintel_transport::{FrameReader, Outbound, Socket};

pub(crate) use peer::supervise as supervise_peers;

/// A connection whose handshake ended: its reader, its outbound queue and writer, and what its
/// hello was granted or why it closes.
pub(crate) struct Opened {
    reader: FrameReader,
    outbound: Outbound,
    writer: JoinHandle<std::io::Result<()>>,
    accepted: Result<handshake::Accepted, Close>,
}

/// A connection's handshake, boxed: it runs once, and its state (the socket before it is
/// split, TLS, the hello) is let go once it ends instead of sized into the connection's task.
pub(crate) type Opening = Pin<Box<dyn Future<Output = Option<Opened>> + Send>>;

/// Screens, secures and splits `stream`, then reads its hello, by one handshake timeout; `None`
/// when it was answered already or failed TLS.
pub(crate) fn open(shared: Arc<Shared>, stream: Socket, pid: u64) -> Opening {
    Box::pin(async move {
        let config = &shared.config;
        // TLS, when on, and the hello both finish within one handshake timeout.
        let deadline = tokio::time::Instant::now() + config.handshake_timeout();
        let secured = handshake::secure(&shared, stream, pid, deadline).await?;
        let (mut reader, outbound, writer) =
            lintel_transport::split(secured.socket, config.max_frame_len, config.outbound_queue);
        outbound.set_limits(config.queue_limits());
        let identity = secured.identity.as_deref();
        let accepted =
            handshake::accept(&shared, &mut reader, &outbound, pid, identity, deadline).await;
        Some(Opened {
            reader,
            outbound,
            writer,
            accepted,
        })
    })
}

/// Serves connection `pid` once `opening` ends, until it closes; every path ends in the same
/// orderly close. Not an `async fn`: its arguments are the future's own fields, not copied
/// into it again, since every idle connection keeps this future for its whole life.
#[allow(clippy::manual_async_fn)]
pub(crate) fn serve(
    shared: Arc<Shared>,
    opening: Opening,
    pid: u64,
) -> impl Future<Output = ()> + Send {
    async move {
        let Some(Opened {
            mut reader,
            outbound,
            writer,
            accepted,
        }) = opening.await
        else {
            return;
        };
        let close = match accepted {
            Ok(handshake::Accepted {
                role,
                version,
                grant,
            }) => {
                shared.connection_counts.opened(pid, role, &outbound);
                reader.set_frame_timeout(Some(shared.config.frame_timeout()));
                let close = match role {
                    Role::Worker => {
                        worker::serve(&shared, (pid, version), &mut reader, &outbound, grant).await
                    }
                    // Boxed: an idle worker connection's task is sized by the worker loop alone.
                    Role::Producer => {
                        let serving =
                            producer::serve(&shared, &mut reader, &outbound, version, grant);
                        Box::pin(serving).await
                    }
                    Role::Peer => {
                        let serving =
                            peer::serve_accepted(&shared, &mut reader, &outbound, version);
                        Box::pin(serving).await
                    }
                };
                shared.connection_counts.closed(pid);
                if let Close::Shed(frame) = &close {
                    if let Frame::Error(error) = &**frame {
                        tracing::info!(pid, version, reason = %error.reason, "closing a slow consumer");
                    }
                }
                close.for_version(version)
            }
            Err(close) => close,
        };
        // The closing flush runs once: boxed, it stays out of the task every idle connection keeps.
        Box::pin(finish(shared, pid, close, reader, outbound, writer)).await;
    }
}

/// Sends `close`'s frame, flushes and closes, then lingers after shedding a slow consumer.
async fn finish(
    shared: Arc<Shared>,
    pid: u64,
    close: Close,
    mut reader: FrameReader,
    outbound: Outbound,
    writer: JoinHandle<std::io::Result<()>>,
) {
    if let Close::With(frame) | Close::Shed(frame) = &close {
        if let Frame::Error(error) = &**frame {
            tracing::debug!(pid, code = ?error.code, reason = %error.reason, "closing on protocol error");
        }
    }
    let shed = matches!(close, Close::Shed(_));
    close::finish(&shared, close, outbound, writer).await;
    if shed {
        close::linger(&mut reader).await;
    }
    tracing::debug!(pid, "connection closed");
}
