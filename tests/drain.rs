//! Drain against a real node on 127.0.0.1: during shutdown new dispatches end `Draining`, and
//! in-flight ones complete or, past the drain timeout, end `ShutDown` before the goodbye; each
//! worker keeps its connection until it says `Drained`, or until the drain timeout ends.
//!
//! Workers are raw frame clients the test drives push by push, auto workers that answer
//! every push with their own name (`support::peers`), or an SDK worker behind a proxy that
//! records the frames crossing it. Every wait is on a frame, an outcome or an event, bounded
//! by `within`.

use lintel_test_support as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, Worker, WorkerState};
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResult, Drained, Frame, FrameCodec, FrameKind,
    RefusalCode, Role, StatusQuery, PROTOCOL_VERSION,
};
use lintel::NodeConfig;
use support::{
    dispatch, hello, next_frame, next_outcome, outcome_of, plain, poll_once, producer,
    quiet_config, request, served_by, small_window_worker, spawn_dispatch, submit, within,
    RawClient, RawWorker, TestNode, WAIT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::codec::Decoder;

fn drained(completed: u64) -> Frame {
    Frame::Drained(Drained { completed })
}

/// Expects the node's `Goodbye`, skipping pings, and then the close.
async fn expect_goodbye_then_close(client: &mut RawClient) {
    match next_frame(client).await {
        Some(Frame::Goodbye(_)) => {}
        other => panic!("expected Goodbye, got {other:?}"),
    }
    let after = client.recv().await;
    assert!(after.is_none(), "expected the close, got {after:?}");
}

/// A node whose drain timeout is far longer than any wait in a test: a shutdown that ends
/// within [`WAIT`] did not wait for it.
fn patient_node() -> NodeConfig {
    NodeConfig {
        drain_timeout_ms: 120_000,
        ..NodeConfig::default()
    }
}

#[tokio::test]
async fn during_shutdown_new_dispatches_end_draining_and_in_flight_ones_complete() {
    let mut node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 2, "w")).await;
    let mut wire = producer(node.addr).await;
    let in_flight = spawn_dispatch(
        &node,
        request("ns", "act", "in flight"),
        DispatchOptions::default(),
    );
    let push = worker.next_push().await;
    let wait = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut waiting = Box::pin(dispatcher.dispatch(request("ns", "nobody", ""), &wait));
    assert!(poll_once(&mut waiting).await.is_pending());

    node.begin_shutdown();
    match next_frame(&mut worker.client).await {
        Some(Frame::Drain(_)) => {}
        other => panic!("expected Drain, got {other:?}"),
    }
    assert_eq!(
        within("the waiting dispatch", waiting).await,
        DispatchResult::Draining
    );
    assert_eq!(
        dispatch(
            &node,
            request("ns", "act", "late"),
            DispatchOptions::default()
        )
        .await,
        DispatchResult::Draining
    );
    wire.send(submit(5, request("ns", "act", "late"), Some(600_000)))
        .await;
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(
        (outcome.correlation, outcome.result),
        (5, DispatchResult::Draining)
    );
    // The listener still accepts while draining: a new worker is refused politely, a new
    // producer is welcomed to look at the node, and its submissions end `Draining`.
    let mut late = RawClient::connect(node.addr).await;
    late.send(Frame::Hello(hello(Role::Worker))).await;
    match late.recv().await {
        Some(Frame::HelloRefused(refusal)) => assert_eq!(refusal.code, RefusalCode::Draining),
        other => panic!("expected HelloRefused{{Draining}}, got {other:?}"),
    }
    let mut looker = producer(node.addr).await;
    looker
        .send(Frame::StatusQuery(StatusQuery { correlation: 8 }))
        .await;
    match next_frame(&mut looker).await {
        Some(Frame::Status(report)) => assert!(report.status.draining),
        other => panic!("expected the status of a draining node, got {other:?}"),
    }
    looker
        .send(submit(6, request("ns", "act", "later"), Some(600_000)))
        .await;
    let outcome = next_outcome(&mut looker).await;
    assert_eq!(
        (outcome.correlation, outcome.result),
        (6, DispatchResult::Draining)
    );

    worker.reply(&push, "finished").await;
    assert_eq!(served_by(&outcome_of(in_flight).await), "finished");
    worker.client.send(drained(1)).await;
    expect_goodbye_then_close(&mut worker.client).await;
    wire.closed().await;
    let pid = worker.pid;
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.registry().reserved_slots(), 0);
    node.shutdown().await;
}

