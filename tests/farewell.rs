//! Peer links retired with a farewell, over real sockets on 127.0.0.1: a rolling restart of
//! every worker node under load loses nothing; a retiring node answers every relay it ran
//! before its farewell and runs none it reads after; an origin places a relay left unanswered
//! at a farewell again, and it runs once; a duplicate link retired under load loses nothing.
//!
//! The rolling restart runs six in-process nodes (workers on three, producers on the other
//! three, so every dispatch is relayed) and restarts each worker node in turn, three rounds,
//! draining it and starting it again on the same address, under 24 dispatches at a time; it
//! takes about 4 s on 2 cores in a debug build. The others are hand-written peers that state
//! exactly what crosses the link.

use lintel_test_support as support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use lintel::sdk::{handler_fn, DispatchOptions, Handler, Request, WorkerHandle};
use lintel::wire::{
    feature, ActivityOutcome, DispatchRequest, DispatchResponse, DispatchResult, Drained, Farewell,
    Frame, FrameCodec, Limits, NodeRouting, PeerHello, PoolPresence, Presence, Relay, RelayOutcome,
    RequestExtras, Role, Welcome,
};
use lintel::NodeConfig;
use support::{
    cluster_config, hand_peer, next_frame, next_of, offering, outcome_of, plain, pool, request,
    sdk_worker, spawn_dispatch, within, RawClient, RawWorker, TestNode,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::codec::Framed;

const NAMESPACE: &str = "ns";
const ACTIVITY: &str = "work";

/// How many times each workflow id was run, counted by the workers as each run starts.
#[derive(Default)]
struct Runs(Mutex<HashMap<String, u32>>);

impl Runs {
    fn of(&self, workflow_id: &str) -> u32 {
        self.0
            .lock()
            .unwrap()
            .get(workflow_id)
            .copied()
            .unwrap_or(0)
    }

    fn more_than_once(&self) -> Vec<(String, u32)> {
        let runs = self.0.lock().unwrap();
        let mut twice: Vec<(String, u32)> = runs
            .iter()
            .filter(|(_, runs)| **runs > 1)
            .map(|(id, runs)| (id.clone(), *runs))
            .collect();
        twice.sort();
        twice
    }
}

/// A handler that counts its runs and takes up to 30 ms over one in four, answering with
/// `name`.
fn counting(runs: &Arc<Runs>, name: &'static str) -> impl Handler {
    let runs = Arc::clone(runs);
    handler_fn(move |request: Request| {
        *runs
            .0
            .lock()
            .unwrap()
            .entry(request.workflow_id.to_string())
            .or_default() += 1;
        async move {
            if fastrand::u8(0..4) == 0 {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(1..30))).await;
            }
            ActivityOutcome::Success(Bytes::from_static(name.as_bytes()))
        }
    })
}

fn work(workflow_id: &str) -> DispatchRequest {
    DispatchRequest {
        workflow_id: workflow_id.into(),
        ..request(NAMESPACE, ACTIVITY, "")
    }
}

/// Wait and reply headroom enough to be placed again while a worker node restarts.
fn patient() -> DispatchOptions {
    DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(30))
        .reply_timeout(Duration::from_secs(30))
}

/// A node of the rolling restart, seeded at `seed`, listening at `listen` when it restarts.
fn member(node_id: &str, seed: Option<SocketAddr>, listen: Option<SocketAddr>) -> NodeConfig {
    let seeds: Vec<SocketAddr> = seed.into_iter().collect();
    let config = NodeConfig {
        drain_timeout_ms: 30_000,
        ..cluster_config(node_id, &seeds)
    };
    match listen {
        Some(listen) => NodeConfig { listen, ..config },
        None => config,
    }
}

