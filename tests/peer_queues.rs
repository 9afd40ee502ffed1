//! A peer link's queue against a real node on 127.0.0.1: a peer that reads slowly but is
//! alive is skipped for placement while its queue is over budget, and never disconnected.
//!
//! The peer is hand-written from frames so the test decides when it reads; it stays alive by
//! sending frames of its own while it reads nothing.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::dispatch::DispatchOptions;
use lintel::wire::{
    channel::dispatch_channel_name, DispatchResponse, DispatchResult, Frame, FrameCodec, Hello,
    PeerHello, Ping, Pong, PoolPresence, Presence, PresenceGroup, RelayOutcome, Role,
    PROTOCOL_VERSION,
};
use support::{cluster_config, outcome_of, request, spawn_dispatch, up, within, TestNode};
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::codec::Framed;

/// A node whose links queue at most 64 KiB before they count as busy, pinging every 300 ms.
async fn node() -> TestNode {
    let mut config = cluster_config("a", &[]);
    config.outbound_queue_bytes = 64 * 1024;
    config.peer_ping_interval_ms = 300;
    config.max_missed_pings = 3;
    TestNode::with_config(config).await
}

/// A peer `hand` serving `ns`/`echo` with plenty of free slots, whose socket takes little
/// before the node's writes to it stall; past the hellos and its snapshot.
async fn slow_peer(addr: SocketAddr) -> Framed<TcpStream, FrameCodec> {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("recv buffer");
    let stream = socket.connect(addr).await.expect("connect");
    let mut framed = Framed::new(stream, FrameCodec::default());
    framed
        .send(Frame::Hello(Hello {
            min_version: 2,
            max_version: PROTOCOL_VERSION,
            role: Role::Peer,
            name: "hand".into(),
            auth_token: None,
        }))
        .await
        .expect("hello");
    let welcome = within("the welcome", framed.next()).await;
    assert!(matches!(welcome, Some(Ok(Frame::Welcome(_)))));
    framed
        .send(Frame::PeerHello(PeerHello {
            node_id: "hand".into(),
            incarnation: 1,
            advertise: "127.0.0.1:1".into(),
            peers: Vec::new(),
        }))
        .await
        .expect("peer hello");
    framed
        .send(Frame::Presence(Presence {
            reset: true,
            synced: true,
            draining: false,
            pools: vec![PoolPresence {
                channel: dispatch_channel_name("ns", "default", None),
                workers: 1,
                groups: vec![PresenceGroup {
                    activity_type: "echo".into(),
                    node: None,
                    workers: 1,
                    slots: 1_000,
                    free: 1_000,
                    full: 0,
                    draining: 0,
                }],
            }],
        }))
        .await
        .expect("presence");
    framed
}

fn options() -> DispatchOptions {
    DispatchOptions {
        wait_for_worker: None,
        reply_timeout: Some(Duration::from_secs(60)),
        ..DispatchOptions::default()
    }
}

#[tokio::test]
async fn a_slow_but_alive_peer_is_skipped_for_placement_and_never_disconnected() {
    let a = node().await;
    let mut hand = slow_peer(a.addr).await;
    a.wait_announced("hand", &dispatch_channel_name("ns", "default", None))
        .await;

    // The only place for `echo` is the peer: the first dispatch is relayed to it, and its
    // 3 MiB input is more than the loopback socket takes (about 1.3 MiB), so the link's queue
    // is over its budget.
    let big = request("ns", "echo", "");
    let first = spawn_dispatch(
        &a,
        lintel::wire::DispatchRequest {
            input: Bytes::from(vec![b'r'; 3 * 1024 * 1024]),
            ..big.clone()
        },
        options(),
    );
    // The relay leaves in the dispatch's first poll; the mesh signals no change for it.
    within("the relay sent", async {
        while !a
            .peers()
            .iter()
            .any(|p| p.node_id == "hand" && p.relays_sent == 1)
        {
            assert!(!first.is_finished(), "the first dispatch was not relayed");
            tokio::task::yield_now().await;
        }
    })
    .await;

    // A busy peer is skipped: nothing else serves `echo`, so the next dispatch finds no
    // worker at once instead of queuing behind the backlog.
    let second = outcome_of(spawn_dispatch(&a, request("ns", "echo", "x"), options())).await;
    assert!(
        matches!(second, DispatchResult::NoWorker(_)),
        "expected NoWorker, got {second:?}"
    );

    // The peer reads nothing for more than three of the node's ping intervals, but speaks:
    // it is alive, so the link stays up however long its queue stays over budget.
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    for nonce in 0..20 {
        ticks.tick().await;
        hand.send(Frame::Ping(Ping { nonce })).await.expect("ping");
    }
    assert!(up(&a.peers(), "hand"), "the busy peer was disconnected");
    assert!(!first.is_finished(), "the relay is still in flight");

    // Once it reads, its backlog drains: pings and pongs went ahead of the relay, and the
    // relay's outcome completes the first dispatch.
    let correlation = within("the relay", async {
        loop {
            match hand.next().await.expect("open").expect("a frame") {
                Frame::Relay(relay) => return relay.correlation,
                Frame::Ping(ping) => {
                    hand.send(Frame::Pong(Pong { nonce: ping.nonce }))
                        .await
                        .expect("pong");
                }
                _ => {}
            }
        }
    })
    .await;
    hand.send(Frame::RelayOutcome(RelayOutcome {
        correlation,
        result: DispatchResult::Completed(DispatchResponse {
            workflow_id: big.workflow_id.clone(),
            ordinal: big.ordinal,
            run_id: None,
            outcome: lintel::wire::ActivityOutcome::Success(Bytes::from_static(b"done")),
        }),
    }))
    .await
    .expect("relay outcome");
    let first = outcome_of(first).await;
    assert!(
        matches!(first, DispatchResult::Completed(_)),
        "expected Completed, got {first:?}"
    );
    assert!(up(&a.peers(), "hand"));
}
