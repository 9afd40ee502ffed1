//! The SDKs against a scripted fake node on `127.0.0.1:0`.
//!
//! The fake node speaks raw frames through `Framed<TcpStream, FrameCodec>`, so every test states
//! exactly what crosses the wire. Waits are on events, bounded by `tokio::time::timeout`.

use lintel_test_support as support;

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::dispatch::DispatchOptions;
use lintel::sdk::status::Status;
use lintel::sdk::{
    Backoff, Client, ClientConfig, ClientError, ConnectError, Dispatch, Handler, InvalidDispatch,
    Worker, WorkerConfig, WorkerConfigBuilder, WorkerError, WorkerHandle, WorkerState,
};
use lintel::wire::{
    feature, ActivityOutcome, Cancel, Counters, DispatchRequest, DispatchResponse, DispatchResult,
    Drain, Drained, Frame, FrameCodec, FrameKind, Header, HeaderLimits, Hello, Limits, NodeStatus,
    OutcomeFrame, Ping, Pong, Push, Refusal, RefusalCode, Register, Registered, Reply,
    RequestExtras, Role, ServedOutcome, StatusDocument, StatusReport, Submit, Welcome,
    PROTOCOL_VERSION,
};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::timeout;
use tokio_util::codec::Framed;

use support::header_echo;

/// Longest any single expected event may take.
const WAIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// The fake node.

struct FakeNode {
    listener: TcpListener,
}

impl FakeNode {
    async fn bind() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self { listener }
    }

    fn addr(&self) -> String {
        self.listener.local_addr().unwrap().to_string()
    }

    async fn accept(&self) -> Peer {
        let (stream, _) = timeout(WAIT, self.listener.accept())
            .await
            .expect("no connection arrived")
            .unwrap();
        Peer {
            framed: Framed::new(stream, FrameCodec::default()),
        }
    }
}

struct Peer {
    framed: Framed<TcpStream, FrameCodec>,
}

impl Peer {
    /// The next frame, or `None` at a clean end of stream.
    async fn recv_or_eof(&mut self) -> Option<Frame> {
        timeout(WAIT, self.framed.next())
            .await
            .expect("no frame arrived")
            .map(|frame| frame.unwrap())
    }

    async fn recv(&mut self) -> Frame {
        self.recv_or_eof().await.expect("connection closed")
    }

    async fn send(&mut self, frame: Frame) {
        self.framed.send(frame).await.unwrap();
    }

    /// The kind the frame received last came as.
    fn last_kind(&self) -> Option<FrameKind> {
        self.framed.codec().last_kind()
    }

    /// Expects `Hello` and answers as a version-2 node: `Welcome` with `limits`.
    async fn welcome_with(&mut self, pid: u64, limits: Limits) -> Hello {
        let Frame::Hello(hello) = self.recv().await else {
            panic!("expected Hello");
        };
        assert_eq!(
            hello.max_version, PROTOCOL_VERSION,
            "the SDK offers the latest"
        );
        self.framed.codec_mut().set_version(2);
        self.send(Frame::from(Welcome {
            version: 2,
            node_id: "fake-node".to_owned(),
            pid,
            limits,
            header_limits: None,
            features: Vec::new(),
        }))
        .await;
        hello
    }

    /// Expects `Hello` and answers as a version-3 node listing `features`.
    async fn welcome3(&mut self, pid: u64, features: &[&str]) -> Hello {
        let Frame::Hello(hello) = self.recv().await else {
            panic!("expected Hello");
        };
        self.framed.codec_mut().set_version(3);
        self.send(Frame::from(Welcome {
            version: 3,
            node_id: "fake-node".to_owned(),
            pid,
            limits: limits(),
            header_limits: Some(HeaderLimits::default()),
            features: features.iter().map(|&feature| feature.to_owned()).collect(),
        }))
        .await;
        hello
    }

    async fn welcome(&mut self, pid: u64) -> Hello {
        self.welcome_with(pid, limits()).await
    }

    /// Expects `Register` and admits it as `worker_id`.
    async fn admit(&mut self, worker_id: u64) -> Register {
        let Frame::Register(register) = self.recv().await else {
            panic!("expected Register");
        };
        self.send(Frame::Registered(Registered { worker_id })).await;
        *register
    }

    async fn push(&mut self, correlation: u64, request: DispatchRequest) {
        self.send(Frame::from(Push {
            correlation,
            request,
            extras: RequestExtras::default(),
        }))
        .await;
    }

    async fn recv_reply(&mut self) -> Reply {
        match self.recv().await {
            Frame::Reply(reply) => reply,
            other => panic!("expected Reply, got {other:?}"),
        }
    }

    async fn recv_submit(&mut self) -> Submit {
        match self.recv().await {
            Frame::Submit(submit) => *submit,
            other => panic!("expected Submit, got {other:?}"),
        }
    }
}

/// Limits with keep-alive pings off, so no SDK ping interleaves with scripted frames.
fn limits() -> Limits {
    Limits {
        max_frame_len: 4 * 1024 * 1024,
        max_in_flight: 1024,
        ping_interval_ms: 0,
        max_missed_pings: 3,
        max_name_len: 256,
        max_set_len: 64,
    }
}

fn request(activity_type: &str, workflow_id: &str, input: &'static [u8]) -> DispatchRequest {
    DispatchRequest {
        namespace: "remote".to_owned(),
        task_queue: "gpu".to_owned(),
        activity_type: activity_type.to_owned(),
        node: None,
        workflow_id: workflow_id.to_owned(),
        ordinal: 3,
        run_id: Some(format!("run-of-{workflow_id}")),
        attempt: 1,
        input: Bytes::from_static(input),
        deadline_unix_ms: None,
    }
}

// ---------------------------------------------------------------------------------------------
// A handler whose every step the test can watch and steer.

/// Activity types: `echo` answers its input, `block` waits for a permit from `release`,
/// `panic` panics.
struct Probe {
    calls: AtomicUsize,
    running: AtomicUsize,
    peak: AtomicUsize,
    release: Semaphore,
    started: mpsc::UnboundedSender<String>,
    dropped: mpsc::UnboundedSender<String>,
}

struct ProbeEvents {
    started: mpsc::UnboundedReceiver<String>,
    dropped: mpsc::UnboundedReceiver<String>,
}

impl ProbeEvents {
    async fn started(&mut self) -> String {
        timeout(WAIT, self.started.recv()).await.unwrap().unwrap()
    }

    /// The workflow id of the next handler dropped before it finished.
    async fn dropped(&mut self) -> String {
        timeout(WAIT, self.dropped.recv()).await.unwrap().unwrap()
    }
}

