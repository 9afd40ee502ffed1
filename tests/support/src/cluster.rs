//! Clusters of test nodes: configs that peer, waits on what a node knows of its peers, and
//! SDK workers and producers to drive them.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use lintel::sdk::{
    handler_fn, handler_fn_with, Client, ClientConfig, Extras, Handler, Request, Worker,
    WorkerHandle,
};
use lintel::status::JoinPoint;
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::ActivityOutcome;
use lintel::wire::{PeerLinkState, PeerStatus, Register};
use lintel::NodeConfig;

use super::node::{within, TestNode, WAIT};

/// A node named `node_id` that dials `seeds`, pinging its peers every 100 ms.
pub fn cluster_config(node_id: &str, seeds: &[SocketAddr]) -> NodeConfig {
    NodeConfig {
        node_id: node_id.into(),
        peers: seeds.iter().map(SocketAddr::to_string).collect(),
        peer_ping_interval_ms: 100,
        ..NodeConfig::default()
    }
}

impl TestNode {
    /// A node named `node_id` joining the mesh through `seeds`.
    pub async fn joined(node_id: &str, seeds: &[&TestNode]) -> Self {
        let seeds: Vec<SocketAddr> = seeds.iter().map(|node| node.addr).collect();
        Self::with_config(cluster_config(node_id, &seeds)).await
    }

    /// The node's peers now.
    pub fn peers(&self) -> Vec<PeerStatus> {
        self.node.peers()
    }

    /// Waits until `holds` is true of the node's peers, looking again on every change.
    pub async fn wait_peers(&self, what: &str, holds: impl Fn(&[PeerStatus]) -> bool) {
        let mesh = self.node.dispatcher().mesh();
        within(what, async {
            loop {
                let mut seen = mesh.changes().epoch();
                let mut members = mesh.subscribe_members();
                if holds(&self.peers()) {
                    return;
                }
                tokio::select! {
                    () = mesh.changes().changed(&mut seen) => {}
                    _ = members.changed() => {}
                }
            }
        })
        .await;
    }

    /// Waits until `holds` is true of the node's join points, looking again whenever a link,
    /// a member or a join point changes.
    pub async fn wait_join_points(&self, what: &str, holds: impl Fn(&[JoinPoint]) -> bool) {
        let mesh = self.node.dispatcher().mesh();
        within(what, async {
            loop {
                let mut links = mesh.subscribe();
                let mut members = mesh.subscribe_members();
                let mut seen = mesh.changes().epoch();
                if holds(&mesh.join_points()) {
                    return;
                }
                tokio::select! {
                    _ = links.changed() => {}
                    _ = members.changed() => {}
                    () = mesh.changes().changed(&mut seen) => {}
                }
            }
        })
        .await;
    }

    /// Waits until the node has an up, synced link to each of `ids`.
    pub async fn wait_linked(&self, ids: &[&str]) {
        self.wait_peers(&format!("links to {ids:?}"), |peers| {
            ids.iter().all(|id| up(peers, id))
        })
        .await;
    }

    /// Waits until peer `id` announced the pool `channel` to this node.
    pub async fn wait_announced(&self, id: &str, channel: &str) {
        self.wait_peers(&format!("{id} announcing {channel}"), |peers| {
            peers
                .iter()
                .any(|peer| peer.node_id == id && peer.pools.iter().any(|pool| pool == channel))
        })
        .await;
    }
}

/// True when `peers` shows an up, synced link to `id`.
pub fn up(peers: &[PeerStatus], id: &str) -> bool {
    peers
        .iter()
        .any(|peer| peer.node_id == id && peer.state == PeerLinkState::Up && peer.synced)
}

/// A producer connected to `addr`.
pub async fn client(addr: SocketAddr) -> Client {
    within(
        "producer connection",
        Client::connect(addr.to_string(), ClientConfig::default()),
    )
    .await
    .expect("producer connects")
}

/// An SDK worker registered at `addr` with `handler`.
pub async fn sdk_worker<H: Handler>(
    addr: SocketAddr,
    register: Register,
    handler: H,
) -> WorkerHandle {
    let handle = Worker::spawn(
        crate::sdk::worker_config(addr.to_string(), register),
        handler,
    );
    within("worker registration", handle.wait_registered(WAIT))
        .await
        .expect("worker registered");
    handle
}

/// Replies to each push with its request's headers, one `name=value` a line.
pub fn header_echo() -> impl Handler {
    handler_fn_with(|_request: Request, extras: Extras| async move {
        let lines: Vec<String> = extras
            .headers
            .iter()
            .map(|header| format!("{}={}", header.name, header.value))
            .collect();
        ActivityOutcome::Success(Bytes::from(lines.join("\n")))
    })
}

/// A duration comfortably under the default reply timeout, for "well before the timeout".
pub const WELL_UNDER_TIMEOUT: Duration = Duration::from_secs(10);

/// A handler that answers each request with its input.
pub fn echo() -> impl Handler {
    handler_fn(|request: Request| std::future::ready(ActivityOutcome::Success(request.input)))
}

/// The channel of `namespace`'s default task queue, as pools and presence name it.
pub fn pool(namespace: &str) -> String {
    dispatch_channel_name(namespace, "default", None)
}
