//! The node's side of the handshake: TLS when the node speaks it, then the first frame must be
//! a `Hello` we can accept.

use lintel_wire::{
    feature, ErrorCode, FeatureSet, Features, Frame, Hello, NotImplemented, Refusal, RefusalCode,
    Role, Welcome,
};

use super::close::Close;
use super::foreign::{self, Screened};
use crate::auth::Grant;
use crate::implemented::IMPLEMENTED;
use crate::shared::Shared;
use crate::tls::Secured;
use lintel_transport::{FrameReader, Outbound, Socket};
use tokio::time::Instant;

/// The lowest protocol version this node speaks; the highest is its `max_protocol_version`.
const MIN_VERSION: u16 = 1;

/// The first protocol version with peer links.
pub(crate) const PEER_VERSION: u16 = 2;

/// What this node implements of version 3, as its welcome and peer hello list it on a
/// version-3 connection.
pub(crate) const FEATURES: [&str; 10] = [
    feature::HEADERS,
    feature::PRIORITY,
    feature::FAIRNESS,
    feature::DEPLOYMENTS,
    feature::STATUS_DOCUMENT,
    feature::PROBATION,
    feature::FAREWELL,
    feature::EVENTS,
    feature::POOL_SETTINGS,
    feature::RELAY_RESUME,
];

/// [`FEATURES`] (and from version 4 [`IMPLEMENTED`]), as a welcome or a peer hello on a
/// connection of `version` lists them: an earlier one than 3 has no word for them.
pub(crate) fn features_at(version: u16) -> Vec<String> {
    if version < 3 {
        return Vec::new();
    }
    let since_4 = if version >= 4 {
        IMPLEMENTED.names()
    } else {
        Vec::new()
    };
    FEATURES
        .iter()
        .map(|&feature| feature.to_owned())
        .chain(since_4)
        .collect()
}

/// A connection past its handshake: its role, the version it speaks, what it was granted.
pub(super) struct Accepted {
    pub(super) role: Role,
    pub(super) version: u16,
    pub(super) grant: Grant,
}

/// Screens the connection's first bytes, then runs the TLS handshake when the node speaks
/// TLS, by `deadline`; `None` when the connection was answered already, failed TLS (or the
/// node closed meanwhile) and is dropped.
pub(super) async fn secure(
    shared: &Shared,
    socket: Socket,
    pid: u64,
    deadline: Instant,
) -> Option<Secured> {
    let (socket, explained, peer) = match foreign::screen(shared, socket, pid, deadline).await {
        Screened::Continue {
            socket,
            explained,
            peer,
        } => (socket, explained, peer),
        Screened::Answered => return None,
    };
    let accepted = tokio::select! {
        accepted = shared.tls.accept(socket, deadline) => accepted,
        () = shared.closing.cancelled() => return None,
    };
    match accepted {
        Ok(secured) => Some(secured),
        Err(err) if explained => {
            tracing::debug!(pid, %peer, error = %err, "closing a connection that failed TLS");
            None
        }
        Err(err) => {
            tracing::info!(pid, %peer, error = %err, "closing a connection that failed TLS");
            None
        }
    }
}

/// Reads the hello by `deadline` and answers it; `identity` is what the connection's verified
/// client certificate names.
pub(super) async fn accept(
    shared: &Shared,
    reader: &mut FrameReader,
    outbound: &Outbound,
    pid: u64,
    identity: Option<&str>,
    deadline: Instant,
) -> Result<Accepted, Close> {
    let timeout = shared.config.handshake_timeout();
    let first = tokio::select! {
        first = tokio::time::timeout_at(deadline, reader.next_owned()) => first,
        () = shared.closing.cancelled() => return Err(Close::goodbye("node shutting down")),
    };
    let hello = match first {
        Err(_) => {
            return Err(Close::error(
                ErrorCode::HandshakeTimeout,
                format!("no Hello within {} ms", timeout.as_millis()),
            ))
        }
        Ok(None) => return Err(Close::Quietly),
        Ok(Some(Err(err))) => return Err(Close::read_failed(err)),
        Ok(Some(Ok(Frame::Hello(hello)))) => hello,
        Ok(Some(Ok(other))) => return Err(Close::unexpected(other.name(), "before Hello")),
    };
    let refused = |refusal: Refusal| {
        tracing::info!(
            pid,
            role = ?hello.role,
            name = clip(&hello.name),
            code = ?refusal.code,
            reason = refusal.reason.as_str(),
            "hello refused"
        );
        refuse(refusal)
    };
    let version = negotiate(&hello, shared.config.max_protocol_version).map_err(refused)?;
    let grant = check(shared, &hello, version, identity).map_err(refused)?;
    // The connection speaks `version` from here on, both ways.
    outbound.speak(version);
    reader.speak(version);
    let features = features_at(version);
    let welcome = Welcome {
        version,
        node_id: shared.node_id().to_owned(),
        pid,
        limits: shared.config.wire_limits(),
        // Stated with the features: both are a version-3 connection's to know.
        header_limits: (!features.is_empty()).then(|| shared.config.header_limits()),
        features,
    };
    outbound
        .send(Frame::from(welcome))
        .await
        .map_err(|_| Close::Quietly)?;
    if version >= 4 && hello.role != Role::Peer {
        let listed = read_features(shared, reader, deadline).await?;
        outbound.listen(listed);
    }
    tracing::debug!(pid, role = ?hello.role, name = %hello.name, "connection welcomed");
    Ok(Accepted {
        role: hello.role,
        version,
        grant,
    })
}

