//! The peer hellos: who each side is and which members it knows.

use lintel_wire::{Frame, PeerHello};

use super::super::close::Close;
use crate::shared::Shared;
use lintel_client::transport::{FrameReader, Outbound};

/// Which side opened the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Dialled,
    Accepted,
}

/// Why hellos did not lead to a link.
#[derive(Debug)]
pub(crate) enum HelloFailed {
    /// The other side is this node itself (a seed or gossip naming our own address).
    Myself,
    /// Anything else; the connection closes this way.
    Close(Close),
}

/// This node's hello, listing the peers it has a link to.
pub(super) fn own_hello(shared: &Shared) -> PeerHello {
    PeerHello {
        node_id: shared.node_id().to_owned(),
        incarnation: shared.incarnation,
        advertise: shared.advertise().to_owned(),
        peers: shared.dispatcher.mesh().known_peers(),
    }
}

/// Exchanges hellos, the dialler first, and checks the other side's.
pub(super) async fn exchange(
    shared: &Shared,
    reader: &mut FrameReader,
    outbound: &Outbound,
    side: Side,
) -> Result<PeerHello, HelloFailed> {
    let send = |outbound: &Outbound| outbound.send_owed(Frame::PeerHello(own_hello(shared)));
    if side == Side::Dialled && send(outbound).is_err() {
        return Err(HelloFailed::Close(Close::Quietly));
    }
    let timeout = shared.config.handshake_timeout();
    let theirs = match tokio::time::timeout(timeout, super::super::close::next(reader)).await {
        Err(_) => {
            return Err(HelloFailed::Close(Close::error(
                lintel_wire::ErrorCode::HandshakeTimeout,
                format!("no PeerHello within {} ms", timeout.as_millis()),
            )))
        }
        Ok(Err(close)) => return Err(HelloFailed::Close(close)),
        Ok(Ok(Frame::PeerHello(hello))) => hello,
        Ok(Ok(other)) => {
            return Err(HelloFailed::Close(Close::unexpected(
                other.kind(),
                "before PeerHello",
            )))
        }
    };
    if theirs.node_id == shared.node_id() {
        return Err(HelloFailed::Myself);
    }
    if theirs.node_id.is_empty() || theirs.node_id.len() > shared.config.max_name_len {
        return Err(HelloFailed::Close(Close::goodbye("invalid peer node id")));
    }
    if side == Side::Accepted && send(outbound).is_err() {
        return Err(HelloFailed::Close(Close::Quietly));
    }
    Ok(theirs)
}
