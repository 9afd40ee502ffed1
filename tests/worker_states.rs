//! Workers as the node keeps them, over real sockets: a new worker earns eligibility by
//! answering its probation pings; one that stops answering is excluded (unreachable) while it
//! keeps what it runs, restored at its next answer, and closed at the missed-ping limit; each
//! worker's state shows in the admin status and metrics.
//!
//! Every wait is on a frame, an outcome or a registry change, bounded by `within`. Where the
//! tests read "excluded before the next ping", the node's keep-alive tells a ping overdue
//! before it sends a later one, so the order holds however late the node's timer fires.

use lintel_test_support as support;

use std::time::Duration;

use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, Request};
use lintel::status::Standing;
use lintel::wire::{
    ActivityOutcome, Census, DispatchResult, ErrorCode, Frame, NoWorkerReason, Pong, Registered,
    Role,
};
use lintel::NodeConfig;
use prometheus_parse::{Scrape, Value};
use support::{
    admin_get, answer_again, client, dispatch, fall_silent, next_frame, next_outcome, no_worker,
    outcome_of, parked, plain, producer, request, sdk_worker, served_by, spawn_dispatch, submit,
    unanswered_ping, watchful, within, AutoWorker, RawClient, RawWorker, TestNode,
};

/// No keep-alive ping within a test's life: the only pings are probation's.
fn probation_only(pings: u32) -> NodeConfig {
    NodeConfig {
        ping_interval_ms: 600_000,
        worker_probation_pings: pings,
        // The bound on a dispatch waiting for a probation, far above any test's pace.
        worker_ping_timeout_ms: 60_000,
        ..NodeConfig::default()
    }
}

fn state_of(node: &TestNode, worker_id: u64) -> Option<Standing> {
    let states = node.registry().states();
    states
        .iter()
        .find(|(id, _)| *id == worker_id)
        .map(|(_, standing)| *standing)
}

/// The census a version-1 producer gets for a dispatch to `ns` / `act` that asked no wait.
async fn version_1_census(node: &TestNode) -> Census {
    let mut producer = producer(node.addr).await;
    producer
        .send(submit(1, request("ns", "act", ""), None))
        .await;
    match next_outcome(&mut producer).await.result {
        DispatchResult::NoWorker(census) => census,
        other => panic!("expected NoWorker, got {other:?}"),
    }
}

fn gauge(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .find(|sample| {
            labels
                .iter()
                .all(|(key, value)| sample.labels.get(key) == Some(value))
        })
        .and_then(|sample| match sample.value {
            Value::Gauge(value) | Value::Untyped(value) => Some(value),
            _ => None,
        })
}

