//! The edges of a dispatch: a reply crossing its deadline, slots held while a worker may still
//! run an ended push, a request's own pin, bounded routing lists, a push whose link closed
//! before it left, and counters that count what PROTOCOL.md says.
//!
//! The stress test at the end is seeded: `LINTEL_EDGES_SEED=N cargo test --test edges` replays
//! a run; the seed is printed when it fails.

use lintel_test_support as support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::activities::BuiltIn;
use lintel::dispatch::{DispatchLimits, DispatchOptions, Dispatcher};
use lintel::link::{ReplyFate, WorkerLink};
use lintel::registry::{AdmissionLimits, Registry};
use lintel::sdk::Worker;
use lintel::transport;
use lintel::wire::{
    ActivityOutcome, Cancel, DispatchRequest, DispatchResponse, DispatchResult, Frame,
    NoWorkerReason, Pong, Push, RefusedReason, Register, Reply, Role, Submit,
};
use lintel::NodeConfig;
use support::{
    next_frame, next_outcome, producer, reply_frame, request, within, RawClient, TestNode,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// A raw worker registered for `activity` in namespace `ns`, optionally on `node`.
async fn worker(node: &TestNode, activity: &str, capacity: u32, on: Option<&str>) -> RawClient {
    let (mut client, _) = RawClient::hello(node.addr, Role::Worker).await;
    client
        .send(Frame::from(Register {
            namespaces: vec!["ns".into()],
            task_queue: String::new(),
            node: on.map(str::to_owned),
            activity_types: vec![activity.into()],
            identity: on.unwrap_or("any").into(),
            max_concurrency: capacity,
            ..Default::default()
        }))
        .await;
    match next_frame(&mut client).await {
        Some(Frame::Registered(_)) => client,
        other => panic!("expected Registered, got {other:?}"),
    }
}

fn submit(correlation: u64, request: DispatchRequest, options: &DispatchOptions) -> Frame {
    Frame::from(Submit {
        correlation,
        request,
        wait_for_worker_ms: options.wait_for_worker_ms(),
        reply_timeout_ms: options.reply_timeout_ms(),
        routing: options.wire_routing().clone(),
        extras: Default::default(),
    })
}

async fn next_push(worker: &mut RawClient) -> Push {
    match next_frame(worker).await {
        Some(Frame::Push(push)) => *push,
        other => panic!("expected a Push, got {other:?}"),
    }
}

/// Round-trips a ping, so every frame the client sent before has been handled by the node.
async fn sync(client: &mut RawClient, nonce: u64) {
    client.send(Frame::Ping(lintel::wire::Ping { nonce })).await;
    loop {
        match client.recv().await {
            Some(Frame::Pong(Pong { nonce: got })) if got == nonce => return,
            Some(Frame::Ping(ping)) => {
                client.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
            }
            Some(_) => {}
            None => panic!("connection closed while syncing"),
        }
    }
}

fn pinned_request(node: &str) -> DispatchRequest {
    DispatchRequest {
        node: Some(node.into()),
        ..request("ns", "act", "")
    }
}

// ---------------------------------------------------------------------------------------------
// Routing.

#[tokio::test]
async fn a_requests_own_node_pin_beats_prefer_and_require() {
    let node = TestNode::start().await;
    let mut on_n1 = worker(&node, "act", 8, Some("n1")).await;
    let mut on_n2 = worker(&node, "act", 8, Some("n2")).await;
    let mut wire = producer(node.addr).await;
    let routings = [
        DispatchOptions::default().prefer(["n1"]),
        DispatchOptions::default().require(["n1"]),
    ];
    for (correlation, options) in (1..).zip(routings) {
        wire.send(submit(correlation, pinned_request("n2"), &options))
            .await;
        let push = next_push(&mut on_n2).await;
        on_n2.send(reply_frame(&push, "n2")).await;
        assert_eq!(next_outcome(&mut wire).await.correlation, correlation);
    }
    sync(&mut on_n1, 1).await;
    let status = node.node.status();
    assert_eq!(status.counters.completed, 2);
    assert_eq!(status.counters.pushed, 2, "nothing went to n1");
}

#[tokio::test]
async fn routing_lists_longer_than_max_set_len_are_refused_before_any_selection() {
    let node = TestNode::with_config(NodeConfig {
        max_set_len: 4,
        ..NodeConfig::default()
    })
    .await;
    let mut wire = producer(node.addr).await;
    let names = |count: usize| (0..count).map(|i| format!("n{i}")).collect::<Vec<_>>();
    let cases = [
        (1, DispatchOptions::default().prefer(names(5))),
        (2, DispatchOptions::default().require(names(5))),
        (3, DispatchOptions::default().require(["x".repeat(300)])),
    ];
    for (correlation, options) in cases {
        wire.send(submit(correlation, request("ns", "act", ""), &options))
            .await;
        match next_outcome(&mut wire).await.result {
            DispatchResult::Refused(refused) => {
                assert_eq!(refused.reason, RefusedReason::InvalidRequest);
            }
            other => panic!("case {correlation}: expected Refused, got {other:?}"),
        }
    }
    let within_bound = DispatchOptions::default().require(names(4));
    wire.send(submit(4, request("ns", "act", ""), &within_bound))
        .await;
    assert!(matches!(
        next_outcome(&mut wire).await.result,
        DispatchResult::NoWorker(_)
    ));
    let counters = node.node.status().counters;
    assert_eq!((counters.submitted, counters.refused), (4, 3));
}

// ---------------------------------------------------------------------------------------------
// Slots held past a dispatch's end.

#[tokio::test]
async fn a_timed_out_push_holds_its_slot_until_the_grace_ends_then_the_slot_is_reclaimed() {
    let node = TestNode::with_config(NodeConfig {
        ping_interval_ms: 50,
        max_missed_pings: 1000,
        late_reply_grace_ms: 300,
        ..NodeConfig::default()
    })
    .await;
    let mut silent = worker(&node, "act", 1, None).await;
    let mut wire = producer(node.addr).await;
    let quick = DispatchOptions::default().reply_timeout(Duration::from_millis(50));
    wire.send(submit(1, request("ns", "act", "never answered"), &quick))
        .await;
    let ignored = next_push(&mut silent).await;
    assert!(matches!(
        next_outcome(&mut wire).await.result,
        DispatchResult::Timeout { .. }
    ));
    match next_frame(&mut silent).await {
        Some(Frame::Cancel(Cancel { correlation })) => assert_eq!(correlation, ignored.correlation),
        other => panic!("expected Cancel, got {other:?}"),
    }

    // The worker may still be running it: its only slot is not given to anyone else yet.
    wire.send(submit(
        2,
        request("ns", "act", ""),
        &DispatchOptions::default(),
    ))
    .await;
    match next_outcome(&mut wire).await.result {
        DispatchResult::NoWorker(census) => {
            assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
        }
        other => panic!("expected NoWorker, got {other:?}"),
    }

    // After the grace the slot comes back, and a waiting dispatch gets it.
    let waits = quick.clone().wait_for_worker(Duration::from_secs(10));
    wire.send(submit(3, request("ns", "act", "after grace"), &waits))
        .await;
    let push = next_push(&mut silent).await;
    assert_eq!(push.request.input, Bytes::from_static(b"after grace"));
    silent.send(reply_frame(&push, "done")).await;
    assert_eq!(next_outcome(&mut wire).await.correlation, 3);
    let counters = node.node.status().counters;
    assert_eq!(counters.reclaimed_slots, 1);
    assert_eq!(counters.late_replies, 0);
}

// ---------------------------------------------------------------------------------------------
// A push whose link closed before it left, in-process over real loopback links.

struct Links {
    listener: TcpListener,
    peers: Vec<TcpStream>,
}

impl Links {
    async fn new() -> Self {
        Self {
            listener: TcpListener::bind("127.0.0.1:0").await.expect("bind"),
            peers: Vec::new(),
        }
    }

    async fn link(&mut self, pid: u64) -> WorkerLink {
        let addr = self.listener.local_addr().expect("addr");
        let (peer, accepted) = tokio::join!(TcpStream::connect(addr), self.listener.accept());
        self.peers.push(peer.expect("connect"));
        let (_reader, outbound, _writer) =
            transport::split(accepted.expect("accept").0, 1 << 20, 16);
        WorkerLink::new(pid, lintel::wire::PROTOCOL_VERSION, outbound)
    }
}

fn limits() -> DispatchLimits {
    DispatchLimits {
        default_reply_timeout: Duration::from_secs(30),
        max_name_len: 256,
        max_set_len: 64,
        max_frame_len: 4 << 20,
        max_active: 1024,
        max_headers: 32,
        max_header_bytes: 8192,
    }
}

#[tokio::test]
async fn a_push_whose_link_closed_before_it_left_goes_to_the_next_worker_not_lost() {
    let registry = Registry::new(AdmissionLimits::default());
    let mut links = Links::new().await;
    let closing = links.link(1).await;
    let open = links.link(2).await;
    let register = support::register("ns", "act", 1);
    let first = registry
        .admit(1, &register, closing.clone())
        .expect("admit");
    let second = registry.admit(2, &register, open).expect("admit");
    // Closed, still registered: the window between a connection closing and deregistering.
    closing.close();
    let dispatcher = Dispatcher::new(Arc::clone(&registry), limits());
    let quick = DispatchOptions::default().reply_timeout(Duration::from_millis(20));
    let result = within(
        "dispatch",
        dispatcher.dispatch(request("ns", "act", ""), &quick),
    )
    .await;
    assert_eq!(
        result,
        DispatchResult::Timeout {
            worker_id: second.worker_id(),
            after_ms: 20
        },
        "nothing ran on the closed link, so the next worker took it"
    );
    assert_ne!(first.worker_id(), second.worker_id());
    assert_eq!(dispatcher.counters().snapshot().pushed, 1);
}

// ---------------------------------------------------------------------------------------------
// Counters.

#[tokio::test]
async fn each_counter_counts_what_the_protocol_says() {
    let node = TestNode::start().await;
    let mut w = worker(&node, "act", 4, None).await;
    let mut wire = producer(node.addr).await;
    let plain = DispatchOptions::default();

    // submitted, no_worker: a dispatch nobody can serve is submitted but never pushed.
    wire.send(submit(1, request("ns", "nobody", ""), &plain))
        .await;
    next_outcome(&mut wire).await;
    // refused: an invalid request is submitted and refused.
    wire.send(submit(2, request("", "act", ""), &plain)).await;
    next_outcome(&mut wire).await;
    // pushed, completed.
    wire.send(submit(3, request("ns", "act", ""), &plain)).await;
    let push = next_push(&mut w).await;
    w.send(reply_frame(&push, "ok")).await;
    next_outcome(&mut wire).await;
    // pushed, cancelled, late_replies: the worker answers the cancelled push afterwards.
    wire.send(submit(4, request("ns", "act", ""), &plain)).await;
    let push = next_push(&mut w).await;
    wire.send(Frame::Cancel(Cancel { correlation: 4 })).await;
    next_outcome(&mut wire).await;
    w.send(reply_frame(&push, "late")).await;
    // dropped_replies: a reply naming no push.
    let mut stray = push.clone();
    stray.correlation = 999;
    w.send(reply_frame(&stray, "stray")).await;
    sync(&mut w, 7).await;

    let c = node.node.status().counters;
    assert_eq!(c.submitted, 4);
    assert_eq!(c.pushed, 2);
    assert_eq!(
        (c.completed, c.no_worker, c.refused, c.cancelled),
        (1, 1, 1, 1)
    );
    assert_eq!((c.worker_lost, c.timed_out, c.draining), (0, 0, 0));
    assert_eq!(
        (c.late_replies, c.dropped_replies, c.reclaimed_slots),
        (1, 1, 0)
    );
    assert_eq!(node.registry().reserved_slots(), 0);
}

// ---------------------------------------------------------------------------------------------
// Replies aimed at the deadline, seeded.

/// What a stub worker saw and did.
#[derive(Default)]
struct WorkerLog {
    /// Push correlation -> the producer submission it carried (the workflow id).
    pushes: HashMap<(usize, u64), String>,
    cancelled: HashSet<(usize, u64)>,
    replies: u64,
}

/// Asks a stub worker to confirm that the node has handled every reply it sent.
type SyncRequest = oneshot::Sender<()>;

/// A worker that answers every push, cancelled ones included, about when its deadline falls.
/// On a sync request it waits for its replies to go out, then pings: the node answers in order,
/// so the pong means every reply before it was handled.
async fn aiming_worker(
    client: RawClient,
    index: usize,
    seed: u64,
    log: Arc<Mutex<WorkerLog>>,
    mut syncs: mpsc::UnboundedReceiver<SyncRequest>,
) {
    let mut rng = fastrand::Rng::with_seed(seed ^ (index as u64 + 1));
    let (mut sink, mut stream) = client.framed.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if sink.send(frame).await.is_err() {
                break;
            }
        }
    });
    let mut replies = tokio::task::JoinSet::new();
    let mut synced: Option<(u64, SyncRequest)> = None;
    loop {
        let frame = tokio::select! {
            frame = stream.next() => frame,
            Some(sync) = syncs.recv() => {
                while replies.join_next().await.is_some() {}
                let nonce = u64::MAX - index as u64;
                let _ = tx.send(Frame::Ping(lintel::wire::Ping { nonce }));
                synced = Some((nonce, sync));
                continue;
            }
        };
        let Some(Ok(frame)) = frame else {
            break;
        };
        match frame {
            Frame::Push(push) => {
                log.lock()
                    .unwrap()
                    .pushes
                    .insert((index, push.correlation), push.request.workflow_id.clone());
                // The reply timeout is 20 ms: aim within a few ms either side of it.
                let after = Duration::from_micros(rng.u64(16_000..24_000));
                let (tx, log) = (tx.clone(), Arc::clone(&log));
                replies.spawn(async move {
                    tokio::time::sleep(after).await;
                    log.lock().unwrap().replies += 1;
                    let _ = tx.send(reply_frame(&push, "aimed"));
                });
            }
            Frame::Cancel(cancel) => {
                log.lock()
                    .unwrap()
                    .cancelled
                    .insert((index, cancel.correlation));
            }
            Frame::Ping(ping) => {
                let _ = tx.send(Frame::Pong(Pong { nonce: ping.nonce }));
            }
            Frame::Pong(pong) if synced.as_ref().is_some_and(|(n, _)| *n == pong.nonce) => {
                if let Some((_, sync)) = synced.take() {
                    let _ = sync.send(());
                }
            }
            _ => {}
        }
    }
    writer.abort();
}

