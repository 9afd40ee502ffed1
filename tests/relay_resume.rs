//! Relays between two incarnations outlive the link they went out on, over real sockets on
//! 127.0.0.1: correlations continue across links to one incarnation; an origin acknowledges
//! the outcomes it holds; a serving node sends again an outcome not acknowledged and says which
//! relays it never read, runs still or cannot account for; a cut link's relays resume on the
//! next link within the grace, both ways, and end `PeerLost` once it passes; kept outcomes stay
//! within their bound under a long cut.
//!
//! Hand-written peers (listing `relay-resume`) state exactly what crosses the link.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use lintel::sdk::DispatchOptions;
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::{
    feature, DispatchRequest, DispatchResult, Frame, NodeRouting, PeerHello, PoolPresence,
    Presence, Relay, RelayAck, RequestExtras, Resume, Resumed,
};
use support::{
    admin_get, cluster_config, hand_peer, next_of, offering, outcome_of, plain, request, served_by,
    spawn_dispatch, within, RawClient, RawWorker, TestNode,
};

const NAMESPACE: &str = "ns";
const ACTIVITY: &str = "work";

fn pool() -> String {
    dispatch_channel_name(NAMESPACE, "default", None)
}

/// A hand-written peer named `hand`, incarnation `incarnation`, listing `relay-resume`, on a
/// version-3 link it dialled to `node`, past the hellos, having announced `pools`.
async fn resuming_peer(node: SocketAddr, incarnation: u64, pools: Vec<PoolPresence>) -> RawClient {
    let hello = Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        features: vec![feature::FAREWELL.into(), feature::RELAY_RESUME.into()],
        extensions: Vec::new(),
    });
    let mut raw = hand_peer(node, 3, hello).await;
    raw.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools,
        ..Default::default()
    }))
    .await;
    raw
}

fn relay3(correlation: u64, workflow_id: &str) -> Frame {
    Frame::from(Relay {
        correlation,
        request: DispatchRequest {
            workflow_id: workflow_id.into(),
            ..request(NAMESPACE, ACTIVITY, "")
        },
        extras: RequestExtras::default(),
        routing: NodeRouting::Any,
        reply_timeout_ms: 30_000,
    })
}

fn resume(unanswered: Vec<u64>) -> Frame {
    Frame::Resume(Resume {
        unanswered,
        last: true,
    })
}

async fn next_outcome(raw: &mut RawClient) -> (u64, DispatchResult) {
    match next_of(raw, |f| matches!(f, Frame::RelayOutcome(_))).await {
        Frame::RelayOutcome(outcome) => (outcome.correlation, outcome.result),
        _ => unreachable!("filtered"),
    }
}

async fn next_resumed(raw: &mut RawClient) -> Resumed {
    match next_of(raw, |f| matches!(f, Frame::Resumed(_))).await {
        Frame::Resumed(resumed) => resumed,
        _ => unreachable!("filtered"),
    }
}

#[tokio::test]
async fn a_serving_node_sends_again_an_outcome_not_acknowledged_and_says_what_it_never_read() {
    let node = TestNode::with_config(cluster_config("n", &[])).await;
    let mut worker = RawWorker::start(node.addr, plain(NAMESPACE, ACTIVITY, 4, "w")).await;
    let mut hand = resuming_peer(node.addr, 1, Vec::new()).await;
    hand.send(relay3(1, "one")).await;
    let push = worker.next_push().await;
    worker.reply(&push, "w").await;
    let (correlation, first) = next_outcome(&mut hand).await;
    assert_eq!(correlation, 1);

    // Not acknowledged: sent again; 2 was never read; nothing else is listed.
    hand.send(resume(vec![1, 2])).await;
    assert_eq!(next_outcome(&mut hand).await, (1, first));
    let resumed = next_resumed(&mut hand).await;
    assert_eq!(
        resumed,
        Resumed {
            handled_up_to: 1,
            running: Vec::new(),
            unknown: Vec::new(),
            last: true
        }
    );

    // One that runs is said to run; once acknowledged, an outcome is let go and unknown.
    hand.send(relay3(3, "three")).await;
    let _running = worker.next_push().await;
    hand.send(Frame::RelayAck(RelayAck {
        below: 2,
        also: Vec::new(),
    }))
    .await;
    hand.send(resume(vec![1, 3])).await;
    let resumed = next_resumed(&mut hand).await;
    assert_eq!(
        (resumed.handled_up_to, resumed.running, resumed.unknown),
        (3, vec![3], vec![1])
    );
}

