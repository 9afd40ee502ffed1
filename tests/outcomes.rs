//! How a dispatch ends when no reply comes, against a real node on 127.0.0.1: a worker lost
//! mid-dispatch, reply timeouts in deadline order, and the no-worker census.
//!
//! Workers are raw frame clients the test drives push by push, or auto workers that answer
//! every push with their own name (`support::peers`). Every wait is on a frame, an outcome or
//! an event, bounded by `within`.

use lintel_test_support as support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lintel::dispatch::DispatchOptions;
use lintel::wire::{DispatchResult, Drain, ErrorCode, Frame, NoWorkerReason, NodeRouting, Submit};
use lintel::NodeConfig;
use support::{
    dispatch, next_frame, next_outcome, no_worker, on_node, outcome_of, plain, producer,
    registration, request, request_in, served_by, spawn_dispatch, submit, submit_timing_out,
    within, AutoWorker, RawWorker, TestNode,
};

// ---------------------------------------------------------------------------------------------
// Worker lost and timeout.

#[tokio::test]
async fn a_worker_dying_mid_dispatch_is_worker_lost_long_before_the_reply_timeout() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 2, "w")).await;
    let (worker_id, pid) = (worker.worker_id, worker.pid);
    let patient = DispatchOptions::default().reply_timeout(Duration::from_secs(30));
    let in_process = spawn_dispatch(&node, request("ns", "act", "a"), patient.clone());
    let mut wire = producer(node.addr).await;
    wire.send(Frame::from(Submit {
        correlation: 41,
        request: request("ns", "act", "b"),
        wait_for_worker_ms: None,
        reply_timeout_ms: Some(30_000),
        routing: NodeRouting::Any,
        extras: Default::default(),
    }))
    .await;
    worker.next_push().await;
    worker.next_push().await;

    let died = Instant::now();
    drop(worker);
    assert_eq!(
        outcome_of(in_process).await,
        DispatchResult::WorkerLost { worker_id }
    );
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(outcome.correlation, 41);
    assert_eq!(outcome.result, DispatchResult::WorkerLost { worker_id });
    assert!(
        died.elapsed() < Duration::from_secs(5),
        "worker lost took {:?}",
        died.elapsed()
    );
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.events.unregistered(pid), 1);
    assert_eq!(node.registry().worker_count(), 0);
    let counters = node.node.status().counters;
    assert_eq!((counters.worker_lost, counters.timed_out), (2, 0));
}

#[tokio::test]
async fn a_live_worker_that_never_replies_is_a_timeout_and_stays_registered() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let quick = DispatchOptions::default().reply_timeout(Duration::from_millis(200));
    let slow = spawn_dispatch(&node, request("ns", "act", "slow"), quick);
    let push = worker.next_push().await;
    assert_eq!(
        outcome_of(slow).await,
        DispatchResult::Timeout {
            worker_id: worker.worker_id,
            after_ms: 200
        }
    );
    // The node abandons the push on the worker, and a late reply is counted, not misdelivered.
    worker.expect_cancel(push.correlation).await;
    worker.sync().await;
    assert_eq!(
        node.registry().reserved_slots(),
        1,
        "held until the late reply"
    );
    worker.reply(&push, "late").await;
    worker.sync().await;
    let counters = node.node.status().counters;
    assert_eq!((counters.late_replies, counters.dropped_replies), (1, 0));
    assert_eq!(node.registry().worker_count(), 1);
    assert_eq!(node.events.unregistered(worker.pid), 0);
    assert_eq!(node.registry().reserved_slots(), 0);

    let next = spawn_dispatch(
        &node,
        request("ns", "act", "next"),
        DispatchOptions::default(),
    );
    let push = worker.next_push().await;
    worker.reply(&push, "next").await;
    assert_eq!(served_by(&outcome_of(next).await), "next");
}