#[tokio::test]
async fn an_in_flight_dispatch_outliving_the_drain_timeout_ends_shut_down() {
    let config = NodeConfig {
        drain_timeout_ms: 200,
        ..NodeConfig::default()
    };
    let mut node = TestNode::with_config(config).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let patient = DispatchOptions::default().reply_timeout(Duration::from_secs(600));
    let in_flight = spawn_dispatch(&node, request("ns", "act", ""), patient);
    worker.next_push().await;
    node.begin_shutdown();
    assert!(
        matches!(
            outcome_of(in_flight).await,
            DispatchResult::ShutDown { after_ms } if after_ms >= 200
        ),
        "the node, not the worker, ended it"
    );
    worker.client.closed().await;
    node.shutdown().await;
}

#[tokio::test]
async fn at_a_forced_shutdown_every_producer_hears_every_outcome_before_the_goodbye() {
    let config = NodeConfig {
        drain_timeout_ms: 200,
        ..NodeConfig::default()
    };
    let mut node = TestNode::with_config(config).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 64, "w")).await;
    // A version-1 producer by hand, and a version-2 one through the SDK.
    let mut raw = producer(node.addr).await;
    for correlation in 1..=20 {
        raw.send(submit(correlation, request("ns", "act", ""), None))
            .await;
    }
    let sdk = support::client(node.addr).await;
    let mut sdk_dispatches = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let sdk = sdk.clone();
        sdk_dispatches.spawn(async move {
            sdk.dispatch(
                &support::dispatch_of(request("ns", "act", "")),
                &DispatchOptions::default(),
            )
            .await
        });
    }
    for _ in 0..40 {
        worker.next_push().await;
    }
    node.begin_shutdown();

    let mut heard = std::collections::BTreeSet::new();
    loop {
        match next_frame(&mut raw).await {
            Some(Frame::Outcome(outcome)) => {
                assert_eq!(
                    outcome.result,
                    DispatchResult::WorkerLost { worker_id: 0 },
                    "version 1 hears ShutDown as the nearest it knows"
                );
                assert!(heard.insert(outcome.correlation), "one outcome each");
            }
            Some(Frame::Goodbye(_)) => break,
            other => panic!("expected outcomes then Goodbye, got {other:?}"),
        }
    }
    assert_eq!(
        heard.len(),
        20,
        "every submission had its outcome before the goodbye"
    );
    while let Some(done) = sdk_dispatches.join_next().await {
        let result = done
            .expect("task")
            .expect("the outcome came before the close");
        assert!(
            matches!(result, DispatchResult::ShutDown { .. }),
            "{result:?}"
        );
    }
    node.shutdown().await;
}

#[tokio::test]
async fn a_draining_worker_keeps_its_connection_until_it_says_drained_and_its_late_reply_is_delivered(
) {
    let mut node = TestNode::with_config(patient_node()).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let in_flight = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push = worker.next_push().await;
    node.begin_shutdown();
    match next_frame(&mut worker.client).await {
        Some(Frame::Drain(_)) => {}
        other => panic!("expected Drain, got {other:?}"),
    }
    worker.reply(&push, "after the drain began").await;
    assert_eq!(
        served_by(&outcome_of(in_flight).await),
        "after the drain began"
    );
    // Nothing is in flight now, yet the connection stays: a round trip gets only its pong,
    // and the worker is still registered.
    worker.sync().await;
    worker.sync().await;
    assert_eq!(node.registry().worker_count(), 1);

    worker.client.send(drained(1)).await;
    expect_goodbye_then_close(&mut worker.client).await;
    node.events.wait_unregistered(worker.pid).await;
    node.shutdown().await;
}

#[tokio::test]
async fn a_worker_that_never_says_drained_is_closed_when_the_drain_timeout_ends() {
    let timeout = Duration::from_millis(300);
    let config = NodeConfig {
        drain_timeout_ms: 300,
        ..NodeConfig::default()
    };
    let mut node = TestNode::with_config(config).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let began = Instant::now();
    node.begin_shutdown();
    match next_frame(&mut worker.client).await {
        Some(Frame::Drain(drain)) => assert_eq!(drain.grace_ms, 300),
        other => panic!("expected Drain, got {other:?}"),
    }
    expect_goodbye_then_close(&mut worker.client).await;
    assert!(
        began.elapsed() >= timeout,
        "closed after {:?}, before the drain timeout",
        began.elapsed()
    );
    node.events.wait_unregistered(worker.pid).await;
    node.shutdown().await;
}

