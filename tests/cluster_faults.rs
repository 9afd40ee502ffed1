//! Faults between nodes over real loopback sockets: a serving node killed mid-dispatch and
//! restarted (with every node behind a proxy too, while relays run between the others), a
//! peer that goes silent without closing, and a partition that heals.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lintel::sdk::{handler_fn, DispatchOptions, Handler};
use lintel::wire::{
    ActivityOutcome, DispatchResult, Frame, Hello, PeerHello, PoolPresence, Presence,
    PresenceGroup, Role,
};
use lintel::NodeConfig;
use support::faulty::Proxy;
use support::{
    client, cluster_config, echo, loopback_listener, on_node, pool, request, sdk_worker, within,
    RawClient, Served, TestNode, WAIT, WELL_UNDER_TIMEOUT,
};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;

/// A handler that signals `started` and never answers.
fn stuck(started: Arc<Notify>) -> impl Handler {
    handler_fn(move |_request: lintel::sdk::Request| {
        let started = Arc::clone(&started);
        async move {
            started.notify_one();
            std::future::pending::<ActivityOutcome>().await
        }
    })
}

/// `lintel serve` in its own process as node `c`, dialling `seeds`, listening on `listen`.
fn node_c(listen: &str, seeds: &[SocketAddr]) -> Served {
    let seeds: Vec<String> = seeds.iter().map(SocketAddr::to_string).collect();
    let mut args = vec!["--listen", listen, "--node-id", "c"];
    for seed in &seeds {
        args.extend(["--peer", seed]);
    }
    args.extend(["--peer-ping-interval-ms", "100"]);
    Served::start(&args)
}

/// A dispatch from `producer` pinned to the workers labelled `west`, with room to wait there.
fn doomed_on_west(
    producer: &lintel::sdk::Client,
) -> tokio::task::JoinHandle<Result<lintel::sdk::Dispatched, lintel::sdk::ClientError>> {
    let producer = producer.clone();
    tokio::spawn(async move {
        let options = DispatchOptions::default()
            .pin("west")
            .reply_timeout(Duration::from_secs(30));
        producer
            .submit(
                &support::dispatch_of(request("ns", "echo", "doomed")),
                &options,
            )
            .await
    })
}

async fn dispatched(
    producer: &lintel::sdk::Client,
    options: &DispatchOptions,
) -> lintel::sdk::Dispatched {
    within(
        "a dispatch",
        producer.submit(&support::dispatch_of(request("ns", "echo", "x")), options),
    )
    .await
    .expect("connection stays up")
}

#[tokio::test]
async fn killing_the_serving_node_is_peer_lost_at_once_and_its_restart_is_used_again() {
    let a = TestNode::joined("a", &[]).await;
    let b = TestNode::joined("b", &[&a]).await;
    let mut c = node_c("127.0.0.1:0", &[a.addr]);
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
    let to_c = doomed_on_west(&producer);
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
    let _c = node_c(&c_listen, &[a.addr]);
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
        max_version: 2,
        role: Role::Peer,
        name: "silent".into(),
        auth_token: None,
    }))
    .await;
    assert!(matches!(raw.recv().await, Some(Frame::Welcome(_))));
    raw.send(Frame::from(PeerHello {
        node_id: "silent".into(),
        incarnation: 7,
        // Nobody listens there: the node's redials fail, which is all they should do.
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        ..Default::default()
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
                ..Default::default()
            }],
        }],
        ..Default::default()
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
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "into the void")),
                    &options,
                )
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
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "cut")),
                    &options,
                )
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

/// An echo that takes `lasting` to answer.
fn slow_echo(lasting: Duration) -> impl Handler {
    handler_fn(move |request: lintel::sdk::Request| async move {
        tokio::time::sleep(lasting).await;
        ActivityOutcome::Success(request.input)
    })
}