#[tokio::test]
async fn wire_submissions_time_out_in_deadline_order_whatever_order_they_came_in() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 3, "w")).await;
    let mut wire = producer(node.addr).await;
    wire.send(submit_timing_out(1, "late", 900)).await;
    wire.send(submit_timing_out(2, "early", 300)).await;
    wire.send(submit_timing_out(3, "middle", 600)).await;
    for _ in 0..3 {
        worker.next_push().await;
    }

    let mut ended = Vec::new();
    for _ in 0..3 {
        let outcome = next_outcome(&mut wire).await;
        let DispatchResult::Timeout {
            worker_id,
            after_ms,
        } = outcome.result
        else {
            panic!("expected a timeout, got {:?}", outcome.result);
        };
        assert_eq!(worker_id, worker.worker_id);
        ended.push((outcome.correlation, after_ms));
    }
    assert_eq!(ended, vec![(2, 300), (3, 600), (1, 900)]);
    for _ in 0..3 {
        assert!(matches!(
            next_frame(&mut worker.client).await,
            Some(Frame::Cancel(_))
        ));
    }
    worker.sync().await;
    assert_eq!(
        node.registry().reserved_slots(),
        3,
        "timed-out pushes hold their slots until the worker answers or leaves"
    );
    assert_eq!(node.node.status().counters.timed_out, 3);
}

#[tokio::test]
async fn a_correlation_reused_after_its_timeout_names_only_the_new_submission() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 2, "w")).await;
    let mut wire = producer(node.addr).await;
    wire.send(submit_timing_out(7, "first", 100)).await;
    let first = worker.next_push().await;
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(outcome.correlation, 7);
    assert!(matches!(outcome.result, DispatchResult::Timeout { .. }));
    worker.expect_cancel(first.correlation).await;

    wire.send(submit_timing_out(7, "second", 30_000)).await;
    let second = worker.next_push().await;
    worker.reply(&first, "stale").await;
    worker.reply(&second, "fresh").await;

    let outcome = next_outcome(&mut wire).await;
    assert_eq!(outcome.correlation, 7);
    assert_eq!(served_by(&outcome.result), "fresh");
    worker.sync().await;
    let counters = node.node.status().counters;
    assert_eq!((counters.late_replies, counters.dropped_replies), (1, 0));
}

#[tokio::test]
async fn a_worker_that_stops_answering_pings_is_closed_and_its_dispatch_lost() {
    let config = NodeConfig {
        ping_interval_ms: 200,
        max_missed_pings: 2,
        ..NodeConfig::default()
    };
    let node = TestNode::with_config(config).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "mute")).await;
    let patient = DispatchOptions::default().reply_timeout(Duration::from_secs(600));
    let in_flight = spawn_dispatch(&node, request("ns", "act", ""), patient);
    // From here on the worker answers nothing: its pings go unanswered.
    let closing = within("the liveness close", async {
        let mut pushed = false;
        loop {
            match worker.client.framed.next().await {
                Some(Ok(Frame::Push(_))) => pushed = true,
                Some(Ok(Frame::Ping(_))) => {}
                Some(Ok(Frame::Error(error))) => break (pushed, error.code),
                other => panic!("expected pings, a push and an Error, got {other:?}"),
            }
        }
    })
    .await;
    assert_eq!(closing, (true, ErrorCode::LivenessTimeout));
    assert_eq!(
        outcome_of(in_flight).await,
        DispatchResult::WorkerLost {
            worker_id: worker.worker_id
        }
    );
    worker.client.closed().await;
    node.events.wait_unregistered(worker.pid).await;
    assert_eq!(node.registry().worker_count(), 0);
}

// ---------------------------------------------------------------------------------------------
// The no-worker census.

#[tokio::test]
async fn without_a_wait_an_empty_pool_is_no_worker_at_once() {
    let node = TestNode::start().await;
    let started = Instant::now();
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
    assert_eq!(census.pool_workers, 0);
    assert_eq!(
        census.last_departure_ms_ago, None,
        "never served is not served long ago"
    );

    let mut wire = producer(node.addr).await;
    wire.send(submit(1, request("ns", "act", ""), None)).await;
    let outcome = next_outcome(&mut wire).await;
    assert_eq!(no_worker(outcome.result).reason, NoWorkerReason::PoolEmpty);
}