#[tokio::test]
async fn an_origin_acknowledges_outcomes_and_numbers_relays_on_across_links_to_one_incarnation() {
    let node = TestNode::with_config(cluster_config("a", &[])).await;
    let mut seen = Vec::new();
    for (incarnation, relays) in [(1, 2), (1, 1), (2, 1)] {
        let mut hand =
            resuming_peer(node.addr, incarnation, vec![offering(pool(), ACTIVITY, 4)]).await;
        node.wait_announced("hand", &pool()).await;
        for _ in 0..relays {
            let dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
            let relay = match next_of(&mut hand, |f| matches!(f, Frame::Relay(_))).await {
                Frame::Relay(relay) => relay,
                _ => unreachable!("filtered"),
            };
            seen.push((incarnation, relay.correlation));
            hand.send(completed(relay.correlation, &relay.request))
                .await;
            within("the dispatch", dispatch)
                .await
                .expect("dispatch task");
            // The outcome is acknowledged, at the latest with the next ping.
            let ack = match next_of(&mut hand, |f| matches!(f, Frame::RelayAck(_))).await {
                Frame::RelayAck(ack) => ack,
                _ => unreachable!("filtered"),
            };
            let held = ack.below > relay.correlation || ack.also.contains(&relay.correlation);
            assert!(held, "{ack:?} leaves out {}", relay.correlation);
        }
        drop(hand);
        node.wait_peers("the hand's link down", |peers| {
            peers
                .iter()
                .all(|peer| peer.node_id != "hand" || peer.pools.is_empty())
        })
        .await;
    }
    assert_eq!(seen, [(1, 1), (1, 2), (1, 3), (2, 1)]);
}

fn options() -> DispatchOptions {
    DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(30))
        .reply_timeout(Duration::from_secs(30))
}

/// The outcome a serving node sends for a relay of `request` it completed.
fn completed(correlation: u64, request: &DispatchRequest) -> Frame {
    Frame::from(lintel::wire::RelayOutcome {
        correlation,
        result: DispatchResult::Completed(lintel::wire::DispatchResponse {
            workflow_id: request.workflow_id.clone(),
            ordinal: request.ordinal,
            run_id: request.run_id.clone(),
            outcome: lintel::wire::ActivityOutcome::Success(bytes::Bytes::from_static(b"hand")),
        }),
    })
}

fn resumed(handled_up_to: u64, running: Vec<u64>, unknown: Vec<u64>) -> Frame {
    Frame::Resumed(Resumed {
        handled_up_to,
        running,
        unknown,
        last: true,
    })
}

async fn next_relay(raw: &mut RawClient) -> Relay {
    match next_of(raw, |f| matches!(f, Frame::Relay(_))).await {
        Frame::Relay(relay) => *relay,
        _ => unreachable!("filtered"),
    }
}

async fn next_resume(raw: &mut RawClient) -> Resume {
    match next_of(raw, |f| matches!(f, Frame::Resume(_))).await {
        Frame::Resume(resume) => resume,
        _ => unreachable!("filtered"),
    }
}

#[tokio::test]
async fn an_origins_relays_over_a_cut_link_resume_on_the_next_one_to_the_same_incarnation() {
    let node = TestNode::with_config(cluster_config("a", &[])).await;
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(), ACTIVITY, 4)]).await;
    node.wait_announced("hand", &pool()).await;
    let mut dispatches = Vec::new();
    let mut relays = Vec::new();
    for _ in 0..3 {
        dispatches.push(spawn_dispatch(
            &node,
            request(NAMESPACE, ACTIVITY, ""),
            options(),
        ));
        relays.push(next_relay(&mut hand).await);
    }
    // The link is cut with three relays in flight; the same incarnation links again.
    drop(hand);
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(), ACTIVITY, 4)]).await;
    let resume = next_resume(&mut hand).await;
    assert_eq!((resume.unanswered, resume.last), (vec![1, 2, 3], true));
    // 1 completed before the cut (its outcome goes again), 2 still runs, 3 was never read.
    hand.send(completed(1, &relays[0].request)).await;
    hand.send(resumed(2, vec![2], Vec::new())).await;
    let again = next_relay(&mut hand).await;
    assert_eq!(again.correlation, 4, "3, never read, is placed again");
    hand.send(completed(2, &relays[1].request)).await;
    hand.send(completed(4, &again.request)).await;
    for dispatch in dispatches {
        assert_eq!(served_by(&outcome_of(dispatch).await), "hand");
    }
    assert_eq!(node.node.dispatcher().counters().peer_lost(), 0);
}

