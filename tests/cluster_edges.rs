//! The edges of a relay, driven by a hand-written peer where the node's side must be exact:
//! a relayed dispatch is never relayed again, its timer runs inside the budget, a lost origin
//! cancels what it relayed, a draining node refuses relays, and the cluster secret is checked.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::time::Duration;

use lintel::sdk::DispatchOptions;
use lintel::wire::{
    DispatchResult, Frame, Hello, NodeRouting, PeerHello, Presence, RefusalCode, Relay, Role,
};
use lintel::NodeConfig;
use support::{
    client, cluster_config, hand_peer, next_of, plain, pool, request, within, RawClient, RawWorker,
    TestNode,
};

fn peer_hello(secret: Option<&str>) -> Frame {
    Frame::Hello(Hello {
        min_version: 2,
        max_version: 2,
        role: Role::Peer,
        name: "hand".into(),
        auth_token: secret.map(str::to_owned),
    })
}

/// A hand-written version-2 peer named `hand`, past the hellos, that announced no pools.
async fn hand_with_no_pools(node: SocketAddr) -> RawClient {
    let hello = Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation: 1,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        ..Default::default()
    });
    let mut raw = hand_peer(node, 2, hello).await;
    raw.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: Vec::new(),
        ..Default::default()
    }))
    .await;
    raw
}

fn relay(correlation: u64, activity: &str, reply_timeout_ms: u64) -> Frame {
    Frame::from(Relay {
        correlation,
        request: request("ns", activity, "relayed"),
        routing: NodeRouting::Any,
        reply_timeout_ms,
        extras: Default::default(),
    })
}

async fn relay_outcome(raw: &mut RawClient) -> (u64, DispatchResult) {
    match next_of(raw, |f| matches!(f, Frame::RelayOutcome(_))).await {
        Frame::RelayOutcome(outcome) => (outcome.correlation, outcome.result),
        _ => unreachable!("filtered"),
    }
}

#[tokio::test]
async fn a_relayed_dispatch_is_served_only_by_the_receiving_nodes_workers() {
    let b = TestNode::joined("b", &[]).await;
    let c = TestNode::joined("c", &[&b]).await;
    b.wait_linked(&["c"]).await;
    // Only c has a worker; b knows it.
    let _worker = RawWorker::start(c.addr, plain("ns", "echo", 4, "w-c")).await;
    b.wait_announced("c", &pool("ns")).await;
    let mut raw = hand_with_no_pools(b.addr).await;
    raw.send(relay(1, "echo", 5_000)).await;
    let (correlation, result) = relay_outcome(&mut raw).await;
    assert_eq!(correlation, 1);
    match result {
        DispatchResult::NoWorker(census) => {
            assert_eq!(census.pool_workers, 0, "the census is b's own, not c's");
        }
        other => panic!("expected NoWorker, got {other:?}"),
    }
    let to_c = b.peers().into_iter().find(|p| p.node_id == "c").expect("c");
    assert_eq!(to_c.relays_sent, 0, "b relayed nothing on");
}

#[tokio::test]
async fn the_serving_nodes_timer_runs_inside_the_budget_so_its_timeout_is_reported() {
    let b = TestNode::joined("b", &[]).await;
    let mut worker = RawWorker::start(b.addr, plain("ns", "slow", 1, "w-b")).await;
    let mut raw = hand_with_no_pools(b.addr).await;
    let sent = tokio::time::Instant::now();
    raw.send(relay(7, "slow", 400)).await;
    let push = worker.next_push().await;
    let (correlation, result) = relay_outcome(&mut raw).await;
    assert_eq!(correlation, 7);
    match result {
        DispatchResult::Timeout { after_ms, .. } => {
            assert!(
                after_ms < 400,
                "the timer ran inside the 400 ms budget: {after_ms}"
            );
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(sent.elapsed() < Duration::from_millis(400) + support::WAIT);
    worker.expect_cancel(push.correlation).await;
}

#[tokio::test]
async fn a_node_that_loses_the_origin_cancels_what_it_relayed() {
    let b = TestNode::joined("b", &[]).await;
    let mut worker = RawWorker::start(b.addr, plain("ns", "slow", 1, "w-b")).await;
    let mut raw = hand_with_no_pools(b.addr).await;
    raw.send(relay(3, "slow", 30_000)).await;
    let push = worker.next_push().await;
    drop(raw);
    worker.expect_cancel(push.correlation).await;
}

#[tokio::test]
async fn a_cancel_from_the_origin_cancels_the_push_and_is_still_answered() {
    let b = TestNode::joined("b", &[]).await;
    let mut worker = RawWorker::start(b.addr, plain("ns", "slow", 1, "w-b")).await;
    let mut raw = hand_with_no_pools(b.addr).await;
    raw.send(relay(4, "slow", 30_000)).await;
    let push = worker.next_push().await;
    raw.send(Frame::Cancel(lintel::wire::Cancel { correlation: 4 }))
        .await;
    worker.expect_cancel(push.correlation).await;
    let (correlation, result) = relay_outcome(&mut raw).await;
    assert_eq!((correlation, result), (4, DispatchResult::Cancelled));
}

#[tokio::test]
async fn a_draining_node_says_so_to_its_peers_and_answers_relays_draining() {
    let a = TestNode::joined("a", &[]).await;
    let mut c = TestNode::with_config(NodeConfig {
        drain_timeout_ms: 5_000,
        ..cluster_config("c", &[a.addr])
    })
    .await;
    let mut worker = RawWorker::start(c.addr, plain("ns", "echo", 2, "w-c")).await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    let running = {
        let producer = producer.clone();
        tokio::spawn(async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "runs on")),
                    &DispatchOptions::default(),
                )
                .await
        })
    };
    let push = worker.next_push().await;
    c.begin_shutdown();
    // a hears that c drains, and places nothing more there.
    within("a to see c draining", async {
        loop {
            let mut seen = a.node.dispatcher().mesh().changes().epoch();
            let refused = producer
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "new")),
                    &DispatchOptions::default(),
                )
                .await
                .expect("connection stays up");
            if matches!(refused, DispatchResult::NoWorker(_)) {
                return;
            }
            a.node
                .dispatcher()
                .mesh()
                .changes()
                .changed(&mut seen)
                .await;
        }
    })
    .await;
    // What c already runs finishes.
    worker.reply(&push, "done").await;
    let finished = within("the running dispatch", running)
        .await
        .expect("task")
        .expect("connection stays up");
    assert!(
        matches!(finished, DispatchResult::Completed(_)),
        "{finished:?}"
    );
}

