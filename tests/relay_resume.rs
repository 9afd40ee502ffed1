//! Relays between two incarnations outlive the link they went out on, over real sockets on
//! 127.0.0.1: correlations continue across links to one incarnation; an origin acknowledges
//! the outcomes it holds; a serving node sends again an outcome not acknowledged and says which
//! relays it never read, runs still or cannot account for; a cut link's relays resume on the
//! next link within the grace, both ways, and end `PeerLost` once it passes; kept outcomes stay
//! within their bound under a long cut.
//!
//! Hand-written peers (listing `relay-resume`) state exactly what crosses the link.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::time::Duration;

use lintel::sdk::DispatchOptions;
use lintel::wire::{
    feature, DispatchRequest, DispatchResult, Frame, Goodbye, NodeRouting, PeerHello,
    PeerLinkState, PoolPresence, Presence, Relay, RelayAck, RequestExtras, Resume, Resumed,
};
use support::{
    admin_get, cluster_config, hand_acceptor, hand_peer, loopback_listener, next_of, offering,
    outcome_of, plain, pool, request, served_by, spawn_dispatch, within, RawClient, RawWorker,
    TestNode,
};

const NAMESPACE: &str = "ns";
const ACTIVITY: &str = "work";

/// What `hand` implements.
const FEATURES: [&str; 2] = [feature::FAREWELL, feature::RELAY_RESUME];

/// `hand`'s hello, incarnation `incarnation`, dialled at `advertise`.
fn hand_hello(incarnation: u64, advertise: &str) -> Frame {
    Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation,
        advertise: advertise.into(),
        peers: Vec::new(),
        features: FEATURES.iter().map(|&feature| feature.to_owned()).collect(),
        extensions: Vec::new(),
    })
}

/// `hand`'s whole presence: `pools`.
fn presence(pools: Vec<PoolPresence>) -> Frame {
    Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools,
        ..Default::default()
    })
}

/// A hand-written peer named `hand`, incarnation `incarnation`, listing `relay-resume`, on a
/// version-3 link it dialled to `node`, past the hellos, having announced `pools`.
async fn resuming_peer(node: SocketAddr, incarnation: u64, pools: Vec<PoolPresence>) -> RawClient {
    resuming_peer_at(node, incarnation, "127.0.0.1:1", pools).await
}

/// As [`resuming_peer`], dialled at `advertise`.
async fn resuming_peer_at(
    node: SocketAddr,
    incarnation: u64,
    advertise: &str,
    pools: Vec<PoolPresence>,
) -> RawClient {
    let mut raw = hand_peer(node, 3, hand_hello(incarnation, advertise)).await;
    raw.send(presence(pools)).await;
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
        let mut hand = resuming_peer(
            node.addr,
            incarnation,
            vec![offering(pool(NAMESPACE), ACTIVITY, 4)],
        )
        .await;
        node.wait_announced("hand", &pool(NAMESPACE)).await;
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
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(NAMESPACE), ACTIVITY, 4)]).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
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
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(NAMESPACE), ACTIVITY, 4)]).await;
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
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(NAMESPACE), ACTIVITY, 4)]).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
    let dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
    next_relay(&mut hand).await;
    drop(hand);
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(NAMESPACE), ACTIVITY, 4)]).await;
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
    let theirs = || vec![offering(pool(NAMESPACE), "hand-work", 4)];
    let mut old = resuming_peer(node.addr, 1, theirs()).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
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
    let mut hand = resuming_peer(node.addr, 1, vec![offering(pool(NAMESPACE), ACTIVITY, 4)]).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
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
    a.wait_announced("b", &pool(NAMESPACE)).await;
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

/// How the link a node accepted from `hand` ends once it lost a simultaneous dial to the link
/// the node dialled (the lower id's).
#[derive(Debug, Clone, Copy)]
enum Loser {
    /// `hand` turns it down before the node reads `hand`'s hello on the winning link.
    TurnedDown,
    /// The node joins the winning link first, which evicts it: the node retires it with a
    /// farewell, and `hand` closes it.
    Evicted,
}