/// Waits until every node has an up, synced link to every other.
async fn fully_linked(nodes: &[&TestNode], ids: &[&str]) {
    for (node, id) in nodes.iter().zip(ids) {
        let others: Vec<&str> = ids.iter().copied().filter(|other| other != id).collect();
        node.wait_linked(&others).await;
        assert_eq!(node.node.dispatcher().mesh().unlinked_member(), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_every_worker_node_under_load_loses_nothing() {
    let p0 = TestNode::with_config(member("p0", None, None)).await;
    let seed = Some(p0.addr);
    let p1 = TestNode::with_config(member("p1", seed, None)).await;
    let p2 = TestNode::with_config(member("p2", seed, None)).await;
    let worker_ids = ["w0", "w1", "w2"];
    let mut workers: Vec<(TestNode, WorkerHandle)> = Vec::new();
    let runs = Arc::new(Runs::default());
    for id in worker_ids {
        let node = TestNode::with_config(member(id, seed, None)).await;
        let handle = sdk_worker(
            node.addr,
            plain(NAMESPACE, ACTIVITY, 4, id),
            counting(&runs, id),
        )
        .await;
        workers.push((node, handle));
    }
    let ids = ["p0", "p1", "p2", "w0", "w1", "w2"];
    {
        let mut all = vec![&p0, &p1, &p2];
        all.extend(workers.iter().map(|(node, _)| node));
        fully_linked(&all, &ids).await;
    }
    for producer in [&p0, &p1, &p2] {
        for id in worker_ids {
            producer.wait_announced(id, &pool(NAMESPACE)).await;
        }
    }

    // Eight dispatches at a time from each producer node, each relayed, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = JoinSet::new();
    for (p, producer) in [&p0, &p1, &p2].into_iter().enumerate() {
        for lane in 0..8 {
            let dispatcher = Arc::clone(producer.node.dispatcher());
            let stop = Arc::clone(&stop);
            load.spawn(async move {
                let mut ended = Vec::new();
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    seq += 1;
                    let workflow_id = format!("p{p}-{lane}-{seq}");
                    let result = dispatcher.dispatch(work(&workflow_id), &patient()).await;
                    ended.push((workflow_id, result));
                }
                ended
            });
        }
    }

    let completed = |nodes: &[&TestNode]| -> u64 {
        nodes
            .iter()
            .map(|node| node.node.dispatcher().counters().snapshot().completed)
            .sum()
    };
    for round in 0..9 {
        let i = round % worker_ids.len();
        let id = worker_ids[i];
        // Under load: dispatches complete before each restart begins.
        let before = completed(&[&p0, &p1, &p2]);
        within("load before the restart", async {
            while completed(&[&p0, &p1, &p2]) < before + 50 {
                tokio::task::yield_now().await;
            }
        })
        .await;
        let (node, handle) = workers.remove(i);
        let addr = node.addr;
        node.shutdown().await;
        let node = TestNode::with_config(member(id, seed, Some(addr))).await;
        // What to wait for before restarting the next: linked to every member and synced, and
        // its worker back and announced.
        let mut all = vec![&p0, &p1, &p2, &node];
        all.extend(workers.iter().map(|(node, _)| node));
        let mut order = vec!["p0", "p1", "p2", id];
        order.extend(worker_ids.iter().copied().filter(|other| *other != id));
        fully_linked(&all, &order).await;
        for producer in [&p0, &p1, &p2] {
            producer.wait_announced(id, &pool(NAMESPACE)).await;
        }
        workers.insert(i, (node, handle));
    }

    stop.store(true, Ordering::Relaxed);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut not_completed = Vec::new();
    let mut dispatched = 0;
    while let Some(ended) = within("the load to stop", load.join_next()).await {
        for (workflow_id, result) in ended.expect("load task") {
            dispatched += 1;
            let class = lintel::dispatch::outcome::class(&result);
            *outcomes.entry(class.to_owned()).or_default() += 1;
            match result {
                DispatchResult::Completed(_) => assert_eq!(
                    runs.of(&workflow_id),
                    1,
                    "{workflow_id} completed but ran {} times",
                    runs.of(&workflow_id)
                ),
                other => not_completed.push((workflow_id, other)),
            }
        }
    }
    let peer_lost: u64 = [&p0, &p1, &p2]
        .iter()
        .map(|node| node.node.dispatcher().counters().peer_lost())
        .sum();
    println!("rolling restart, 3 rounds of 3 worker nodes of 6: {dispatched} dispatches, outcomes {outcomes:?}, peer-lost {peer_lost}");
    assert!(dispatched > 150, "too little load: {dispatched}");
    assert_eq!(peer_lost, 0, "{not_completed:?}");
    assert!(not_completed.is_empty(), "{not_completed:?}");
    assert_eq!(runs.more_than_once(), Vec::<(String, u32)>::new());
}

/// A hand-written peer named `hand` (incarnation 7, listing `farewell`) on a version-3 link it
/// dialled to `node`, past the hellos, having announced `pools`.
async fn farewell_peer(node: SocketAddr, pools: Vec<PoolPresence>) -> RawClient {
    let hello = Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation: 7,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        features: vec![feature::FAREWELL.into()],
        extensions: Vec::new(),
    });
    let mut raw = hand_peer(node, 3, hello).await;
    raw.send(presence(pools)).await;
    raw
}

fn presence(pools: Vec<PoolPresence>) -> Frame {
    Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools,
        ..Default::default()
    })
}

