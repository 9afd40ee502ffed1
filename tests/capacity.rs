//! Capacity against a real node on 127.0.0.1: no worker holds more pushes than its capacity,
//! capacity updates take effect at once, and a dispatch waiting for a slot or a worker is woken.
//!
//! Workers are raw frame clients the test drives push by push, or auto workers that answer
//! every push with their own name (`support::peers`). Every wait is on a frame, an outcome or
//! an event, bounded by `within`.

use lintel_test_support as support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lintel::dispatch::DispatchOptions;
use lintel::registry::Exclusion;
use lintel::sdk::{handler_fn, Client, ClientConfig, Worker, WorkerHandle};
use lintel::wire::{
    ActivityOutcome, CapacityUpdate, DispatchRequest, Drain, ErrorCode, Frame, NoWorkerReason,
    RefusalCode, Role,
};
use support::{
    count, counts, dispatch, next_frame, no_worker, outcome_of, parked, plain, poll_once, request,
    served_by, spawn_dispatch, within, AutoWorker, RawClient, RawWorker, Stats, TestNode, WAIT,
};
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_dispatches_never_exceed_any_sdk_workers_capacity() {
    const WORKERS: usize = 4;
    const CAPACITY: u32 = 3;
    const DISPATCHES: u64 = 1_000;
    let node = TestNode::start().await;
    let mut handles: Vec<WorkerHandle> = Vec::new();
    let mut stats = Vec::new();
    for i in 0..WORKERS {
        let name = format!("sdk{i}");
        let seen = Arc::new(Stats::default());
        stats.push(Arc::clone(&seen));
        let handler_name = name.clone();
        let handler = handler_fn(move |request: lintel::sdk::Request| {
            let (seen, name) = (Arc::clone(&seen), handler_name.clone());
            async move {
                let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                seen.peak.fetch_max(now, Ordering::SeqCst);
                seen.served.fetch_add(1, Ordering::SeqCst);
                // Some complete at once, some after yielding.
                for _ in 0..request.ordinal % 4 {
                    tokio::task::yield_now().await;
                }
                seen.in_flight.fetch_sub(1, Ordering::SeqCst);
                ActivityOutcome::Success(Bytes::from(name))
            }
        });
        let config =
            support::worker_config(node.addr.to_string(), plain("cap", "work", CAPACITY, &name));
        let handle = Worker::spawn(config, handler);
        within("sdk worker registration", handle.wait_registered(WAIT))
            .await
            .expect("registered");
        handles.push(handle);
    }
    let client = within(
        "client connect",
        Client::connect(node.addr, ClientConfig::default()),
    )
    .await
    .expect("client");

    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(60))
        .reply_timeout(Duration::from_secs(60));
    let mut set = JoinSet::new();
    for ordinal in 0..DISPATCHES {
        let request = DispatchRequest {
            ordinal,
            ..request("cap", "work", "")
        };
        let options = options.clone();
        if ordinal % 2 == 0 {
            let dispatcher = Arc::clone(node.node.dispatcher());
            set.spawn(async move { dispatcher.dispatch(request, &options).await });
        } else {
            let client = client.clone();
            set.spawn(async move {
                client
                    .dispatch(&support::dispatch_of(request), &options)
                    .await
                    .expect("client dispatch")
            });
        }
    }
    let results = within("a thousand dispatches", async {
        let mut results = Vec::new();
        while let Some(result) = set.join_next().await {
            results.push(result.expect("dispatch task"));
        }
        results
    })
    .await;

    // The SDK answers a push beyond its capacity with a failure, so an over-dispatch shows here.
    let served = count(results.iter().map(served_by));
    assert_eq!(served.values().sum::<usize>(), DISPATCHES as usize);
    assert_eq!(served.len(), WORKERS, "every worker served: {served:?}");
    for (i, seen) in stats.iter().enumerate() {
        let peak = seen.peak.load(Ordering::SeqCst);
        assert!(
            peak <= CAPACITY,
            "sdk{i} ran {peak} handlers at once, capacity {CAPACITY}"
        );
    }
    assert_eq!(node.registry().reserved_slots(), 0);
    assert_eq!(node.node.status().counters.completed, DISPATCHES);
    for handle in &handles {
        within("sdk worker shutdown", handle.shutdown()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_workers_never_hold_more_pushes_than_their_capacity() {
    const DISPATCHES: usize = 1_000;
    let capacities = [1u32, 2, 2, 3];
    let node = TestNode::start().await;
    let mut workers = Vec::new();
    for (i, cap) in capacities.iter().enumerate() {
        workers.push(
            AutoWorker::start(node.addr, plain("cap", "work", *cap, &format!("raw{i}")), 3).await,
        );
    }
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(60))
        .reply_timeout(Duration::from_secs(60));
    let mut set = JoinSet::new();
    for _ in 0..DISPATCHES {
        let dispatcher = Arc::clone(node.node.dispatcher());
        let options = options.clone();
        set.spawn(async move {
            dispatcher
                .dispatch(request("cap", "work", ""), &options)
                .await
        });
    }
    let served = within("a thousand dispatches", async {
        let mut served = Vec::new();
        while let Some(result) = set.join_next().await {
            served.push(served_by(&result.expect("dispatch task")));
        }
        served
    })
    .await;
    assert_eq!(served.len(), DISPATCHES);
    for (worker, cap) in workers.iter().zip(capacities) {
        let peak = worker.stats.peak.load(Ordering::SeqCst);
        assert!(
            peak <= cap,
            "a worker of capacity {cap} held {peak} pushes at once"
        );
        assert!(worker.stats.served.load(Ordering::SeqCst) > 0);
    }
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn a_worker_at_capacity_is_skipped() {
    let node = TestNode::start().await;
    let mut small = RawWorker::start(node.addr, plain("ns", "act", 1, "small")).await;
    let mut large = RawWorker::start(node.addr, plain("ns", "act", 3, "large")).await;

    let mut pending = vec![spawn_dispatch(
        &node,
        request("ns", "act", ""),
        DispatchOptions::default(),
    )];
    let small_push = small.next_push().await;
    // Rotation would come back to `small`; it is full, so both go to `large`.
    let mut large_pushes = Vec::new();
    for _ in 0..2 {
        pending.push(spawn_dispatch(
            &node,
            request("ns", "act", ""),
            DispatchOptions::default(),
        ));
        large_pushes.push(large.next_push().await);
    }
    small.sync().await;
    pending.push(spawn_dispatch(
        &node,
        request("ns", "act", ""),
        DispatchOptions::default(),
    ));
    large_pushes.push(large.next_push().await);

    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!((census.compatible_workers, census.at_capacity), (2, 2));
    assert_eq!(node.registry().reserved_slots(), 4);

    small.reply(&small_push, "small").await;
    for push in &large_pushes {
        large.reply(push, "large").await;
    }
    let served = count(
        futures_util::future::join_all(pending.into_iter().map(outcome_of))
            .await
            .iter()
            .map(served_by),
    );
    assert_eq!(served, counts(&[("large", 3), ("small", 1)]));
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn a_capacity_update_takes_effect_on_the_next_selection() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let first = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push1 = worker.next_push().await;
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);

    // Raise: the very next selection may use the new slot.
    worker
        .client
        .send(Frame::CapacityUpdate(CapacityUpdate { max_concurrency: 2 }))
        .await;
    worker.sync().await;
    let second = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push2 = worker.next_push().await;
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);

    // Lower below what is in flight: one reply leaves it still full.
    worker
        .client
        .send(Frame::CapacityUpdate(CapacityUpdate { max_concurrency: 1 }))
        .await;
    worker.sync().await;
    worker.reply(&push1, "1").await;
    assert_eq!(served_by(&outcome_of(first).await), "1");
    let census =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    worker.reply(&push2, "2").await;
    assert_eq!(served_by(&outcome_of(second).await), "2");

    let third = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push3 = worker.next_push().await;
    worker.reply(&push3, "3").await;
    assert_eq!(served_by(&outcome_of(third).await), "3");
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn zero_capacity_is_refused_at_registration_and_at_update() {
    let node = TestNode::start().await;
    let (mut client, pid) = RawClient::hello(node.addr, Role::Worker).await;
    client
        .send(Frame::from(plain("ns", "act", 0, "zero")))
        .await;
    match next_frame(&mut client).await {
        Some(Frame::RegisterRefused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::ZeroCapacity)
        }
        other => panic!("expected RegisterRefused, got {other:?}"),
    }
    assert_eq!(node.registry().worker_count(), 0);

    // The connection stays usable for a valid registration; a zero update then closes it.
    let mut worker = RawWorker::register(client, pid, plain("ns", "act", 1, "w")).await;
    worker
        .client
        .send(Frame::CapacityUpdate(CapacityUpdate { max_concurrency: 0 }))
        .await;
    match next_frame(&mut worker.client).await {
        Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::ZeroCapacity),
        other => panic!("expected an Error frame, got {other:?}"),
    }
    worker.client.closed().await;
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.registry().worker_count(), 0);
}