/// The link to `hand` (listening on `listener`, dialled at `advertise`) was cut; now the node
/// and `hand` dial each other at once. The node joins `hand`'s dial first, the link it dialled
/// itself wins, and `hand` turns its own down as `loser` says. Returns the winning link, past
/// the hellos and `hand`'s presence of `pools`.
async fn dials_crossing(
    node: &TestNode,
    listener: &tokio::net::TcpListener,
    advertise: &str,
    pools: Vec<PoolPresence>,
    loser: Loser,
) -> RawClient {
    // The node redials the member it lost; `hand` holds that dial before its hello.
    let (mut won, _) = hand_acceptor(listener, "hand", &FEATURES).await;
    // `hand` dials too, and the node joins that link: it answers with its hello.
    let mut lost = hand_peer(node.addr, 3, hand_hello(1, advertise)).await;
    if let Loser::TurnedDown = loser {
        lost.send(Frame::Goodbye(Goodbye {
            reason: "duplicate peer link".into(),
        }))
        .await;
        node.wait_peers("the turned-down link gone", |peers| {
            !peers
                .iter()
                .any(|peer| peer.node_id == "hand" && peer.state == PeerLinkState::Up)
        })
        .await;
    }
    won.send(hand_hello(1, advertise)).await;
    // The node keeps the link it dialled: its hello.
    next_of(&mut won, |f| matches!(f, Frame::PeerHello(_))).await;
    if let Loser::Evicted = loser {
        next_of(&mut lost, |f| matches!(f, Frame::Farewell(_))).await;
    }
    drop(lost);
    won.send(presence(pools)).await;
    won
}

/// A relay `a` sent over a link later cut, then resumed across dials crossing as `loser` says:
/// it is resumed on the winning link, not lost with the link that lost.
async fn a_relay_survives_crossing_dials(loser: Loser) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let advertise = listener.local_addr().expect("addr").to_string();
    let node = TestNode::with_config(lintel::NodeConfig {
        peer_relink_grace_ms: 30_000,
        ..cluster_config("a", &[])
    })
    .await;
    let theirs = || vec![offering(pool(NAMESPACE), ACTIVITY, 4)];
    let mut hand = resuming_peer_at(node.addr, 1, &advertise, theirs()).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
    let mut dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
    let relay = next_relay(&mut hand).await;
    drop(hand);
    let mut won = dials_crossing(&node, &listener, &advertise, theirs(), loser).await;
    let resume = tokio::select! {
        resume = next_resume(&mut won) => resume,
        ended = &mut dispatch => panic!(
            "{loser:?}: the relay ended {:?} before a link resumed it",
            ended.expect("dispatch task")
        ),
    };
    assert_eq!(resume.unanswered, [relay.correlation]);
    won.send(resumed(
        relay.correlation,
        vec![relay.correlation],
        Vec::new(),
    ))
    .await;
    won.send(completed(relay.correlation, &relay.request)).await;
    assert_eq!(served_by(&outcome_of(dispatch).await), "hand");
    assert_eq!(node.node.dispatcher().counters().peer_lost(), 0);
}

#[tokio::test]
async fn a_relay_taken_over_by_a_link_turned_down_by_its_dialler_resumes_on_the_link_that_stays() {
    a_relay_survives_crossing_dials(Loser::TurnedDown).await;
}

#[tokio::test]
async fn a_relay_taken_over_by_a_link_that_loses_the_dial_resumes_on_the_link_that_evicts_it() {
    a_relay_survives_crossing_dials(Loser::Evicted).await;
}

#[tokio::test]
async fn a_newcomer_turned_down_after_replacing_a_link_as_cut_leaves_its_relays_to_the_next() {
    let node = TestNode::with_config(lintel::NodeConfig {
        peer_relink_grace_ms: 30_000,
        ..cluster_config("a", &[])
    })
    .await;
    let theirs = || vec![offering(pool(NAMESPACE), ACTIVITY, 4)];
    let mut old = resuming_peer(node.addr, 1, theirs()).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
    let mut dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
    let relay = next_relay(&mut old).await;
    // `hand` dials again while the old link looks alive here: it is replaced as cut. Then
    // `hand` turns the newcomer down, as a dialler that lost to another link does.
    let mut newcomer = hand_peer(node.addr, 3, hand_hello(1, "127.0.0.1:1")).await;
    newcomer
        .send(Frame::Goodbye(Goodbye {
            reason: "duplicate peer link".into(),
        }))
        .await;
    newcomer.closed().await;
    let mut next = resuming_peer(node.addr, 1, theirs()).await;
    let resume = tokio::select! {
        resume = next_resume(&mut next) => resume,
        ended = &mut dispatch => panic!(
            "the relay ended {:?} before a link resumed it",
            ended.expect("dispatch task")
        ),
    };
    assert_eq!(resume.unanswered, [relay.correlation]);
    next.send(completed(relay.correlation, &relay.request))
        .await;
    next.send(resumed(relay.correlation, Vec::new(), Vec::new()))
        .await;
    assert_eq!(served_by(&outcome_of(dispatch).await), "hand");
    drop(old);
    assert_eq!(node.node.dispatcher().counters().peer_lost(), 0);
}

