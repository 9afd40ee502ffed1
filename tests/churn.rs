//! Churn: hundreds of workers connect, register and leave (goodbye, drain, dropping the socket
//! mid-dispatch, going silent) while thousands of dispatches run through the wire producer path
//! and in-process. Every dispatch must end in exactly one outcome of an allowed class, no slot or
//! registration may leak, and the node must still serve a fresh worker afterwards.
//!
//! # Replaying a run
//!
//! Every random choice (each worker's capacity and budget, which pushes go unanswered, how long
//! a reply waits) comes from generators derived from one seed. The seed is read from
//! `LINTEL_CHURN_SEED` when set and chosen at random otherwise; the test prints it to stderr at
//! the start and again when it fails. To replay a failure with the same choices:
//!
//! ```text
//! LINTEL_CHURN_SEED=<seed> cargo test --test churn
//! ```
//!
//! The seed fixes the choices, not the scheduling: how tasks interleave still varies by run.

use lintel_test_support as support;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use fastrand::Rng;
use futures_util::{SinkExt, StreamExt};
use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, Worker, WorkerHandle, WorkerState};
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResponse, DispatchResult, Frame, Goodbye,
    NodeRouting, Pong, Push, Register, Reply, Role, Submit,
};
use lintel::NodeConfig;
use support::{next_frame, request, within, RawClient, TestNode};
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};
use tokio::task::JoinSet;

/// Worker incarnations that come and go.
const CHURN_WORKERS: usize = 200;
/// Churn workers alive at once.
const ALIVE: usize = 24;
/// Workers that stay for the whole run, so most dispatches find someone.
const STEADY_WORKERS: usize = 3;
/// Dispatches submitted at least; more only if churn workers are still coming and going.
const MIN_DISPATCHES: u64 = 3_000;
/// Dispatches in flight at once.
const CONCURRENCY: usize = 64;
/// Wire producer connections.
const PRODUCERS: usize = 4;
/// Bound on the whole churn phase.
const CHURN_BOUND: Duration = Duration::from_secs(45);

/// Names the seed of a run to replay (see the module doc).
const SEED_VAR: &str = "LINTEL_CHURN_SEED";

/// The run's seed: [`SEED_VAR`] when set, otherwise random.
fn churn_seed() -> u64 {
    match std::env::var(SEED_VAR) {
        Ok(value) => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VAR}={value:?} is not a u64")),
        Err(std::env::VarError::NotPresent) => fastrand::u64(..),
        Err(error) => panic!("{SEED_VAR}: {error}"),
    }
}

/// Names the seed again when the test fails, however it fails, so the failure can be replayed.
struct SeedReport(u64);

impl Drop for SeedReport {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "churn failed with seed {seed}; replay with {SEED_VAR}={seed} cargo test --test churn",
                seed = self.0
            );
        }
    }
}

/// Served by every worker; the common case.
const WORK: &str = "work";
/// Served only by churn workers, and waited for briefly: sometimes nobody is there.
const RARE: &str = "rare";

fn registration(activities: &[&str], max_concurrency: u32, identity: String) -> Register {
    Register {
        namespaces: vec!["churn".into()],
        task_queue: String::new(),
        node: None,
        activity_types: activities.iter().map(|a| (*a).to_owned()).collect(),
        identity,
        max_concurrency,
        ..Default::default()
    }
}

fn echo(push: &Push) -> Frame {
    Frame::Reply(Reply {
        correlation: push.correlation,
        response: DispatchResponse {
            workflow_id: push.request.workflow_id.clone(),
            ordinal: push.request.ordinal,
            run_id: push.request.run_id.clone(),
            outcome: ActivityOutcome::Success(push.request.input.clone()),
        },
    })
}

/// Every pid that registered, so the test can wait for each to go.
#[derive(Default)]
struct Pids(Mutex<Vec<u64>>);

impl Pids {
    fn add(&self, pid: u64) {
        self.0.lock().unwrap().push(pid);
    }

