//! The peer hellos: who each side is, which members it knows and, from version 3, what it
//! implements.
//!
//! The dialler sends its `PeerHello` first. The acceptor reads it and decides whether to keep
//! the link before it answers: a link it keeps gets its `PeerHello` (sent by the session), a
//! link it refuses gets `Goodbye` instead, its hello never sent.

use lintel_wire::{feature, ErrorCode, Extension, FeatureSet, Frame, NotImplemented, PeerHello};

use super::super::close::Close;
use super::super::handshake::features_at;
use crate::implemented::IMPLEMENTED;
use crate::shared::Shared;
use lintel_transport::{FrameReader, Outbound};

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

impl Side {
    /// This side of a link that negotiated protocol `version`.
    pub(crate) fn speaking(self, version: u16) -> LinkEnd {
        LinkEnd {
            side: self,
            version,
        }
    }
}

/// One side of a link and the protocol version the link speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkEnd {
    pub(crate) side: Side,
    pub(crate) version: u16,
}

/// A peer's hello, and what it says of the peer.
#[derive(Debug)]
pub(crate) struct Heard {
    pub(crate) hello: PeerHello,
    /// The peer retires a link with `Farewell`: its version-3 hello lists `farewell`.
    pub(crate) farewell: bool,
    /// The peer takes `PoolSettings`: its version-3 hello lists `pool-settings`.
    pub(crate) pool_settings: bool,
    /// The peer numbers relays per pair of incarnations, acknowledges outcomes and resumes
    /// after a relink: its version-3 hello lists `relay-resume`.
    pub(crate) resume: bool,
    /// The peer says it held a link to this node's incarnation and lost it (hello tag 3).
    pub(crate) lost_ours: bool,
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

/// This node's hello on a link of `version`: the peers it has a link to and, from version 3,
/// what it implements.
pub(super) fn hello_frame(shared: &Shared, version: u16) -> Frame {
    Frame::from(own_hello(shared, version))
}

fn own_hello(shared: &Shared, version: u16) -> PeerHello {
    PeerHello {
        node_id: shared.node_id().to_owned(),
        incarnation: shared.incarnation,
        advertise: shared.advertise().to_owned(),
        peers: shared.dispatcher.mesh().known_peers(),
        features: features_at(version),
        extensions: Vec::new(),
    }
}

/// A dialler's hello; from version 4 it says which incarnation of the peer this node held a
/// link to and lost (`lost`), so the acceptor takes a link it dialled itself as cut.
fn dial_hello(shared: &Shared, version: u16, lost: Option<u64>) -> Frame {
    let mut hello = own_hello(shared, version);
    if version >= 4 {
        hello.set_lost_link_to(lost);
    }
    Frame::from(hello)
}

/// A peer's hello to this node (of incarnation `incarnation`); `None` for any other frame.
///
/// # Errors
/// The close owed for a hello whose extensions this node refuses.
pub(super) fn read_hello(
    frame: &Frame,
    max_set_len: usize,
    incarnation: u64,
) -> Option<Result<Heard, Close>> {
    let Frame::PeerHello(hello) = frame else {
        return None;
    };
    let lists = |wanted: &str| hello.features.iter().any(|listed| listed == wanted);
    Some(
        check_extensions(&hello.extensions, max_set_len, frame.name()).map(|()| Heard {
            hello: (**hello).clone(),
            farewell: lists(feature::FAREWELL),
            pool_settings: lists(feature::POOL_SETTINGS),
            resume: lists(feature::RELAY_RESUME),
            lost_ours: hello.lost_link_to() == Some(incarnation),
        }),
    )
}

/// Refuses a peer frame with more extensions than `max_set_len`, or with a critical one this
/// node does not honour (of a tag not allocated, or of a feature it does not implement);
/// ignores the rest.
///
/// # Errors
/// `Error{LimitExceeded}` or `Error{Unsupported}`.
pub(super) fn check_extensions(
    extensions: &[Extension],
    max_set_len: usize,
    kind: &str,
) -> Result<(), Close> {
    if extensions.len() > max_set_len {
        return Err(Close::error(
            ErrorCode::LimitExceeded,
            format!("{kind} carries more than {max_set_len} extensions"),
        ));
    }
    match NotImplemented::critical(extensions, IMPLEMENTED) {
        Some(missing) => Err(Close::error(
            ErrorCode::Unsupported,
            format!("{kind}: {missing}"),
        )),
        None => Ok(()),
    }
}

/// The dialler sends its hello, saying which incarnation of the peer it lost a link to
/// (`lost`); either side then reads and checks the other's. The acceptor's own hello is left
/// to the session, once the link is kept.
pub(super) async fn exchange(
    shared: &Shared,
    reader: &mut FrameReader,
    outbound: &Outbound,
    link: LinkEnd,
    lost: Option<u64>,
) -> Result<Heard, HelloFailed> {
    if link.side == Side::Dialled
        && outbound
            .send_owed(dial_hello(shared, link.version, lost))
            .is_err()
    {
        return Err(HelloFailed::Close(Close::Quietly));
    }
    let timeout = shared.config.handshake_timeout();
    let first = match tokio::time::timeout(timeout, super::super::close::next(reader)).await {
        Err(_) => {
            return Err(HelloFailed::Close(Close::error(
                ErrorCode::HandshakeTimeout,
                format!("no PeerHello within {} ms", timeout.as_millis()),
            )))
        }
        Ok(Err(close)) => return Err(HelloFailed::Close(close)),
        Ok(Ok(Frame::Goodbye(goodbye))) if link.side == Side::Dialled => {
            return Err(HelloFailed::Refused(Refusal::from_reason(goodbye.reason)))
        }
        Ok(Ok(frame)) => frame,
    };
    let theirs = match read_hello(&first, shared.config.max_set_len, shared.incarnation) {
        Some(Ok(hello)) => hello,
        Some(Err(close)) => return Err(HelloFailed::Close(close)),
        None => {
            return Err(HelloFailed::Close(Close::unexpected(
                first.name(),
                "before PeerHello",
            )))
        }
    };
    if theirs.hello.node_id == shared.node_id() {
        return Err(HelloFailed::Myself);
    }
    // What the peer lists bounds what is written to it from version 4 on.
    outbound.listen(FeatureSet::named(&theirs.hello.features));
    let node_id = &theirs.hello.node_id;
    if node_id.is_empty() || node_id.len() > shared.config.max_name_len {
        return Err(HelloFailed::Close(Close::goodbye("invalid peer node id")));
    }
    Ok(theirs)
}
