//! The Rust SDK's worker across a lost link and under blocking handlers, against a real node:
//! a worker holding 64 pushes whose link is reset (or cut while it sends its results) resumes
//! its session and each dispatch completes exactly once; past the grace it registers anew and
//! drops what it held; a heartbeating handler's heartbeats follow it to the new connection; a
//! handler that blocks its thread, `runs_briefly` or not, leaves the worker eligible through
//! several ping timeouts.

use lintel_test_support as support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lintel::dispatch::DispatchOptions;
use lintel::sdk::status::Standing;
use lintel::sdk::{
    ConnectionThread, Handler, Request, Worker, WorkerConfigBuilder, WorkerHandle, WorkerState,
};
use lintel::wire::{ActivityOutcome, DispatchResult};
use lintel::NodeConfig;
use support::faulty::Proxy;
use support::{
    outcome_of, register, request, spawn_dispatch, within, worker_builder, worker_config, TestNode,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Pushes the worker holds when its link goes.
const HELD: usize = 64;

/// A node that selects a worker as soon as it registers and keeps a lost session 10 s.
fn config() -> NodeConfig {
    NodeConfig {
        worker_probation_pings: 0,
        worker_resume_grace_ms: 10_000,
        ..NodeConfig::default()
    }
}

/// Options for a dispatch that waits for a worker and for its reply far longer than a test.
fn patient() -> DispatchOptions {
    DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(20))
        .reply_timeout(Duration::from_secs(60))
}

/// Echoes its input once the gate opens, counting executions per input and handlers started,
/// finished and dropped unfinished.
#[derive(Clone)]
struct Gated {
    gate: watch::Receiver<bool>,
    executions: Arc<Mutex<HashMap<String, u32>>>,
    started: Arc<watch::Sender<usize>>,
    finished: Arc<watch::Sender<usize>>,
    dropped: Arc<watch::Sender<usize>>,
}

/// Counts a handler dropped before it finished.
struct Unfinished(Option<Arc<watch::Sender<usize>>>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(dropped) = self.0.take() {
            dropped.send_modify(|dropped| *dropped += 1);
        }
    }
}

impl Gated {
    fn new() -> (Self, watch::Sender<bool>) {
        let (open, gate) = watch::channel(false);
        let gated = Self {
            gate,
            executions: Arc::default(),
            started: Arc::new(watch::channel(0).0),
            finished: Arc::new(watch::channel(0).0),
            dropped: Arc::new(watch::channel(0).0),
        };
        (gated, open)
    }

    /// Waits until `n` handlers have started.
    async fn started(&self, n: usize) {
        let mut started = self.started.subscribe();
        within(
            "the handlers started",
            started.wait_for(|started| *started >= n),
        )
        .await
        .expect("counted");
    }

    /// Waits until `n` handlers have finished.
    async fn finished(&self, n: usize) {
        let mut finished = self.finished.subscribe();
        within(
            "the handlers finished",
            finished.wait_for(|done| *done >= n),
        )
        .await
        .expect("counted");
    }
}

impl Handler for Gated {
    async fn handle(&self, request: Request) -> ActivityOutcome {
        let input = String::from_utf8_lossy(&request.input).into_owned();
        *self
            .executions
            .lock()
            .expect("counts")
            .entry(input)
            .or_default() += 1;
        self.started.send_modify(|started| *started += 1);
        let mut unfinished = Unfinished(Some(Arc::clone(&self.dropped)));
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
        unfinished.0 = None;
        self.finished.send_modify(|finished| *finished += 1);
        ActivityOutcome::Success(request.input)
    }
}

/// A node configured by `node_config` with a proxy in front, an SDK worker of capacity [`HELD`]
/// registered through it (configured by `worker`), and [`HELD`] dispatches its gated handlers
/// have all started.
async fn holding_with(
    node_config: NodeConfig,
    worker: impl FnOnce(WorkerConfigBuilder) -> WorkerConfigBuilder,
) -> (
    TestNode,
    Proxy,
    WorkerHandle,
    u64,
    Gated,
    watch::Sender<bool>,
    Vec<JoinHandle<DispatchResult>>,
) {
    let node = TestNode::with_config(node_config).await;
    let proxy = Proxy::start(node.addr).await;
    let (gated, open) = Gated::new();
    let config = worker(worker_builder(
        proxy.addr.to_string(),
        register("ns", "echo", HELD as u32),
    ))
    .build()
    .expect("a worker config");
    let worker = Worker::spawn(config, gated.clone());
    let worker_id = within(
        "registered",
        worker.wait_registered(Duration::from_secs(10)),
    )
    .await
    .expect("registered");
    let handles = (0..HELD)
        .map(|i| spawn_dispatch(&node, request("ns", "echo", &i.to_string()), patient()))
        .collect();
    gated.started(HELD).await;
    (node, proxy, worker, worker_id, gated, open, handles)
}