#[tokio::test]
async fn replies_aimed_at_the_deadline_end_once_and_every_loser_is_counted() {
    let seed = std::env::var("LINTEL_EDGES_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let seed_note = format!("replay with LINTEL_EDGES_SEED={seed}");
    eprintln!("{seed_note}");
    let node = TestNode::start().await;
    let log = Arc::new(Mutex::new(WorkerLog::default()));
    let mut clients = Vec::new();
    let mut syncs = Vec::new();
    for index in 0..3 {
        let client = worker(&node, "act", 8, None).await;
        let (sync, requests) = mpsc::unbounded_channel();
        syncs.push(sync);
        clients.push(tokio::spawn(aiming_worker(
            client,
            index,
            seed,
            Arc::clone(&log),
            requests,
        )));
    }
    const PER_PRODUCER: u64 = 400;
    let options = DispatchOptions::default()
        .reply_timeout(Duration::from_millis(20))
        .wait_for_worker(Duration::from_secs(5));
    let mut producers = tokio::task::JoinSet::new();
    for p in 0..2u64 {
        let mut wire = producer(node.addr).await;
        let options = options.clone();
        producers.spawn(async move {
            let mut outcomes = HashMap::new();
            // At most 16 outstanding per producer; each outcome lets the next one in.
            let mut sent = 0;
            while sent < PER_PRODUCER.min(16) {
                sent += 1;
                let mut r = request("ns", "act", "");
                r.workflow_id = format!("p{p}-{sent}");
                wire.send(submit(sent, r, &options)).await;
            }
            while (outcomes.len() as u64) < PER_PRODUCER {
                let outcome = next_outcome(&mut wire).await;
                let fresh = outcomes
                    .insert(outcome.correlation, outcome.result)
                    .is_none();
                assert!(fresh, "a second outcome for {}", outcome.correlation);
                if sent < PER_PRODUCER {
                    sent += 1;
                    let mut r = request("ns", "act", "");
                    r.workflow_id = format!("p{p}-{sent}");
                    wire.send(submit(sent, r, &options)).await;
                }
            }
            (p, outcomes)
        });
    }
    let mut results: HashMap<String, DispatchResult> = HashMap::new();
    let runs = within("every outcome", async {
        let mut all = Vec::new();
        while let Some(done) = producers.join_next().await {
            all.push(done.expect("producer task"));
        }
        all
    })
    .await;
    for (p, outcomes) in runs {
        for (correlation, result) in outcomes {
            results.insert(format!("p{p}-{correlation}"), result);
        }
    }
    assert_eq!(results.len() as u64, 2 * PER_PRODUCER, "{seed_note}");

    // Every dispatch has its outcome; let every aimed reply reach the node, then check the books.
    for sync in &syncs {
        let (done, synced) = oneshot::channel();
        sync.send(done).expect("stub worker alive");
        within("every reply to be handled", synced)
            .await
            .expect("stub worker synced");
    }
    let counters = node.node.status().counters;
    let log = log.lock().unwrap();
    let completed = results
        .values()
        .filter(|r| matches!(r, DispatchResult::Completed(_)))
        .count() as u64;
    let timed_out = results
        .values()
        .filter(|r| matches!(r, DispatchResult::Timeout { .. }))
        .count() as u64;
    assert_eq!(
        completed + timed_out,
        2 * PER_PRODUCER,
        "only completed or timeout: {seed_note}"
    );
    assert_eq!(counters.pushed, log.pushes.len() as u64, "{seed_note}");
    assert_eq!(
        log.replies, counters.pushed,
        "every push was answered: {seed_note}"
    );
    assert_eq!(counters.completed, completed, "{seed_note}");
    assert_eq!(counters.timed_out, timed_out, "{seed_note}");
    assert_eq!(
        counters.pushed,
        counters.completed + counters.late_replies,
        "every push: its reply delivered, or its late reply counted: {seed_note}"
    );
    // Cancel went out for exactly the pushes whose dispatch ended without their reply.
    for (push, submission) in &log.pushes {
        let timed = matches!(
            results.get(submission),
            Some(DispatchResult::Timeout { .. })
        );
        assert_eq!(
            log.cancelled.contains(push),
            timed,
            "push {push:?} of {submission}: cancel sent iff it timed out: {seed_note}"
        );
    }
    assert_eq!(node.registry().reserved_slots(), 0, "{seed_note}");
    for client in clients {
        client.abort();
    }
}

#[tokio::test]
async fn an_sdk_worker_answers_a_cancel_so_its_slot_frees_long_before_the_grace() {
    let node = TestNode::start().await;
    let config = support::worker_config(node.addr.to_string(), support::register("ns", "sleep", 1));
    let worker = Worker::spawn(config, BuiltIn);
    within("registration", worker.wait_registered(support::WAIT))
        .await
        .expect("registered");
    let dispatcher = node.node.dispatcher();
    let quick = DispatchOptions::default().reply_timeout(Duration::from_millis(50));
    let slow = dispatcher
        .dispatch(request("ns", "sleep", "600000"), &quick)
        .await;
    assert!(matches!(slow, DispatchResult::Timeout { .. }), "{slow:?}");
    // The only slot is held until the worker lets go; the SDK does so on the Cancel.
    let waits = DispatchOptions::default().wait_for_worker(support::WAIT);
    let next = within(
        "the freed slot",
        dispatcher.dispatch(request("ns", "sleep", "0"), &waits),
    )
    .await;
    assert!(matches!(next, DispatchResult::Completed(_)), "{next:?}");
    let counters = node.node.status().counters;
    assert_eq!((counters.late_replies, counters.reclaimed_slots), (1, 0));
    worker.shutdown().await;
}

#[tokio::test]
async fn the_largest_input_protocol_md_allows_is_carried_and_one_byte_more_is_refused() {
    let max_frame_len = 64 * 1024;
    let node = TestNode::with_config(NodeConfig {
        max_frame_len,
        ..NodeConfig::default()
    })
    .await;
    let mut w = worker(&node, "act", 1, None).await;
    let mut wire = producer(node.addr).await;
    let ids = |r: &DispatchRequest| r.workflow_id.len() + r.run_id.as_deref().map_or(0, str::len);
    let mut largest = request("ns", "act", "");
    largest.input = Bytes::from(vec![7; max_frame_len - 16384 - ids(&largest)]);
    let mut over = largest.clone();
    over.input = Bytes::from(vec![7; largest.input.len() + 1]);

    wire.send(submit(1, largest.clone(), &DispatchOptions::default()))
        .await;
    let push = next_push(&mut w).await;
    assert_eq!(push.request.input.len(), largest.input.len());
    let echo = Frame::Reply(Reply {
        correlation: push.correlation,
        response: DispatchResponse {
            workflow_id: push.request.workflow_id.clone(),
            ordinal: push.request.ordinal,
            run_id: push.request.run_id.clone(),
            outcome: ActivityOutcome::Success(push.request.input.clone()),
        },
    });
    w.send(echo).await;
    match next_outcome(&mut wire).await.result {
        DispatchResult::Completed(response) => {
            assert_eq!(
                response.outcome,
                ActivityOutcome::Success(largest.input.clone()),
                "a result as large as the largest input comes back whole"
            );
        }
        other => panic!("expected Completed, got {other:?}"),
    }

    wire.send(submit(2, over, &DispatchOptions::default()))
        .await;
    match next_outcome(&mut wire).await.result {
        DispatchResult::Refused(refused) => {
            assert_eq!(refused.reason, RefusedReason::InvalidRequest);
        }
        other => panic!("expected Refused, got {other:?}"),
    }
}

/// Yields until the link holds `pushes` pushes; paused time does not move meanwhile.
async fn until_pushed(link: &WorkerLink, pushes: usize) {
    for _ in 0..10_000 {
        if link.in_flight() == pushes {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the push never reached the link");
}

fn response() -> DispatchResponse {
    DispatchResponse {
        workflow_id: "wf-1".into(),
        ordinal: 1,
        run_id: Some("run-1".into()),
        outcome: ActivityOutcome::Success(Bytes::from_static(b"done")),
    }
}

#[tokio::test(start_paused = true)]
async fn with_paused_time_a_reply_just_before_the_deadline_completes_and_one_at_it_is_late() {
    let registry = Registry::new(AdmissionLimits::default());
    let mut links = Links::new().await;
    let link = links.link(1).await;
    let guard = registry
        .admit(1, &support::register("ns", "act", 2), link.clone())
        .expect("admit");
    let dispatcher = Dispatcher::new(Arc::clone(&registry), limits());
    let second = DispatchOptions::default().reply_timeout(Duration::from_secs(1));

    // A reply one millisecond before the deadline wins.
    let early = tokio::spawn({
        let (dispatcher, options) = (Arc::clone(&dispatcher), second.clone());
        async move {
            dispatcher
                .dispatch(request("ns", "act", ""), &options)
                .await
        }
    });
    until_pushed(&link, 1).await;
    tokio::time::advance(Duration::from_millis(999)).await;
    assert_eq!(link.reply(1, response().view()), ReplyFate::Delivered);
    assert!(matches!(early.await, Ok(DispatchResult::Completed(_))));

    // At the deadline the timeout wins; the reply after it is late and frees the slot.
    let late = tokio::spawn({
        let dispatcher = Arc::clone(&dispatcher);
        async move { dispatcher.dispatch(request("ns", "act", ""), &second).await }
    });
    until_pushed(&link, 1).await;
    assert_eq!(
        late.await.expect("dispatch task"),
        DispatchResult::Timeout {
            worker_id: guard.worker_id(),
            after_ms: 1000
        }
    );
    assert_eq!(
        registry.reserved_slots(),
        1,
        "held while the worker may run it"
    );
    assert_eq!(link.reply(2, response().view()), ReplyFate::Late);
    assert_eq!(registry.reserved_slots(), 0);
    let counters = dispatcher.counters().snapshot();
    assert_eq!(
        (
            counters.completed,
            counters.timed_out,
            counters.late_replies
        ),
        (1, 1, 1)
    );
}