#[tokio::test]
async fn an_sdk_worker_drains_cleanly_saying_drained_then_goodbye() {
    let mut node = TestNode::with_config(patient_node()).await;
    let proxy = RecordingProxy::start(node.addr).await;
    // Each request waits for a permit the test hands out once the drain has begun.
    let permits = Arc::new(Semaphore::new(0));
    let gate = Arc::clone(&permits);
    let handle = Worker::spawn(
        support::worker_config(proxy.addr.to_string(), plain("ns", "act", 2, "sdk")),
        handler_fn(move |request: lintel::sdk::Request| {
            let gate = Arc::clone(&gate);
            async move {
                let _permit = gate.acquire().await;
                ActivityOutcome::Success(request.input)
            }
        }),
    );
    within("worker registration", handle.wait_registered(WAIT))
        .await
        .expect("registered");
    let in_flight = spawn_dispatch(
        &node,
        request("ns", "act", "ran"),
        DispatchOptions::default(),
    );
    // The SDK speaks version 3: its pushes are `Push3`.
    proxy.wait_for(Toward::Worker, FrameKind::Push3).await;
    node.begin_shutdown();
    let mut state = handle.state();
    within(
        "the worker to begin draining",
        state.wait_for(|state| matches!(state, WorkerState::Draining { .. })),
    )
    .await
    .expect("worker runs");
    permits.add_permits(1);
    assert_eq!(served_by(&outcome_of(in_flight).await), "ran");
    within(
        "the node's shutdown, well before its drain timeout",
        async {
            node.shutdown().await;
        },
    )
    .await;
    proxy.wait_for(Toward::Worker, FrameKind::Goodbye).await;

    let seen = proxy.seen();
    let from_worker: Vec<FrameKind> = seen
        .iter()
        .filter(|(toward, _)| *toward == Toward::Node)
        .map(|(_, frame)| {
            frame
                .kind_at(PROTOCOL_VERSION)
                .expect("a frame of its version")
        })
        .filter(|kind| !matches!(kind, FrameKind::Ping | FrameKind::Pong))
        .collect();
    assert!(
        from_worker.ends_with(&[FrameKind::Reply, FrameKind::Drained, FrameKind::Goodbye]),
        "the worker's last frames: {from_worker:?}"
    );
    assert!(
        seen.iter()
            .any(|(_, frame)| matches!(frame, Frame::Drained(Drained { completed: 1 }))),
        "Drained counts the one reply: {seen:?}"
    );
    let at = |toward: Toward, kind: FrameKind| {
        seen.iter()
            .position(|(t, frame)| {
                *t == toward && frame.kind_at(PROTOCOL_VERSION).ok() == Some(kind)
            })
            .unwrap_or_else(|| panic!("no {kind:?} toward {toward:?} in {seen:?}"))
    };
    assert!(
        at(Toward::Node, FrameKind::Drained) < at(Toward::Worker, FrameKind::Goodbye),
        "the node said goodbye only after the worker's Drained: {seen:?}"
    );
    drop(handle);
}

#[tokio::test]
async fn a_worker_whose_queue_is_full_still_hears_drain() {
    let config = NodeConfig {
        drain_timeout_ms: 120_000,
        ..quiet_config(1)
    };
    let mut node = TestNode::with_config(config).await;
    let mut worker = small_window_worker(node.addr, plain("bp", "big", 10_000, "stalled")).await;
    // The worker reads nothing: 1 MiB pushes fill its socket, then the node's queue.
    let input = Bytes::from(vec![7u8; 1 << 20]);
    let instant = DispatchOptions::default().reply_timeout(Duration::from_millis(1));
    within("the worker's queue to fill", async {
        for _ in 0..512 {
            let big = DispatchRequest {
                input: input.clone(),
                ..request("bp", "big", "")
            };
            if let DispatchResult::Refused(_) = node.node.dispatcher().dispatch(big, &instant).await
            {
                return;
            }
        }
        panic!("512 MiB pushed without back-pressure");
    })
    .await;

    node.begin_shutdown();
    within("the Drain behind the backlog", async {
        loop {
            match worker.client.framed.next().await {
                Some(Ok(Frame::Drain(_))) => return,
                Some(Ok(Frame::Push(_) | Frame::Cancel(_) | Frame::Ping(_))) => {}
                other => panic!("expected the backlog, then Drain; got {other:?}"),
            }
        }
    })
    .await;
    worker.client.send(drained(0)).await;
    expect_goodbye_then_close(&mut worker.client).await;
    node.shutdown().await;
}

