//! Drain against a real node on 127.0.0.1: during shutdown new dispatches end `Draining`, and
//! in-flight ones complete or, past the drain timeout, end `ShutDown` before the goodbye.
//!
//! Workers are raw frame clients the test drives push by push, or auto workers that answer
//! every push with their own name (`support::peers`). Every wait is on a frame, an outcome or
//! an event, bounded by `within`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use lintel::dispatch::DispatchOptions;
use lintel::wire::{DispatchResult, Frame, RefusalCode, Role};
use lintel::NodeConfig;
use support::{
    dispatch, hello, next_frame, next_outcome, outcome_of, plain, poll_once, producer, request,
    served_by, spawn_dispatch, submit, within, RawClient, RawWorker, TestNode,
};

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
    // The listener still accepts while draining, and refuses the newcomer politely.
    let mut late = RawClient::connect(node.addr).await;
    late.send(Frame::Hello(hello(Role::Producer))).await;
    match late.recv().await {
        Some(Frame::HelloRefused(refusal)) => assert_eq!(refusal.code, RefusalCode::Draining),
        other => panic!("expected HelloRefused{{Draining}}, got {other:?}"),
    }

    worker.reply(&push, "finished").await;
    assert_eq!(served_by(&outcome_of(in_flight).await), "finished");
    worker.client.closed().await;
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
            sdk.dispatch(request("ns", "act", ""), &DispatchOptions::default())
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
