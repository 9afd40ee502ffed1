//! Three nodes over real loopback sockets: relays, routing across nodes, the mesh learned
//! through one seed, capacity across nodes, waits woken by a peer, and the cluster census.

use lintel_test_support as support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lintel::sdk::{handler_fn, DispatchOptions};
use lintel::wire::{ActivityOutcome, DispatchResult, NoWorkerReason, PeerLinkState};
use support::{client, echo, on_node, plain, pool, request, sdk_worker, within, TestNode};
use tokio::task::JoinSet;

fn waiting(ms: u64) -> DispatchOptions {
    DispatchOptions::default().wait_for_worker(Duration::from_millis(ms))
}

/// Nodes a, b and c, b and c joined through a alone, fully linked.
async fn three_nodes() -> (TestNode, TestNode, TestNode) {
    let a = TestNode::joined("a", &[]).await;
    let b = TestNode::joined("b", &[&a]).await;
    let c = TestNode::joined("c", &[&a]).await;
    a.wait_linked(&["b", "c"]).await;
    b.wait_linked(&["a", "c"]).await;
    c.wait_linked(&["a", "b"]).await;
    (a, b, c)
}

#[tokio::test]
async fn a_worker_on_c_serves_a_producer_on_a() {
    let (a, _b, c) = three_nodes().await;
    let _worker = sdk_worker(c.addr, plain("ns", "echo", 4, "w-c"), echo()).await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    let done = within(
        "relayed dispatch",
        producer.submit(
            &support::dispatch_of(request("ns", "echo", "over the hop")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    match done.result {
        DispatchResult::Completed(response) => assert_eq!(
            response.outcome,
            ActivityOutcome::Success(Bytes::from_static(b"over the hop"))
        ),
        other => panic!("expected Completed, got {other:?}"),
    }
    assert_eq!(done.served_by.as_deref(), Some("c"));
    let peers = a.peers();
    let to_c = peers
        .iter()
        .find(|p| p.node_id == "c")
        .expect("c is a peer");
    assert_eq!((to_c.relays_sent, to_c.relays_in_flight), (1, 0));
}

#[tokio::test]
async fn a_local_worker_is_chosen_before_a_peer_by_default() {
    let (a, _b, c) = three_nodes().await;
    let _remote = sdk_worker(c.addr, plain("ns", "echo", 4, "w-c"), echo()).await;
    let _local = sdk_worker(a.addr, plain("ns", "echo", 4, "w-a"), echo()).await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    for _ in 0..8 {
        let done = within(
            "local dispatch",
            producer.submit(
                &support::dispatch_of(request("ns", "echo", "x")),
                &DispatchOptions::default(),
            ),
        )
        .await
        .expect("connection stays up");
        assert_eq!(done.served_by.as_deref(), Some("a"));
    }
}

#[tokio::test]
async fn pin_prefer_and_require_apply_to_worker_node_labels_across_the_cluster() {
    let (a, b, c) = three_nodes().await;
    let _east = sdk_worker(b.addr, on_node("ns", "echo", "east", 4, "w-b"), echo()).await;
    let _west = sdk_worker(c.addr, on_node("ns", "echo", "west", 4, "w-c"), echo()).await;
    a.wait_announced("b", &pool("ns")).await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    let cases = [
        (DispatchOptions::default().pin("west"), "c"),
        (DispatchOptions::default().pin("east"), "b"),
        (DispatchOptions::default().require(["east"]), "b"),
        (DispatchOptions::default().prefer(["west", "east"]), "c"),
        (DispatchOptions::default().prefer(["east", "west"]), "b"),
    ];
    for (options, expected) in cases {
        for _ in 0..4 {
            let done = within(
                "routed dispatch",
                producer.submit(&support::dispatch_of(request("ns", "echo", "x")), &options),
            )
            .await
            .expect("connection stays up");
            assert!(
                matches!(done.result, DispatchResult::Completed(_)),
                "{options:?}: {:?}",
                done.result
            );
            assert_eq!(done.served_by.as_deref(), Some(expected), "{options:?}");
        }
    }
    let nowhere = within(
        "dispatch required on an unknown node",
        producer.dispatch(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default().require(["north"]),
        ),
    )
    .await
    .expect("connection stays up");
    match nowhere {
        DispatchResult::NoWorker(census) => {
            assert_eq!(census.reason, NoWorkerReason::NodeFilterMatchedNobody);
            assert_eq!(
                census.serving_activity, 2,
                "both remote workers are counted"
            );
        }
        other => panic!("expected NoWorker, got {other:?}"),
    }
}

#[tokio::test]
async fn a_node_joined_through_one_seed_sees_the_whole_mesh() {
    let a = TestNode::joined("a", &[]).await;
    let b = TestNode::joined("b", &[&a]).await;
    b.wait_linked(&["a"]).await;
    let c = TestNode::joined("c", &[&b]).await;
    let d = TestNode::joined("d", &[&c]).await;
    for (node, others) in [
        (&a, ["b", "c", "d"]),
        (&b, ["a", "c", "d"]),
        (&c, ["a", "b", "d"]),
        (&d, ["a", "b", "c"]),
    ] {
        node.wait_linked(&others).await;
        let up = node
            .peers()
            .iter()
            .filter(|p| p.state == PeerLinkState::Up)
            .count();
        assert_eq!(up, 3, "exactly one link per pair of nodes");
    }
}

#[tokio::test]
async fn capacity_split_across_nodes_is_never_exceeded_under_load_from_every_node() {
    let (a, b, c) = three_nodes().await;
    let busiest = Arc::new(AtomicU32::new(0));
    let mut workers = Vec::new();
    for (node, name) in [(&a, "w-a"), (&b, "w-b"), (&c, "w-c")] {
        let running = Arc::new(AtomicU32::new(0));
        let (running, busiest) = (Arc::clone(&running), Arc::clone(&busiest));
        let handler = handler_fn(move |request: lintel::sdk::Request| {
            let (running, busiest) = (Arc::clone(&running), Arc::clone(&busiest));
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                busiest.fetch_max(now, Ordering::SeqCst);
                // The activity's own work: long enough that dispatches overlap.
                tokio::time::sleep(Duration::from_millis(5)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                ActivityOutcome::Success(request.input)
            }
        });
        workers.push(sdk_worker(node.addr, plain("ns", "work", 2, name), handler).await);
    }
    for node in [&a, &b, &c] {
        for other in ["a", "b", "c"] {
            if node.peers().iter().any(|p| p.node_id == other) {
                node.wait_announced(other, &pool("ns")).await;
            }
        }
    }
    let mut dispatches = JoinSet::new();
    for node in [&a, &b, &c] {
        let producer = client(node.addr).await;
        for i in 0..60 {
            let producer = producer.clone();
            dispatches.spawn(async move {
                producer
                    .submit(
                        &support::dispatch_of(request("ns", "work", &i.to_string())),
                        &waiting(10_000),
                    )
                    .await
            });
        }
    }
    let mut served = std::collections::BTreeMap::new();
    within("every dispatch of the load", async {
        while let Some(done) = dispatches.join_next().await {
            let done = done.expect("dispatch task").expect("connection stays up");
            assert!(
                matches!(done.result, DispatchResult::Completed(_)),
                "{:?}",
                done.result
            );
            *served
                .entry(done.served_by.unwrap_or_default())
                .or_insert(0) += 1;
        }
    })
    .await;
    assert!(
        busiest.load(Ordering::SeqCst) <= 2,
        "a worker of capacity 2 ran {} at once",
        busiest.load(Ordering::SeqCst)
    );
    assert_eq!(served.values().sum::<u32>(), 180);
    for node in [&a, &b, &c] {
        assert_eq!(node.registry().reserved_slots(), 0, "every slot is back");
    }
}

#[tokio::test]
async fn a_waiting_dispatch_on_a_is_woken_by_a_worker_registering_on_c() {
    let (a, _b, c) = three_nodes().await;
    let producer = client(a.addr).await;
    let waiting_dispatch = tokio::spawn(async move {
        producer
            .submit(
                &support::dispatch_of(request("ns", "echo", "woken")),
                &waiting(10_000),
            )
            .await
    });
    // The dispatch is queued on a before the worker exists anywhere.
    within("the dispatch to queue", async {
        loop {
            let mut seen = a.registry().changes().epoch();
            if a.registry().waiting() == 1 {
                return;
            }
            a.registry().changes().changed(&mut seen).await;
        }
    })
    .await;
    let _worker = sdk_worker(c.addr, plain("ns", "echo", 1, "w-c"), echo()).await;
    let done = within("the woken dispatch", waiting_dispatch)
        .await
        .expect("dispatch task")
        .expect("connection stays up");
    assert!(
        matches!(done.result, DispatchResult::Completed(_)),
        "{:?}",
        done.result
    );
    assert_eq!(done.served_by.as_deref(), Some("c"));
    assert_eq!(a.registry().waiting(), 0);
}

#[tokio::test]
async fn a_dispatch_without_a_wait_never_waits_on_peers_and_its_census_counts_remote_workers() {
    let (a, _b, c) = three_nodes().await;
    let (hold, held) = tokio::sync::oneshot::channel::<()>();
    let held = Arc::new(tokio::sync::Mutex::new(Some(held)));
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let handler = handler_fn(move |request: lintel::sdk::Request| {
        let (held, signal) = (Arc::clone(&held), Arc::clone(&signal));
        async move {
            if let Some(held) = held.lock().await.take() {
                signal.notify_one();
                let _ = held.await;
            }
            ActivityOutcome::Success(request.input)
        }
    });
    let _worker = sdk_worker(c.addr, plain("ns", "echo", 1, "w-c"), handler).await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    let first = {
        let producer = producer.clone();
        tokio::spawn(async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "first")),
                    &DispatchOptions::default(),
                )
                .await
        })
    };
    // c's one slot is taken by the first dispatch, and a has it charged.
    within("the first dispatch to run on c", started.notified()).await;
    let second = within(
        "a dispatch with no wait",
        producer.dispatch(
            &support::dispatch_of(request("ns", "echo", "second")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    match second {
        DispatchResult::NoWorker(census) => {
            assert_eq!(census.pool_workers, 1);
            assert_eq!(census.compatible_workers, 1);
            assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
        }
        other => panic!("expected NoWorker, got {other:?}"),
    }
    let _ = hold.send(());
    let first = within("the first dispatch", first)
        .await
        .expect("task")
        .expect("connection stays up");
    assert!(matches!(first, DispatchResult::Completed(_)), "{first:?}");
}

#[tokio::test]
async fn a_producer_cancel_crosses_the_hop_and_frees_the_remote_slot() {
    let (a, _b, c) = three_nodes().await;
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let handler = handler_fn(move |_request: lintel::sdk::Request| {
        let signal = Arc::clone(&signal);
        async move {
            signal.notify_one();
            std::future::pending::<ActivityOutcome>().await
        }
    });
    let _worker = sdk_worker(c.addr, plain("ns", "slow", 1, "w-c"), handler).await;
    a.wait_announced("c", &pool("ns")).await;
    let producer = client(a.addr).await;
    let dispatch = {
        let producer = producer.clone();
        tokio::spawn(async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("ns", "slow", "x")),
                    &DispatchOptions::default(),
                )
                .await
        })
    };
    within("the activity to start on c", started.notified()).await;
    // Dropping the dispatch future cancels it on a, which cancels the relay on c.
    dispatch.abort();
    within("c's slot to come back", async {
        loop {
            let mut seen = c.registry().changes().epoch();
            if c.registry().reserved_slots() == 0 {
                return;
            }
            c.registry().changes().changed(&mut seen).await;
        }
    })
    .await;
    a.wait_peers("the relay to be let go", |peers| {
        peers
            .iter()
            .any(|p| p.node_id == "c" && p.relays_in_flight == 0)
    })
    .await;
}

#[tokio::test]
async fn two_nodes_joining_through_one_seed_at_the_same_moment_still_find_each_other() {
    for _ in 0..5 {
        let a = TestNode::joined("a", &[]).await;
        let seed = [&a];
        let (b, c) = tokio::join!(TestNode::joined("b", &seed), TestNode::joined("c", &seed));
        b.wait_linked(&["a", "c"]).await;
        c.wait_linked(&["a", "b"]).await;
    }
}