#[tokio::test]
async fn a_relay_the_serving_node_cannot_account_for_ends_peer_lost() {
    let node = TestNode::with_config(cluster_config("a", &[])).await;
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(), ACTIVITY, 4)]).await;
    node.wait_announced("hand", &pool()).await;
    let dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
    next_relay(&mut hand).await;
    drop(hand);
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(), ACTIVITY, 4)]).await;
    assert_eq!(next_resume(&mut hand).await.unanswered, [1]);
    hand.send(resumed(1, Vec::new(), vec![1])).await;
    match outcome_of(dispatch).await {
        DispatchResult::PeerLost { peer, .. } => assert_eq!(peer, "hand"),
        other => panic!("expected PeerLost, got {other:?}"),
    }
}

#[tokio::test]
async fn a_peer_dialling_again_while_its_old_link_looks_alive_here_takes_over_its_relays() {
    let node = TestNode::with_config(cluster_config("n", &[])).await;
    let mut worker = RawWorker::start(node.addr, plain(NAMESPACE, ACTIVITY, 4, "w")).await;
    let theirs = || vec![offering(pool(), "hand-work", 4)];
    let mut old = resuming_peer(node.addr, 1, theirs()).await;
    node.wait_announced("hand", &pool()).await;
    // A relay each way in flight over the old link.
    old.send(relay3(1, "to-n")).await;
    let push = worker.next_push().await;
    let dispatch = spawn_dispatch(&node, request(NAMESPACE, "hand-work", ""), options());
    let relay = next_relay(&mut old).await;
    // The old link is dead over there, but not here: no ping has gone unanswered yet. The
    // same incarnation's new link is kept, not refused as a duplicate.
    let mut new = resuming_peer(node.addr, 1, theirs()).await;
    assert_eq!(next_resume(&mut new).await.unanswered, [relay.correlation]);
    new.send(resume(vec![1])).await;
    let answer = next_resumed(&mut new).await;
    assert_eq!((answer.handled_up_to, answer.running), (1, vec![1]));
    worker.reply(&push, "w").await;
    assert_eq!(
        next_outcome(&mut new).await.0,
        1,
        "answered on the new link"
    );
    let running = vec![relay.correlation];
    new.send(resumed(relay.correlation, running, Vec::new()))
        .await;
    new.send(completed(relay.correlation, &relay.request)).await;
    assert_eq!(served_by(&outcome_of(dispatch).await), "hand");
    old.closed().await;
    assert_eq!(node.node.dispatcher().counters().peer_lost(), 0);
}

#[tokio::test]
async fn relays_over_a_link_cut_for_good_end_peer_lost_once_the_grace_passes() {
    let grace = Duration::from_millis(400);
    let node = TestNode::with_config(lintel::NodeConfig {
        peer_relink_grace_ms: 400,
        ..cluster_config("a", &[])
    })
    .await;
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(), ACTIVITY, 4)]).await;
    node.wait_announced("hand", &pool()).await;
    let dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
    next_relay(&mut hand).await;
    // The serving process dies: no link to its incarnation comes back.
    let cut = tokio::time::Instant::now();
    drop(hand);
    match outcome_of(dispatch).await {
        DispatchResult::PeerLost { peer, .. } => assert_eq!(peer, "hand"),
        other => panic!("expected PeerLost, got {other:?}"),
    }
    assert!(
        cut.elapsed() >= grace,
        "ended {:?} after the cut",
        cut.elapsed()
    );
}

#[tokio::test]
async fn a_serving_node_keeps_running_a_cut_links_relays_and_answers_them_on_the_next_link() {
    let node = TestNode::with_config(cluster_config("n", &[])).await;
    let mut worker = RawWorker::start(node.addr, plain(NAMESPACE, ACTIVITY, 4, "w")).await;
    let mut hand = resuming_peer(node.addr, 1, Vec::new()).await;
    hand.send(relay3(1, "one")).await;
    let push = worker.next_push().await;
    drop(hand);
    let mut hand = resuming_peer(node.addr, 1, Vec::new()).await;
    hand.send(resume(vec![1, 2])).await;
    assert_eq!(
        next_resumed(&mut hand).await,
        Resumed {
            handled_up_to: 1,
            running: vec![1],
            unknown: Vec::new(),
            last: true
        }
    );
    worker.reply(&push, "w").await;
    let (correlation, result) = next_outcome(&mut hand).await;
    assert_eq!((correlation, served_by(&result)), (1, "w".to_owned()));
}