/// The probe, and whether it says it runs briefly (polled first on the connection's task).
#[derive(Clone)]
struct ProbeHandler(Arc<Probe>, bool);

fn probe() -> (ProbeHandler, Arc<Probe>, ProbeEvents) {
    let (started_tx, started) = mpsc::unbounded_channel();
    let (dropped_tx, dropped) = mpsc::unbounded_channel();
    let probe = Arc::new(Probe {
        calls: AtomicUsize::new(0),
        running: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        release: Semaphore::new(0),
        started: started_tx,
        dropped: dropped_tx,
    });
    (
        ProbeHandler(Arc::clone(&probe), false),
        probe,
        ProbeEvents { started, dropped },
    )
}

/// Counts a running handler; reports a drop that happens before `finish`.
struct Running {
    probe: Arc<Probe>,
    workflow_id: String,
    finished: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.probe.running.fetch_sub(1, Ordering::SeqCst);
        if !self.finished {
            let _ = self.probe.dropped.send(self.workflow_id.clone());
        }
    }
}

impl Handler for ProbeHandler {
    fn runs_briefly(&self) -> bool {
        self.1
    }

    fn handle(
        &self,
        request: lintel::sdk::Request,
    ) -> impl std::future::Future<Output = ActivityOutcome> + Send {
        let probe = Arc::clone(&self.0);
        async move {
            probe.calls.fetch_add(1, Ordering::SeqCst);
            match &*request.activity_type {
                "echo" => ActivityOutcome::Success(request.input),
                "block" => {
                    let now = probe.running.fetch_add(1, Ordering::SeqCst) + 1;
                    probe.peak.fetch_max(now, Ordering::SeqCst);
                    let mut running = Running {
                        probe: Arc::clone(&probe),
                        workflow_id: request.workflow_id.to_string(),
                        finished: false,
                    };
                    let _ = probe.started.send(request.workflow_id.to_string());
                    probe.release.acquire().await.unwrap().forget();
                    running.finished = true;
                    ActivityOutcome::Success(Bytes::from_static(b"released"))
                }
                "panic" => panic!("the handler gave up"),
                other => ActivityOutcome::Failure {
                    message: format!("unknown activity {other}"),
                    retryable: false,
                },
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Worker set-up.

fn registration(max_concurrency: u32) -> Register {
    Register {
        namespaces: vec!["remote".to_owned(), "local".to_owned()],
        task_queue: "gpu".to_owned(),
        node: Some("box-7".to_owned()),
        activity_types: vec!["echo".to_owned(), "block".to_owned(), "panic".to_owned()],
        identity: "worker-under-test".to_owned(),
        max_concurrency,
        ..Default::default()
    }
}

fn worker_builder(node: &FakeNode, max_concurrency: u32) -> WorkerConfigBuilder {
    support::worker_builder(node.addr(), registration(max_concurrency))
        .auth_token("secret")
        .handshake_timeout(WAIT)
        .reconnect(Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(50),
        })
}

fn worker_config(node: &FakeNode, max_concurrency: u32) -> WorkerConfig {
    worker_builder(node, max_concurrency)
        .build()
        .expect("a worker config")
}

type RegisteredProbe = (FakeNode, Peer, WorkerHandle, Arc<Probe>, ProbeEvents);

/// A worker registered with the fake node as worker 1 on pid 100.
async fn registered_worker(max_concurrency: u32) -> RegisteredProbe {
    registered_probe(max_concurrency, false).await
}

/// As [`registered_worker`], with a handler that says it runs briefly.
async fn registered_brief_worker(max_concurrency: u32) -> RegisteredProbe {
    registered_probe(max_concurrency, true).await
}

async fn registered_probe(max_concurrency: u32, brief: bool) -> RegisteredProbe {
    let node = FakeNode::bind().await;
    let (mut handler, probe, events) = probe();
    handler.1 = brief;
    let worker = Worker::spawn(worker_config(&node, max_concurrency), handler);
    let mut peer = node.accept().await;
    peer.welcome(100).await;
    peer.admit(1).await;
    assert_eq!(worker.wait_registered(WAIT).await, Ok(1));
    (node, peer, worker, probe, events)
}

async fn wait_for_state(worker: &WorkerHandle, expected: WorkerState) {
    let mut state = worker.state();
    timeout(WAIT, state.wait_for(|state| *state == expected))
        .await
        .unwrap_or_else(|_| panic!("never reached {expected:?}"))
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Worker behaviours.

#[tokio::test]
async fn a_worker_handshakes_and_registers_with_its_stated_fields() {
    let node = FakeNode::bind().await;
    let (handler, _probe, _events) = probe();
    let worker = Worker::spawn(worker_config(&node, 4), handler);
    let mut peer = node.accept().await;

    let hello = peer.welcome(100).await;
    assert_eq!(
        hello,
        Hello {
            min_version: 1,
            max_version: PROTOCOL_VERSION,
            role: Role::Worker,
            name: "worker-under-test".to_owned(),
            auth_token: Some("secret".to_owned()),
        }
    );
    let register = peer.admit(42).await;
    assert_eq!(register, registration(4));

    assert_eq!(worker.wait_registered(WAIT).await, Ok(42));
    assert_eq!(
        *worker.state().borrow(),
        WorkerState::Registered {
            worker_id: 42,
            pid: 100
        }
    );
}

#[tokio::test]
async fn a_push_is_answered_with_the_same_correlation_and_echoed_ids() {
    let (_node, mut peer, _worker, _probe, _events) = registered_worker(4).await;

    peer.push(7, request("echo", "wf-1", b"hello")).await;

    assert_eq!(
        peer.recv_reply().await,
        Reply {
            correlation: 7,
            response: DispatchResponse {
                workflow_id: "wf-1".to_owned(),
                ordinal: 3,
                run_id: Some("run-of-wf-1".to_owned()),
                outcome: ActivityOutcome::Success(Bytes::from_static(b"hello")),
            },
        }
    );
}

#[tokio::test]
async fn the_runtime_answers_a_ping_while_every_handler_is_busy() {
    let (_node, mut peer, _worker, probe, mut events) = registered_worker(1).await;
    peer.push(1, request("block", "wf-busy", b"")).await;
    events.started().await;

    peer.send(Frame::Ping(Ping { nonce: 99 })).await;

    assert_eq!(peer.recv().await, Frame::Pong(Pong { nonce: 99 }));
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1, "only the push ran");
}

#[tokio::test]
async fn a_cancelled_push_is_aborted_and_answered_at_once_so_its_slot_frees() {
    let (_node, mut peer, _worker, _probe, mut events) = registered_worker(4).await;
    peer.push(1, request("block", "wf-cancelled", b"")).await;
    assert_eq!(events.started().await, "wf-cancelled");

    peer.send(Frame::Cancel(Cancel { correlation: 1 })).await;
    assert_eq!(
        events.dropped().await,
        "wf-cancelled",
        "the handler was aborted"
    );
    let stopped = peer.recv_reply().await;
    assert_eq!(stopped.correlation, 1, "the worker lets go of the push");
    assert!(matches!(
        stopped.response.outcome,
        ActivityOutcome::Failure {
            retryable: false,
            ..
        }
    ));

    peer.push(2, request("echo", "wf-next", b"next")).await;
    let reply = peer.recv_reply().await;
    assert_eq!(reply.correlation, 2, "the next frame answers the next push");
    assert_eq!(reply.response.workflow_id, "wf-next");
}

#[tokio::test]
async fn a_worker_whose_connection_drops_reconnects_and_registers_again() {
    let (node, peer, worker, _probe, _events) = registered_worker(4).await;

    drop(peer);

    let mut peer = node.accept().await;
    let hello = peer.welcome(101).await;
    assert_eq!(hello.role, Role::Worker);
    assert_eq!(peer.admit(2).await, registration(4));
    wait_for_state(
        &worker,
        WorkerState::Registered {
            worker_id: 2,
            pid: 101,
        },
    )
    .await;

    peer.push(5, request("echo", "wf-after", b"again")).await;
    assert_eq!(peer.recv_reply().await.correlation, 5);
}

#[tokio::test]
async fn a_node_drain_finishes_in_flight_work_then_says_drained_and_goodbye() {
    let (node, mut peer, worker, probe, mut events) = registered_worker(4).await;
    peer.push(1, request("block", "wf-in-flight", b"")).await;
    events.started().await;

    peer.send(Frame::Drain(Drain { grace_ms: 60_000 })).await;
    wait_for_state(&worker, WorkerState::Draining { worker_id: 1 }).await;
    probe.release.add_permits(1);

    assert_eq!(peer.recv_reply().await.correlation, 1);
    assert_eq!(peer.recv().await, Frame::Drained(Drained { completed: 1 }));
    assert!(matches!(peer.recv().await, Frame::Goodbye(_)));
    assert_eq!(peer.recv_or_eof().await, None, "the worker closed");

    let mut peer = node.accept().await;
    peer.welcome(101).await;
    peer.admit(2).await;
    assert_eq!(worker.wait_registered(WAIT).await, Ok(2), "it came back");
}

#[tokio::test]
async fn a_node_drain_aborts_what_outlives_the_grace() {
    let (_node, mut peer, _worker, _probe, mut events) = registered_worker(4).await;
    peer.push(1, request("block", "wf-slow", b"")).await;
    events.started().await;

    peer.send(Frame::Drain(Drain { grace_ms: 0 })).await;

    assert_eq!(events.dropped().await, "wf-slow");
    assert_eq!(peer.recv().await, Frame::Drained(Drained { completed: 0 }));
    assert!(matches!(peer.recv().await, Frame::Goodbye(_)));
}

#[tokio::test]
async fn no_more_than_max_concurrency_handlers_run_at_once() {
    let (_node, mut peer, _worker, probe, mut events) = registered_worker(2).await;
    for correlation in 1..=2 {
        peer.push(
            correlation,
            request("block", &format!("wf-{correlation}"), b""),
        )
        .await;
    }
    events.started().await;
    events.started().await;

    // A misbehaving node pushes past the stated capacity.
    peer.push(3, request("block", "wf-3", b"")).await;
    let refused = peer.recv_reply().await;
    assert_eq!(refused.correlation, 3);
    assert!(matches!(
        refused.response.outcome,
        ActivityOutcome::Failure {
            retryable: true,
            ..
        }
    ));

    probe.release.add_permits(2);
    let mut done = [
        peer.recv_reply().await.correlation,
        peer.recv_reply().await.correlation,
    ];
    done.sort_unstable();
    assert_eq!(done, [1, 2]);
    assert_eq!(probe.peak.load(Ordering::SeqCst), 2);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 2, "the third never ran");
}

#[tokio::test]
async fn a_capacity_change_reaches_the_node_and_the_local_limit() {
    let (_node, mut peer, worker, probe, mut events) = registered_worker(1).await;

    worker.set_capacity(NonZeroU32::new(2).unwrap()).unwrap();
    assert_eq!(
        peer.recv().await,
        Frame::CapacityUpdate(lintel::wire::CapacityUpdate { max_concurrency: 2 })
    );
    peer.push(1, request("block", "wf-1", b"")).await;
    peer.push(2, request("block", "wf-2", b"")).await;
    events.started().await;
    events.started().await;
    assert_eq!(probe.peak.load(Ordering::SeqCst), 2);

    worker.set_capacity(NonZeroU32::new(1).unwrap()).unwrap();
    assert_eq!(
        peer.recv().await,
        Frame::CapacityUpdate(lintel::wire::CapacityUpdate { max_concurrency: 1 })
    );
    peer.push(3, request("block", "wf-3", b"")).await;
    let refused = peer.recv_reply().await;
    assert_eq!(refused.correlation, 3, "two in flight exceed the new limit");
}

#[tokio::test]
async fn a_self_drain_finishes_in_flight_work_and_does_not_reconnect() {
    let (_node, mut peer, worker, probe, mut events) = registered_worker(4).await;
    peer.push(1, request("block", "wf-in-flight", b"")).await;
    events.started().await;

    let node_side = async {
        assert_eq!(peer.recv().await, Frame::Drain(Drain { grace_ms: 60_000 }));
        probe.release.add_permits(1);
        assert_eq!(peer.recv_reply().await.correlation, 1);
        assert_eq!(peer.recv().await, Frame::Drained(Drained { completed: 1 }));
        assert!(matches!(peer.recv().await, Frame::Goodbye(_)));
        assert_eq!(peer.recv_or_eof().await, None);
    };
    let ((), ()) = timeout(
        WAIT,
        futures_util::future::join(worker.drain(Duration::from_secs(60)), node_side),
    )
    .await
    .unwrap();

    assert_eq!(*worker.state().borrow(), WorkerState::Stopped);
}

#[tokio::test]
async fn a_refused_registration_is_final() {
    let node = FakeNode::bind().await;
    let (handler, _probe, _events) = probe();
    let worker = Worker::spawn(worker_config(&node, 4), handler);
    let mut peer = node.accept().await;
    peer.welcome(100).await;
    let Frame::Register(_) = peer.recv().await else {
        panic!("expected Register");
    };
    let refusal = Refusal {
        code: RefusalCode::EmptyActivityTypes,
        reason: "no activity types".to_owned(),
    };
    peer.send(Frame::RegisterRefused(refusal.clone())).await;

    assert_eq!(
        worker.wait_registered(WAIT).await,
        Err(WorkerError::Refused(refusal.clone()))
    );
    timeout(WAIT, worker.stopped()).await.unwrap();
    assert_eq!(*worker.state().borrow(), WorkerState::Refused(refusal));
}

#[tokio::test]
async fn a_brief_handler_that_must_wait_moves_to_its_own_task_and_the_connection_goes_on() {
    let (_node, mut peer, _worker, probe, mut events) = registered_brief_worker(4).await;
    peer.push(1, request("block", "wf-waits", b"")).await;
    assert_eq!(events.started().await, "wf-waits");

    peer.push(2, request("echo", "wf-quick", b"quick")).await;
    let quick = peer.recv_reply().await;
    assert_eq!(quick.correlation, 2, "the waiting handler holds nothing up");
    assert_eq!(
        quick.response.outcome,
        ActivityOutcome::Success(Bytes::from_static(b"quick"))
    );

    probe.release.add_permits(1);
    let waited = peer.recv_reply().await;
    assert_eq!(waited.correlation, 1);
    assert_eq!(
        waited.response.outcome,
        ActivityOutcome::Success(Bytes::from_static(b"released"))
    );
}

#[tokio::test]
async fn a_cancel_aborts_a_brief_handler_that_waits() {
    let (_node, mut peer, _worker, _probe, mut events) = registered_brief_worker(4).await;
    peer.push(1, request("block", "wf-cancelled", b"")).await;
    assert_eq!(events.started().await, "wf-cancelled");

    peer.send(Frame::Cancel(Cancel { correlation: 1 })).await;

    assert_eq!(events.dropped().await, "wf-cancelled");
    assert_eq!(
        peer.recv_reply().await.correlation,
        1,
        "the cancel is answered"
    );
    peer.push(2, request("echo", "wf-next", b"next")).await;
    assert_eq!(peer.recv_reply().await.correlation, 2);
}

#[tokio::test]
async fn a_panicking_handler_becomes_a_failure_reply_whether_brief_or_not() {
    for brief in [false, true] {
        let (_node, mut peer, _worker, _probe, _events) = registered_probe(4, brief).await;

        peer.push(1, request("panic", "wf-panic", b"")).await;

        let reply = peer.recv_reply().await;
        assert_eq!(reply.correlation, 1);
        let ActivityOutcome::Failure { message, retryable } = reply.response.outcome else {
            panic!("expected a failure (brief: {brief})");
        };
        assert!(message.contains("the handler gave up"), "{message}");
        assert!(!retryable);
    }
}

#[tokio::test]
async fn a_result_too_large_for_the_node_becomes_a_failure_reply() {
    let node = FakeNode::bind().await;
    let (handler, _probe, _events) = probe();
    let _worker = Worker::spawn(worker_config(&node, 4), handler);
    let mut peer = node.accept().await;
    peer.welcome_with(
        100,
        Limits {
            max_frame_len: 1024,
            ..limits()
        },
    )
    .await;
    peer.admit(1).await;

    peer.push(1, request("echo", "wf-big", &[7u8; 4096])).await;

    let reply = peer.recv_reply().await;
    assert_eq!(reply.correlation, 1);
    assert!(matches!(
        reply.response.outcome,
        ActivityOutcome::Failure {
            retryable: false,
            ..
        }
    ));
}

#[tokio::test]
async fn shutdown_says_goodbye_closes_and_aborts_handlers() {
    let (_node, mut peer, worker, _probe, mut events) = registered_worker(4).await;
    peer.push(1, request("block", "wf-running", b"")).await;
    events.started().await;

    timeout(WAIT, worker.shutdown()).await.unwrap();

    // A goodbye, so a node keeps no session for a resume that will not come.
    assert!(matches!(peer.recv_or_eof().await, Some(Frame::Goodbye(_))));
    assert_eq!(peer.recv_or_eof().await, None);
    assert_eq!(events.dropped().await, "wf-running");
    assert_eq!(*worker.state().borrow(), WorkerState::Stopped);
}

// ---------------------------------------------------------------------------------------------
// Producer client behaviours.

async fn connected_client() -> (FakeNode, Peer, Client) {
    let node = FakeNode::bind().await;
    let config = {
        let mut config = ClientConfig::default();
        config.name = "producer-under-test".to_owned();
        config.handshake_timeout = WAIT;
        config
    };
    let (client, peer) = tokio::join!(Client::connect(node.addr(), config), async {
        let mut peer = node.accept().await;
        let hello = peer.welcome(200).await;
        assert_eq!(hello.role, Role::Producer);
        assert_eq!(hello.name, "producer-under-test");
        peer
    });
    (node, peer, client.unwrap())
}

fn completed(submit: &Submit) -> Frame {
    Frame::Outcome(OutcomeFrame {
        correlation: submit.correlation,
        result: DispatchResult::Completed(DispatchResponse {
            workflow_id: submit.request.workflow_id.clone(),
            ordinal: submit.request.ordinal,
            run_id: submit.request.run_id.clone(),
            outcome: ActivityOutcome::Success(submit.request.input.clone()),
        }),
    })
}

#[tokio::test]
async fn concurrent_dispatches_are_correlated_even_when_answered_out_of_order() {
    let (_node, mut peer, client) = connected_client().await;
    assert_eq!(client.node_info().pid, 200);
    let inputs: [&'static [u8]; 3] = [b"zero", b"one", b"two"];
    let dispatches: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            let client = client.clone();
            let request = request("echo", &format!("wf-{index}"), input);
            tokio::spawn(async move {
                client
                    .dispatch(&support::dispatch_of(request), &DispatchOptions::default())
                    .await
            })
        })
        .collect();

    let mut submits = Vec::new();
    for _ in 0..3 {
        submits.push(peer.recv_submit().await);
    }
    for submit in submits.iter().rev() {
        peer.send(completed(submit)).await;
    }

    for (index, dispatch) in dispatches.into_iter().enumerate() {
        let result = timeout(WAIT, dispatch).await.unwrap().unwrap().unwrap();
        let DispatchResult::Completed(response) = result else {
            panic!("expected Completed, got {result:?}");
        };
        assert_eq!(response.workflow_id, format!("wf-{index}"));
        assert_eq!(
            response.outcome,
            ActivityOutcome::Success(Bytes::from_static(inputs[index]))
        );
    }
}

#[tokio::test]
async fn submissions_carry_the_dispatch_options() {
    let (_node, mut peer, client) = connected_client().await;
    let options = DispatchOptions::default()
        .prefer(["box-7"])
        .wait_for_worker(Duration::from_millis(1500))
        .reply_timeout(Duration::from_secs(2));
    let dispatch = tokio::spawn({
        let client = client.clone();
        let options = options.clone();
        async move {
            client
                .dispatch(&support::dispatch_of(request("echo", "wf", b"")), &options)
                .await
        }
    });

    let submit = peer.recv_submit().await;
    assert_eq!(&submit.routing, options.wire_routing());
    assert_eq!(submit.wait_for_worker_ms, Some(1500));
    assert_eq!(submit.reply_timeout_ms, Some(2000));
    assert_eq!(submit.request, request("echo", "wf", b""));
    peer.send(completed(&submit)).await;
    assert!(timeout(WAIT, dispatch).await.unwrap().unwrap().is_ok());
}

#[tokio::test]
async fn a_dropped_connection_fails_every_pending_dispatch_as_lost_after_it_ran_promptly() {
    let (_node, mut peer, client) = connected_client().await;
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(60))
        .reply_timeout(Duration::from_secs(60));
    let dispatches: Vec<_> = (0..3)
        .map(|index| {
            let client = client.clone();
            let options = options.clone();
            let request = request("echo", &format!("wf-{index}"), b"");
            tokio::spawn(async move {
                client
                    .dispatch(&support::dispatch_of(request), &options)
                    .await
            })
        })
        .collect();
    for _ in 0..3 {
        peer.recv_submit().await;
    }

