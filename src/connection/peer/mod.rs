//! Peer links: the hellos, the live link, and the dialler that keeps links to every member.
//!
//! - `hello`: who each side is; `session`: one live link, presence and relays both ways;
//! - `retire`: a link's orderly end, every relay it handled answered before a farewell;
//! - `announce`: what one peer was last told about this node's pools;
//! - `dial`: one dialler per member, keyed by node id, and one per join point until it is
//!   known who answers there; each redials with jittered backoff while no link is up;
//! - `discover`: a peer name's join points, one per address it resolves to, kept up to date.

mod announce;
mod dial;
mod discover;
mod hello;
mod retire;
mod session;

use std::sync::Arc;

use super::close::Close;
use crate::shared::Shared;
use hello::{HelloFailed, Side};
use lintel_transport::{FrameReader, Outbound};

pub(crate) use dial::supervise;

/// Runs a peer link a member dialled here, after a handshake that negotiated `version`.
pub(super) async fn serve_accepted(
    shared: &Arc<Shared>,
    reader: &mut FrameReader,
    outbound: &Outbound,
    version: u16,
) -> Close {
    let link = Side::Accepted.speaking(version);
    match hello::exchange(shared, reader, outbound, link, None).await {
        Ok(theirs) => session::run(shared, reader, outbound, link, theirs).await,
        Err(HelloFailed::Myself) => Close::goodbye(hello::MYSELF),
        // A dialler's refusal; the acceptor reads none.
        Err(HelloFailed::Refused(_)) => Close::Quietly,
        Err(HelloFailed::Close(close)) => close,
    }
}
