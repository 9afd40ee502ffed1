//! Priority and fairness when a pool is full, against a real node on 127.0.0.1: a freed slot
//! goes to the highest priority waiting (a lower one that waited long enough goes first), keys
//! share slots by weight, first come first served within a key, and a key's cap holds it to its
//! slots while the rest of the pool serves others.
//!
//! Producers are in-process (a version-2 submission carries no priority, key or weight; a
//! producer's grant names its key); workers speak over real sockets: SDK workers whose tasks
//! take 20 ms where the order comes from the node under load, raw workers the test answers
//! push by push where one push must be the next. Every wait is on an event, bounded by
//! `within`.

use lintel_test_support as support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lintel::auth::{FairnessKeySource, GrantConfig, GrantRole};
use lintel::dispatch::DispatchOptions;
use lintel::registry::fairness::{FairnessStatus, KeyPolicy, Weight};
use lintel::sdk::{handler_fn, Client, ClientConfig};
use lintel::wire::{ActivityOutcome, DispatchRequest, DispatchResult, RefusedReason};
use lintel::NodeConfig;
use prometheus_parse::{Scrape, Value};
use support::{
    admin_get, assert_b_served_within_25, count_with, logging_worker, plain, request, served_by,
    spawn_dispatch, wait_fairness, waiting, within, RawWorker, TestNode, TASK,
};
use tokio::task::JoinHandle;

/// A dispatch to `ns`/`work` whose input is `input`.
fn work(input: &str) -> DispatchRequest {
    request("ns", "work", input)
}

/// Dispatches `n` inputs `label:0`, `label:1`, ... in-process with `options`.
fn dispatch_many(
    node: &TestNode,
    label: &str,
    n: usize,
    options: &DispatchOptions,
) -> Vec<JoinHandle<DispatchResult>> {
    (0..n)
        .map(|i| spawn_dispatch(node, work(&format!("{label}:{i}")), options.clone()))
        .collect()
}

fn waiting_of(status: &FairnessStatus, key: &str) -> u64 {
    status
        .waiting_by_key
        .iter()
        .find(|(k, _)| k == key)
        .map_or(0, |(_, n)| *n)
}

fn served_of(status: &FairnessStatus, key: &str) -> u64 {
    status
        .served
        .by_key
        .iter()
        .find(|(k, _)| k == key)
        .map_or(0, |(_, n)| *n)
}

/// Waits until every dispatch of `key` is waiting or was given a slot.
async fn all_placed(node: &TestNode, key: &str, n: u64) {
    wait_fairness(
        node,
        &format!("{n} dispatches of {key} queued or placed"),
        |s| waiting_of(s, key) + served_of(s, key) == n,
    )
    .await;
}

fn abort(handles: Vec<JoinHandle<DispatchResult>>) {
    for handle in handles {
        handle.abort();
    }
}

#[tokio::test]
async fn a_key_that_queues_after_another_is_served_within_a_few_completions() {
    let node = TestNode::start().await;
    let (_worker, log) = logging_worker(node.addr, 1, TASK).await;

    // One `a` runs, 200 wait; then 10 `b` queue behind them.
    let a = dispatch_many(&node, "a", 201, &waiting(3, "a", 1_000));
    all_placed(&node, "a", 201).await;
    let b = dispatch_many(&node, "b", 10, &waiting(3, "b", 1_000));
    all_placed(&node, "b", 10).await;
    let mark = log.completed().len();
    for handle in b {
        assert!(matches!(
            within("a b dispatch", handle).await.expect("task"),
            DispatchResult::Completed(_)
        ));
    }
    assert_b_served_within_25(&log.completed(), mark);
    abort(a);
}