    drop(peer);

    for dispatch in dispatches {
        let result = timeout(Duration::from_secs(1), dispatch)
            .await
            .expect("a pending dispatch outlived its connection")
            .unwrap();
        assert_eq!(
            result,
            Err(ClientError::ConnectionLost { may_have_run: true })
        );
    }
    timeout(WAIT, client.closed()).await.unwrap();
    assert_eq!(
        client
            .dispatch(
                &support::dispatch_of(request("echo", "wf-late", b"")),
                &options
            )
            .await,
        Err(ClientError::ConnectionLost {
            may_have_run: false
        })
    );
}

/// Submits one dispatch through `client`, has the fake node read it and write `bytes` in its
/// place, raw, then close when `close` (else it stays open and silent); returns how the
/// dispatch ended, which must be well within `WAIT`.
async fn answered_with_raw_bytes(
    mut peer: Peer,
    client: &Client,
    bytes: &[u8],
    close: bool,
) -> Result<(), ClientError> {
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(60))
        .reply_timeout(Duration::from_secs(60));
    let dispatch = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .submit(
                    &support::dispatch_of(request("echo", "wf-raw", b"")),
                    &options,
                )
                .await
                .map(drop)
        })
    };
    peer.recv_submit().await;
    let stream = peer.framed.get_mut();
    stream.write_all(bytes).await.unwrap();
    stream.flush().await.unwrap();
    let held_open = if close {
        drop(peer);
        None
    } else {
        Some(peer)
    };
    let ended = timeout(WAIT, dispatch)
        .await
        .expect("the dispatch outlived bytes it cannot read")
        .unwrap();
    drop(held_open);
    ended
}

