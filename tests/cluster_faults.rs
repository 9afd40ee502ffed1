//! Faults between nodes over real loopback sockets: a serving node killed mid-dispatch and
//! restarted, a peer that goes silent without closing, and a partition that heals.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lintel::sdk::{handler_fn, DispatchOptions, Handler};
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResult, Frame, Hello, PeerHello, PoolPresence,
    Presence, PresenceGroup, Role, PROTOCOL_VERSION,
};
use lintel::NodeConfig;
use support::faulty::Proxy;
use support::{
    client, cluster_config, on_node, request, sdk_worker, within, RawClient, Served, TestNode,
    WELL_UNDER_TIMEOUT,
};
use tokio::sync::Notify;
use tokio::time::Instant;

fn pool(namespace: &str) -> String {
    dispatch_channel_name(namespace, "default", None)
}

fn echo() -> impl Handler {
    handler_fn(|request: DispatchRequest| {
        std::future::ready(ActivityOutcome::Success(request.input))
    })
}

/// A handler that signals `started` and never answers.
fn stuck(started: Arc<Notify>) -> impl Handler {
    handler_fn(move |_request: DispatchRequest| {
        let started = Arc::clone(&started);
        async move {
            started.notify_one();
            std::future::pending::<ActivityOutcome>().await
        }
    })
}

/// A listener on an ephemeral loopback port, and its address.
fn loopback_listener() -> (tokio::net::TcpListener, SocketAddr) {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = lintel::listener::bind(any, NodeConfig::default().backlog).expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

/// `lintel serve` in its own process as node `c`, dialling `seed`, listening on `listen`.
fn node_c(listen: &str, seed: SocketAddr) -> Served {
    let seed = seed.to_string();
    Served::start(&[
        "--listen",
        listen,
        "--node-id",
        "c",
        "--peer",
        &seed,
        "--peer-ping-interval-ms",
        "100",
    ])
}

async fn dispatched(
    producer: &lintel::sdk::Client,
    options: &DispatchOptions,
) -> lintel::sdk::Dispatched {
    within(
        "a dispatch",
        producer.dispatch_traced(request("ns", "echo", "x"), options),
    )
    .await
    .expect("connection stays up")
}

#[tokio::test]
async fn killing_the_serving_node_is_peer_lost_at_once_and_its_restart_is_used_again() {
    let a = TestNode::joined("a", &[]).await;
    let b = TestNode::joined("b", &[&a]).await;
    let mut c = node_c("127.0.0.1:0", a.addr);
    let c_listen = c.listening();
    let c_addr: SocketAddr = c_listen.parse().expect("c's address");
    a.wait_linked(&["b", "c"]).await;

    let _east = sdk_worker(b.addr, on_node("ns", "echo", "east", 4, "w-b"), echo()).await;
    let _local = sdk_worker(a.addr, on_node("ns", "echo", "home", 4, "w-a"), echo()).await;
    let started = Arc::new(Notify::new());
    let west = on_node("ns", "echo", "west", 4, "w-c");
    let _west = sdk_worker(c_addr, west, stuck(Arc::clone(&started))).await;
    a.wait_announced("c", &pool("ns")).await;
    a.wait_announced("b", &pool("ns")).await;

    let producer = client(a.addr).await;
    let to_c = {
        let producer = producer.clone();
        tokio::spawn(async move {
            let options = DispatchOptions::default()
                .pin("west")
                .reply_timeout(Duration::from_secs(30));
            producer
                .dispatch_traced(request("ns", "echo", "doomed"), &options)
                .await
        })
    };
    within("the activity to start on c", started.notified()).await;
    let killed_at = Instant::now();
    drop(c); // SIGKILL, then reaped
    let lost = within("the outcome after c died", to_c)
        .await
        .expect("dispatch task")
        .expect("connection stays up");
    match &lost.result {
        DispatchResult::PeerLost { peer, .. } => assert_eq!(peer, "c"),
        other => panic!("expected PeerLost, got {other:?}"),
    }
    assert!(
        killed_at.elapsed() < WELL_UNDER_TIMEOUT,
        "PeerLost came {:?} after the kill",
        killed_at.elapsed()
    );
    assert_eq!(a.node.dispatcher().counters().peer_lost(), 1);

    // The nodes and workers that did not die serve on.
    for (pin, served_by) in [("east", "b"), ("home", "a")] {
        let done = dispatched(&producer, &DispatchOptions::default().pin(pin)).await;
        assert!(matches!(done.result, DispatchResult::Completed(_)));
        assert_eq!(done.served_by.as_deref(), Some(served_by));
    }

    // c comes back at the same address as a new incarnation; its worker re-registers and
    // routes to it return.
    let _c = node_c(&c_listen, a.addr);
    let _echo_west = sdk_worker(c_addr, on_node("ns", "echo", "west2", 4, "w-c2"), echo()).await;
    a.wait_peers("c back with its pool", |peers| {
        peers
            .iter()
            .any(|p| p.node_id == "c" && p.synced && p.pools.contains(&pool("ns")))
    })
    .await;
    let options = DispatchOptions::default()
        .pin("west2")
        .wait_for_worker(Duration::from_secs(10));
    let done = dispatched(&producer, &options).await;
    assert!(
        matches!(done.result, DispatchResult::Completed(_)),
        "{:?}",
        done.result
    );
    assert_eq!(done.served_by.as_deref(), Some("c"));
}

/// Speaks the peer side of the protocol by hand: hellos, then a presence offering one slot.
async fn silent_peer(node: SocketAddr) -> RawClient {
    let mut raw = RawClient::connect(node).await;
    raw.send(Frame::Hello(Hello {
        min_version: 2,
        max_version: PROTOCOL_VERSION,
        role: Role::Peer,
        name: "silent".into(),
        auth_token: None,
    }))
    .await;
    assert!(matches!(raw.recv().await, Some(Frame::Welcome(_))));
    raw.send(Frame::PeerHello(PeerHello {
        node_id: "silent".into(),
        incarnation: 7,
        // Nobody listens there: the node's redials fail, which is all they should do.
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
    }))
    .await;
    assert!(matches!(raw.recv().await, Some(Frame::PeerHello(_))));
    raw.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: vec![PoolPresence {
            channel: pool("ns"),
            workers: 1,
            groups: vec![PresenceGroup {
                activity_type: "echo".into(),
                node: None,
                workers: 1,
                slots: 1,
                free: 1,
                full: 0,
                draining: 0,
            }],
        }],
    }))
    .await;
    raw
}