/// Queues 400 dispatches of `heavy` and of `light` with the weights they ask for, then lets
/// one worker serve; checks the first 400 served are about 3:1.
async fn three_to_one(node: &TestNode, heavy_asks: u32, light_asks: u32) {
    // Both keys queue in full before any worker is there, so both wait throughout.
    let heavy = dispatch_many(node, "heavy", 400, &waiting(3, "heavy", heavy_asks));
    let light = dispatch_many(node, "light", 400, &waiting(3, "light", light_asks));
    all_placed(node, "heavy", 400).await;
    all_placed(node, "light", 400).await;
    let (_worker, log) = logging_worker(node.addr, 1, Duration::ZERO).await;
    log.wait("400 completions", |done| done.len() >= 400).await;
    let first: Vec<String> = log.completed().into_iter().take(400).collect();
    let (h, l) = (count_with(&first, "heavy:"), count_with(&first, "light:"));
    // 3:1 of 400 is 300:100; within 10% either way.
    let ratio = h as f64 / l as f64;
    assert!(
        (2.7..=3.3).contains(&ratio),
        "heavy {h} light {l}: ratio {ratio:.2}"
    );
    abort(heavy);
    abort(light);
}

#[tokio::test]
async fn weights_of_three_to_one_give_three_to_one_service_under_sustained_load() {
    three_to_one(&TestNode::start().await, 3_000, 1_000).await;
}

#[tokio::test]
async fn a_weight_listed_for_a_key_replaces_the_one_its_requests_ask_for() {
    let node = TestNode::with_config(NodeConfig {
        fairness: vec![KeyPolicy {
            key: "heavy".into(),
            max_in_flight: None,
            weight: Some(Weight(3_000)),
        }],
        ..NodeConfig::default()
    })
    .await;
    three_to_one(&node, 100, 1_000).await;
}

#[tokio::test]
async fn a_priority_one_dispatch_behind_a_hundred_priority_three_waiters_is_pushed_next() {
    let node = TestNode::start().await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "work", 1, "raw")).await;
    let first = spawn_dispatch(&node, work("p3:first"), waiting(3, "", 1_000));
    let held = worker.next_push().await;
    let behind = dispatch_many(&node, "p3", 100, &waiting(3, "", 1_000));
    wait_fairness(&node, "100 priority-3 waiters", |s| {
        s.waiting_by_priority[2] == 100
    })
    .await;
    // The urgent one comes over the wire, as a version-3 submission with its priority.
    let producer = support::client(node.addr).await;
    let urgent = tokio::spawn(async move {
        let options = DispatchOptions::default()
            .wait_for_worker(Duration::from_secs(60))
            .priority(1);
        producer
            .dispatch(&support::dispatch_of(work("p1:urgent")), &options)
            .await
    });
    wait_fairness(&node, "the priority-1 waiter", |s| {
        s.waiting_by_priority[0] == 1
    })
    .await;

    worker.reply(&held, "done").await;
    let next = worker.next_push().await;
    assert_eq!(next.request.input, Bytes::from("p1:urgent"));
    worker.reply(&next, "urgent done").await;
    let outcome = within("the urgent outcome", urgent).await.expect("task");
    assert_eq!(served_by(&outcome.expect("connection")), "urgent done");
    // Then the priority-3 waiters, in their order.
    let after = worker.next_push().await;
    assert_eq!(after.request.input, Bytes::from("p3:0"));
    assert!(matches!(
        within("the first outcome", first).await.expect("task"),
        DispatchResult::Completed(_)
    ));
    abort(behind);
}

#[tokio::test]
async fn a_low_priority_is_raised_by_aging_while_higher_ones_keep_arriving() {
    // Each priority step is 20 ms of waiting: a priority-5 dispatch ranks 80 ms after its
    // arrival, so it goes before priority-1 dispatches that arrive later than that. Strict
    // priority would serve it only once priority 1 stops arriving.
    let node = TestNode::with_config(NodeConfig {
        priority_aging_ms: 20,
        ..NodeConfig::default()
    })
    .await;
    let (_worker, log) = logging_worker(node.addr, 1, TASK).await;
    let stop = Arc::new(AtomicU32::new(0));
    let mut loops = Vec::new();
    // Four producers each dispatch priority 1 again as soon as the last one completed.
    for producer in 0..4 {
        let dispatcher = Arc::clone(node.node.dispatcher());
        let stop = Arc::clone(&stop);
        loops.push(tokio::spawn(async move {
            for i in 0..300 {
                if stop.load(Ordering::SeqCst) > 0 {
                    break;
                }
                let input = format!("p1:{producer}-{i}");
                dispatcher
                    .dispatch(work(&input), &waiting(1, "", 1_000))
                    .await;
            }
        }));
    }
    wait_fairness(&node, "priority 1 waiting", |s| {
        s.waiting_by_priority[0] >= 2
    })
    .await;
    let before = count_with(&log.completed(), "p1:");
    let low = spawn_dispatch(&node, work("p5:low"), waiting(5, "", 1_000));
    let outcome = within("the priority-5 dispatch", low).await.expect("task");
    assert!(
        matches!(outcome, DispatchResult::Completed(_)),
        "{outcome:?}"
    );
    let passed = count_with(&log.completed(), "p1:") - before;
    stop.store(1, Ordering::SeqCst);
    // About 8 tasks of 20 ms pass before it ranks first; 100 is far beyond.
    assert!(
        passed < 100,
        "{passed} priority-1 dispatches completed first"
    );
    for handle in loops {
        within("the priority-1 producers", handle)
            .await
            .expect("task");
    }
}