#[tokio::test]
async fn what_runs_for_a_cut_link_is_answered_on_the_link_that_wins_crossing_dials() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let advertise = listener.local_addr().expect("addr").to_string();
    let node = TestNode::with_config(lintel::NodeConfig {
        peer_relink_grace_ms: 30_000,
        ..cluster_config("n", &[])
    })
    .await;
    let mut worker = RawWorker::start(node.addr, plain(NAMESPACE, ACTIVITY, 4, "w")).await;
    let mut hand = resuming_peer_at(node.addr, 1, &advertise, Vec::new()).await;
    hand.send(relay3(1, "one")).await;
    let push = worker.next_push().await;
    drop(hand);
    let mut won = dials_crossing(&node, &listener, &advertise, Vec::new(), Loser::TurnedDown).await;
    won.send(resume(vec![1])).await;
    assert_eq!(
        next_resumed(&mut won).await,
        Resumed {
            handled_up_to: 1,
            running: vec![1],
            unknown: Vec::new(),
            last: true
        },
        "the dispatch still runs, for the link that stays"
    );
    worker.reply(&push, "w").await;
    let (correlation, result) = next_outcome(&mut won).await;
    assert_eq!((correlation, served_by(&result)), (1, "w".to_owned()));
}

/// `hand`'s hello saying it held a link to incarnation `lost` of the node and lost it.
fn hello_after_cut(advertise: &str, lost: u64) -> Frame {
    let Frame::PeerHello(mut hello) = hand_hello(1, advertise) else {
        unreachable!("a peer hello")
    };
    hello.set_lost_link_to(Some(lost));
    Frame::PeerHello(hello)
}

/// The node `a` dialled `hand` (listening on `listener`, dialled at `advertise`), which keeps
/// the link and announces `pools` on it; returns the link and `a`'s incarnation.
async fn dialled_by_the_node(
    node: &TestNode,
    listener: &tokio::net::TcpListener,
    advertise: &str,
    pools: Vec<PoolPresence>,
) -> (RawClient, u64) {
    let (mut link, hello) = hand_acceptor(listener, "hand", &FEATURES).await;
    let Frame::PeerHello(hello) = hello else {
        unreachable!("hand_acceptor returns the node's hello")
    };
    link.send(hand_hello(1, advertise)).await;
    next_of(&mut link, |f| matches!(f, Frame::PeerHello(_))).await;
    link.send(presence(pools)).await;
    node.wait_announced("hand", &pool(NAMESPACE)).await;
    (link, hello.incarnation)
}

/// A node whose pings would find a dead link only after minutes, dialling `listener`.
async fn slow_pinging_dialler(listener: &tokio::net::TcpListener) -> TestNode {
    let hand = listener.local_addr().expect("addr");
    TestNode::with_config(lintel::NodeConfig {
        peer_relink_grace_ms: 30_000,
        peer_ping_interval_ms: 60_000,
        ..cluster_config("a", &[hand])
    })
    .await
}