/// [`holding_with`] the node of [`config`] and a worker as the builder makes it.
async fn holding() -> (
    TestNode,
    Proxy,
    WorkerHandle,
    u64,
    Gated,
    watch::Sender<bool>,
    Vec<JoinHandle<DispatchResult>>,
) {
    holding_with(config(), |builder| builder).await
}

/// Each dispatch completed with its own input, each handler ran once, none was lost, and the
/// worker is still the one it registered as.
async fn each_completed_once(
    node: &TestNode,
    worker: &WorkerHandle,
    worker_id: u64,
    gated: &Gated,
    handles: Vec<JoinHandle<DispatchResult>>,
) {
    for (i, handle) in handles.into_iter().enumerate() {
        match outcome_of(handle).await {
            DispatchResult::Completed(response) => assert_eq!(
                response.outcome,
                ActivityOutcome::Success(i.to_string().into()),
                "dispatch {i}"
            ),
            other => panic!("dispatch {i}: expected a completion, got {other:?}"),
        }
    }
    let executions = gated.executions.lock().expect("counts").clone();
    assert_eq!(executions.len(), HELD);
    assert!(
        executions.values().all(|runs| *runs == 1),
        "each handler ran once: {executions:?}"
    );
    let counters = node.node.dispatcher().counters().snapshot();
    assert_eq!(counters.worker_lost, 0);
    assert!(
        matches!(*worker.state().borrow(), WorkerState::Registered { worker_id: id, .. } if id == worker_id),
        "the session resumed: the worker id is the one it registered with"
    );
}

#[tokio::test]
async fn an_sdk_worker_holding_64_pushes_resumes_after_a_reset_and_delivers_each_once() {
    let (node, proxy, worker, worker_id, gated, open, handles) = holding().await;
    proxy.reset();
    // The handlers finish while the worker is away or just back: their results go out on the
    // new connection.
    open.send_replace(true);
    each_completed_once(&node, &worker, worker_id, &gated, handles).await;
    worker.shutdown().await;
}

#[tokio::test]
async fn results_sent_into_a_cut_link_are_delivered_again_on_resume() {
    let (node, proxy, worker, worker_id, gated, open, handles) = holding().await;
    // Bytes stop moving: the results are sent into the cut link and never read.
    proxy.partition();
    open.send_replace(true);
    gated.finished(HELD).await;
    // The cut connections close; the worker resumes on a new one.
    proxy.heal();
    each_completed_once(&node, &worker, worker_id, &gated, handles).await;
    worker.shutdown().await;
}

#[tokio::test]
async fn past_the_grace_the_worker_registers_anew_and_drops_what_it_held() {
    // Pings every 100 ms, a lost worker closed after 3 missed, its session kept 300 ms.
    let node_config = NodeConfig {
        ping_interval_ms: 100,
        max_missed_pings: 3,
        worker_resume_grace_ms: 300,
        ..config()
    };
    let (node, proxy, worker, worker_id, gated, open, handles) =
        holding_with(node_config, |builder| {
            builder.handshake_timeout(Duration::from_millis(500))
        })
        .await;
    // Silent both ways, and no new connection gets through, until the heal.
    proxy.partition();
    for handle in handles {
        let result = outcome_of(handle).await;
        assert!(
            matches!(result, DispatchResult::WorkerLost { .. }),
            "past the grace: {result:?}"
        );
    }
    proxy.heal();
    let mut state = worker.state();
    // Read at once: a watch read guard held on would block the worker's next state.
    let registered = within(
        "the worker registered anew",
        state.wait_for(|state| matches!(state, WorkerState::Registered { worker_id: id, .. } if *id != worker_id)),
    )
    .await
    .is_ok();
    assert!(registered);
    // What it held is dropped: every handler aborted, none run again.
    let mut dropped = gated.dropped.subscribe();
    within(
        "the held handlers dropped",
        dropped.wait_for(|n| *n >= HELD),
    )
    .await
    .expect("counted");
    open.send_replace(true);
    let next = spawn_dispatch(&node, request("ns", "echo", "next"), patient());
    match outcome_of(next).await {
        DispatchResult::Completed(response) => {
            assert_eq!(response.outcome, ActivityOutcome::Success("next".into()));
        }
        other => panic!("expected a completion, got {other:?}"),
    }
    let executions = gated.executions.lock().expect("counts").clone();
    assert!(executions.values().all(|runs| *runs == 1), "{executions:?}");
    assert_eq!(
        *gated.finished.borrow(),
        1,
        "only the new dispatch finished"
    );
    worker.shutdown().await;
}

