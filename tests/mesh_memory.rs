//! The memory a node spends on what its peers announced, measured by allocation: a counting
//! global allocator tallies the bytes live in this process, and the figure is what applying
//! every peer's presence snapshot adds to a mesh whose links are already joined (the frames
//! themselves are consumed by the apply, so only the view structures stay).
//!
//! The shape: 50 nodes and 10,000 pools spread evenly over them, so one node holds 49 peers'
//! 200 pools each (9,800 remote pools); each pool `aion.dispatch.tenant-NNN.queue-N` has two
//! activity groups, one of them with a worker node label. It prints one JSON line.

use lintel_test_support as support;

use std::sync::Arc;

use lintel::cluster::{Mesh, Opener, Remote};
use lintel::link::{Pair, PeerLink, Retention};
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::{PoolPresence, Presence, PresenceGroup};
use support::Counting;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const NODES: usize = 50;
const POOLS: usize = 10_000;
/// Pools per presence frame, as a node sends its snapshot.
const POOLS_PER_FRAME: usize = 256;
/// The target: remote state for 10,000 pools under 64 MB per node.
const TARGET: usize = 64 * 1024 * 1024;

fn group(activity: &str, node: Option<&str>) -> PresenceGroup {
    PresenceGroup {
        activity_type: activity.into(),
        node: node.map(str::to_owned),
        deployment: None,
        workers: 3,
        slots: 24,
        free: 17,
        full: 0,
        draining: 0,
        probation: 0,
        unreachable: 0,
    }
}

/// Peer `peer`'s snapshot: its share of the pools, in frames.
fn snapshot(peer: usize) -> Vec<Presence> {
    let per_node = POOLS / NODES;
    let pools: Vec<PoolPresence> = (0..per_node)
        .map(|i| {
            let n = peer * per_node + i;
            PoolPresence {
                channel: dispatch_channel_name(
                    &format!("tenant-{:03}", n / 10),
                    &format!("queue-{}", n % 10),
                    None,
                ),
                workers: 6,
                groups: vec![group("charge", None), group("refund", Some("eu-west"))],
            }
        })
        .collect();
    let count = pools.len().div_ceil(POOLS_PER_FRAME);
    let mut pools = pools.into_iter();
    (0..count)
        .map(|index| Presence {
            reset: index == 0,
            synced: index + 1 == count,
            draining: false,
            pools: pools.by_ref().take(POOLS_PER_FRAME).collect(),
            extensions: Vec::new(),
        })
        .collect()
}

#[tokio::test]
async fn remote_state_for_10_000_pools_stays_under_64_mb_per_node() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mesh = Mesh::new(64);
    let closing = CancellationToken::new();
    let retention = Retention::new(1);
    // The sockets stay open while the mesh is measured.
    let mut sockets = Vec::new();
    let mut remotes = Vec::new();
    for peer in 1..NODES {
        let (client, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_reader, outbound, writer) =
            lintel::transport::split(accepted.expect("accept").0, 1 << 20, 8);
        sockets.push((client.expect("connect"), writer));
        let node_id: Arc<str> = Arc::from(format!("n{peer:02}"));
        let pair = Pair::new(1, &retention);
        let link = PeerLink::new(Arc::clone(&node_id), 3, outbound, pair.numbering());
        let remote = Remote::new(
            node_id,
            1,
            format!("10.0.0.{peer}:7400"),
            Opener::Peer,
            false,
            link,
            &closing,
        );
        mesh.join(&remote).expect("joined");
        remotes.push(remote);
    }
    let before = Counting::live();
    // Every snapshot is moved into the mesh and consumed there: what stays live past `before`
    // is the view structures (pool channels and groups are kept, the frames' buffers freed).
    for (remote, peer) in remotes.iter().zip(1..NODES) {
        for frame in snapshot(peer) {
            mesh.apply(remote, frame).expect("a valid snapshot");
        }
    }
    let held = Counting::live() - before;
    let pools = (NODES - 1) * (POOLS / NODES);
    let status = mesh.status();
    assert_eq!(status.iter().filter(|peer| peer.synced).count(), NODES - 1);
    assert_eq!(
        status.iter().map(|peer| peer.pools.len()).sum::<usize>(),
        pools
    );
    println!(
        "{{\"nodes\": {NODES}, \"remote_pools\": {pools}, \"remote_state_bytes\": {held}, \"bytes_per_pool\": {}}}",
        held / pools
    );
    assert!(
        held < TARGET,
        "{held} bytes of remote state for {pools} pools"
    );
    drop(sockets);
}