/// A node with the key `noisy` capped at one dispatch running on its workers.
fn capped_config() -> NodeConfig {
    NodeConfig {
        fairness: vec![KeyPolicy {
            key: "noisy".into(),
            max_in_flight: Some(1),
            weight: None,
        }],
        ..NodeConfig::default()
    }
}

#[tokio::test]
async fn a_capped_key_holds_its_slots_while_the_rest_of_the_pool_serves_others() {
    let node = TestNode::with_config(capped_config()).await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "work", 3, "raw")).await;
    let noisy = dispatch_many(&node, "noisy", 3, &waiting(3, "noisy", 1_000));
    let first_noisy = worker.next_push().await;
    all_placed(&node, "noisy", 3).await;
    let quiet = dispatch_many(&node, "quiet", 3, &waiting(3, "quiet", 1_000));
    let mut quiet_pushes = vec![worker.next_push().await, worker.next_push().await];
    all_placed(&node, "quiet", 3).await;
    let status = node.registry().fairness();
    assert_eq!(
        (waiting_of(&status, "noisy"), waiting_of(&status, "quiet")),
        (2, 1),
        "two slots were free for noisy's waiters, its cap held them back"
    );
    assert_eq!(status.capped, [("noisy".to_owned(), 1, 1)]);
    for push in &quiet_pushes {
        assert!(push.request.input.starts_with(b"quiet:"));
    }

    // A noisy dispatch that may not wait is refused, naming the cap.
    let refused = node
        .node
        .dispatcher()
        .dispatch(
            work("noisy:now"),
            &DispatchOptions::default().fairness_key("noisy"),
        )
        .await;
    match refused {
        DispatchResult::Refused(refused) => {
            assert_eq!(refused.reason, RefusedReason::FairnessCapReached);
            assert!(refused.detail.contains("noisy"), "{}", refused.detail);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    // A freed slot passes noisy's earlier waiters by for quiet's.
    let done = quiet_pushes.remove(0);
    worker.reply(&done, "ok").await;
    let next = worker.next_push().await;
    assert_eq!(next.request.input, Bytes::from("quiet:2"));
    // Once noisy's running dispatch ends, its next waiter takes the slot.
    worker.reply(&first_noisy, "ok").await;
    let next_noisy = worker.next_push().await;
    assert_eq!(next_noisy.request.input, Bytes::from("noisy:1"));
    for push in [next, next_noisy] {
        worker.reply(&push, "ok").await;
    }
    abort(noisy);
    abort(quiet);
}

#[tokio::test]
async fn a_key_below_its_cap_again_is_served_by_any_free_worker_it_waits_for() {
    let node = TestNode::with_config(capped_config()).await;
    let mut x = RawWorker::start(node.addr, plain("ns", "x", 1, "x")).await;
    let mut y = RawWorker::start(node.addr, plain("ns", "y", 1, "y")).await;
    let on_x = spawn_dispatch(
        &node,
        request("ns", "x", "noisy:x"),
        waiting(3, "noisy", 1_000),
    );
    let running = x.next_push().await;
    // `y` is free, but noisy is at its cap.
    let on_y = spawn_dispatch(
        &node,
        request("ns", "y", "noisy:y"),
        waiting(3, "noisy", 1_000),
    );
    wait_fairness(&node, "noisy waiting for y", |s| {
        waiting_of(s, "noisy") == 1
    })
    .await;
    // The slot that frees is x's, which the waiter cannot use; y takes it.
    x.reply(&running, "ok").await;
    let pushed = y.next_push().await;
    assert_eq!(pushed.request.input, Bytes::from("noisy:y"));
    y.reply(&pushed, "ok").await;
    for handle in [on_x, on_y] {
        assert!(matches!(
            within("an outcome", handle).await.expect("task"),
            DispatchResult::Completed(_)
        ));
    }
}

#[tokio::test]
async fn a_wire_producer_dispatches_under_its_grants_key() {
    let grant = |token: &str, key: Option<&str>| GrantConfig {
        token: Some(token.into()),
        identity: None,
        roles: vec![GrantRole::Producer],
        namespaces: vec!["ns".into()],
        fairness_key: key.map(str::to_owned),
        fairness_weights: false,
    };
    let node = TestNode::with_config(NodeConfig {
        auth_token: Some("root".into()),
        grants: vec![grant("first", None), grant("second", Some("beta"))],
        ..NodeConfig::default()
    })
    .await;
    let root = {
        let mut config = ClientConfig::default();
        config.auth_token = Some("root".into());
        config
    };
    let handler = handler_fn(|request: lintel::sdk::Request| {
        std::future::ready(ActivityOutcome::Success(request.input))
    });
    let worker = {
        let mut config = support::worker_config(node.addr.to_string(), plain("ns", "work", 4, "w"));
        config.auth_token = Some("root".into());
        config
    };
    let handle = lintel::sdk::Worker::spawn(worker, handler);
    within("worker registration", handle.wait_registered(support::WAIT))
        .await
        .expect("registered");
    // Each asks for the key `chosen`: only the node's own token may choose.
    for (token, expected_key) in [("first", "grant-1"), ("second", "beta"), ("root", "chosen")] {
        let config = {
            let mut config = root.clone();
            config.auth_token = Some(token.into());
            config
        };
        let producer = within("a producer", Client::connect(node.addr.to_string(), config))
            .await
            .expect("connects");
        let before = served_of(&node.registry().fairness(), expected_key);
        let options = DispatchOptions::default().fairness_key("chosen");
        let result = within(
            "a dispatch",
            producer.dispatch(&support::dispatch_of(work(token)), &options),
        )
        .await
        .expect("connection");
        assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
        assert_eq!(
            served_of(&node.registry().fairness(), expected_key),
            before + 1,
            "{token} dispatched under {expected_key:?}"
        );
    }
    within("worker shutdown", handle.shutdown()).await;
}

#[tokio::test]
async fn with_the_request_as_key_source_the_request_names_the_key() {
    let node = TestNode::with_config(NodeConfig {
        auth_token: Some("root".into()),
        grants: vec![GrantConfig {
            token: Some("t".into()),
            identity: None,
            roles: vec![GrantRole::Producer, GrantRole::Worker],
            namespaces: vec!["ns".into()],
            fairness_key: Some("ignored".into()),
            fairness_weights: true,
        }],
        fairness_key_source: FairnessKeySource::Request,
        ..NodeConfig::default()
    })
    .await;
    let worker = {
        let mut config = support::worker_config(node.addr.to_string(), plain("ns", "work", 1, "w"));
        config.auth_token = Some("t".into());
        config
    };
    let handler = handler_fn(|request: lintel::sdk::Request| {
        std::future::ready(ActivityOutcome::Success(request.input))
    });
    let handle = lintel::sdk::Worker::spawn(worker, handler);
    within("worker registration", handle.wait_registered(support::WAIT))
        .await
        .expect("registered");
    let config = {
        let mut config = ClientConfig::default();
        config.auth_token = Some("t".into());
        config
    };
    let producer = within("a producer", Client::connect(node.addr.to_string(), config))
        .await
        .expect("connects");
    for options in [
        DispatchOptions::default(),
        DispatchOptions::default().fairness_key("mine"),
    ] {
        let result = within(
            "a dispatch",
            producer.dispatch(&support::dispatch_of(work("x")), &options),
        )
        .await
        .expect("connection");
        assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
    }
    let status = node.registry().fairness();
    // One names no key and runs under the shared key; the other under its own.
    assert_eq!(served_of(&status, ""), 1);
    assert_eq!(served_of(&status, "mine"), 1);
    assert_eq!(served_of(&status, "ignored"), 0);
    within("worker shutdown", handle.shutdown()).await;
}

fn sample(scrape: &Scrape, name: &str, label: (&str, &str)) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .find(|sample| sample.labels.get(label.0) == Some(label.1))
        .and_then(|sample| match &sample.value {
            Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => Some(*value),
            _ => None,
        })
}