/// Reads until the node's `Farewell`: the relays it answered before it, by correlation, each
/// of which must have completed.
async fn completed_before_farewell(raw: &mut RawClient) -> BTreeSet<u64> {
    let mut answered = BTreeSet::new();
    loop {
        let wanted = |f: &Frame| matches!(f, Frame::RelayOutcome(_) | Frame::Farewell(_));
        match next_of(raw, wanted).await {
            Frame::RelayOutcome(outcome) => {
                let completed = matches!(outcome.result, DispatchResult::Completed(_));
                assert!(completed, "{outcome:?}");
                answered.insert(outcome.correlation);
            }
            _ => return answered,
        }
    }
}

/// Reads what the node still sends until it closes the link; none of it may be a relay
/// outcome.
async fn closed_without_outcomes(raw: &mut RawClient) {
    while let Some(frame) = next_frame(raw).await {
        assert!(!matches!(frame, Frame::RelayOutcome(_)), "{frame:?}");
    }
}

fn relay3(correlation: u64, activity: &str, workflow_id: &str) -> Frame {
    Frame::from(Relay {
        correlation,
        request: DispatchRequest {
            workflow_id: workflow_id.into(),
            ..request(NAMESPACE, activity, "")
        },
        extras: RequestExtras::default(),
        routing: NodeRouting::Any,
        reply_timeout_ms: 30_000,
    })
}

/// The outcome a serving node sends for a relay of `request` it completed.
fn completed(correlation: u64, request: &DispatchRequest) -> Frame {
    Frame::from(RelayOutcome {
        correlation,
        result: DispatchResult::Completed(DispatchResponse {
            workflow_id: request.workflow_id.clone(),
            ordinal: request.ordinal,
            run_id: request.run_id.clone(),
            outcome: ActivityOutcome::Success(Bytes::from_static(b"hand")),
        }),
    })
}

#[tokio::test]
async fn a_retiring_node_answers_every_relay_it_ran_before_its_farewell_and_runs_none_after() {
    let mut b = TestNode::with_config(member("b", None, None)).await;
    let mut worker = RawWorker::start(b.addr, plain(NAMESPACE, ACTIVITY, 4, "w-b")).await;
    let mut hand = farewell_peer(b.addr, Vec::new()).await;
    hand.send(relay3(1, ACTIVITY, "ran-1")).await;
    hand.send(relay3(2, ACTIVITY, "ran-2")).await;
    let pushes = [worker.next_push().await, worker.next_push().await];

    b.begin_shutdown();
    // What b runs finishes: the worker hears the drain, replies, and says it drained.
    match next_frame(&mut worker.client).await {
        Some(Frame::Drain(_)) => {}
        other => panic!("expected Drain, got {other:?}"),
    }
    for push in &pushes {
        worker.reply(push, "w-b").await;
    }
    worker
        .client
        .send(Frame::Drained(Drained { completed: 2 }))
        .await;
    // Both outcomes come before the farewell.
    assert_eq!(
        completed_before_farewell(&mut hand).await,
        BTreeSet::from([1, 2])
    );

    // A relay that crossed the farewell on the wire is neither run nor answered: the farewell
    // told its origin so. The hand leaves too, and b closes once it read that.
    hand.send(relay3(3, ACTIVITY, "crossed")).await;
    hand.send(Frame::Farewell(Farewell {
        reason: "leaving too".into(),
    }))
    .await;
    hand.framed.get_mut().shutdown().await.expect("half-close");
    closed_without_outcomes(&mut hand).await;
    b.shutdown().await;
    while let Some(frame) = next_frame(&mut worker.client).await {
        assert!(!matches!(frame, Frame::Push(_)), "{frame:?}");
    }
}

#[tokio::test]
async fn a_relay_left_unanswered_at_a_farewell_is_placed_again_and_runs_once() {
    let a = TestNode::with_config(member("a", None, None)).await;
    let mut hand = farewell_peer(a.addr, vec![offering(pool(NAMESPACE), ACTIVITY, 1)]).await;
    a.wait_announced("hand", &pool(NAMESPACE)).await;
    let dispatch = spawn_dispatch(&a, work("crossing"), patient());
    match next_of(&mut hand, |f| matches!(f, Frame::Relay(_))).await {
        Frame::Relay(relay) => assert_eq!(relay.request.workflow_id, "crossing"),
        _ => unreachable!("filtered"),
    }
    let runs = Arc::new(Runs::default());
    let c = TestNode::with_config(member("c", Some(a.addr), None)).await;
    let _worker = sdk_worker(
        c.addr,
        plain(NAMESPACE, ACTIVITY, 1, "w-c"),
        counting(&runs, "c"),
    )
    .await;
    a.wait_announced("c", &pool(NAMESPACE)).await;

    // The hand leaves without answering: the relay crossed its farewell, so it never ran there.
    hand.send(Frame::Farewell(Farewell {
        reason: "draining".into(),
    }))
    .await;
    let result = outcome_of(dispatch).await;
    assert_eq!(support::served_by(&result), "c");
    assert_eq!(runs.of("crossing"), 1);
    assert_eq!(a.node.dispatcher().counters().peer_lost(), 0);
    // a retires its side too: its own farewell, then its close once the hand shut its side.
    next_of(&mut hand, |f| matches!(f, Frame::Farewell(_))).await;
    hand.framed.get_mut().shutdown().await.expect("half-close");
    closed_without_outcomes(&mut hand).await;
}