#[tokio::test]
async fn a_pool_without_the_activity_is_no_activity_match() {
    let node = TestNode::start().await;
    let _worker = AutoWorker::start(node.addr, plain("ns", "other", 1, "w"), 0).await;
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::NoActivityMatch);
    assert_eq!((census.pool_workers, census.serving_activity), (1, 0));
}

#[tokio::test]
async fn a_pool_whose_workers_are_all_full_is_all_at_capacity() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let held = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push = worker.next_push().await;
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(
        (
            census.compatible_workers,
            census.at_capacity,
            census.draining
        ),
        (1, 1, 0)
    );
    worker.reply(&push, "done").await;
    assert_eq!(served_by(&outcome_of(held).await), "done");
}

#[tokio::test]
async fn a_pool_whose_workers_all_drained_is_all_excluded() {
    let node = TestNode::start().await;
    let mut first = RawWorker::start(node.addr, plain("ns", "act", 1, "a")).await;
    let mut second = RawWorker::start(node.addr, plain("ns", "act", 1, "b")).await;
    first.client.send(Frame::Drain(Drain { grace_ms: 0 })).await;
    first.sync().await;
    // One left: it takes the work.
    let held = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push = second.next_push().await;
    second.reply(&push, "b").await;
    assert_eq!(served_by(&outcome_of(held).await), "b");

    second
        .client
        .send(Frame::Drain(Drain { grace_ms: 0 }))
        .await;
    second.sync().await;
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::AllExcluded);
    assert_eq!((census.compatible_workers, census.draining), (2, 2));
    first.sync().await;
    assert_eq!(
        node.registry().worker_count(),
        2,
        "a drained worker stays registered"
    );
}

#[tokio::test]
async fn a_departed_compatible_worker_leaves_its_departure_age_in_the_census() {
    let node = TestNode::start().await;
    let worker = AutoWorker::start(node.addr, on_node("ns", "act", "n1", 1, "w"), 0).await;
    served_by(&dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    let pid = worker.pid;
    drop(worker);
    node.events.wait_unregistered(pid).await;

    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
    let age = census.last_departure_ms_ago.expect("a departure age");
    assert!(age < 60_000, "implausible departure age {age} ms");
    // Only compatible departures count: a different node or activity never saw a worker leave.
    let elsewhere = no_worker(
        dispatch(
            &node,
            request("ns", "act", ""),
            DispatchOptions::default().pin("n2"),
        )
        .await,
    );
    assert_eq!(elsewhere.last_departure_ms_ago, None);
    let other = no_worker(
        dispatch(
            &node,
            request("ns", "other", ""),
            DispatchOptions::default(),
        )
        .await,
    );
    assert_eq!(other.last_departure_ms_ago, None);
}

#[tokio::test]
async fn keyed_state_grows_only_with_real_workers_and_cursors_go_with_them() {
    let node = TestNode::start().await;
    let registers = |name| registration(&["ns"], "tq", None, &["x", "y", "z"], 2, name);
    let first = AutoWorker::start(node.addr, registers("first"), 0).await;
    let second = AutoWorker::start(node.addr, registers("second"), 0).await;
    for activity in ["x", "y", "z"] {
        served_by(
            &dispatch(
                &node,
                request_in("ns", "tq", activity),
                DispatchOptions::default(),
            )
            .await,
        );
    }
    assert_eq!(node.registry().keyed_state_len(), (3, 0));
    // Names no worker announced leave nothing behind.
    for i in 0..50 {
        let activity = format!("made-up-{i}");
        no_worker(
            dispatch(
                &node,
                request_in("ns", "tq", &activity),
                DispatchOptions::default(),
            )
            .await,
        );
        no_worker(
            dispatch(
                &node,
                request_in(&format!("ns-{i}"), "tq", "x"),
                DispatchOptions::default(),
            )
            .await,
        );
    }
    assert_eq!(node.registry().keyed_state_len(), (3, 0));

    let pids = [first.pid, second.pid];
    drop((first, second));
    for pid in pids {
        node.events.wait_unregistered(pid).await;
    }
    let (cursors, departures) = node.registry().keyed_state_len();
    assert_eq!(cursors, 0, "rotation cursors outlived their workers");
    assert_eq!(departures, 3, "one departure record per announced address");
}