#[tokio::test]
async fn drain_goes_out_behind_every_push_queued_before_it() {
    let config = NodeConfig {
        drain_timeout_ms: 120_000,
        ..quiet_config(64)
    };
    let mut node = TestNode::with_config(config).await;
    let mut worker = small_window_worker(node.addr, plain("bp", "big", 10_000, "stalled")).await;
    // The worker reads nothing yet: 256 KiB pushes fill its socket, then the node's queue.
    let input = Bytes::from(vec![7u8; 256 << 10]);
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut pushed = Vec::new();
    within("the worker's queue to fill", async {
        for _ in 0..512 {
            let (dispatcher, input) = (Arc::clone(&dispatcher), input.clone());
            let mut running = Box::pin(async move {
                let big = DispatchRequest {
                    input,
                    ..request("bp", "big", "")
                };
                let patient = DispatchOptions::default().reply_timeout(Duration::from_secs(60));
                dispatcher.dispatch(big, &patient).await
            });
            match poll_once(&mut running).await {
                std::task::Poll::Pending => pushed.push(tokio::spawn(running)),
                std::task::Poll::Ready(DispatchResult::Refused(_)) => return,
                std::task::Poll::Ready(other) => panic!("expected a push, got {other:?}"),
            }
        }
        panic!("512 pushes of 256 KiB queued without back-pressure");
    })
    .await;

    node.begin_shutdown();
    let mut held = Vec::new();
    within("every queued push, then Drain", async {
        loop {
            match next_frame(&mut worker.client).await {
                Some(Frame::Push(push)) => held.push(*push),
                Some(Frame::Drain(_)) => return,
                other => panic!("expected pushes, then Drain; got {other:?}"),
            }
        }
    })
    .await;
    assert_eq!(held.len(), pushed.len(), "a push came after the Drain");
    for push in &held {
        worker.reply(push, "done").await;
    }
    worker.client.send(drained(held.len() as u64)).await;
    expect_goodbye_then_close(&mut worker.client).await;
    for running in pushed {
        let result = outcome_of(running).await;
        assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
    }
    node.shutdown().await;
}

/// Which way a frame crossed the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Toward {
    Node,
    Worker,
}

/// A loopback proxy for one connection to a node, recording every frame crossing it, in the
/// order it forwarded them.
struct RecordingProxy {
    addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<(Toward, Frame)>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl RecordingProxy {
    async fn start(node: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let (record, notify) = (Arc::clone(&seen), Arc::clone(&changed));
        tokio::spawn(async move {
            // One connection only: a reconnect after the drain meets a closed port.
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            drop(listener);
            let server = TcpStream::connect(node).await.expect("proxy to node");
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            let up = pump(client_read, server_write, Toward::Node, &record, &notify);
            let down = pump(server_read, client_write, Toward::Worker, &record, &notify);
            tokio::join!(up, down);
        });
        Self {
            addr,
            seen,
            changed,
        }
    }

    fn seen(&self) -> Vec<(Toward, Frame)> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until a frame of `kind` went `toward`.
    async fn wait_for(&self, toward: Toward, kind: FrameKind) {
        within(&format!("{kind:?} toward {toward:?}"), async {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                let found = self.seen.lock().unwrap().iter().any(|(t, frame)| {
                    *t == toward && frame.kind_at(PROTOCOL_VERSION).ok() == Some(kind)
                });
                if found {
                    return;
                }
                changed.await;
            }
        })
        .await;
    }
}

/// Copies `from` to `to`, recording each whole frame before forwarding the bytes that end it;
/// shuts `to` down when `from` ends.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    toward: Toward,
    record: &Mutex<Vec<(Toward, Frame)>>,
    notify: &tokio::sync::Notify,
) {
    let mut codec = FrameCodec::default();
    let mut pending = BytesMut::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        let read = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        pending.extend_from_slice(&buf[..read]);
        while let Ok(Some(frame)) = codec.decode(&mut pending) {
            record.lock().unwrap().push((toward, frame));
        }
        notify.notify_waiters();
        if to.write_all(&buf[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
