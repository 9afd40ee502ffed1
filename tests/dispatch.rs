//! Dispatch against a real node on 127.0.0.1: routing, round robin, capacity, lost workers,
//! timeouts, back-pressure, cancel, the no-worker census and drain.
//!
//! Most workers are raw frame clients, so a test states exactly which pushes a worker sees and
//! when it answers; "auto" workers answer every push by themselves with their own name, so a test
//! can tell who served. Every wait is on a frame, an outcome or an event, bounded by `within`.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, Client, ClientConfig, Worker, WorkerConfig, WorkerHandle};
use lintel::wire::{
    ActivityOutcome, Cancel, CapacityUpdate, DispatchRequest, DispatchResult, Drain, ErrorCode,
    Frame, NoWorkerReason, NodeRouting, RefusalCode, RefusedReason, Role, Submit,
};
use lintel::NodeConfig;
use support::{
    count, counts, dispatch, next_frame, next_outcome, no_worker, on_node, outcome_of, parked,
    plain, poll_once, producer, quiet_config, registration, request, request_in, served_by,
    small_window_client, small_window_worker, spawn_dispatch, submit, submit_timing_out, within,
    AutoWorker, RawClient, RawWorker, Stats, TestNode, WAIT,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// Helpers.

/// Sequential dispatches with default options; who served each, in order.
async fn serve_sequence(
    node: &TestNode,
    requests: Vec<(DispatchRequest, DispatchOptions)>,
) -> Vec<String> {
    let mut served = Vec::new();
    for (request, options) in requests {
        served.push(served_by(&dispatch(node, request, options).await));
    }
    served
}

fn times(
    n: usize,
    request: DispatchRequest,
    options: DispatchOptions,
) -> Vec<(DispatchRequest, DispatchOptions)> {
    (0..n).map(|_| (request.clone(), options.clone())).collect()
}

// ---------------------------------------------------------------------------------------------
// Routing.

#[tokio::test]
async fn a_node_pin_selects_only_that_nodes_workers() {
    let node = TestNode::start().await;
    let _a1 = AutoWorker::start(node.addr, on_node("ns", "act", "n1", 4, "a1"), 0).await;
    let _a2 = AutoWorker::start(node.addr, on_node("ns", "act", "n1", 4, "a2"), 0).await;
    let _b = AutoWorker::start(node.addr, on_node("ns", "act", "n2", 4, "b"), 0).await;
    let _c = AutoWorker::start(node.addr, plain("ns", "act", 4, "c"), 0).await;

    let pin_n1 = DispatchOptions::default().pin("n1");
    let served = serve_sequence(&node, times(6, request("ns", "act", ""), pin_n1)).await;
    assert_eq!(count(served), counts(&[("a1", 3), ("a2", 3)]));
    let pin_n2 = DispatchOptions::default().pin("n2");
    let served = serve_sequence(&node, times(3, request("ns", "act", ""), pin_n2)).await;
    assert_eq!(count(served), counts(&[("b", 3)]));

    let census = no_worker(
        dispatch(
            &node,
            request("ns", "act", ""),
            DispatchOptions::default().pin("n3"),
        )
        .await,
    );
    assert_eq!(census.reason, NoWorkerReason::NodeFilterMatchedNobody);
    assert_eq!(census.pool_workers, 4);
    assert_eq!(census.serving_activity, 4);
    assert_eq!(census.compatible_workers, 0);
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn a_request_node_pins_like_a_routing_pin() {
    let node = TestNode::start().await;
    let _a = AutoWorker::start(node.addr, on_node("ns", "act", "n1", 4, "a"), 0).await;
    let _b = AutoWorker::start(node.addr, on_node("ns", "act", "n2", 4, "b"), 0).await;
    let pinned = |node: &str| DispatchRequest {
        node: Some(node.to_owned()),
        ..request("ns", "act", "")
    };

    let served = serve_sequence(&node, times(4, pinned("n2"), DispatchOptions::default())).await;
    assert_eq!(count(served), counts(&[("b", 4)]));
    // An empty node is no pin at all.
    let served = serve_sequence(&node, times(4, pinned(""), DispatchOptions::default())).await;
    assert_eq!(count(served), counts(&[("a", 2), ("b", 2)]));

    let census = no_worker(dispatch(&node, pinned("n3"), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::NodeFilterMatchedNobody);
    assert_eq!(census.serving_activity, 2);
}

#[tokio::test]
async fn prefer_tries_nodes_in_order_then_spills_to_any() {
    let node = TestNode::start().await;
    let mut on_n1 = RawWorker::start(node.addr, on_node("ns", "act", "n1", 1, "n1")).await;
    let mut on_n2 = RawWorker::start(node.addr, on_node("ns", "act", "n2", 1, "n2")).await;
    let mut nodeless = RawWorker::start(node.addr, plain("ns", "act", 1, "any")).await;
    let prefer = DispatchOptions::default().prefer(["n2", "n1"]);

    let first = spawn_dispatch(&node, request("ns", "act", "1"), prefer.clone());
    let push_n2 = on_n2.next_push().await;
    let second = spawn_dispatch(&node, request("ns", "act", "2"), prefer.clone());
    let push_n1 = on_n1.next_push().await;
    let third = spawn_dispatch(&node, request("ns", "act", "3"), prefer.clone());
    let push_any = nodeless.next_push().await;
    let census = no_worker(dispatch(&node, request("ns", "act", "4"), prefer.clone()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(
        census.compatible_workers, 3,
        "the widest tier of prefer is any node"
    );

    on_n2.reply(&push_n2, "n2").await;
    on_n1.reply(&push_n1, "n1").await;
    nodeless.reply(&push_any, "any").await;
    assert_eq!(served_by(&outcome_of(first).await), "n2");
    assert_eq!(served_by(&outcome_of(second).await), "n1");
    assert_eq!(served_by(&outcome_of(third).await), "any");

    // With everyone idle again, the first preferred node wins over rotation.
    for _ in 0..3 {
        let again = spawn_dispatch(&node, request("ns", "act", "again"), prefer.clone());
        let push = on_n2.next_push().await;
        on_n2.reply(&push, "n2").await;
        assert_eq!(served_by(&outcome_of(again).await), "n2");
    }
    on_n1.sync().await;
    nodeless.sync().await;
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn require_accepts_any_node_of_its_set_and_never_spills() {
    let node = TestNode::start().await;
    let mut on_n1 = RawWorker::start(node.addr, on_node("ns", "act", "n1", 1, "n1")).await;
    let mut on_n2 = RawWorker::start(node.addr, on_node("ns", "act", "n2", 1, "n2")).await;
    let mut nodeless = RawWorker::start(node.addr, plain("ns", "act", 1, "any")).await;
    let mut on_n3 = RawWorker::start(node.addr, on_node("ns", "act", "n3", 1, "n3")).await;
    let require = DispatchOptions::default().require(["n1", "n2"]);

    let first = spawn_dispatch(&node, request("ns", "act", ""), require.clone());
    let second = spawn_dispatch(&node, request("ns", "act", ""), require.clone());
    // Both land inside the set, one on each (capacity one each), whichever order.
    let push_n1 = on_n1.next_push().await;
    let push_n2 = on_n2.next_push().await;
    let census = no_worker(dispatch(&node, request("ns", "act", ""), require.clone()).await);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(census.compatible_workers, 2);
    assert_eq!(census.at_capacity, 2);
    nodeless.sync().await;
    on_n3.sync().await;

    let census = no_worker(
        dispatch(
            &node,
            request("ns", "act", ""),
            DispatchOptions::default().require(["n9"]),
        )
        .await,
    );
    assert_eq!(census.reason, NoWorkerReason::NodeFilterMatchedNobody);

    on_n1.reply(&push_n1, "n1").await;
    on_n2.reply(&push_n2, "n2").await;
    let mut served = vec![
        served_by(&outcome_of(first).await),
        served_by(&outcome_of(second).await),
    ];
    served.sort();
    assert_eq!(served, ["n1", "n2"]);
    assert_eq!(node.registry().reserved_slots(), 0);
}

#[tokio::test]
async fn an_empty_task_queue_means_default() {
    let node = TestNode::start().await;
    let _unnamed = AutoWorker::start(
        node.addr,
        registration(&["ns"], "", None, &["act"], 4, "unnamed"),
        0,
    )
    .await;
    let _named = AutoWorker::start(
        node.addr,
        registration(&["ns"], "default", None, &["act"], 4, "named"),
        0,
    )
    .await;
    let _other = AutoWorker::start(
        node.addr,
        registration(&["ns"], "other", None, &["act"], 4, "other"),
        0,
    )
    .await;
    let both = counts(&[("named", 2), ("unnamed", 2)]);

    let served = serve_sequence(
        &node,
        times(4, request_in("ns", "", "act"), DispatchOptions::default()),
    )
    .await;
    assert_eq!(count(served), both);
    let served = serve_sequence(
        &node,
        times(
            4,
            request_in("ns", "default", "act"),
            DispatchOptions::default(),
        ),
    )
    .await;
    assert_eq!(count(served), both);
    let served = serve_sequence(
        &node,
        times(
            2,
            request_in("ns", "other", "act"),
            DispatchOptions::default(),
        ),
    )
    .await;
    assert_eq!(count(served), counts(&[("other", 2)]));
}

#[tokio::test]
async fn namespaces_are_isolated_and_never_normalized() {
    let node = TestNode::start().await;
    let tenant_a = AutoWorker::start(node.addr, plain("tenant-a", "act", 4, "a"), 0).await;
    let _tenant_b = AutoWorker::start(node.addr, plain("tenant-b", "act", 4, "b"), 0).await;

    let served = serve_sequence(
        &node,
        times(
            3,
            request("tenant-a", "act", ""),
            DispatchOptions::default(),
        ),
    )
    .await;
    assert_eq!(count(served), counts(&[("a", 3)]));
    let served = serve_sequence(
        &node,
        times(
            3,
            request("tenant-b", "act", ""),
            DispatchOptions::default(),
        ),
    )
    .await;
    assert_eq!(count(served), counts(&[("b", 3)]));
    for other in ["Tenant-A", "tenant-a ", "tenant"] {
        let census =
            no_worker(dispatch(&node, request(other, "act", ""), DispatchOptions::default()).await);
        assert_eq!(census.reason, NoWorkerReason::PoolEmpty, "{other:?}");
    }

    let pid = tenant_a.pid;
    drop(tenant_a);
    node.events.wait_unregistered(pid).await;
    let census = no_worker(
        dispatch(
            &node,
            request("tenant-a", "act", ""),
            DispatchOptions::default(),
        )
        .await,
    );
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
    let served = serve_sequence(
        &node,
        times(
            2,
            request("tenant-b", "act", ""),
            DispatchOptions::default(),
        ),
    )
    .await;
    assert_eq!(count(served), counts(&[("b", 2)]));
}

#[tokio::test]
async fn task_queues_partition_pools_within_a_namespace() {
    let node = TestNode::start().await;
    let _q1 = AutoWorker::start(
        node.addr,
        registration(&["ns"], "q1", None, &["act"], 4, "q1"),
        0,
    )
    .await;
    let _q2a = AutoWorker::start(
        node.addr,
        registration(&["ns"], "q2", None, &["act"], 4, "q2a"),
        0,
    )
    .await;
    let _q2b = AutoWorker::start(
        node.addr,
        registration(&["ns"], "q2", None, &["act"], 4, "q2b"),
        0,
    )
    .await;

    let served = serve_sequence(
        &node,
        times(4, request_in("ns", "q1", "act"), DispatchOptions::default()),
    )
    .await;
    assert_eq!(count(served), counts(&[("q1", 4)]));
    let served = serve_sequence(
        &node,
        times(4, request_in("ns", "q2", "act"), DispatchOptions::default()),
    )
    .await;
    assert_eq!(count(served), counts(&[("q2a", 2), ("q2b", 2)]));
    let census = no_worker(
        dispatch(
            &node,
            request_in("ns", "q3", "act"),
            DispatchOptions::default(),
        )
        .await,
    );
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
}

#[tokio::test]
async fn a_worker_serving_several_namespaces_is_reachable_in_each() {
    let node = TestNode::start().await;
    let both = AutoWorker::start(
        node.addr,
        registration(&["a", "b"], "", None, &["act"], 4, "ab"),
        0,
    )
    .await;
    let _only_a = AutoWorker::start(node.addr, plain("a", "act", 4, "a"), 0).await;

    let served = serve_sequence(
        &node,
        times(3, request("b", "act", ""), DispatchOptions::default()),
    )
    .await;
    assert_eq!(count(served), counts(&[("ab", 3)]));
    let served = serve_sequence(
        &node,
        times(4, request("a", "act", ""), DispatchOptions::default()),
    )
    .await;
    assert_eq!(count(served), counts(&[("a", 2), ("ab", 2)]));

    let pid = both.pid;
    drop(both);
    node.events.wait_unregistered(pid).await;
    let census =
        no_worker(dispatch(&node, request("b", "act", ""), DispatchOptions::default()).await);
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
    let served = serve_sequence(
        &node,
        times(2, request("a", "act", ""), DispatchOptions::default()),
    )
    .await;
    assert_eq!(count(served), counts(&[("a", 2)]));
}

// ---------------------------------------------------------------------------------------------
// Round robin.

/// Every window of `n` consecutive selections names `n` different workers.
#[track_caller]
fn assert_strict_rotation(served: &[String], n: usize) {
    for window in served.windows(n) {
        let distinct: BTreeSet<_> = window.iter().collect();
        assert_eq!(distinct.len(), n, "not a rotation: {served:?}");
    }
}

#[tokio::test]
async fn workers_with_the_same_activity_get_equal_shares() {
    const N: usize = 4;
    const K: usize = 6;
    let node = TestNode::start().await;
    let mut workers = Vec::new();
    for i in 0..N {
        workers
            .push(AutoWorker::start(node.addr, plain("ns", "act", 2, &format!("w{i}")), 0).await);
    }
    let served = serve_sequence(
        &node,
        times(K * N, request("ns", "act", ""), DispatchOptions::default()),
    )
    .await;
    assert_strict_rotation(&served, N);
    let shares = count(served);
    assert_eq!(shares.len(), N);
    assert!(
        shares.values().all(|&share| share == K),
        "unequal shares: {shares:?}"
    );
    for worker in &workers {
        assert_eq!(worker.stats.served.load(Ordering::SeqCst), K as u64);
    }
}

#[tokio::test]
async fn rotation_is_shared_by_pinned_and_unpinned_lookups() {
    const N: usize = 3;
    let node = TestNode::start().await;
    let mut workers = Vec::new();
    for i in 0..N {
        workers.push(
            AutoWorker::start(
                node.addr,
                on_node("ns", "act", "n1", 2, &format!("w{i}")),
                0,
            )
            .await,
        );
    }
    let requests = (0..4 * N)
        .map(|i| {
            let options = if i % 2 == 0 {
                DispatchOptions::default().pin("n1")
            } else {
                DispatchOptions::default()
            };
            (request("ns", "act", ""), options)
        })
        .collect();
    let served = serve_sequence(&node, requests).await;
    // Separate cursors for pinned and unpinned lookups would serve w0 w0 w1 w1 ...
    assert_strict_rotation(&served, N);
    assert!(count(served).values().all(|&share| share == 4));
}

#[tokio::test]
async fn rotation_is_kept_per_activity() {
    let node = TestNode::start().await;
    let registers = |name| registration(&["ns"], "", None, &["x", "y"], 2, name);
    let _first = AutoWorker::start(node.addr, registers("first"), 0).await;
    let _second = AutoWorker::start(node.addr, registers("second"), 0).await;
    let requests = ["x", "y", "x", "y"]
        .iter()
        .map(|activity| (request("ns", activity, ""), DispatchOptions::default()))
        .collect();
    let served = serve_sequence(&node, requests).await;
    // Each activity rotates on its own: x and y both start on the same worker, then both move.
    assert_eq!(served[0], served[1], "{served:?}");
    assert_eq!(served[2], served[3], "{served:?}");
    assert_ne!(served[0], served[2], "{served:?}");
}

// ---------------------------------------------------------------------------------------------
// Capacity.

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
        let handler = handler_fn(move |request: DispatchRequest| {
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
            WorkerConfig::new(node.addr.to_string(), plain("cap", "work", CAPACITY, &name));
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
                    .dispatch(request, &options)
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
        .send(Frame::Register(plain("ns", "act", 0, "zero")))
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

    node.registry().set_excluded(worker.worker_id, false);
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

// ---------------------------------------------------------------------------------------------
// Worker lost, timeout, back-pressure.

#[tokio::test]
async fn a_worker_dying_mid_dispatch_is_worker_lost_long_before_the_reply_timeout() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 2, "w")).await;
    let (worker_id, pid) = (worker.worker_id, worker.pid);
    let patient = DispatchOptions::default().reply_timeout(Duration::from_secs(30));
    let in_process = spawn_dispatch(&node, request("ns", "act", "a"), patient.clone());
    let mut wire = producer(node.addr).await;
    wire.send(Frame::Submit(Submit {
        correlation: 41,
        request: request("ns", "act", "b"),
        wait_for_worker_ms: None,
        reply_timeout_ms: Some(30_000),
        routing: NodeRouting::Any,
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
    // The node abandons the push on the worker, and a late reply is dropped, not misdelivered.
    worker.expect_cancel(push.correlation).await;
    worker.reply(&push, "late").await;
    worker.sync().await;
    assert_eq!(node.node.status().counters.dropped_replies, 1);
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
    assert_eq!(node.registry().reserved_slots(), 0);
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
    assert_eq!(node.node.status().counters.dropped_replies, 1);
}

#[tokio::test]
async fn a_producer_that_stops_reading_is_read_no_further_yet_its_deadlines_still_fire() {
    let node = TestNode::with_config(quiet_config(64)).await;
    let echo = Worker::spawn(
        WorkerConfig::new(node.addr.to_string(), plain("ns", "echo", 10_000, "echo")),
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
        let frame = Frame::Submit(Submit {
            correlation,
            request: DispatchRequest {
                input: input.clone(),
                ..request("ns", "echo", "e")
            },
            wait_for_worker_ms: None,
            reply_timeout_ms: None,
            routing: NodeRouting::Any,
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
    assert_eq!(node.registry().reserved_slots(), 0);
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

// ---------------------------------------------------------------------------------------------
// Cancel.

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
    assert_eq!(node.registry().reserved_slots(), 0);

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
    assert_eq!(node.registry().reserved_slots(), 0);
    assert_eq!(node.node.dispatcher().active(), 0);
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
            .dispatch(request("ns", "act", ""), &DispatchOptions::default())
            .await
    });
    let push = worker.next_push().await;
    abandoned.abort();
    worker.expect_cancel(push.correlation).await;

    // The slot comes back: the next dispatch through the same client reaches the worker.
    let next = tokio::spawn(async move {
        client
            .dispatch(request("ns", "act", "next"), &DispatchOptions::default())
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
    worker.sync().await;
    assert_eq!(node.registry().reserved_slots(), 0);
    assert_eq!(node.registry().worker_count(), 1);
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
            census.excluded
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
    assert_eq!((census.compatible_workers, census.excluded), (2, 2));
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

// ---------------------------------------------------------------------------------------------
// Drain.

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
async fn an_in_flight_dispatch_outliving_the_drain_timeout_ends_worker_lost() {
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
    assert_eq!(
        outcome_of(in_flight).await,
        DispatchResult::WorkerLost {
            worker_id: worker.worker_id
        }
    );
    worker.client.closed().await;
    node.shutdown().await;
}