#[tokio::test]
async fn a_freed_slot_wakes_a_waiting_dispatch() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let first = spawn_dispatch(&node, request("ns", "act", "1"), DispatchOptions::default());
    let push1 = worker.next_push().await;

    // Far longer than `within`: only a wake can finish this in time.
    let wait = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut waiting = Box::pin(dispatcher.dispatch(request("ns", "act", "2"), &wait));
    assert!(poll_once(&mut waiting).await.is_pending());
    assert_eq!(parked(&node), 1);

    let (result, ()) = within("the woken dispatch", async {
        tokio::join!(&mut waiting, async {
            worker.reply(&push1, "1").await;
            let push2 = worker.next_push().await;
            worker.reply(&push2, "2").await;
        })
    })
    .await;
    assert_eq!(served_by(&result), "2");
    assert_eq!(served_by(&outcome_of(first).await), "1");
    assert_eq!(parked(&node), 0);
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn a_registration_wakes_a_waiting_dispatch() {
    let node = TestNode::start().await;
    let wait = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut waiting = Box::pin(dispatcher.dispatch(request("ns", "act", "x"), &wait));
    assert!(poll_once(&mut waiting).await.is_pending());
    assert_eq!(parked(&node), 1);

    let (result, ()) = within("the woken dispatch", async {
        tokio::join!(&mut waiting, async {
            let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "late")).await;
            let push = worker.next_push().await;
            worker.reply(&push, "late").await;
            // Keep the worker until the reply is read.
            worker.sync().await;
        })
    })
    .await;
    assert_eq!(served_by(&result), "late");
    assert_eq!(parked(&node), 0);
}