#[tokio::test]
async fn a_draining_node_answers_a_relay_draining() {
    let mut b = TestNode::with_config(NodeConfig {
        drain_timeout_ms: 5_000,
        ..cluster_config("b", &[])
    })
    .await;
    let mut worker = RawWorker::start(b.addr, plain("ns", "echo", 2, "w-b")).await;
    let mut raw = hand_with_no_pools(b.addr).await;
    // A relay in flight keeps the draining node up until it is answered.
    raw.send(relay(8, "echo", 30_000)).await;
    let push = worker.next_push().await;
    b.begin_shutdown();
    // The peer hears the drain before it relays again.
    within("b to announce its drain", async {
        loop {
            if let Frame::Presence(presence) =
                next_of(&mut raw, |f| matches!(f, Frame::Presence(_))).await
            {
                if presence.draining {
                    return;
                }
            }
        }
    })
    .await;
    raw.send(relay(9, "echo", 5_000)).await;
    let (correlation, result) = relay_outcome(&mut raw).await;
    assert_eq!((correlation, result), (9, DispatchResult::Draining));
    worker.reply(&push, "done").await;
    let (correlation, result) = relay_outcome(&mut raw).await;
    assert_eq!(correlation, 8);
    assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
}

#[tokio::test]
async fn with_a_cluster_secret_a_peer_must_present_it() {
    let secret = |id: &str, seeds: &[SocketAddr]| NodeConfig {
        cluster_secret: Some("mesh".into()),
        ..cluster_config(id, seeds)
    };
    let a = TestNode::with_config(secret("a", &[])).await;
    let b = TestNode::with_config(secret("b", &[a.addr])).await;
    a.wait_linked(&["b"]).await;
    for presented in [None, Some("wrong")] {
        let mut raw = RawClient::connect(a.addr).await;
        raw.send(peer_hello(presented)).await;
        match raw.recv().await {
            Some(Frame::HelloRefused(refusal)) => {
                assert_eq!(refusal.code, RefusalCode::Unauthorized);
            }
            other => panic!("expected HelloRefused, got {other:?}"),
        }
    }
    let mut raw = RawClient::connect(a.addr).await;
    raw.send(peer_hello(Some("mesh"))).await;
    assert!(matches!(raw.recv().await, Some(Frame::Welcome(_))));
    drop(b);
}

#[tokio::test]
async fn weighted_placement_spreads_dispatches_over_local_and_remote_workers() {
    let a = TestNode::with_config(NodeConfig {
        placement: lintel::dispatch::Placement::Weighted,
        ..cluster_config("a", &[])
    })
    .await;
    let c = TestNode::joined("c", &[&a]).await;
    a.wait_linked(&["c"]).await;
    let echo = |request: lintel::sdk::Request| {
        std::future::ready(lintel::wire::ActivityOutcome::Success(request.input))
    };
    let _local = support::sdk_worker(
        a.addr,
        plain("ns", "echo", 8, "w-a"),
        lintel::sdk::handler_fn(echo),
    )
    .await;
    let _remote = support::sdk_worker(
        c.addr,
        plain("ns", "echo", 8, "w-c"),
        lintel::sdk::handler_fn(echo),
    )
    .await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    let mut served = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let done = within(
            "a dispatch",
            producer.submit(
                &support::dispatch_of(request("ns", "echo", "x")),
                &DispatchOptions::default(),
            ),
        )
        .await
        .expect("connection stays up");
        *served
            .entry(done.served_by.unwrap_or_default())
            .or_insert(0) += 1;
    }
    // Equal free slots on both sides: each is chosen about half the time.
    for node in ["a", "c"] {
        let count = served.get(node).copied().unwrap_or(0);
        assert!(count >= 40, "{node} served {count} of 200: {served:?}");
    }
}