/// A handler that reports each start on `started` and never answers.
fn held(started: mpsc::UnboundedSender<()>) -> impl Handler {
    handler_fn(move |_request: lintel::sdk::Request| {
        let _ = started.send(());
        std::future::pending::<ActivityOutcome>()
    })
}

/// Dispatches from `producer` pinned to worker label `pin` until `stop` is set and at least
/// `least` were made; every outcome with the node that served it.
async fn relay_until(
    producer: lintel::sdk::Client,
    pin: &'static str,
    least: usize,
    mut stop: watch::Receiver<bool>,
) -> Vec<lintel::sdk::Dispatched> {
    let options = DispatchOptions::default().pin(pin);
    let mut done = Vec::new();
    while done.len() < least || !*stop.borrow_and_update() {
        let dispatched = producer
            .submit(&support::dispatch_of(request("ns", "echo", pin)), &options)
            .await
            .expect("the producer's connection stays up");
        done.push(dispatched);
    }
    done
}

#[tokio::test]
async fn relays_over_links_without_a_fault_complete_while_a_node_behind_proxies_is_killed_and_restarted(
) {
    // Every configured peer address is a proxy: each node is given addresses its peers do not
    // advertise, as behind a load-balanced service name.
    let (a_listener, a_port) = loopback_listener();
    let (b_listener, b_port) = loopback_listener();
    let to_a = Proxy::start(a_port).await;
    let to_b = Proxy::start(b_port).await;
    let mut c = node_c("127.0.0.1:0", &[to_a.addr, to_b.addr]);
    let c_listen = c.listening();
    let c_addr: SocketAddr = c_listen.parse().expect("c's address");
    let to_c = Proxy::start(c_addr).await;
    let a_config = NodeConfig {
        listen: a_port,
        ..cluster_config("a", &[to_b.addr, to_c.addr])
    };
    let a = TestNode::on_listener(a_config, a_listener).await;
    let b_config = NodeConfig {
        listen: b_port,
        ..cluster_config("b", &[to_a.addr, to_c.addr])
    };
    let b = TestNode::on_listener(b_config, b_listener).await;
    a.wait_linked(&["b", "c"]).await;
    b.wait_linked(&["a", "c"]).await;
    // Members are node ids at the addresses they advertise; the proxies are join points.
    let members: Vec<(String, String)> = a
        .peers()
        .into_iter()
        .map(|peer| (peer.node_id, peer.address))
        .collect();
    assert_eq!(
        members,
        [
            ("b".into(), b_port.to_string()),
            ("c".into(), c_listen.clone())
        ]
    );

    let _home = sdk_worker(a.addr, on_node("ns", "echo", "home", 8, "w-a"), echo()).await;
    let _east = sdk_worker(b.addr, on_node("ns", "echo", "east", 8, "w-b"), echo()).await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let west = on_node("ns", "echo", "west", 4, "w-c");
    let _west = sdk_worker(c_addr, west, held(started_tx)).await;
    a.wait_announced("b", &pool("ns")).await;
    a.wait_announced("c", &pool("ns")).await;
    b.wait_announced("a", &pool("ns")).await;

    // Relays a -> b and b -> a run through the kill and the restart of c.
    const LEAST: usize = 25;
    let (stop_tx, stop) = watch::channel(false);
    let (from_a, from_b) = (client(a.addr).await, client(b.addr).await);
    let mut relays = Vec::new();
    for _ in 0..4 {
        relays.push(tokio::spawn(relay_until(
            from_a.clone(),
            "east",
            LEAST,
            stop.clone(),
        )));
        relays.push(tokio::spawn(relay_until(
            from_b.clone(),
            "home",
            LEAST,
            stop.clone(),
        )));
    }

    // Three relays a -> c are running on c when it is killed.
    let doomed: Vec<_> = (0..3).map(|_| doomed_on_west(&from_a)).collect();
    for _ in 0..3 {
        within("a relay to start on c", started.recv()).await;
    }
    let killed_at = Instant::now();
    drop(c); // SIGKILL, then reaped
             // The documented bound: at once for a closed socket, after the missed pings for a silent
             // peer (3 x 100 ms here); two seconds more for a loaded machine.
    let bound = Duration::from_millis(3 * 100) + Duration::from_secs(2);
    for task in doomed {
        let lost = within("the outcome after c died", task)
            .await
            .expect("dispatch task")
            .expect("connection stays up");
        assert!(
            matches!(&lost.result, DispatchResult::PeerLost { peer, .. } if peer == "c"),
            "{:?}",
            lost.result
        );
    }
    assert!(
        killed_at.elapsed() < bound,
        "PeerLost came {:?} after the kill",
        killed_at.elapsed()
    );

    // c comes back at the same address, a new incarnation, and links to a and b again.
    let _c = node_c(&c_listen, &[to_a.addr, to_b.addr]);
    let west2 = on_node("ns", "echo", "west2", 4, "w-c2");
    let _west2 = sdk_worker(c_addr, west2, slow_echo(Duration::from_millis(100))).await;
    for node in [&a, &b] {
        node.wait_peers("c back with its pool", |peers| {
            peers
                .iter()
                .any(|p| p.node_id == "c" && p.synced && p.pools.contains(&pool("ns")))
        })
        .await;
    }
    // The pool is announced again with whichever of c's workers (west reconnects too) is first
    // out of probation: the first relay to west2 from each origin waits for west2's turn.
    for producer in [&from_a, &from_b] {
        let first = within(
            "a first relay to west2",
            producer.submit(
                &support::dispatch_of(request("ns", "echo", "west2")),
                &DispatchOptions::default()
                    .pin("west2")
                    .wait_for_worker(WAIT),
            ),
        )
        .await
        .expect("the producer's connection stays up");
        assert!(
            matches!(first.result, DispatchResult::Completed(_)),
            "{:?}",
            first.result
        );
    }
    // Relays to the new c, each running 100 ms there, cover the seconds in which every node's
    // diallers settle after the restart: none of them may cost a link that carries one.
    let (_, stopped) = watch::channel(true);
    let to_new_c: Vec<_> = [&from_a, &from_b, &from_a, &from_b]
        .into_iter()
        .map(|producer| tokio::spawn(relay_until(producer.clone(), "west2", 15, stopped.clone())))
        .collect();
    for task in to_new_c {
        for done in within("the relays to the new c", task)
            .await
            .expect("relay task")
        {
            assert!(
                matches!(done.result, DispatchResult::Completed(_)),
                "a relay to the new c ended {:?}",
                done.result
            );
            assert_eq!(done.served_by.as_deref(), Some("c"));
        }
    }
    stop_tx.send_replace(true);
    let mut count = 0;
    for task in relays {
        for done in within("the relays between a and b", task)
            .await
            .expect("relay task")
        {
            assert!(
                matches!(done.result, DispatchResult::Completed(_)),
                "a relay between a and b ended {:?}",
                done.result
            );
            count += 1;
        }
    }
    assert!(count >= 8 * LEAST, "{count} relays");
    assert_eq!(
        a.node.dispatcher().counters().peer_lost(),
        3,
        "only c's relays"
    );
    assert_eq!(b.node.dispatcher().counters().peer_lost(), 0);
    // Relays to c count across its links: the three lost with the first are still counted.
    let to_c_sent = a
        .peers()
        .into_iter()
        .find(|peer| peer.node_id == "c")
        .map(|peer| peer.relays_sent);
    assert!(to_c_sent >= Some(3), "relays sent to c: {to_c_sent:?}");
    // The link between a and b came up once and never went down.
    for (node, peer) in [(&a, "b"), (&b, "a")] {
        let tallies = node.node.dispatcher().mesh().tallies();
        let tally = tallies
            .iter()
            .find(|member| member.node_id == peer)
            .expect("a member")
            .tally;
        assert_eq!((tally.ups, tally.downs), (1, 0), "{tally:?}");
    }
    drop(to_c);
}
