//! Keeps a link to every known member: one dialler per address, redialling with jittered
//! exponential backoff while no link to the node last seen there is up. Links are opened by the
//! node's [`Dialer`](lintel_client::transport::Dialer), TCP unless the node was given another.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use lintel_client::connect::connect_with;
use lintel_client::transport::Batched;
use lintel_client::Handshake;
use lintel_wire::Role;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::hello::{self, HelloFailed, Side};
use super::session;
use crate::shared::Shared;

/// First pause before redialling.
const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest pause before redialling.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A link that lived this long starts its next backoff afresh.
const STABLE: Duration = Duration::from_secs(10);

/// Dials the configured peers and every member learned later, until the node closes.
pub(crate) async fn supervise(shared: Arc<Shared>, tasks: TaskTracker) {
    let mesh = Arc::clone(shared.dispatcher.mesh());
    // Subscribed before the first look, so no member learned meanwhile is missed.
    let mut members = mesh.subscribe_members();
    for seed in &shared.config.peers {
        mesh.learn(seed);
    }
    let mut dialling: HashSet<String> = HashSet::new();
    loop {
        for address in mesh.member_addresses() {
            if address != shared.advertise() && dialling.insert(address.clone()) {
                tasks.spawn(Batched::new(dial(Arc::clone(&shared), address)));
            }
        }
        tokio::select! {
            () = shared.closing.cancelled() => return,
            changed = members.changed() => if changed.is_err() { return },
        }
    }
}

/// Keeps a link to the member at `address` until the node closes or it turns out to be this
/// node itself.
async fn dial(shared: Arc<Shared>, address: String) {
    let mut backoff = BACKOFF_START;
    loop {
        if !linked_elsewhere(&shared, &address).await {
            return;
        }
        let started = Instant::now();
        let handshake = Handshake {
            role: Role::Peer,
            name: shared.node_id().to_owned(),
            auth_token: shared
                .config
                .cluster_secret
                .clone()
                .or_else(|| shared.config.auth_token.clone()),
            timeout: shared.config.handshake_timeout(),
            max_frame_len: shared.config.max_frame_len,
            queue_len: shared.config.outbound_queue,
        };
        let connected = tokio::select! {
            () = shared.closing.cancelled() => return,
            connected = connect_with(&*shared.dialer, &address, &handshake) => connected,
        };
        match connected {
            Ok(mut conn) => {
                conn.reader
                    .set_frame_timeout(Some(shared.config.frame_timeout()));
                let close =
                    match hello::exchange(&shared, &mut conn.reader, &conn.outbound, Side::Dialled)
                        .await
                    {
                        Ok(theirs) => {
                            session::run(
                                &shared,
                                &mut conn.reader,
                                &conn.outbound,
                                Side::Dialled,
                                theirs,
                            )
                            .await
                        }
                        Err(HelloFailed::Myself) => {
                            tracing::debug!(%address, "peer address is this node; not dialling it");
                            conn.outbound.close();
                            return;
                        }
                        Err(HelloFailed::Close(close)) => close,
                    };
                super::super::close::finish(&shared, close, conn.outbound, conn.writer).await;
            }
            Err(err) => tracing::debug!(%address, error = %err, "peer dial failed"),
        }
        if started.elapsed() >= STABLE {
            backoff = BACKOFF_START;
        }
        let pause = backoff.mul_f64(0.5 + fastrand::f64());
        tokio::select! {
            () = shared.closing.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Waits while a link to the node last seen at `address` is up (it may have dialled us);
/// false once the node closes.
async fn linked_elsewhere(shared: &Shared, address: &str) -> bool {
    let mesh = shared.dispatcher.mesh();
    loop {
        let mut changes = mesh.subscribe();
        let up = mesh.node_at(address).is_some_and(|id| mesh.is_up(&id));
        if !up {
            return !shared.closing.is_cancelled();
        }
        tokio::select! {
            () = shared.closing.cancelled() => return false,
            _ = changes.changed() => {}
        }
    }
}