#[tokio::test]
async fn a_peer_that_goes_silent_without_closing_is_found_dead_by_pings() {
    let a = TestNode::with_config(NodeConfig {
        max_missed_pings: 3,
        ..cluster_config("a", &[])
    })
    .await;
    let mut raw = silent_peer(a.addr).await;
    a.wait_announced("silent", &pool("ns")).await;
    let producer = client(a.addr).await;
    let relayed = {
        let producer = producer.clone();
        tokio::spawn(async move {
            let options = DispatchOptions::default().reply_timeout(Duration::from_secs(30));
            producer
                .dispatch(request("ns", "echo", "into the void"), &options)
                .await
        })
    };
    // The relay arrives; from here on the peer reads but never answers anything.
    within("the relay", async {
        loop {
            if let Some(Frame::Relay(_)) = raw.recv().await {
                return;
            }
        }
    })
    .await;
    let went_silent = Instant::now();
    let result = within("the outcome", relayed)
        .await
        .expect("task")
        .expect("connection stays up");
    match result {
        DispatchResult::PeerLost { peer, .. } => assert_eq!(peer, "silent"),
        other => panic!("expected PeerLost, got {other:?}"),
    }
    assert!(went_silent.elapsed() < WELL_UNDER_TIMEOUT);
    a.wait_peers("the silent peer forgotten", |peers| {
        peers
            .iter()
            .all(|p| p.node_id != "silent" || p.pools.is_empty())
    })
    .await;
    drop(raw);
}

#[tokio::test]
async fn a_partition_ends_relays_as_peer_lost_and_once_healed_relays_flow_again() {
    // Bound before the proxies that point at them, and held: no other socket can take them.
    let (a_listener, a_port) = loopback_listener();
    let (b_listener, b_port) = loopback_listener();
    let to_a = Proxy::start(a_port).await;
    let to_b = Proxy::start(b_port).await;
    // Every link between a and b runs through the proxies: each advertises its proxy.
    let a_config = NodeConfig {
        listen: a_port,
        advertise: to_a.addr.to_string(),
        ..cluster_config("a", &[to_b.addr])
    };
    let a = TestNode::on_listener(a_config, a_listener).await;
    let b_config = NodeConfig {
        listen: b_port,
        advertise: to_b.addr.to_string(),
        ..cluster_config("b", &[to_a.addr])
    };
    let b = TestNode::on_listener(b_config, b_listener).await;
    a.wait_linked(&["b"]).await;
    let started = Arc::new(Notify::new());
    let _stuck = sdk_worker(
        b.addr,
        on_node("ns", "echo", "far", 1, "w-b"),
        stuck(Arc::clone(&started)),
    )
    .await;
    let _echo = sdk_worker(b.addr, on_node("ns", "echo", "near", 4, "w-b2"), echo()).await;
    a.wait_announced("b", &pool("ns")).await;
    let producer = client(a.addr).await;
    let cut_off = {
        let producer = producer.clone();
        tokio::spawn(async move {
            let options = DispatchOptions::default()
                .pin("far")
                .reply_timeout(Duration::from_secs(30));
            producer
                .dispatch(request("ns", "echo", "cut"), &options)
                .await
        })
    };
    within("the activity to start on b", started.notified()).await;
    to_a.partition();
    to_b.partition();
    let result = within("the outcome across the partition", cut_off)
        .await
        .expect("task")
        .expect("connection stays up");
    assert!(
        matches!(&result, DispatchResult::PeerLost { peer, .. } if peer == "b"),
        "{result:?}"
    );
    a.wait_peers("b forgotten", |peers| !support::up(peers, "b"))
        .await;

    to_a.heal();
    to_b.heal();
    a.wait_announced("b", &pool("ns")).await;
    let done = dispatched(&producer, &DispatchOptions::default().pin("near")).await;
    assert!(
        matches!(done.result, DispatchResult::Completed(_)),
        "{:?}",
        done.result
    );
    assert_eq!(done.served_by.as_deref(), Some("b"));
    drop(b);
}