#[tokio::test]
async fn a_node_closing_in_the_middle_of_a_frame_ends_the_dispatch_as_lost() {
    let (_node, peer, client) = connected_client().await;
    // A length prefix of 20, then 5 of those bytes, then the end of the stream.
    let cut = [0, 0, 0, 20, 24, 1, 1, b'n', 0];
    let ended = answered_with_raw_bytes(peer, &client, &cut, true).await;
    assert_eq!(
        ended,
        Err(ClientError::ConnectionLost { may_have_run: true })
    );
}

#[tokio::test]
async fn a_frame_longer_than_the_limit_ends_the_connection_without_waiting_for_its_body() {
    let (_node, peer, client) = connected_client().await;
    // A prefix announcing 4 GiB less one byte, on a connection that stays open: refused from
    // the prefix, its body neither awaited nor allocated.
    let oversize = [0xff, 0xff, 0xff, 0xff, 24];
    let ended = answered_with_raw_bytes(peer, &client, &oversize, false).await;
    assert_eq!(
        ended,
        Err(ClientError::ConnectionLost { may_have_run: true })
    );
}

#[tokio::test]
async fn an_outcome_variant_from_a_newer_node_ends_the_connection_as_lost() {
    let (_node, peer, client) = connected_client().await;
    // `ServedOutcome` (kind 24) for correlation 1, served by "n", with result variant 99: a
    // variant no version this client speaks has. The connection stays open: the client ends
    // it because it cannot read the frame.
    let body = [24, 1, 1, b'n', 99];
    let mut frame = vec![0, 0, 0, body.len() as u8];
    frame.extend_from_slice(&body);
    let ended = answered_with_raw_bytes(peer, &client, &frame, false).await;
    assert_eq!(
        ended,
        Err(ClientError::ConnectionLost { may_have_run: true })
    );
}

