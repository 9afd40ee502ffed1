//! The peer hellos: who each side is and which members it knows.
//!
//! The dialler sends its `PeerHello` first. The acceptor reads it and decides whether to keep
//! the link before it answers: a link it keeps gets its `PeerHello` (sent by the session), a
//! link it refuses gets `Goodbye` instead, its hello never sent.

use lintel_wire::{Frame, PeerHello};

use super::super::close::Close;
use crate::shared::Shared;
use lintel_client::transport::{FrameReader, Outbound};

/// The `Goodbye` reason for a link turned down because another link to the same node stays.
pub(super) const DUPLICATE: &str = "duplicate peer link";
/// The `Goodbye` reason for a link from a node to itself.
pub(super) const MYSELF: &str = "a node does not link to itself";

/// Which side opened the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Dialled,
    Accepted,
}

/// Why the acceptor said `Goodbye` instead of its hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It keeps another link to this node.
    Duplicate,
    /// It is this node itself.
    Myself,
    /// Any other reason, as it said it.
    Other(String),
}

impl Refusal {
    fn from_reason(reason: String) -> Self {
        match reason.as_str() {
            DUPLICATE => Refusal::Duplicate,
            MYSELF => Refusal::Myself,
            _ => Refusal::Other(reason),
        }
    }
}

/// Why hellos did not lead to a link.
#[derive(Debug)]
pub(crate) enum HelloFailed {
    /// The other side is this node itself (a seed or gossip naming our own address).
    Myself,
    /// The acceptor turned the dialler's link down before its hello.
    Refused(Refusal),
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

/// The dialler sends its hello; either side then reads and checks the other's. The acceptor's
/// own hello is left to the session, once the link is kept.
pub(super) async fn exchange(
    shared: &Shared,
    reader: &mut FrameReader,
    outbound: &Outbound,
    side: Side,
) -> Result<PeerHello, HelloFailed> {
    if side == Side::Dialled
        && outbound
            .send_owed(Frame::PeerHello(own_hello(shared)))
            .is_err()
    {
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
        Ok(Ok(Frame::Goodbye(goodbye))) if side == Side::Dialled => {
            return Err(HelloFailed::Refused(Refusal::from_reason(goodbye.reason)))
        }
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
    Ok(theirs)
}