/// Each worker's `state` in the admin `/status`, by identity.
fn states_in(status: &serde_json::Value) -> Vec<(String, String)> {
    let mut states: Vec<(String, String)> = status["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .flat_map(|pool| pool["workers"].as_array().expect("workers").iter())
        .map(|worker| {
            (
                worker["identity"].as_str().expect("identity").to_owned(),
                worker["state"].as_str().expect("a state").to_owned(),
            )
        })
        .collect();
    states.sort();
    states
}

#[tokio::test]
async fn a_worker_that_stops_answering_is_excluded_and_dispatches_go_to_the_other_at_once() {
    let (node, admin) = TestNode::with_admin(watchful()).await;
    let mut silent = RawWorker::start(node.addr, plain("ns", "act", 4, "silent")).await;
    let _other = AutoWorker::start(node.addr, plain("ns", "act", 4, "other"), 0).await;

    fall_silent(&node, &mut silent).await;
    // Round-robin would give `silent` every other dispatch; none waits for it.
    for i in 0..4 {
        let result = dispatch(
            &node,
            request("ns", "act", &i.to_string()),
            DispatchOptions::default(),
        )
        .await;
        assert_eq!(served_by(&result), "other");
    }
    // It was pushed nothing: the next frame it gets is the next ping.
    unanswered_ping(&mut silent.client).await;

    // What `lintel status` reads: a version-3 producer's status document.
    let document = within("the status document", client(node.addr).await.status())
        .await
        .expect("a status document");
    let silent_state = document
        .pools
        .iter()
        .flat_map(|pool| &pool.workers)
        .find(|worker| worker.identity == "silent")
        .and_then(|worker| worker.state);
    assert_eq!(silent_state, Some(Standing::Unreachable));

    let (code, status) = admin_get(admin, "/status").await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(
        states_in(&status),
        [
            ("other".to_owned(), "eligible".to_owned()),
            ("silent".to_owned(), "unreachable".to_owned())
        ]
    );
    let (_, text) = admin_get(admin, "/metrics").await;
    let scrape = Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("metrics");
    let channel = "aion.dispatch.ns.default";
    let by_state = |state| {
        gauge(
            &scrape,
            "lintel_pool_workers_by_state",
            &[("pool", channel), ("state", state)],
        )
    };
    assert_eq!(
        [
            by_state("probation"),
            by_state("eligible"),
            by_state("unreachable"),
            by_state("draining")
        ],
        [Some(0.0), Some(1.0), Some(1.0), Some(0.0)]
    );
}

#[tokio::test]
async fn an_unreachable_worker_is_restored_at_its_next_answer_and_wakes_a_waiting_dispatch() {
    let node = TestNode::with_config(watchful()).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let latest = fall_silent(&node, &mut worker).await;

    // A pool of only unreachable workers says so.
    let missed =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(missed.reason, NoWorkerReason::AllUnreachable);
    assert_eq!((missed.unreachable, missed.at_capacity), (Some(1), 0));

    let waiting = DispatchOptions::default().wait_for_worker(Duration::from_secs(600));
    let woken = spawn_dispatch(&node, request("ns", "act", "woken"), waiting);
    node.wait_registry("the dispatch to wait", |_| parked(&node) == 1)
        .await;

    answer_again(&mut worker, latest).await;
    assert_eq!(state_of(&node, worker.worker_id), Some(Standing::Eligible));
    let push = worker.next_push().await;
    worker.reply(&push, "restored").await;
    assert_eq!(served_by(&outcome_of(woken).await), "restored");
}

#[tokio::test]
async fn an_unreachable_worker_keeps_its_push_until_the_missed_ping_limit_ends_it_worker_lost() {
    let node = TestNode::with_config(NodeConfig {
        max_missed_pings: 3,
        ..watchful()
    })
    .await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "held")).await;
    let patient = DispatchOptions::default().reply_timeout(Duration::from_secs(600));
    let held = spawn_dispatch(&node, request("ns", "act", "held"), patient);
    worker.next_push().await;

    fall_silent(&node, &mut worker).await;
    assert!(!held.is_finished(), "exclusion leaves the push in flight");
    // Holding its one slot, the unreachable worker does not make the pool read full, to a
    // version-3 reader nor to an earlier one.
    let missed =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    assert_eq!(missed.reason, NoWorkerReason::AllUnreachable);
    assert_eq!((missed.unreachable, missed.at_capacity), (Some(1), 0));
    let earlier = version_1_census(&node).await;
    assert_eq!(earlier.reason, NoWorkerReason::AllExcluded);
    assert_eq!(
        (earlier.draining, earlier.unreachable, earlier.at_capacity),
        (1, None, 0),
        "a version-1 census counts every exclusion as one"
    );

    let error = loop {
        match worker.client.recv().await {
            Some(Frame::Ping(_)) => {}
            Some(Frame::Error(error)) => break error,
            other => panic!("expected pings, then an Error, got {other:?}"),
        }
    };
    assert_eq!(error.code, ErrorCode::LivenessTimeout, "{}", error.reason);
    assert_eq!(
        outcome_of(held).await,
        DispatchResult::WorkerLost {
            worker_id: worker.worker_id
        }
    );
}

/// Connects and registers a worker without answering anything: the client and its worker id.
async fn registered_raw(node: &TestNode, identity: &str) -> (RawClient, u64) {
    let (mut client, _) = RawClient::hello(node.addr, Role::Worker).await;
    client
        .send(Frame::from(plain("ns", "act", 1, identity)))
        .await;
    match client.recv().await {
        Some(Frame::Registered(Registered { worker_id })) => (client, worker_id),
        other => panic!("expected Registered, got {other:?}"),
    }
}