#[tokio::test]
async fn a_restored_worker_wakes_a_waiting_dispatch() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    worker
        .client
        .send(Frame::Drain(Drain { grace_ms: 0 }))
        .await;
    worker.sync().await;

    let wait = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let dispatcher = Arc::clone(node.node.dispatcher());
    let mut waiting = Box::pin(dispatcher.dispatch(request("ns", "act", "x"), &wait));
    assert!(poll_once(&mut waiting).await.is_pending());
    let (_, waiting_status) = node.registry().snapshot();
    assert_eq!(waiting_status.len(), 1);
    assert_eq!(waiting_status[0].census.reason, NoWorkerReason::AllExcluded);

    node.registry()
        .set_excluded(worker.worker_id, Exclusion::Draining, false);
    let (result, ()) = within("the woken dispatch", async {
        tokio::join!(&mut waiting, async {
            let push = worker.next_push().await;
            worker.reply(&push, "restored").await;
        })
    })
    .await;
    assert_eq!(served_by(&result), "restored");
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn a_wait_that_runs_out_reports_the_census_at_its_end() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let first = spawn_dispatch(&node, request("ns", "act", ""), DispatchOptions::default());
    let push = worker.next_push().await;
    let wait = Duration::from_millis(150);
    let started = Instant::now();
    let census = no_worker(
        dispatch(
            &node,
            request("ns", "act", ""),
            DispatchOptions::default().wait_for_worker(wait),
        )
        .await,
    );
    assert!(started.elapsed() >= wait);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(
        parked(&node),
        0,
        "a dispatch that stopped waiting is not counted as waiting"
    );
    worker.reply(&push, "1").await;
    assert_eq!(served_by(&outcome_of(first).await), "1");
}