#[tokio::test]
async fn metrics_status_and_the_status_document_show_waiters_by_priority_and_top_keys() {
    let (node, admin) = TestNode::with_admin(capped_config()).await;
    // No worker: everything waits. Key `a` at priority 1 three times, then twelve keys once
    // each at priority 5: `a` and the nine first by name are shown, the other three summed.
    let mut handles = dispatch_many(&node, "a", 3, &waiting(1, "a", 1_000));
    for k in 0..12 {
        let key = format!("k{k:02}");
        handles.extend(dispatch_many(&node, &key, 1, &waiting(5, &key, 1_000)));
    }
    wait_fairness(&node, "15 waiting", |s| {
        s.waiting_by_priority.iter().sum::<u64>() == 15
    })
    .await;

    let (code, text) = admin_get(admin, "/metrics").await;
    assert_eq!(code, 200);
    let scrape =
        Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("Prometheus text");
    let by_priority = |p: &str| {
        sample(
            &scrape,
            "lintel_dispatches_waiting_by_priority",
            ("priority", p),
        )
    };
    assert_eq!(
        (by_priority("1"), by_priority("3"), by_priority("5")),
        (Some(3.0), Some(0.0), Some(12.0))
    );
    let by_key = |k: &str| sample(&scrape, "lintel_dispatches_waiting_by_key", ("key", k));
    assert_eq!(by_key("a"), Some(3.0));
    assert_eq!(by_key("k08"), Some(1.0));
    assert_eq!(by_key("k09"), None, "beyond the top keys");
    assert_eq!(by_key("other"), Some(3.0));
    let labels = scrape
        .samples
        .iter()
        .filter(|s| s.metric == "lintel_dispatches_waiting_by_key")
        .count();
    assert_eq!(labels, 11, "ten keys and other");
    assert_eq!(
        sample(
            &scrape,
            "lintel_fairness_key_max_in_flight",
            ("key", "noisy")
        ),
        Some(1.0)
    );

    let (code, status) = admin_get(admin, "/status").await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    let fairness = &status["fairness"];
    assert_eq!(
        fairness["waiting_by_priority"],
        serde_json::json!([3, 0, 0, 0, 12])
    );
    assert_eq!(
        fairness["waiting_by_key"][0],
        serde_json::json!({"key": "a", "count": 3})
    );
    assert_eq!(fairness["waiting_other_keys"], 3);

    // `lintel status` reads the same from a version-3 node's status document.
    let producer = support::client(node.addr).await;
    let document = within("the status document", producer.status())
        .await
        .expect("a status");
    assert_eq!(document.fairness.waiting_by_priority, [3, 0, 0, 0, 12]);
    assert_eq!(document.fairness.capped.len(), 1);
    abort(handles);
}

#[tokio::test]
async fn a_request_outside_the_ranges_is_refused_as_invalid() {
    let node = TestNode::start().await;
    for options in [
        DispatchOptions::default().priority(0),
        DispatchOptions::default().priority(6),
        DispatchOptions::default().fairness_weight(0),
        DispatchOptions::default().fairness_key("k".repeat(257)),
    ] {
        let result = node.node.dispatcher().dispatch(work("x"), &options).await;
        match result {
            DispatchResult::Refused(refused) => {
                assert_eq!(refused.reason, RefusedReason::InvalidRequest, "{options:?}");
            }
            other => panic!("{options:?}: expected a refusal, got {other:?}"),
        }
    }
}