#[tokio::test]
async fn a_submission_still_queued_when_the_connection_drops_is_lost_without_having_run() {
    let (_node, mut peer, client) = connected_client().await;
    let options = DispatchOptions::default();
    let written = tokio::spawn({
        let client = client.clone();
        let options = options.clone();
        async move {
            client
                .dispatch(
                    &support::dispatch_of(request("echo", "wf-read", b"")),
                    &options,
                )
                .await
        }
    });
    peer.recv_submit().await;
    // The node reads no more: 12 MiB of submissions fill the socket's buffers on both sides,
    // and the last, small one waits behind them in the client's queue.
    let blocking: Vec<_> = (0..4)
        .map(|index| {
            let client = client.clone();
            let options = options.clone();
            tokio::spawn(async move {
                let mut request = request("echo", &format!("wf-big-{index}"), b"");
                request.input = Bytes::from(vec![7u8; 3 * 1024 * 1024]);
                client
                    .dispatch(&support::dispatch_of(request), &options)
                    .await
            })
        })
        .collect();
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
    let queued = support::dispatch_of(request("echo", "wf-queued", b""));
    let mut queued = Box::pin(client.dispatch(&queued, &options));
    std::future::poll_fn(|cx| {
        assert!(std::future::Future::poll(queued.as_mut(), cx).is_pending());
        std::task::Poll::Ready(())
    })
    .await;

    drop(peer);

    assert_eq!(
        timeout(WAIT, queued).await.unwrap(),
        Err(ClientError::ConnectionLost {
            may_have_run: false
        })
    );
    assert_eq!(
        timeout(WAIT, written).await.unwrap().unwrap(),
        Err(ClientError::ConnectionLost { may_have_run: true })
    );
    for big in blocking {
        let result = timeout(WAIT, big).await.unwrap().unwrap();
        assert!(
            matches!(result, Err(ClientError::ConnectionLost { .. })),
            "{result:?}"
        );
    }
}

