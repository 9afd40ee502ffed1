//! One accepted connection: handshake, then the loop of its role, then an orderly close.

mod close;
mod flights;
mod foreign;
mod handshake;
mod peer;
mod producer;
mod report;
mod worker;

use std::sync::Arc;

use lintel_wire::{Frame, Role};

use crate::shared::Shared;
use close::Close;
use lintel_client::transport::{self, FrameReader, Outbound, Socket};

pub(crate) use peer::supervise as supervise_peers;

/// Serves connection `pid` until it closes; every path ends in the same orderly close.
pub(crate) async fn serve(shared: Arc<Shared>, stream: Socket, pid: u64) {
    let config = &shared.config;
    // TLS, when on, and the hello both finish within one handshake timeout.
    let deadline = tokio::time::Instant::now() + config.handshake_timeout();
    let Some(secured) = Box::pin(handshake::secure(&shared, stream, pid, deadline)).await else {
        return;
    };
    let (mut reader, outbound, writer) =
        transport::split(secured.socket, config.max_frame_len, config.outbound_queue);
    let identity = secured.identity.as_deref();
    outbound.set_limits(config.queue_limits());
    // The handshake and the closing flush run once each; boxed, they stay out of the task that
    // every idle connection keeps for its whole life.
    let accepting = handshake::accept(&shared, &mut reader, &outbound, pid, identity, deadline);
    let close = match Box::pin(accepting).await {
        Ok(accepted) => {
            shared.tally.opened(pid, accepted.role, &outbound);
            reader.set_frame_timeout(Some(config.frame_timeout()));
            let version = accepted.version;
            let close = serve_role(&shared, pid, &mut reader, &outbound, accepted).await;
            shared.tally.closed(pid);
            if let Close::Shed(frame) = &close {
                if let Frame::Error(error) = &**frame {
                    tracing::info!(pid, version, reason = %error.reason, "closing a slow consumer");
                }
            }
            close.for_version(version)
        }
        Err(close) => close,
    };
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

/// Runs the role a connection took at its handshake until it should close.
async fn serve_role(
    shared: &Arc<Shared>,
    pid: u64,
    reader: &mut FrameReader,
    outbound: &Outbound,
    accepted: handshake::Accepted,
) -> Close {
    match accepted.role {
        Role::Worker => worker::serve(shared, pid, reader, outbound, accepted.grant).await,
        // Boxed: an idle worker connection's task is sized by the worker loop alone.
        Role::Producer => {
            Box::pin(producer::serve(
                shared,
                reader,
                outbound,
                accepted.version,
                accepted.grant,
            ))
            .await
        }
        Role::Peer => Box::pin(peer::serve_accepted(shared, reader, outbound)).await,
    }
}