    fn all(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
}

/// How a raw churn worker leaves once it has taken its budget of pushes.
#[derive(Debug, Clone, Copy)]
enum Leave {
    /// Replies to the last push, then says goodbye.
    Goodbye,
    /// Drops the socket holding the last push unanswered.
    DropMidDispatch,
    /// Replies to everything, then drops the socket.
    DropIdle,
}

/// A raw worker that echoes pushes after a few yields, ignores one in forty (the dispatch times
/// out), and leaves after `budget` pushes in the way `leave` says. Its choices come from `rng`.
async fn raw_churn_worker(addr: SocketAddr, index: usize, pids: Arc<Pids>, mut rng: Rng) {
    let (mut client, pid) = RawClient::hello(addr, Role::Worker).await;
    let activities: &[&str] = if index % 3 == 0 {
        &[WORK]
    } else {
        &[WORK, RARE]
    };
    let capacity = rng.u32(1..=3);
    client
        .send(Frame::from(registration(
            activities,
            capacity,
            format!("raw-{index}"),
        )))
        .await;
    match next_frame(&mut client).await {
        Some(Frame::Registered(_)) => pids.add(pid),
        other => panic!("raw churn worker {index}: expected Registered, got {other:?}"),
    }
    let budget = rng.u32(1..=8);
    let leave = match index % 3 {
        0 => Leave::Goodbye,
        1 => Leave::DropMidDispatch,
        _ => Leave::DropIdle,
    };
    let (mut sink, mut stream) = client.framed.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let writer = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            let last = matches!(frame, Frame::Goodbye(_));
            if sink.send(frame).await.is_err() || last {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let mut taken = 0;
    let mut replies = JoinSet::new();
    while let Some(Ok(frame)) = stream.next().await {
        match frame {
            Frame::Push(push) => {
                taken += 1;
                if taken < budget {
                    if rng.u8(0..40) == 0 {
                        continue;
                    }
                    let tx = tx.clone();
                    let yields = rng.u32(0..4);
                    replies.spawn(async move {
                        for _ in 0..yields {
                            tokio::task::yield_now().await;
                        }
                        let _ = tx.send(echo(&push));
                    });
                    continue;
                }
                match leave {
                    Leave::DropMidDispatch => break,
                    Leave::Goodbye | Leave::DropIdle => {
                        while replies.join_next().await.is_some() {}
                        let _ = tx.send(echo(&push));
                        if matches!(leave, Leave::Goodbye) {
                            let _ = tx.send(Frame::Goodbye(Goodbye {
                                reason: "churn".into(),
                            }));
                        }
                        // Let the last frames reach the socket before it drops.
                        drop(tx);
                        let _ = writer.await;
                        return;
                    }
                }
            }
            Frame::Ping(ping) => {
                let _ = tx.send(Frame::Pong(Pong { nonce: ping.nonce }));
            }
            _ => {}
        }
    }
    replies.abort_all();
    writer.abort();
}

/// An SDK worker that leaves after `budget` requests by draining or by shutting down abruptly.
/// Its choices come from `rng`; each request's from a generator derived from it and the ordinal.
async fn sdk_churn_worker(addr: SocketAddr, index: usize, pids: Arc<Pids>, mut rng: Rng) {
    let budget = u64::from(rng.u32(1..=8));
    let request_seed = rng.u64(..);
    let handled = Arc::new(AtomicU64::new(0));
    let reached = Arc::new(Notify::new());
    let (count, notify) = (Arc::clone(&handled), Arc::clone(&reached));
    let handler = handler_fn(move |request: lintel::sdk::Request| {
        let (count, notify) = (Arc::clone(&count), Arc::clone(&notify));
        let yields = Rng::with_seed(request_seed ^ request.ordinal).u32(0..4);
        async move {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            if count.fetch_add(1, Ordering::SeqCst) + 1 == budget {
                notify.notify_one();
            }
            ActivityOutcome::Success(request.input)
        }
    });
    let config = support::worker_config(
        addr.to_string(),
        registration(&[WORK, RARE], rng.u32(1..=3), format!("sdk-{index}")),
    );
    let handle: WorkerHandle = Worker::spawn(config, handler);
    within(
        "sdk churn worker registration",
        handle.wait_registered(support::WAIT),
    )
    .await
    .expect("sdk churn worker registered");
    match &*handle.state().borrow() {
        WorkerState::Registered { pid, .. } => pids.add(*pid),
        other => panic!("sdk churn worker {index}: state {other:?}"),
    }
    reached.notified().await;
    if index % 2 == 0 {
        handle.drain(Duration::from_secs(1)).await;
    } else {
        handle.shutdown().await;
    }
}

/// A wire producer: submissions on one connection, outcomes routed back by correlation.
/// An outcome for a correlation nobody waits on (a duplicate) is counted, never dropped silently.
struct Producer {
    tx: mpsc::UnboundedSender<Frame>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<DispatchResult>>>>,
    unexpected: Arc<AtomicUsize>,
    next: AtomicU64,
}

impl Producer {
    async fn connect(addr: SocketAddr) -> Arc<Self> {
        let (client, _) = RawClient::hello(addr, Role::Producer).await;
        let (mut sink, mut stream) = client.framed.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
        tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                if sink.send(frame).await.is_err() {
                    break;
                }
            }
        });
        let waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<DispatchResult>>>> = Arc::default();
        let unexpected = Arc::new(AtomicUsize::new(0));
        let (routes, strays, pongs) = (Arc::clone(&waiting), Arc::clone(&unexpected), tx.clone());
        tokio::spawn(async move {
            while let Some(Ok(frame)) = stream.next().await {
                match frame {
                    Frame::Outcome(outcome) => {
                        let waiter = routes.lock().unwrap().remove(&outcome.correlation);
                        match waiter {
                            Some(waiter) => {
                                let _ = waiter.send(outcome.result);
                            }
                            None => {
                                strays.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                    Frame::Ping(ping) => {
                        let _ = pongs.send(Frame::Pong(Pong { nonce: ping.nonce }));
                    }
                    _ => {
                        strays.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        });
        Arc::new(Self {
            tx,
            waiting,
            unexpected,
            next: AtomicU64::new(1),
        })
    }

    async fn dispatch(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
    ) -> DispatchResult {
        let correlation = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(correlation, tx);
        self.tx
            .send(Frame::from(Submit {
                correlation,
                request,
                wait_for_worker_ms: options.wait_for_worker_ms(),
                reply_timeout_ms: options.reply_timeout_ms(),
                routing: NodeRouting::Any,
                extras: Default::default(),
            }))
            .expect("producer writer");
        rx.await
            .expect("the producer connection closed before an outcome")
    }
}

/// Outcome classes, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    completed: u64,
    worker_lost: u64,
    no_worker: u64,
    timeout: u64,
}

impl Tally {
    fn total(&self) -> u64 {
        self.completed + self.worker_lost + self.no_worker + self.timeout
    }
}

/// Classifies `result` of the request with `ordinal`; a completion must echo that request.
fn classify(ordinal: u64, result: &DispatchResult, tally: &Mutex<Tally>) {
    let mut tally = tally.lock().unwrap();
    match result {
        DispatchResult::Completed(response) => {
            assert_eq!(
                response.ordinal, ordinal,
                "a reply reached the wrong dispatch"
            );
            assert_eq!(
                response.outcome,
                ActivityOutcome::Success(Bytes::from(ordinal.to_string())),
                "a reply carried another dispatch's result"
            );
            tally.completed += 1;
        }
        DispatchResult::WorkerLost { .. } => tally.worker_lost += 1,
        DispatchResult::NoWorker(_) => tally.no_worker += 1,
        DispatchResult::Timeout { .. } => tally.timeout += 1,
        other => panic!("outcome not allowed under churn: {other:?}"),
    }
}

/// A worker that stays for the whole run and echoes every push at once.
async fn steady_worker(
    addr: SocketAddr,
    index: usize,
    pids: Arc<Pids>,
) -> tokio::task::JoinHandle<()> {
    let (mut client, pid) = RawClient::hello(addr, Role::Worker).await;
    client
        .send(Frame::from(registration(
            &[WORK],
            4,
            format!("steady-{index}"),
        )))
        .await;
    match next_frame(&mut client).await {
        Some(Frame::Registered(_)) => pids.add(pid),
        other => panic!("expected Registered, got {other:?}"),
    }
    tokio::spawn(async move {
        while let Some(Ok(frame)) = client.framed.next().await {
            let answer = match frame {
                Frame::Push(push) => echo(&push),
                Frame::Ping(ping) => Frame::Pong(Pong { nonce: ping.nonce }),
                _ => continue,
            };
            if client.framed.send(answer).await.is_err() {
                break;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dispatch_ends_once_and_nothing_leaks_while_workers_churn() {
    let seed = churn_seed();
    eprintln!("churn seed: {seed} (replay with {SEED_VAR}={seed})");
    let _report = SeedReport(seed);
    // Raw workers ignore one push in forty; the slot it holds comes back after a short grace.
    let config = NodeConfig {
        ping_interval_ms: 100,
        max_missed_pings: 20,
        late_reply_grace_ms: 200,
        ..NodeConfig::default()
    };
    let node = TestNode::with_config(config).await;
    let addr = node.addr;
    let pids = Arc::new(Pids::default());

    let mut steady = Vec::new();
    for index in 0..STEADY_WORKERS {
        steady.push(steady_worker(addr, index, Arc::clone(&pids)).await);
    }

    // Churn workers: at most ALIVE at once, each replaced when it leaves.
    let churned = Arc::new(AtomicUsize::new(0));
    let spawner = {
        let (pids, churned) = (Arc::clone(&pids), Arc::clone(&churned));
        tokio::spawn(async move {
            let alive = Arc::new(Semaphore::new(ALIVE));
            let mut workers = JoinSet::new();
            // One generator per worker, forked in index order, so each worker's choices depend
            // only on the seed and its index.
            let mut seeds = Rng::with_seed(seed);
            for index in 0..CHURN_WORKERS {
                let permit = Arc::clone(&alive).acquire_owned().await.expect("permit");
                let (pids, churned) = (Arc::clone(&pids), Arc::clone(&churned));
                let rng = seeds.fork();
                workers.spawn(async move {
                    if index % 4 == 3 {
                        sdk_churn_worker(addr, index, pids, rng).await;
                    } else {
                        raw_churn_worker(addr, index, pids, rng).await;
                    }
                    churned.fetch_add(1, Ordering::SeqCst);
                    drop(permit);
                });
                // Reap as we go so a panicking worker fails the run early.
                while let Some(joined) = workers.try_join_next() {
                    joined.expect("churn worker");
                }
            }
            while let Some(joined) = workers.join_next().await {
                joined.expect("churn worker");
            }
        })
    };

    let mut producers = Vec::new();
    for _ in 0..PRODUCERS {
        producers.push(Producer::connect(addr).await);
    }
    let tally = Arc::new(Mutex::new(Tally::default()));
    let work = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(2))
        .reply_timeout(Duration::from_millis(500));
    let rare = DispatchOptions::default()
        .wait_for_worker(Duration::from_millis(100))
        .reply_timeout(Duration::from_millis(500));

    let submitted = tokio::time::timeout(CHURN_BOUND, async {
        let in_flight = Arc::new(Semaphore::new(CONCURRENCY));
        let mut dispatches = JoinSet::new();
        let mut ordinal = 0u64;
        // At least MIN_DISPATCHES, and on until every churn worker has come and gone.
        while ordinal < MIN_DISPATCHES || !spawner.is_finished() {
            assert!(
                ordinal < 20 * MIN_DISPATCHES,
                "churn workers never finished leaving"
            );
            let permit = Arc::clone(&in_flight)
                .acquire_owned()
                .await
                .expect("permit");
            ordinal += 1;
            let activity = if ordinal % 10 == 0 { RARE } else { WORK };
            let options = if activity == RARE {
                rare.clone()
            } else {
                work.clone()
            };
            let request = DispatchRequest {
                ordinal,
                workflow_id: format!("wf-{ordinal}"),
                ..request("churn", activity, &ordinal.to_string())
            };
            let tally = Arc::clone(&tally);
            if ordinal % 2 == 0 {
                let producer = Arc::clone(&producers[(ordinal as usize / 2) % PRODUCERS]);
                dispatches.spawn(async move {
                    let result = producer.dispatch(request, &options).await;
                    classify(ordinal, &result, &tally);
                    drop(permit);
                });
            } else {
                let dispatcher = Arc::clone(node.node.dispatcher());
                dispatches.spawn(async move {
                    let result = dispatcher.dispatch(request, &options).await;
                    classify(ordinal, &result, &tally);
                    drop(permit);
                });
            }
            while let Some(joined) = dispatches.try_join_next() {
                joined.expect("dispatch task");
            }
        }
        while let Some(joined) = dispatches.join_next().await {
            joined.expect("dispatch task");
        }
        ordinal
    })
    .await
    .expect("the churn run finished within its bound");

    within("the churn workers' spawner", spawner)
        .await
        .expect("every churn worker ran cleanly");
    let tally = *tally.lock().unwrap();
    assert_eq!(
        tally.total(),
        submitted,
        "every dispatch ends in exactly one outcome: {tally:?}"
    );
    // Each worker leaving mid-dispatch holds at least one push: lost, not timed out.
    let dropped_mid_dispatch = (0..CHURN_WORKERS)
        .filter(|index| index % 4 != 3 && index % 3 == 1)
        .count() as u64;
    assert!(
        tally.worker_lost >= dropped_mid_dispatch,
        "{dropped_mid_dispatch} workers dropped mid-dispatch: {tally:?}"
    );
    assert!(
        tally.completed > submitted / 2,
        "most dispatches should complete: {tally:?}"
    );
    assert_eq!(churned.load(Ordering::SeqCst), CHURN_WORKERS);
    for producer in &producers {
        assert_eq!(
            producer.unexpected.load(Ordering::SeqCst),
            0,
            "an outcome arrived twice or unasked"
        );
        assert!(producer.waiting.lock().unwrap().is_empty());
    }
    let counters = node.node.status().counters;
    assert_eq!(counters.submitted, submitted);
    let by_node = Tally {
        completed: counters.completed,
        worker_lost: counters.worker_lost,
        no_worker: counters.no_worker,
        timeout: counters.timed_out,
    };
    assert_eq!(
        by_node, tally,
        "the node's counters agree with what producers saw"
    );
    assert_eq!(
        node.registry().reserved_slots(),
        0,
        "a reserved slot leaked"
    );
    // A dispatch is counted active until just after its outcome is handed over.
    within(
        "every dispatch to leave the node's count",
        node.node.dispatcher().wait_idle(),
    )
    .await;

    // Everyone leaves; every registration is undone exactly once.
    for worker in &steady {
        worker.abort();
    }
    let pids = pids.all();
    assert_eq!(pids.len(), CHURN_WORKERS + STEADY_WORKERS);
    for pid in &pids {
        node.events.wait_unregistered(*pid).await;
    }
    let unregistered_once: BTreeMap<u32, usize> =
        pids.iter().fold(BTreeMap::new(), |mut m, pid| {
            *m.entry(node.events.unregistered(*pid)).or_insert(0) += 1;
            m
        });
    assert_eq!(unregistered_once, BTreeMap::from([(1, pids.len())]));
    assert_eq!(
        node.events.total_registered(),
        node.events.total_unregistered()
    );
    assert_eq!(node.events.total_registered() as usize, pids.len());
    assert_eq!(node.registry().worker_count(), 0);
    assert_eq!(node.registry().reserved_slots(), 0);
    assert_eq!(
        node.registry().keyed_state_len().0,
        0,
        "rotation cursors outlived the workers"
    );

    // The node still serves a fresh worker.
    let fresh = steady_worker(addr, 99, Arc::new(Pids::default())).await;
    let result = within(
        "a dispatch to a fresh worker",
        node.node
            .dispatcher()
            .dispatch(request("churn", WORK, "1"), &DispatchOptions::default()),
    )
    .await;
    classify(1, &result, &Mutex::new(Tally::default()));
    fresh.abort();
    node.shutdown().await;
}