#[tokio::test]
async fn dropping_a_dispatch_future_cancels_it_on_the_node() {
    let (_node, mut peer, client) = connected_client().await;
    let abandoned = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .dispatch(
                    &support::dispatch_of(request("echo", "wf-abandoned", b"")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });
    let submit = peer.recv_submit().await;

    abandoned.abort();

    assert_eq!(
        peer.recv().await,
        Frame::Cancel(Cancel {
            correlation: submit.correlation
        })
    );
    // The node's late outcome for it is ignored, and the connection keeps working.
    peer.send(Frame::Outcome(OutcomeFrame {
        correlation: submit.correlation,
        result: DispatchResult::Cancelled,
    }))
    .await;
    let next = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .dispatch(
                    &support::dispatch_of(request("echo", "wf-next", b"next")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });
    let submit = peer.recv_submit().await;
    peer.send(completed(&submit)).await;
    let result = timeout(WAIT, next).await.unwrap().unwrap().unwrap();
    assert!(matches!(result, DispatchResult::Completed(r) if r.workflow_id == "wf-next"));
}

#[tokio::test]
async fn the_client_answers_pings_and_queries_status() {
    let (_node, mut peer, client) = connected_client().await;

    peer.send(Frame::Ping(Ping { nonce: 5 })).await;
    assert_eq!(peer.recv().await, Frame::Pong(Pong { nonce: 5 }));

    let status = tokio::spawn({
        let client = client.clone();
        async move { client.status().await }
    });
    let Frame::StatusQuery(query) = peer.recv().await else {
        panic!("expected StatusQuery");
    };
    let report = NodeStatus {
        node_id: "fake-node".to_owned(),
        uptime_ms: 1234,
        connections: 2,
        draining: false,
        pools: Vec::new(),
        waiting: Vec::new(),
        counters: Counters::default(),
    };
    peer.send(Frame::from(StatusReport {
        correlation: query.correlation,
        status: report.clone(),
    }))
    .await;
    let read = timeout(WAIT, status).await.unwrap().unwrap();
    assert_eq!(read, Ok(Status::new(report, Vec::new(), 0)));
}

#[tokio::test]
async fn closing_the_client_says_goodbye() {
    let (_node, mut peer, client) = connected_client().await;

    timeout(WAIT, client.close()).await.unwrap();

    assert!(matches!(peer.recv().await, Frame::Goodbye(_)));
    assert_eq!(peer.recv_or_eof().await, None);
    assert!(client.is_closed());
    assert_eq!(client.status().await, Err(ClientError::Closed));
}

#[tokio::test]
async fn a_refused_handshake_is_a_typed_error() {
    let node = FakeNode::bind().await;
    let (client, ()) = tokio::join!(
        Client::connect(node.addr(), ClientConfig::default()),
        async {
            let mut peer = node.accept().await;
            let Frame::Hello(_) = peer.recv().await else {
                panic!("expected Hello");
            };
            peer.send(Frame::HelloRefused(Refusal {
                code: RefusalCode::Unauthorized,
                reason: "bad token".to_owned(),
            }))
            .await;
        }
    );

    let Err(ConnectError::Refused(refusal)) = client else {
        panic!("expected a refusal, got {client:?}");
    };
    assert_eq!(refusal.code, RefusalCode::Unauthorized);
}

#[tokio::test]
async fn a_silent_node_fails_the_handshake_with_a_timeout() {
    let node = FakeNode::bind().await;
    let config = {
        let mut config = ClientConfig::default();
        config.handshake_timeout = Duration::from_millis(100);
        config
    };
    let (client, _peer) = tokio::join!(Client::connect(node.addr(), config), node.accept());

    assert!(matches!(client, Err(ConnectError::Timeout(_))));
}

/// Limits under which an SDK pings every 20 ms and gives up after two unanswered pings.
fn impatient_limits() -> Limits {
    Limits {
        ping_interval_ms: 20,
        max_missed_pings: 2,
        ..limits()
    }
}

#[tokio::test]
async fn a_worker_reconnects_when_the_node_stops_answering_pings() {
    let node = FakeNode::bind().await;
    let (handler, _probe, _events) = probe();
    let worker = Worker::spawn(worker_config(&node, 4), handler);
    let mut peer = node.accept().await;
    peer.welcome_with(100, impatient_limits()).await;
    peer.admit(1).await;

    assert!(matches!(peer.recv().await, Frame::Ping(_)));
    assert!(matches!(peer.recv().await, Frame::Ping(_)));
    assert_eq!(peer.recv_or_eof().await, None, "the worker gave up");

    let mut peer = node.accept().await;
    peer.welcome(101).await;
    peer.admit(2).await;
    assert_eq!(worker.wait_registered(WAIT).await, Ok(2));
}

