//! Cancel against a real node on 127.0.0.1: a producer's `Cancel`, a dropped in-process or SDK
//! dispatch, and a producer that disconnects each end the dispatch and cancel its push.
//!
//! Workers are raw frame clients the test drives push by push, or auto workers that answer
//! every push with their own name (`support::peers`). Every wait is on a frame, an outcome or
//! an event, bounded by `within`.

use lintel_test_support as support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, Client, ClientConfig, Request};
use lintel::wire::ActivityOutcome;
use lintel::wire::{Cancel, DispatchResult, Frame};
use support::{
    next_frame, next_outcome, parked, plain, poll_once, producer, request, sdk_worker, served_by,
    spawn_dispatch, submit, within, RawWorker, TestNode,
};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_producer_cancel_ends_the_submission_cancelled_and_cancels_the_push() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let mut wire = producer(node.addr).await;
    wire.send(submit(7, request("ns", "act", "cancel me"), None))
        .await;
    let push = worker.next_push().await;
    wire.send(Frame::Cancel(Cancel { correlation: 7 })).await;
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(
        (outcome.correlation, outcome.result),
        (7, DispatchResult::Cancelled)
    );
    worker.expect_cancel(push.correlation).await;
    worker.sync().await;
    assert_eq!(
        node.registry().reserved_slots(),
        1,
        "the slot is held until the worker lets go of the cancelled push"
    );
    worker.reply(&push, "stopped").await;
    worker.sync().await;
    assert_eq!(node.registry().reserved_slots(), 0);
    assert_eq!(node.node.status().counters.late_replies, 1);

    // The worker is still there and the slot is free again.
    wire.send(submit(8, request("ns", "act", "after"), None))
        .await;
    let push = worker.next_push().await;
    worker.reply(&push, "after").await;
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(outcome.correlation, 8);
    assert_eq!(served_by(&outcome.result), "after");
}

#[tokio::test]
async fn a_producer_cancel_while_waiting_for_a_worker_ends_cancelled() {
    let node = TestNode::start().await;
    let mut wire = producer(node.addr).await;
    wire.send(submit(3, request("ns", "nobody", ""), Some(600_000)))
        .await;
    wire.send(Frame::Cancel(Cancel { correlation: 3 })).await;
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(
        (outcome.correlation, outcome.result),
        (3, DispatchResult::Cancelled)
    );
    assert_eq!(parked(&node), 0);

    let token = CancellationToken::new();
    let wait = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut waiting =
        Box::pin(dispatcher.dispatch_cancellable(request("ns", "nobody", ""), &wait, &token));
    assert!(poll_once(&mut waiting).await.is_pending());
    assert_eq!(parked(&node), 1);
    token.cancel();
    assert_eq!(
        within("cancelled", waiting).await,
        DispatchResult::Cancelled
    );
    assert_eq!(parked(&node), 0);
}

#[tokio::test]
async fn dropping_an_in_process_dispatch_sends_cancel_to_the_worker() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let abandoned = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push = worker.next_push().await;
    abandoned.abort();
    assert!(within("the aborted task", abandoned)
        .await
        .unwrap_err()
        .is_cancelled());
    worker.expect_cancel(push.correlation).await;
    within(
        "the cancelled dispatch to leave the node's count",
        node.node.dispatcher().wait_idle(),
    )
    .await;
    worker.reply(&push, "stopped").await;
    worker.sync().await;
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn dropping_an_sdk_client_dispatch_cancels_the_push_on_the_worker() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let client = within(
        "client connect",
        Client::connect(node.addr, ClientConfig::default()),
    )
    .await
    .expect("client");
    let dispatching = client.clone();
    let abandoned = tokio::spawn(async move {
        dispatching
            .dispatch(
                &support::dispatch_of(request("ns", "act", "")),
                &DispatchOptions::default(),
            )
            .await
    });
    let push = worker.next_push().await;
    abandoned.abort();
    worker.expect_cancel(push.correlation).await;
    worker.reply(&push, "stopped").await;

    // The slot comes back once the worker lets go: the next dispatch reaches the worker.
    let next = tokio::spawn(async move {
        client
            .dispatch(
                &support::dispatch_of(request("ns", "act", "next")),
                &DispatchOptions::default(),
            )
            .await
    });
    let push = worker.next_push().await;
    worker.reply(&push, "next").await;
    let result = within("the next dispatch", next)
        .await
        .expect("task")
        .expect("client");
    assert_eq!(served_by(&result), "next");
}

#[tokio::test]
async fn dropping_a_waiting_dispatch_stops_counting_it_as_waiting() {
    let node = TestNode::start().await;
    let wait = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut waiting = Box::pin(dispatcher.dispatch(request("ns", "nobody", ""), &wait));
    assert!(poll_once(&mut waiting).await.is_pending());
    assert_eq!(parked(&node), 1);
    drop(waiting);
    assert_eq!(parked(&node), 0);
    assert_eq!(dispatcher.active(), 0);
}

#[tokio::test]
async fn a_producer_that_disconnects_cancels_its_submissions_on_the_worker() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 2, "w")).await;
    let mut wire = producer(node.addr).await;
    wire.send(submit(1, request("ns", "act", "1"), None)).await;
    wire.send(submit(2, request("ns", "act", "2"), None)).await;
    let first = worker.next_push().await;
    let second = worker.next_push().await;
    drop(wire);
    let mut cancelled = BTreeSet::new();
    for _ in 0..2 {
        match next_frame(&mut worker.client).await {
            Some(Frame::Cancel(cancel)) => {
                cancelled.insert(cancel.correlation);
            }
            other => panic!("expected Cancel, got {other:?}"),
        }
    }
    assert_eq!(
        cancelled,
        BTreeSet::from([first.correlation, second.correlation])
    );
    worker.reply(&first, "stopped").await;
    worker.reply(&second, "stopped").await;
    worker.sync().await;
    assert_eq!(node.registry().reserved_slots(), 0);
    assert_eq!(node.registry().worker_count(), 1);
}

#[tokio::test]
async fn a_cancelled_push_stops_the_blocking_work_its_handler_started() {
    let node = TestNode::start().await;
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let (stopped_tx, mut stopped) = tokio::sync::mpsc::unbounded_channel();
    let handler = handler_fn(move |request: Request| {
        let (started_tx, stopped_tx) = (started_tx.clone(), stopped_tx.clone());
        async move {
            let signal = request.cancel_signal();
            let work = tokio::task::spawn_blocking(move || {
                let _ = started_tx.send(());
                while !signal.is_cancelled() {
                    std::thread::yield_now();
                }
                let _ = stopped_tx.send(());
            });
            let _ = work.await;
            ActivityOutcome::Success("stopped".into())
        }
    });
    let _worker = sdk_worker(node.addr, plain("ns", "spin", 1, "spinner"), handler).await;
    let client = Client::connect(node.addr.to_string(), ClientConfig::default())
        .await
        .unwrap();
    let options = DispatchOptions::default();
    let spin = support::dispatch_of(request("ns", "spin", ""));
    let mut dispatch = Box::pin(client.dispatch(&spin, &options));
    // The dispatch runs until the blocking work has started, then is dropped: the SDK cancels
    // it on the node, which cancels the push.
    tokio::select! {
        result = &mut dispatch => panic!("the dispatch ended first: {result:?}"),
        _ = started.recv() => {}
    }
    drop(dispatch);

    within("the blocking work to stop", stopped.recv())
        .await
        .unwrap();
}