/// Reads a version-4 client's `Features`, its first frame after the welcome, by `deadline`:
/// what it understands.
///
/// # Errors
/// The close owed for none in time, another frame first, a list over the node's bounds or an
/// extension the node cannot honour.
async fn read_features(
    shared: &Shared,
    reader: &mut FrameReader,
    deadline: Instant,
) -> Result<FeatureSet, Close> {
    let next = tokio::select! {
        biased;
        next = tokio::time::timeout_at(deadline, reader.next_owned()) => next,
        () = shared.closing.cancelled() => return Err(Close::goodbye("node shutting down")),
    };
    let features = match next {
        Err(_) => {
            return Err(Close::error(
                ErrorCode::HandshakeTimeout,
                format!(
                    "no Features within {} ms",
                    shared.config.handshake_timeout().as_millis()
                ),
            ))
        }
        Ok(None) => return Err(Close::Quietly),
        Ok(Some(Err(err))) => return Err(Close::read_failed(err)),
        Ok(Some(Ok(Frame::Features(features)))) => features,
        Ok(Some(Ok(other))) => {
            return Err(Close::unexpected(other.name(), "before Features"));
        }
    };
    check_features(
        &features,
        shared.config.max_set_len,
        shared.config.max_name_len,
    )?;
    Ok(features.listed())
}

/// Refuses a `Features` over the node's bounds, or with an extension it cannot honour.
fn check_features(
    features: &Features,
    max_set_len: usize,
    max_name_len: usize,
) -> Result<(), Close> {
    if features.features.len() > max_set_len || features.extensions.len() > max_set_len {
        return Err(Close::error(
            ErrorCode::LimitExceeded,
            format!("Features lists more than {max_set_len} names or extensions"),
        ));
    }
    if let Some(name) = features
        .features
        .iter()
        .find(|name| name.is_empty() || name.len() > max_name_len)
    {
        return Err(Close::error(
            ErrorCode::LimitExceeded,
            format!(
                "Features names `{}`, not 1 to {max_name_len} bytes",
                clip(name)
            ),
        ));
    }
    match NotImplemented::critical(&features.extensions, IMPLEMENTED) {
        Some(missing) => Err(Close::error(
            ErrorCode::Unsupported,
            format!("Features: {missing}"),
        )),
        None => Ok(()),
    }
}

/// Most bytes of a client-chosen text a log line shows.
const CLIP: usize = 128;

/// The start of `text`, a name or a reason a client may have made as long as a frame, cut to
/// [`CLIP`] bytes at a character boundary for a log line.
pub(super) fn clip(text: &str) -> &str {
    let end = text
        .char_indices()
        .map(|(at, c)| at + c.len_utf8())
        .take_while(|end| *end <= CLIP)
        .last()
        .unwrap_or(0);
    text.get(..end).unwrap_or_default()
}

/// The highest version both sides speak, the node's highest being `max_version`.
fn negotiate(hello: &Hello, max_version: u16) -> Result<u16, Refusal> {
    let version = hello.max_version.min(max_version);
    if hello.min_version > hello.max_version || version < hello.min_version.max(MIN_VERSION) {
        return Err(Refusal {
            code: RefusalCode::VersionMismatch,
            reason: format!(
                "client speaks {}..={}, node speaks {MIN_VERSION}..={max_version}",
                hello.min_version, hello.max_version
            ),
        });
    }
    Ok(version)
}

fn check(
    shared: &Shared,
    hello: &Hello,
    version: u16,
    identity: Option<&str>,
) -> Result<Grant, Refusal> {
    let grant = shared.config.authenticator().authenticate(
        hello.role,
        hello.auth_token.as_deref(),
        identity,
    )?;
    if hello.role == Role::Peer && version < PEER_VERSION {
        return Err(Refusal {
            code: RefusalCode::VersionMismatch,
            reason: format!("peer links need protocol version {PEER_VERSION}"),
        });
    }
    // A producer may still look at a draining node: its status is answered, its submissions
    // end `Draining`. Workers and peers would bring work the node is letting go of.
    if shared.dispatcher.is_draining() && hello.role != Role::Producer {
        return Err(Refusal {
            code: RefusalCode::Draining,
            reason: "node is draining".into(),
        });
    }
    Ok(grant)
}

fn refuse(refusal: Refusal) -> Close {
    Close::With(Box::new(Frame::HelloRefused(refusal)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lintel_wire::PROTOCOL_VERSION;

    fn hello(min_version: u16, max_version: u16) -> Hello {
        Hello {
            min_version,
            max_version,
            role: Role::Worker,
            name: String::new(),
            auth_token: None,
        }
    }

    #[test]
    fn a_long_client_text_is_clipped_at_a_character_boundary() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(100);
        let clipped = clip(&long);
        assert!(clipped.len() <= CLIP && long.starts_with(clipped) && clipped.len() == CLIP);
    }

    #[test]
    fn the_highest_common_version_is_chosen() {
        assert_eq!(
            negotiate(&hello(1, 9), PROTOCOL_VERSION),
            Ok(PROTOCOL_VERSION)
        );
        assert_eq!(negotiate(&hello(1, 1), PROTOCOL_VERSION), Ok(1));
        assert_eq!(negotiate(&hello(1, 3), 2), Ok(2), "a capped node");
        assert_eq!(
            negotiate(&hello(3, 3), 2).map_err(|r| r.code),
            Err(RefusalCode::VersionMismatch)
        );
    }

    #[test]
    fn disjoint_or_inverted_ranges_are_refused() {
        for (min, max) in [(PROTOCOL_VERSION + 1, 9), (0, 0), (3, 2)] {
            assert_eq!(
                negotiate(&hello(min, max), PROTOCOL_VERSION).map_err(|r| r.code),
                Err(RefusalCode::VersionMismatch),
                "{min}..={max}"
            );
        }
    }
}