#[tokio::test]
async fn a_client_fails_pending_dispatches_when_the_node_stops_answering_pings() {
    let node = FakeNode::bind().await;
    let (client, mut peer) = tokio::join!(
        Client::connect(node.addr(), ClientConfig::default()),
        async {
            let mut peer = node.accept().await;
            peer.welcome_with(200, impatient_limits()).await;
            peer
        }
    );
    let client = client.unwrap();
    let pending = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .dispatch(
                    &support::dispatch_of(request("echo", "wf", b"")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });

    // The submit and the pings arrive in either order; none is answered.
    let mut pings = 0;
    while let Some(frame) = peer.recv_or_eof().await {
        match frame {
            Frame::Ping(_) => pings += 1,
            // The client gives up on the node with a goodbye.
            Frame::Submit(_) | Frame::Goodbye(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(pings, 2);
    assert_eq!(
        timeout(WAIT, pending).await.unwrap().unwrap(),
        Err(ClientError::ConnectionLost { may_have_run: true })
    );
}

#[tokio::test]
async fn a_worker_told_goodbye_before_registering_tries_again() {
    let node = FakeNode::bind().await;
    let (handler, _probe, _events) = probe();
    let worker = Worker::spawn(worker_config(&node, 4), handler);
    let mut peer = node.accept().await;
    peer.welcome(100).await;
    let Frame::Register(_) = peer.recv().await else {
        panic!("expected Register");
    };

    peer.send(Frame::Goodbye(lintel::wire::Goodbye {
        reason: "draining".to_owned(),
    }))
    .await;
    drop(peer);

    let mut peer = node.accept().await;
    peer.welcome(101).await;
    peer.admit(2).await;
    assert_eq!(worker.wait_registered(WAIT).await, Ok(2));
}

#[tokio::test]
async fn an_undecodable_frame_is_answered_with_an_error_then_a_reconnect() {
    let (node, mut peer, worker, _probe, _events) = registered_worker(4).await;

    // A one-byte body whose frame kind (127) no version knows.
    peer.framed
        .get_mut()
        .write_all(&[0, 0, 0, 1, 0x7f])
        .await
        .unwrap();

    let Frame::Error(error) = peer.recv().await else {
        panic!("expected Error");
    };
    assert_eq!(error.code, lintel::wire::ErrorCode::UnknownFrameKind);
    assert_eq!(peer.recv_or_eof().await, None);
    let mut peer = node.accept().await;
    peer.welcome(101).await;
    peer.admit(2).await;
    assert_eq!(worker.wait_registered(WAIT).await, Ok(2));
}

#[tokio::test]
async fn a_submission_too_large_for_the_node_is_refused_before_sending() {
    let node = FakeNode::bind().await;
    let (client, mut peer) = tokio::join!(
        Client::connect(node.addr(), ClientConfig::default()),
        async {
            let mut peer = node.accept().await;
            peer.welcome_with(
                200,
                Limits {
                    max_frame_len: 1024,
                    ..limits()
                },
            )
            .await;
            peer
        }
    );
    let client = client.unwrap();

    let result = client
        .dispatch(
            &support::dispatch_of(request("echo", "wf-big", &[7u8; 4096])),
            &DispatchOptions::default(),
        )
        .await;

    let Err(ClientError::Oversize { len, max: 1024 }) = result else {
        panic!("expected Oversize, got {result:?}");
    };
    assert!(len > 4096, "{len}");
    let status = nothing_sent_before_a_status_query(&client, &mut peer).await;
    drop(peer);
    assert_eq!(
        timeout(WAIT, status).await.unwrap().unwrap(),
        Err(ClientError::ConnectionLost {
            may_have_run: false
        })
    );
}

/// Asks for the status and checks that its query is the first frame the node reads, so nothing
/// was sent before it; the status call goes on in the task returned.
async fn nothing_sent_before_a_status_query(
    client: &Client,
    peer: &mut Peer,
) -> tokio::task::JoinHandle<Result<Status, ClientError>> {
    let status = tokio::spawn({
        let client = client.clone();
        async move { client.status().await }
    });
    assert!(
        matches!(peer.recv().await, Frame::StatusQuery(_)),
        "nothing was sent before the status query"
    );
    status
}

// ---------------------------------------------------------------------------------------------
// Protocol version 3.

/// A client connected to a fake version-3 node listing `features`.
async fn connected_client_v3(features: &[&str]) -> (FakeNode, Peer, Client) {
    let node = FakeNode::bind().await;
    let config = {
        let mut config = ClientConfig::default();
        config.handshake_timeout = WAIT;
        config
    };
    let (client, peer) = tokio::join!(Client::connect(node.addr(), config), async {
        let mut peer = node.accept().await;
        let hello = peer.welcome3(300, features).await;
        assert_eq!(hello.max_version, PROTOCOL_VERSION);
        peer
    });
    (node, peer, client.unwrap())
}

#[tokio::test]
async fn a_version_3_welcome_tells_the_client_the_features_and_header_limits() {
    let (_node, _peer, client) = connected_client_v3(&[feature::HEADERS]).await;
    let welcome = client.node_info();
    assert_eq!((welcome.version, welcome.pid), (3, 300));
    assert!(welcome.implements(feature::HEADERS));
    assert!(!welcome.implements(feature::PRIORITY));
    let defaults = HeaderLimits::default();
    assert_eq!(
        (welcome.limits.max_headers, welcome.limits.max_header_bytes),
        (Some(defaults.max_headers), Some(defaults.max_header_bytes))
    );
}

#[tokio::test]
async fn a_dispatch_with_headers_goes_as_submit3_and_one_without_as_submit() {
    let (_node, mut peer, client) = connected_client_v3(&[feature::HEADERS]).await;
    let traced = DispatchOptions::default()
        .header("TraceParent", "00-abc-01")
        .header("baggage", "k=v");
    let dispatch = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .dispatch(
                    &support::dispatch_of(request("echo", "wf-3", b"x")),
                    &traced,
                )
                .await
        }
    });
    let Frame::Submit(submit) = peer.recv().await else {
        panic!("expected Submit");
    };
    assert_eq!(peer.last_kind(), Some(FrameKind::Submit3));
    let names: Vec<_> = submit
        .extras
        .headers
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["traceparent", "baggage"], "lowercase, in order");
    assert_eq!(submit.request.workflow_id, "wf-3");
    peer.send(Frame::from(ServedOutcome {
        correlation: submit.correlation,
        served_by: "fake-node".into(),
        result: DispatchResult::Cancelled,
    }))
    .await;
    let result = timeout(WAIT, dispatch).await.unwrap().unwrap();
    assert_eq!(result, Ok(DispatchResult::Cancelled));

    let plain = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .dispatch(
                    &support::dispatch_of(request("echo", "wf-4", b"x")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });
    assert!(matches!(peer.recv().await, Frame::Submit(_)));
    assert_eq!(peer.last_kind(), Some(FrameKind::Submit));
    drop(plain);
}

#[tokio::test]
async fn headers_to_a_version_2_node_are_refused_by_the_client_and_nothing_is_sent() {
    let (_node, mut peer, client) = connected_client().await;
    let traced = DispatchOptions::default().header("traceparent", "00-abc-01");
    let refused = client
        .dispatch(&support::dispatch_of(request("echo", "wf", b"x")), &traced)
        .await;
    assert_eq!(
        refused,
        Err(ClientError::Unsupported {
            version: 2,
            what: feature::HEADERS
        })
    );
    let status = nothing_sent_before_a_status_query(&client, &mut peer).await;
    drop(status);
}

