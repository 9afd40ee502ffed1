//! Back-pressure against a real node on 127.0.0.1: a peer that stops reading fills its queue,
//! and the node refuses further pushes or stops reading the producer, while deadlines still fire.
//!
//! Workers are raw frame clients the test drives push by push, or auto workers that answer
//! every push with their own name (`support::peers`). Every wait is on a frame, an outcome or
//! an event, bounded by `within`.

use lintel_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::dispatch::DispatchOptions;
use lintel::sdk::Worker;
use lintel::wire::{
    DispatchRequest, DispatchResult, Frame, NodeRouting, RefusedReason, Role, Submit,
};
use support::{
    next_outcome, plain, quiet_config, request, served_by, small_window_client,
    small_window_worker, spawn_dispatch, submit_timing_out, within, RawWorker, TestNode, WAIT,
};

#[tokio::test]
async fn a_producer_that_stops_reading_is_read_no_further_yet_its_deadlines_still_fire() {
    let node = TestNode::with_config(quiet_config(64)).await;
    let echo = Worker::spawn(
        support::worker_config(node.addr.to_string(), plain("ns", "echo", 10_000, "echo")),
        lintel::activities::BuiltIn,
    );
    assert!(echo.wait_registered(WAIT).await.is_ok());
    let mut hung = RawWorker::start(node.addr, plain("ns", "act", 1, "hung")).await;
    let (mut wire, _pid) = small_window_client(node.addr, Role::Producer).await;

    wire.send(submit_timing_out(1, "hung", 300)).await;
    let push = hung.next_push().await;
    // Echoes of 64 KiB that the producer never reads: once its queue is full the node stops
    // reading, so the producer's writes stall long before all 128 MiB are taken.
    let input = Bytes::from(vec![b'x'; 64 * 1024]);
    let attempts = 2_000u64;
    let mut taken = 0u64;
    for correlation in 2..2 + attempts {
        let frame = Frame::from(Submit {
            correlation,
            request: DispatchRequest {
                input: input.clone(),
                ..request("ns", "echo", "e")
            },
            wait_for_worker_ms: None,
            reply_timeout_ms: None,
            routing: NodeRouting::Any,
            extras: Default::default(),
        });
        if tokio::time::timeout(Duration::from_secs(1), wire.framed.send(frame))
            .await
            .is_err()
        {
            break;
        }
        taken += 1;
    }
    assert!(
        taken < attempts,
        "the node read all {attempts} submissions from a producer that reads nothing"
    );

    // Its reply deadline still fires while the node waits for the producer to read.
    hung.expect_cancel(push.correlation).await;

    // Reading again, the producer gets an outcome for everything taken, the timeout among them.
    // An echo may be refused if the echo worker's own queue filled meanwhile.
    let mut timed_out = false;
    let mut answered = 0u64;
    within("the producer's backlog", async {
        while answered < taken || !timed_out {
            let outcome = next_outcome(&mut wire).await;
            match outcome.result {
                DispatchResult::Timeout { .. } if outcome.correlation == 1 => timed_out = true,
                DispatchResult::Completed(_) => answered += 1,
                DispatchResult::Refused(refused)
                    if refused.reason == RefusedReason::WorkerBackpressure =>
                {
                    answered += 1;
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_full_outbound_queue_is_refused_as_backpressure_and_the_worker_stays() {
    let node = TestNode::with_config(quiet_config(1)).await;
    let mut worker = small_window_worker(node.addr, plain("bp", "big", 10_000, "stalled")).await;
    let input = Bytes::from(vec![7u8; 1 << 20]);
    let big = || DispatchRequest {
        input: input.clone(),
        ..request("bp", "big", "")
    };

    // The worker reads nothing: pushes fill its socket, then the node's queue.
    let instant = DispatchOptions::default().reply_timeout(Duration::from_millis(1));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut pushed = 0usize;
    let refused = within("the worker's queue to fill", async {
        loop {
            match dispatcher.dispatch(big(), &instant).await {
                DispatchResult::Timeout { .. } => pushed += 1,
                DispatchResult::Refused(refused) => break refused,
                other => panic!("expected Timeout until Refused, got {other:?}"),
            }
            assert!(pushed < 512, "512 MiB pushed without back-pressure");
        }
    })
    .await;
    assert_eq!(refused.reason, RefusedReason::WorkerBackpressure);
    assert!(pushed > 0);
    assert_eq!(node.registry().worker_count(), 1);
    assert_eq!(node.events.unregistered(worker.pid), 0);
    assert_eq!(
        node.registry().reserved_slots(),
        pushed as u64,
        "each timed-out push holds its slot while the worker may run it; the refused one does not"
    );
    let counters = node.node.status().counters;
    assert_eq!((counters.refused, counters.worker_lost), (1, 0));

    // Reading again, the worker gets the backlog; new work then reaches it and completes.
    let patient = DispatchOptions::default().reply_timeout(WAIT);
    let mut seen = 0usize;
    let result = within("a dispatch after the backlog", async {
        let mut marker = spawn_dispatch(&node, request("bp", "big", "marker"), patient.clone());
        let mut retry = false;
        loop {
            tokio::select! {
                result = &mut marker, if !retry => match result.expect("dispatch task") {
                    DispatchResult::Refused(refused) if refused.reason == RefusedReason::WorkerBackpressure => {
                        retry = true;
                    }
                    other => panic!("expected the marker to complete, got {other:?}"),
                },
                frame = worker.client.framed.next() => {
                    match frame {
                        Some(Ok(Frame::Push(push))) if &push.request.input[..] == b"marker" => {
                            worker.reply(&push, "marker").await;
                            return marker.await.expect("dispatch task");
                        }
                        Some(Ok(Frame::Push(_))) => seen += 1,
                        Some(Ok(Frame::Cancel(_) | Frame::Ping(_))) => {}
                        other => panic!("unexpected {other:?}"),
                    }
                    if retry {
                        retry = false;
                        marker = spawn_dispatch(&node, request("bp", "big", "marker"), patient.clone());
                    }
                }
            }
        }
    })
    .await;
    assert_eq!(served_by(&result), "marker");
    assert_eq!(
        seen, pushed,
        "every push that was queued reached the worker"
    );
}