/// How long a dispatch of the heartbeat test may go without a heartbeat.
const HEARTBEAT: Duration = Duration::from_millis(300);

/// Heartbeats every 50 ms, counting the heartbeats the worker took, until the gate opens.
struct Beating {
    gate: watch::Receiver<bool>,
    beats: Arc<watch::Sender<usize>>,
}

impl Handler for Beating {
    async fn handle(&self, request: Request) -> ActivityOutcome {
        let heartbeat = request.heartbeater();
        let mut gate = self.gate.clone();
        loop {
            if heartbeat.beat("").is_ok() {
                self.beats.send_modify(|beats| *beats += 1);
            }
            // The heartbeat's cadence, not a wait for another task.
            tokio::select! {
                _ = gate.wait_for(|open| *open) => break,
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        ActivityOutcome::Success(request.input)
    }
}

#[tokio::test]
async fn heartbeats_of_a_running_handler_go_out_on_the_resumed_connection() {
    let node = TestNode::with_config(config()).await;
    let proxy = Proxy::start(node.addr).await;
    let (open, gate) = watch::channel(false);
    let beats = Arc::new(watch::channel(0).0);
    let beating = Beating {
        gate,
        beats: Arc::clone(&beats),
    };
    let config = worker_config(proxy.addr.to_string(), register("ns", "beat", 1));
    let worker = Worker::spawn(config, beating);
    within(
        "registered",
        worker.wait_registered(Duration::from_secs(10)),
    )
    .await
    .expect("registered");
    let dispatch = spawn_dispatch(
        &node,
        request("ns", "beat", "beating"),
        patient().heartbeat_timeout(HEARTBEAT),
    );
    let mut taken = beats.subscribe();
    within("heartbeats", taken.wait_for(|n| *n >= 3))
        .await
        .expect("counted");
    proxy.reset();
    // Twenty more heartbeats taken (a few by the lost connection at most): a second, several
    // heartbeat timeouts, most of it on the resumed connection.
    let before = *beats.borrow();
    within(
        "heartbeats after the reset",
        taken.wait_for(|n| *n >= before + 20),
    )
    .await
    .expect("counted");
    open.send_replace(true);
    match outcome_of(dispatch).await {
        DispatchResult::Completed(response) => {
            assert_eq!(response.outcome, ActivityOutcome::Success("beating".into()));
        }
        other => panic!("expected a completion, not a missed heartbeat: {other:?}"),
    }
    assert_eq!(node.node.dispatcher().counters().snapshot().worker_lost, 0);
    worker.shutdown().await;
}

/// A node that pings every 50 ms, finds a worker unreachable after 100 ms without its pong and
/// closes it after 3 missed pings.
fn impatient() -> NodeConfig {
    NodeConfig {
        ping_interval_ms: 50,
        worker_ping_timeout_ms: 100,
        max_missed_pings: 3,
        worker_probation_pings: 1,
        ..NodeConfig::default()
    }
}

/// How long a handler blocks its thread: many ping timeouts of [`impatient`].
const BLOCKED: Duration = Duration::from_millis(1_500);

/// Blocks its thread for [`BLOCKED`], then echoes; says it runs briefly when `brief`.
struct Blocking {
    brief: bool,
    started: Arc<watch::Sender<usize>>,
}

impl Handler for Blocking {
    async fn handle(&self, request: Request) -> ActivityOutcome {
        self.started.send_modify(|started| *started += 1);
        std::thread::sleep(BLOCKED);
        ActivityOutcome::Success(request.input)
    }

    fn runs_briefly(&self) -> bool {
        self.brief
    }
}

/// An application's current-thread runtime on a thread of its own, which its handlers block;
/// the test's runtime (and the node on it) stays free.
struct AppRuntime {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AppRuntime {
    fn start() -> Self {
        let (handle_tx, handle_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            handle_tx.send(runtime.handle().clone()).expect("handle");
            let _ = runtime.block_on(stopped);
        });
        let handle = handle_rx.recv().expect("the app runtime's handle");
        Self {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for AppRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A node pinging as [`impatient`] says and a worker on an [`AppRuntime`], its connection where
/// `thread` says, whose handler (`brief` or not) blocks the app's thread for [`BLOCKED`]: the
/// worker is eligible and the handler of its first dispatch is blocking.
struct BlockedHandler {
    node: TestNode,
    app: AppRuntime,
    worker: WorkerHandle,
    worker_id: u64,
    first: JoinHandle<DispatchResult>,
}

async fn block_a_handler(brief: bool, thread: ConnectionThread) -> BlockedHandler {
    let node = TestNode::with_config(impatient()).await;
    let app = AppRuntime::start();
    let started = Arc::new(watch::channel(0).0);
    let blocking = Blocking {
        brief,
        started: Arc::clone(&started),
    };
    let config = worker_builder(node.addr.to_string(), register("ns", "block", 2))
        .connection_thread(thread)
        .build()
        .expect("a config");
    let worker = {
        let _app = app.handle.enter();
        Worker::spawn(config, blocking)
    };
    let worker_id = within(
        "registered",
        worker.wait_registered(Duration::from_secs(10)),
    )
    .await
    .expect("registered");
    node.wait_registry("the worker eligible", |registry| {
        registry.states().contains(&(worker_id, Standing::Eligible))
    })
    .await;
    let first = spawn_dispatch(&node, request("ns", "block", "first"), patient());
    within(
        "the handler blocking",
        started.subscribe().wait_for(|n| *n >= 1),
    )
    .await
    .expect("counted");
    BlockedHandler {
        node,
        app,
        worker,
        worker_id,
        first,
    }
}

/// Runs one blocking handler (`brief` or not) for [`BLOCKED`] and asserts the worker stayed
/// eligible throughout, its dispatch completed, and a second one was pushed meanwhile.
async fn stays_eligible_while_a_handler_blocks(brief: bool) {
    let BlockedHandler {
        node,
        app: _app,
        worker,
        worker_id,
        first,
    } = block_a_handler(brief, ConnectionThread::Own).await;
    // While the handler blocks the app's thread, the worker answers every ping: it is never
    // out of selection, and a second dispatch is pushed to it.
    let registry = node.registry();
    let watch = async {
        loop {
            let mut seen = registry.changes().epoch();
            let states = registry.states();
            if let Some((_, standing)) = states.iter().find(|(id, _)| *id == worker_id) {
                assert_eq!(*standing, Standing::Eligible, "while the handler blocks");
            } else {
                panic!("the worker left the registry while its handler blocked");
            }
            registry.changes().changed(&mut seen).await;
        }
    };
    let second = spawn_dispatch(&node, request("ns", "block", "second"), patient());
    let results = async { (outcome_of(first).await, outcome_of(second).await) };
    let (first, second) = tokio::select! {
        results = results => results,
        () = watch => unreachable!("the watch loops until the results are in"),
    };
    for (result, input) in [(first, "first"), (second, "second")] {
        match result {
            DispatchResult::Completed(response) => {
                assert_eq!(response.outcome, ActivityOutcome::Success(input.into()));
            }
            other => panic!("{input}: expected a completion, got {other:?}"),
        }
    }
    assert_eq!(node.node.dispatcher().counters().snapshot().worker_lost, 0);
    worker.shutdown().await;
}

#[tokio::test]
async fn a_handler_blocking_its_thread_for_several_ping_timeouts_leaves_the_worker_eligible() {
    stays_eligible_while_a_handler_blocks(false).await;
}

#[tokio::test]
async fn a_brief_handler_blocking_its_thread_leaves_the_worker_eligible() {
    stays_eligible_while_a_handler_blocks(true).await;
}

#[tokio::test]
async fn a_connection_sharing_the_handlers_thread_goes_unanswered_while_a_handler_blocks_it() {
    let BlockedHandler {
        node,
        app: _app,
        worker,
        worker_id,
        first: _first,
    } = block_a_handler(false, ConnectionThread::Shared).await;
    let blocked_at = std::time::Instant::now();
    // The blocked thread is the connection's too: its pongs stop, and the node takes the
    // worker out of selection before the handler ends.
    node.wait_registry("the worker out of selection", |registry| {
        !registry.states().contains(&(worker_id, Standing::Eligible))
    })
    .await;
    assert!(
        blocked_at.elapsed() < BLOCKED,
        "out of selection only after the handler ended"
    );
    drop(worker);
}