#[tokio::test]
async fn a_status_document_is_read_as_the_status_and_unknown_keys_are_ignored() {
    let (_node, mut peer, client) = connected_client_v3(&[feature::STATUS_DOCUMENT]).await;
    let status = tokio::spawn({
        let client = client.clone();
        async move { client.status().await }
    });
    let Frame::StatusQuery(query) = peer.recv().await else {
        panic!("expected StatusQuery");
    };
    let mut document = serde_json::to_value(Status::new(
        NodeStatus {
            node_id: "fake-node".into(),
            ..NodeStatus::default()
        },
        Vec::new(),
        7,
    ))
    .unwrap();
    document["added_by_a_later_node"] = serde_json::json!({"any": [1, 2]});
    peer.send(Frame::StatusDocument(StatusDocument {
        correlation: query.correlation,
        json: Bytes::from(serde_json::to_vec(&document).unwrap()),
    }))
    .await;
    let status = timeout(WAIT, status).await.unwrap().unwrap().unwrap();
    assert_eq!(
        (status.node_id.as_str(), status.counters.peer_lost),
        ("fake-node", 7)
    );
}

#[tokio::test]
async fn a_worker_handler_reads_the_headers_of_a_push3_and_none_from_a_push() {
    let node = FakeNode::bind().await;
    let worker = Worker::spawn(worker_config(&node, 4), header_echo());
    let mut peer = node.accept().await;
    peer.welcome3(100, &[feature::HEADERS]).await;
    assert!(matches!(peer.recv().await, Frame::Register(_)));
    assert_eq!(
        peer.last_kind(),
        Some(FrameKind::Register),
        "no deployment identity: a plain Register"
    );
    peer.send(Frame::Registered(Registered { worker_id: 1 }))
        .await;
    assert_eq!(worker.wait_registered(WAIT).await, Ok(1));
    peer.send(Frame::from(Push {
        correlation: 9,
        request: request("echo", "wf-9", b""),
        extras: RequestExtras {
            headers: vec![
                Header::new("traceparent", "00-abc-01"),
                Header::new("b", "2"),
            ],
            ..RequestExtras::default()
        },
    }))
    .await;
    let reply = peer.recv_reply().await;
    assert_eq!(reply.correlation, 9);
    assert_eq!(
        reply.response.outcome,
        ActivityOutcome::Success(Bytes::from_static(b"traceparent=00-abc-01\nb=2"))
    );
    peer.push(10, request("echo", "wf-10", b"")).await;
    let reply = peer.recv_reply().await;
    assert_eq!(
        reply.response.outcome,
        ActivityOutcome::Success(Bytes::new())
    );
    worker.shutdown().await;
}

#[tokio::test]
async fn a_worker_with_a_deployment_registers_with_register3_and_without_it_on_version_2() {
    let identified = |node: &FakeNode| {
        worker_builder(node, 2)
            .deployment("v42")
            .instance_id("pod-1")
            .build()
            .expect("a worker config")
    };
    let node = FakeNode::bind().await;
    let worker = Worker::spawn(identified(&node), header_echo());
    let mut peer = node.accept().await;
    peer.welcome3(100, &[]).await;
    let Frame::Register(register) = peer.recv().await else {
        panic!("expected Register");
    };
    assert_eq!(peer.last_kind(), Some(FrameKind::Register3));
    assert_eq!(
        (
            register.deployment.as_deref(),
            register.instance_id.as_deref()
        ),
        (Some("v42"), Some("pod-1"))
    );
    let plain = Register {
        deployment: None,
        instance_id: None,
        ..*register
    };
    assert_eq!(plain, registration(2));
    worker.shutdown().await;

    let old = FakeNode::bind().await;
    let worker = Worker::spawn(identified(&old), header_echo());
    let mut peer = old.accept().await;
    peer.welcome(100).await;
    assert_eq!(peer.admit(1).await, registration(2));
    assert_eq!(worker.wait_registered(WAIT).await, Ok(1));
    worker.shutdown().await;
}

#[tokio::test]
async fn a_dispatch_breaking_the_nodes_stated_limits_is_a_typed_error_and_nothing_is_sent() {
    let node = FakeNode::bind().await;
    let config = {
        let mut config = ClientConfig::default();
        config.handshake_timeout = WAIT;
        config
    };
    let (client, mut peer) = tokio::join!(Client::connect(node.addr(), config), async {
        let mut peer = node.accept().await;
        let Frame::Hello(_) = peer.recv().await else {
            panic!("expected Hello");
        };
        peer.framed.codec_mut().set_version(3);
        peer.send(Frame::from(Welcome {
            version: 3,
            node_id: "fake-node".to_owned(),
            pid: 1,
            limits: Limits {
                max_name_len: 16,
                ..limits()
            },
            header_limits: Some(HeaderLimits {
                max_headers: 2,
                max_header_bytes: 32,
            }),
            features: Vec::new(),
        }))
        .await;
        peer
    });
    let client = client.unwrap();
    let plain = DispatchOptions::default();
    let cases = [
        (
            Dispatch::new("", "echo"),
            plain.clone(),
            InvalidDispatch::EmptyNamespace,
        ),
        (
            Dispatch::new("ns", "echo").task_queue("q".repeat(17)),
            plain.clone(),
            InvalidDispatch::NameTooLong {
                field: "task queue",
                len: 17,
                max: 16,
            },
        ),
        (
            Dispatch::new("n".repeat(17), "echo"),
            plain.clone(),
            InvalidDispatch::NameTooLong {
                field: "namespace",
                len: 17,
                max: 16,
            },
        ),
        (
            Dispatch::new("ns", "echo").node("a".repeat(18)),
            plain.clone(),
            InvalidDispatch::NameTooLong {
                field: "node",
                len: 18,
                max: 16,
            },
        ),
        (
            Dispatch::new("ns", ""),
            plain.clone(),
            InvalidDispatch::EmptyActivityType,
        ),
        (
            Dispatch::new("ns", "echo"),
            plain
                .clone()
                .header("a", "1")
                .header("b", "2")
                .header("c", "3"),
            InvalidDispatch::TooManyHeaders { count: 3, max: 2 },
        ),
        (
            Dispatch::new("ns", "echo"),
            plain.clone().header("trace", "x".repeat(40)),
            InvalidDispatch::HeadersTooLarge { bytes: 45, max: 32 },
        ),
    ];
    for (dispatch, options, invalid) in cases {
        assert_eq!(
            client.submit(&dispatch, &options).await,
            Err(ClientError::Invalid(invalid))
        );
    }
    let status = nothing_sent_before_a_status_query(&client, &mut peer).await;
    drop(peer);
    let _ = timeout(WAIT, status).await;
}
