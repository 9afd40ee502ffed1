//! Routing against a real node on 127.0.0.1: node pins, prefer and require, task queues,
//! namespaces, the rotation among the workers that qualify, and bursts kept on one worker.
//!
//! Workers are raw frame clients the test drives push by push, or auto workers that answer
//! every push with their own name (`support::peers`). Every wait is on a frame, an outcome or
//! an event, bounded by `within`.

use lintel_test_support as support;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use futures_util::SinkExt;
use lintel::dispatch::DispatchOptions;
use lintel::wire::{DispatchRequest, Frame, NoWorkerReason};
use support::{
    count, counts, dispatch, next_outcome, no_worker, on_node, outcome_of, plain, producer,
    registration, request, request_in, served_by, spawn_dispatch, submit, AutoWorker, RawClient,
    RawWorker, TestNode,
};

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
// Bursts.

/// Writes `submissions` to the node in one write, so it reads them as one burst.
async fn submit_in_one_write(
    producer: &mut RawClient,
    submissions: impl IntoIterator<Item = Frame>,
) {
    for frame in submissions {
        SinkExt::<Frame>::feed(&mut producer.framed, frame)
            .await
            .expect("feed a submission");
    }
    SinkExt::<Frame>::flush(&mut producer.framed)
        .await
        .expect("write the burst");
}

/// Which worker served each of `n` outcomes, by the name it answered with.
async fn served_names(producer: &mut RawClient, n: usize) -> Vec<String> {
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        names.push(served_by(&next_outcome(producer).await.result));
    }
    names
}

#[tokio::test]
async fn dispatches_read_in_one_burst_go_to_one_worker_while_it_has_free_slots() {
    let node = TestNode::start().await;
    let mut workers = Vec::new();
    for name in ["w1", "w2", "w3", "w4"] {
        workers.push(AutoWorker::start(node.addr, plain("ns", "act", 3, name), 0).await);
    }
    let mut producer = producer(node.addr).await;
    let burst = (1..=8).map(|correlation| submit(correlation, request("ns", "act", ""), None));
    submit_in_one_write(&mut producer, burst).await;
    let served = count(served_names(&mut producer, 8).await);
    // Three slots each: the first worker is filled, then the next, then two on a third.
    let mut shares: Vec<usize> = served.values().copied().collect();
    shares.sort_unstable();
    assert_eq!(shares, [2, 3, 3], "{served:?}");
    assert!(workers
        .iter()
        .all(|worker| worker.stats.peak.load(Ordering::SeqCst) <= 3));
}

#[tokio::test]
async fn under_steady_traffic_every_worker_of_four_takes_a_share() {
    const DISPATCHES: u64 = 2_000;
    const IN_FLIGHT: u64 = 32;
    let node = TestNode::start().await;
    let mut workers = Vec::new();
    for name in ["w1", "w2", "w3", "w4"] {
        workers.push(AutoWorker::start(node.addr, plain("ns", "act", 16, name), 2).await);
    }
    let mut producer = producer(node.addr).await;
    let submission = |correlation| submit(correlation, request("ns", "act", ""), None);
    submit_in_one_write(&mut producer, (1..=IN_FLIGHT).map(submission)).await;
    let mut names = Vec::new();
    for correlation in IN_FLIGHT + 1..=DISPATCHES + IN_FLIGHT {
        names.push(served_by(&next_outcome(&mut producer).await.result));
        if correlation <= DISPATCHES {
            producer.send(submission(correlation)).await;
        }
    }
    let served = count(names);
    // A fair share is a quarter (500); each burst goes to the next worker in turn, so none is
    // left far behind. The bound leaves room for how the node happens to read the bursts.
    assert_eq!(served.len(), 4, "{served:?}");
    assert!(served.values().all(|&share| share >= 200), "{served:?}");
    assert!(workers
        .iter()
        .all(|worker| worker.stats.peak.load(Ordering::SeqCst) <= 16));
}
