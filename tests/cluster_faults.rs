//! Faults between nodes over real loopback sockets: a serving node killed mid-dispatch and
//! restarted, a peer that goes silent without closing, and a partition that heals.

mod support;

use std::net::SocketAddr;
use std::process::Stdio;
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
    client, cluster_config, on_node, request, sdk_worker, within, RawClient, TestNode,
    WELL_UNDER_TIMEOUT,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
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

/// `lintel serve` in its own process as node `id` listening on `listen`, dialling `seed`.
fn serve_command(id: &str, listen: &str, seed: SocketAddr) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lintel"));
    command
        .args(["serve", "--listen", listen, "--node-id", id])
        .args([
            "--peer",
            &seed.to_string(),
            "--peer-ping-interval-ms",
            "100",
        ])
        .stdout(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Node `id` on an ephemeral loopback port, and the address it bound, read from its log.
async fn node_process(id: &str, seed: SocketAddr) -> (Child, SocketAddr) {
    let mut child = serve_command(id, "127.0.0.1:0", seed)
        .env("RUST_LOG", "warn,lintel::node=info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lintel serve");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = within("the node to say where it listens", async {
        while let Some(line) = lines.next_line().await.expect("read the node's log") {
            let bound = line
                .split_whitespace()
                .find_map(|field| field.strip_prefix("addr="))
                .filter(|_| line.contains("lintel::node: listening "))
                .and_then(|addr| addr.parse::<SocketAddr>().ok());
            if let Some(addr) = bound {
                return addr;
            }
        }
        panic!("the node exited before it listened");
    })
    .await;
    // Keep draining the log so the node never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// Node `id` again at `addr`, where an earlier incarnation listened.
fn node_process_at(id: &str, addr: SocketAddr, seed: SocketAddr) -> Child {
    serve_command(id, &addr.to_string(), seed)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .expect("restart lintel serve")
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
    let (mut c, c_addr) = node_process("c", a.addr).await;
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
    c.start_kill().expect("kill c");
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
    let _ = c.wait().await;
    let _c = node_process_at("c", c_addr, a.addr);
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