#[tokio::test]
async fn probation_delays_a_new_workers_first_push_by_one_round_trip() {
    let node = TestNode::with_config(probation_only(1)).await;
    let (mut client, worker_id) = registered_raw(&node, "new").await;
    // The probation ping comes at once, right behind the acknowledgement.
    let ping = unanswered_ping(&mut client).await;
    assert_eq!(state_of(&node, worker_id), Some(Standing::Probation));

    // A dispatch that asked for no wait waits for the probation.
    let first = spawn_dispatch(
        &node,
        request("ns", "act", "first"),
        DispatchOptions::default(),
    );
    node.wait_registry("the dispatch to wait", |_| parked(&node) == 1)
        .await;
    client.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
    let push = match next_frame(&mut client).await {
        Some(Frame::Push(push)) => push,
        other => panic!("expected the push once the ping was answered, got {other:?}"),
    };
    assert_eq!(state_of(&node, worker_id), Some(Standing::Eligible));
    client.send(support::reply_frame(&push, "new")).await;
    assert_eq!(served_by(&outcome_of(first).await), "new");
}

#[tokio::test]
async fn each_probation_ping_goes_out_as_the_last_is_answered() {
    let node = TestNode::with_config(probation_only(3)).await;
    let (mut client, worker_id) = registered_raw(&node, "new").await;
    for _ in 0..3 {
        assert_eq!(state_of(&node, worker_id), Some(Standing::Probation));
        let ping = unanswered_ping(&mut client).await;
        client.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
    }
    node.wait_registry("probation to end", |_| {
        state_of(&node, worker_id) == Some(Standing::Eligible)
    })
    .await;
}

#[tokio::test]
async fn zero_probation_pings_select_a_worker_as_it_registers() {
    let node = TestNode::with_config(probation_only(0)).await;
    let (mut client, worker_id) = registered_raw(&node, "new").await;
    assert_eq!(state_of(&node, worker_id), Some(Standing::Eligible));
    let first = spawn_dispatch(
        &node,
        request("ns", "act", "first"),
        DispatchOptions::default(),
    );
    // No ping comes first.
    let push = match client.recv().await {
        Some(Frame::Push(push)) => push,
        other => panic!("expected the push at once, got {other:?}"),
    };
    client.send(support::reply_frame(&push, "new")).await;
    assert_eq!(served_by(&outcome_of(first).await), "new");
}

#[tokio::test]
async fn a_dispatch_waits_for_a_probation_no_longer_than_the_ping_timeout() {
    let node = TestNode::with_config(NodeConfig {
        worker_ping_timeout_ms: 200,
        ..probation_only(1)
    })
    .await;
    let (mut client, _) = registered_raw(&node, "mute").await;
    unanswered_ping(&mut client).await;
    let missed =
        no_worker(dispatch(&node, request("ns", "act", ""), DispatchOptions::default()).await);
    // Still in probation, or unreachable too if its ping timed out first.
    assert!(
        matches!(
            missed.reason,
            NoWorkerReason::AllInProbation | NoWorkerReason::AllUnreachable
        ),
        "{missed:?}"
    );
    assert_eq!(missed.compatible_workers, 1);
    assert_eq!(
        missed.probation.unwrap_or(0) + missed.unreachable.unwrap_or(0),
        1
    );
}

#[tokio::test]
async fn a_worker_registered_then_dispatched_to_at_once_serves_with_no_wait_asked() {
    let node = TestNode::start().await;
    let echo =
        handler_fn(|request: Request| std::future::ready(ActivityOutcome::Success(request.input)));
    // Registered as the acknowledgement arrives: its probation's answer is still on its way.
    let _worker = sdk_worker(node.addr, plain("ns", "echo", 1, "w"), echo).await;
    let result = dispatch(
        &node,
        request("ns", "echo", "at once"),
        DispatchOptions::default(),
    )
    .await;
    assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
}