#[tokio::test]
async fn kept_outcomes_stay_within_their_bound_under_a_long_cut() {
    let (node, admin) = TestNode::with_admin(lintel::NodeConfig {
        relay_retention_bytes: 2048,
        peer_relink_grace_ms: 60_000,
        ..cluster_config("n", &[])
    })
    .await;
    let mut worker = RawWorker::start(node.addr, plain(NAMESPACE, ACTIVITY, 64, "w")).await;
    let mut hand = resuming_peer(node.addr, 1, Vec::new()).await;
    for correlation in 1..=40 {
        hand.send(relay3(correlation, &format!("run-{correlation}")))
            .await;
    }
    let pushes: Vec<_> = futures_pushes(&mut worker, 40).await;
    // The link is cut: every outcome is kept for the origin, unacknowledged, within the bound.
    drop(hand);
    for push in &pushes {
        worker.reply(push, "w").await;
    }
    within("the outcomes dropped past the bound", async {
        loop {
            let (_, metrics) = admin_get(admin, "/metrics").await;
            let value = |name: &str| -> f64 {
                metrics
                    .lines()
                    .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
                    .unwrap_or(0.0)
            };
            let kept = value("lintel_relay_outcomes_kept_bytes ");
            assert!(kept <= 2048.0, "{kept} bytes kept");
            if value("lintel_relay_outcomes_dropped_total ") > 0.0 {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
}

async fn futures_pushes(worker: &mut RawWorker, count: usize) -> Vec<lintel::wire::Push> {
    let mut pushes = Vec::new();
    for _ in 0..count {
        pushes.push(worker.next_push().await);
    }
    pushes
}

/// Nodes `a` (producers) and `b` (a worker counting each run) linked only through proxies
/// that cut every link between them three times under load: every dispatch completes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_reset_through_a_proxy_under_load_cost_no_dispatch() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use lintel::sdk::{handler_fn, Request};
    use support::faulty::Proxy;

    let (a_listener, a_port) = loopback_listener();
    let (b_listener, b_port) = loopback_listener();
    let to_a = Proxy::start(a_port).await;
    let to_b = Proxy::start(b_port).await;
    let a_config = lintel::NodeConfig {
        listen: a_port,
        advertise: to_a.addr.to_string(),
        ..cluster_config("a", &[to_b.addr])
    };
    let a = TestNode::on_listener(a_config, a_listener).await;
    let b_config = lintel::NodeConfig {
        listen: b_port,
        advertise: to_b.addr.to_string(),
        ..cluster_config("b", &[to_a.addr])
    };
    let b = TestNode::on_listener(b_config, b_listener).await;
    a.wait_linked(&["b"]).await;
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let counted = Arc::clone(&runs);
    let handler = handler_fn(move |request: Request| {
        *counted
            .lock()
            .unwrap()
            .entry(request.workflow_id.to_string())
            .or_default() += 1;
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            lintel::wire::ActivityOutcome::Success(bytes::Bytes::from_static(b"b"))
        }
    });
    let _worker = support::sdk_worker(b.addr, plain(NAMESPACE, ACTIVITY, 8, "w-b"), handler).await;
    a.wait_announced("b", &pool()).await;
    let mut dispatches = Vec::new();
    for round in 0..3 {
        for n in 0..16 {
            let work = DispatchRequest {
                workflow_id: format!("r{round}-{n}"),
                ..request(NAMESPACE, ACTIVITY, "")
            };
            dispatches.push(spawn_dispatch(&a, work, options()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        // A cut: every link between a and b goes silent until a finds it dead by its pings;
        // then the proxies close the cut links and let new ones through.
        for proxy in [&to_a, &to_b] {
            proxy.partition();
        }
        a.wait_peers("the link to b found cut", |peers| !support::up(peers, "b"))
            .await;
        for proxy in [&to_a, &to_b] {
            proxy.heal();
        }
        a.wait_linked(&["b"]).await;
    }
    for dispatch in dispatches {
        assert_eq!(served_by(&outcome_of(dispatch).await), "b");
    }
    assert_eq!(a.node.dispatcher().counters().peer_lost(), 0);
    let downs: u64 = a
        .node
        .dispatcher()
        .mesh()
        .tallies()
        .iter()
        .map(|member| member.tally.downs)
        .sum();
    assert!(downs >= 1, "no link between a and b was cut");
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 48);
    assert!(runs.values().all(|&n| n == 1), "{runs:?}");
}

fn loopback_listener() -> (tokio::net::TcpListener, SocketAddr) {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener =
        lintel::listener::bind(any, lintel::NodeConfig::default().backlog).expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}