#[tokio::test]
async fn a_link_the_node_dialled_is_taken_as_cut_when_the_peer_dials_again_saying_it_lost_it() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let advertise = listener.local_addr().expect("addr").to_string();
    let node = slow_pinging_dialler(&listener).await;
    let theirs = || vec![offering(pool(NAMESPACE), ACTIVITY, 4)];
    let (mut old, incarnation) = dialled_by_the_node(&node, &listener, &advertise, theirs()).await;
    let dispatch = spawn_dispatch(&node, request(NAMESPACE, ACTIVITY, ""), options());
    let relay = next_relay(&mut old).await;
    // Only `hand` saw the cut: the old link looks alive to the node, whose pings would notice
    // after minutes. `hand`'s new link says so, and is kept rather than refused.
    let mut new = hand_peer(node.addr, 3, hello_after_cut(&advertise, incarnation)).await;
    new.send(presence(theirs())).await;
    assert_eq!(next_resume(&mut new).await.unanswered, [relay.correlation]);
    new.send(resumed(
        relay.correlation,
        vec![relay.correlation],
        Vec::new(),
    ))
    .await;
    new.send(completed(relay.correlation, &relay.request)).await;
    assert_eq!(served_by(&outcome_of(dispatch).await), "hand");
    old.closed().await;
    assert_eq!(node.node.dispatcher().counters().peer_lost(), 0);
}

#[tokio::test]
async fn a_second_link_is_refused_when_its_hello_names_no_lost_link_to_this_incarnation() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let advertise = listener.local_addr().expect("addr").to_string();
    let node = slow_pinging_dialler(&listener).await;
    let theirs = || vec![offering(pool(NAMESPACE), ACTIVITY, 4)];
    let (_old, incarnation) = dialled_by_the_node(&node, &listener, &advertise, theirs()).await;
    for hello in [
        hand_hello(1, &advertise),
        hello_after_cut(&advertise, incarnation.wrapping_add(1)),
    ] {
        let mut second = support::hand_peer_written_at(node.addr, hello, 3).await;
        let refusal = next_of(&mut second, |f| {
            matches!(f, Frame::Goodbye(_) | Frame::PeerHello(_))
        })
        .await;
        assert!(
            matches!(&refusal, Frame::Goodbye(goodbye) if goodbye.reason == "duplicate peer link"),
            "{refusal:?}"
        );
    }
}

/// Nodes `a` and `b`, `a` dialling `b` through a proxy that then closes `b`'s side of the
/// link only: `b` dials `a` again, and the relays in flight complete on the new link long
/// before `a`'s pings could find the old one dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_only_the_serving_node_saw_costs_no_relay() {
    use support::faulty::Proxy;

    let (b_listener, b_port) = loopback_listener();
    let to_b = Proxy::start(b_port).await;
    let config = |node_id: &str, seeds: &[SocketAddr]| lintel::NodeConfig {
        peer_relink_grace_ms: 30_000,
        // a's pings would need three minutes to find the old link dead.
        peer_ping_interval_ms: 60_000,
        ..cluster_config(node_id, seeds)
    };
    let b = TestNode::on_listener(
        lintel::NodeConfig {
            listen: b_port,
            advertise: to_b.addr.to_string(),
            ..config("b", &[])
        },
        b_listener,
    )
    .await;
    let a = TestNode::with_config(config("a", &[to_b.addr])).await;
    a.wait_linked(&["b"]).await;
    let mut worker = RawWorker::start(b.addr, plain(NAMESPACE, ACTIVITY, 8, "w-b")).await;
    a.wait_announced("b", &pool(NAMESPACE)).await;
    let dispatches: Vec<_> = (0..8)
        .map(|n| {
            let work = DispatchRequest {
                workflow_id: format!("w{n}"),
                ..request(NAMESPACE, ACTIVITY, "")
            };
            spawn_dispatch(&a, work, options())
        })
        .collect();
    let pushes = futures_pushes(&mut worker, 8).await;
    let downs = |node: &TestNode| -> u64 {
        let mesh = node.node.dispatcher().mesh();
        mesh.tallies().iter().map(|member| member.tally.downs).sum()
    };
    to_b.cut_target_side();
    a.wait_peers("a's old link to b taken as cut", |_| downs(&a) >= 1)
        .await;
    a.wait_linked(&["b"]).await;
    for push in &pushes {
        worker.reply(push, "w-b").await;
    }
    for dispatch in dispatches {
        assert_eq!(served_by(&outcome_of(dispatch).await), "w-b");
    }
    assert_eq!(a.node.dispatcher().counters().peer_lost(), 0);
    assert_eq!((downs(&a), downs(&b)), (1, 1), "one cut, one relink");
}