#[tokio::test]
async fn a_duplicate_link_retired_under_load_loses_nothing() {
    // The hand listens, and a is given it as a join point: a dials it (link 2), and the hand
    // holds that dial unanswered while it dials a itself (link 1) and relays both ways on it.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let hand_addr = listener.local_addr().expect("addr");
    let a = TestNode::with_config(NodeConfig {
        handshake_timeout_ms: 30_000,
        ..cluster_config("a", &[hand_addr])
    })
    .await;
    let mut worker = RawWorker::start(a.addr, plain(NAMESPACE, "here", 8, "w-a")).await;
    let (stream, _) = within("a's dial", listener.accept()).await.expect("accept");
    let mut two = RawClient {
        framed: Framed::new(stream, FrameCodec::default()),
    };
    match two.recv().await {
        Some(Frame::Hello(hello)) => assert_eq!(hello.role, Role::Peer),
        other => panic!("expected Hello, got {other:?}"),
    }
    two.speak(2);
    two.send(Frame::from(Welcome {
        version: 2,
        node_id: "hand".into(),
        pid: 1,
        limits: Limits {
            max_frame_len: 4 << 20,
            max_in_flight: 1024,
            ping_interval_ms: 0,
            max_missed_pings: 3,
            max_name_len: 256,
            max_set_len: 64,
        },
        header_limits: None,
        features: Vec::new(),
    }))
    .await;
    assert!(matches!(two.recv().await, Some(Frame::PeerHello(_))));

    let mut one = farewell_peer(a.addr, vec![offering(pool(NAMESPACE), "there", 8)]).await;
    a.wait_announced("hand", &pool(NAMESPACE)).await;
    let dispatches: Vec<_> = (0..4)
        .map(|i| {
            let request = DispatchRequest {
                workflow_id: format!("out-{i}"),
                ..request(NAMESPACE, "there", "")
            };
            spawn_dispatch(&a, request, patient())
        })
        .collect();
    let mut from_a = Vec::new();
    for _ in 0..4 {
        match next_of(&mut one, |f| matches!(f, Frame::Relay(_))).await {
            Frame::Relay(relay) => from_a.push(*relay),
            _ => unreachable!("filtered"),
        }
    }
    from_a.sort_by_key(|relay| relay.correlation);
    for correlation in 1..=4 {
        one.send(relay3(correlation, "here", &format!("in-{correlation}")))
            .await;
    }
    let mut pushes = Vec::new();
    for _ in 0..4 {
        pushes.push(worker.next_push().await);
    }

    // The hand answers a's dial: a keeps link 2, its own dial (its id sorts lower), and
    // retires link 1 with relays in flight both ways.
    two.send(Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation: 7,
        advertise: hand_addr.to_string(),
        peers: Vec::new(),
        ..Default::default()
    }))
    .await;
    two.send(presence(vec![offering(pool(NAMESPACE), "there", 8)]))
        .await;
    for relay in &from_a[..2] {
        one.send(completed(relay.correlation, &relay.request)).await;
    }
    for push in &pushes {
        worker.reply(push, "w-a").await;
    }
    // Every relay a ran for the hand is answered on link 1 before its farewell.
    let answered = completed_before_farewell(&mut one).await;
    assert_eq!(answered, BTreeSet::from([1, 2, 3, 4]));
    // a still hears an answer after its farewell; the last relay is left unanswered at the
    // hand's own farewell, and a places it again, over link 2.
    one.send(completed(from_a[2].correlation, &from_a[2].request))
        .await;
    one.send(Frame::Farewell(Farewell {
        reason: "retiring too".into(),
    }))
    .await;
    one.framed.get_mut().shutdown().await.expect("half-close");
    closed_without_outcomes(&mut one).await;
    match next_of(&mut two, |f| matches!(f, Frame::Relay(_))).await {
        Frame::Relay(relay) => {
            assert_eq!(relay.request.workflow_id, from_a[3].request.workflow_id);
            two.send(completed(relay.correlation, &relay.request)).await;
        }
        _ => unreachable!("filtered"),
    }
    for dispatch in dispatches {
        let result = outcome_of(dispatch).await;
        assert_eq!(support::served_by(&result), "hand");
    }
    assert_eq!(a.node.dispatcher().counters().peer_lost(), 0);
}
