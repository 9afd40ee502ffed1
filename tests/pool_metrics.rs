//! Per-pool series of `/metrics` on a real node: outcomes by class, push-to-reply latency,
//! waiting and the oldest wait, slots in flight, workers; the bound on labelled pools (10,000
//! pools keep a scrape within its stated size, the rest summed as `pool="other"`); and a pool
//! name holding characters the text format must escape, parsed back by prometheus-parse.

use lintel_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use lintel::sdk::{handler_fn, DispatchOptions};
use lintel::wire::{ActivityOutcome, DispatchResult};
use lintel::NodeConfig;
use prometheus_parse::{Scrape, Value};
use support::{admin_get, client, registration, request, sdk_worker, within, TestNode};
use tokio::sync::Semaphore;

const BILLING: &str = "aion.dispatch.billing.default";

/// Series each labelled pool has, as the README states: 9 outcome classes, the histogram's 21
/// buckets with its sum and count, waiting, oldest wait, in flight, workers, slots, free slots,
/// and 4 worker states.
const SERIES_PER_POOL: usize = 9 + 21 + 2 + 6 + 4;

async fn scrape(admin: std::net::SocketAddr) -> (String, Scrape) {
    let (code, text) = admin_get(admin, "/metrics").await;
    assert_eq!(code, 200, "{text}");
    let scrape =
        Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("Prometheus text");
    (text, scrape)
}

/// The value of the sample `name` whose labels include every one of `labels`.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .find(|sample| {
            labels
                .iter()
                .all(|(key, value)| sample.labels.get(key) == Some(*value))
        })
        .and_then(|sample| match &sample.value {
            Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => Some(*value),
            Value::Histogram(buckets) => buckets.last().map(|bucket| bucket.count),
            Value::Summary(_) => None,
        })
}

#[tokio::test]
async fn a_pools_outcomes_latency_waiting_and_slots_carry_its_channel_name() {
    let (node, admin) = TestNode::with_admin(NodeConfig::default()).await;
    // The worker runs `hold` until the test lets it go; `echo` at once.
    let gate = Arc::new(Semaphore::new(0));
    let held = Arc::clone(&gate);
    let worker = handler_fn(move |request: lintel::sdk::Request| {
        let held = Arc::clone(&held);
        async move {
            if request.activity_type == "hold" {
                let _ = held.acquire().await.map(|permit| permit.forget());
            }
            ActivityOutcome::Success(request.input)
        }
    });
    let register = registration(&["billing"], "", None, &["echo", "hold"], 2, "w");
    let _worker = sdk_worker(node.addr, register, worker).await;
    let producer = client(node.addr).await;
    let now = DispatchOptions::default();
    for i in 0..5 {
        let done = producer
            .dispatch(
                &support::dispatch_of(request("billing", "echo", &i.to_string())),
                &now,
            )
            .await
            .expect("connection stays up");
        assert!(matches!(done, DispatchResult::Completed(_)), "{done:?}");
    }
    for _ in 0..2 {
        let missed = producer
            .dispatch(&support::dispatch_of(request("nowhere", "echo", "x")), &now)
            .await
            .expect("connection stays up");
        assert!(matches!(missed, DispatchResult::NoWorker(_)), "{missed:?}");
    }

    // Two holds fill both slots; a third waits for one.
    let waits = DispatchOptions::default().wait_for_worker(Duration::from_secs(30));
    let mut holds = tokio::task::JoinSet::new();
    for i in 0..3 {
        let (producer, waits) = (producer.clone(), waits.clone());
        holds.spawn(async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("billing", "hold", &i.to_string())),
                    &waits,
                )
                .await
        });
        if i < 2 {
            node.wait_registry("a slot taken", move |r| r.reserved_slots() == i + 1)
                .await;
        }
    }
    node.wait_registry("a dispatch waiting", |r| r.waiting() == 1)
        .await;

    let (_, metrics) = scrape(admin).await;
    let pool = ("pool", BILLING);
    let outcome = |class| [pool, ("outcome", class)];
    assert_eq!(
        value(
            &metrics,
            "lintel_pool_dispatches_total",
            &outcome("completed")
        ),
        Some(5.0)
    );
    assert_eq!(
        value(
            &metrics,
            "lintel_pool_dispatches_total",
            &[
                ("pool", "aion.dispatch.nowhere.default"),
                ("outcome", "no-worker")
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(&metrics, "lintel_pool_push_to_reply_seconds", &[pool]),
        Some(5.0),
        "five replies timed from their push"
    );
    assert_eq!(
        value(&metrics, "lintel_pool_dispatches_waiting", &[pool]),
        Some(1.0)
    );
    let oldest = value(&metrics, "lintel_pool_oldest_waiting_seconds", &[pool]).expect("age");
    assert!(oldest > 0.0 && oldest < 30.0, "{oldest}");
    assert_eq!(
        value(&metrics, "lintel_pool_dispatches_in_flight", &[pool]),
        Some(2.0)
    );
    assert_eq!(value(&metrics, "lintel_pool_workers", &[pool]), Some(1.0));
    assert_eq!(value(&metrics, "lintel_pool_slots", &[pool]), Some(2.0));
    assert_eq!(
        value(&metrics, "lintel_pool_free_slots", &[pool]),
        Some(0.0)
    );
    assert_eq!(
        value(
            &metrics,
            "lintel_pool_workers_by_state",
            &[pool, ("state", "eligible")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &metrics,
            "lintel_pool_dispatches_waiting",
            &[("pool", "other")]
        ),
        Some(0.0),
        "other is always there"
    );

    gate.add_permits(3);
    while let Some(done) = within("the holds", holds.join_next()).await {
        let result = done.expect("task").expect("connection stays up");
        assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
    }
    let (_, metrics) = scrape(admin).await;
    assert_eq!(
        value(
            &metrics,
            "lintel_pool_dispatches_total",
            &outcome("completed")
        ),
        Some(8.0)
    );
    for (name, expected) in [
        ("lintel_pool_dispatches_in_flight", 0.0),
        ("lintel_pool_dispatches_waiting", 0.0),
        ("lintel_pool_oldest_waiting_seconds", 0.0),
        ("lintel_pool_free_slots", 2.0),
    ] {
        assert_eq!(value(&metrics, name, &[pool]), Some(expected), "{name}");
    }
}

#[tokio::test]
async fn ten_thousand_pools_keep_a_scrape_within_its_stated_bound() {
    const POOLS: usize = 10_000;
    const MAX_POOLS: usize = 256;
    let (node, admin) = TestNode::with_admin(NodeConfig {
        max_set_len: 64,
        ..NodeConfig::default()
    })
    .await;
    // 64 pools with a worker, then 10,000 more named by dispatches that find no worker.
    let namespaces: Vec<String> = (0..64).map(|n| format!("served-{n:02}")).collect();
    let names: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let echo = handler_fn(|request: lintel::sdk::Request| {
        std::future::ready(ActivityOutcome::Success(request.input))
    });
    let _worker = sdk_worker(
        node.addr,
        registration(&names, "", None, &["echo"], 4, "w"),
        echo,
    )
    .await;
    let dispatcher = node.node.dispatcher();
    for n in 0..POOLS {
        let missed = dispatcher
            .dispatch(
                request(&format!("tenant-{n:05}"), "echo", ""),
                &DispatchOptions::default(),
            )
            .await;
        assert!(matches!(missed, DispatchResult::NoWorker(_)), "{missed:?}");
    }

    let (text, metrics) = scrape(admin).await;
    let pooled: Vec<&prometheus_parse::Sample> = metrics
        .samples
        .iter()
        .filter(|sample| sample.labels.get("pool").is_some())
        .collect();
    let mut labels: Vec<&str> = pooled
        .iter()
        .filter_map(|sample| sample.labels.get("pool"))
        .collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), MAX_POOLS + 1, "the first 256 pools and other");
    assert!(labels.contains(&"other"));
    assert!(labels.contains(&"aion.dispatch.served-00.default"));
    assert_eq!(
        value(&metrics, "lintel_pool_workers", &[("pool", "other")]),
        Some(0.0),
        "the served pools came first"
    );
    // Every no-worker outcome counted once, in its pool or in other.
    let no_worker: f64 = pooled
        .iter()
        .filter(|s| s.metric == "lintel_pool_dispatches_total")
        .filter(|s| s.labels.get("outcome") == Some("no-worker"))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum();
    assert_eq!(no_worker, POOLS as f64);
    assert_eq!(
        value(
            &metrics,
            "lintel_pool_dispatches_total",
            &[("pool", "other"), ("outcome", "no-worker")]
        ),
        Some((POOLS - (MAX_POOLS - 64)) as f64)
    );

    // The bound the README states: (metrics_max_pools + 1) * 42 per-pool series.
    let series = text
        .lines()
        .filter(|line| !line.starts_with('#') && line.contains("pool=\""))
        .count();
    assert_eq!(series, (MAX_POOLS + 1) * SERIES_PER_POOL);
    assert!(
        text.len() < 2 * 1024 * 1024,
        "a scrape of {} bytes at 10,000 pools",
        text.len()
    );
}

/// A label value as it was before the text format escaped it; prometheus-parse keeps the
/// escapes as written.
fn unescape(written: &str) -> String {
    let mut out = String::new();
    let mut chars = written.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

#[tokio::test]
async fn a_pool_name_the_text_format_must_escape_parses_back_whole() {
    // Names may hold any UTF-8; prometheus-parse cannot read `,`, `=` or `}` in a label, so
    // this one holds what the text format itself escapes.
    let namespace = "we\"ird\\name\nline";
    let (node, admin) = TestNode::with_admin(NodeConfig::default()).await;
    let producer = client(node.addr).await;
    let missed = producer
        .dispatch(
            &support::dispatch_of(request(namespace, "echo", "x")),
            &DispatchOptions::default(),
        )
        .await
        .expect("connection stays up");
    assert!(matches!(missed, DispatchResult::NoWorker(_)), "{missed:?}");

    let (text, metrics) = scrape(admin).await;
    for line in text.lines().filter(|line| line.contains("we\\\"ird")) {
        assert!(
            line.starts_with("lintel_pool_"),
            "one sample a line, nothing broken off: {line:?}"
        );
    }
    let channel = lintel::wire::channel::dispatch_channel_name(namespace, "default", None);
    let found = metrics
        .samples
        .iter()
        .filter(|sample| sample.metric == "lintel_pool_dispatches_total")
        .filter(|sample| sample.labels.get("outcome") == Some("no-worker"))
        .find_map(|sample| {
            let pool = unescape(sample.labels.get("pool")?);
            (pool == channel).then_some(&sample.value)
        });
    assert!(
        matches!(found, Some(Value::Counter(n) | Value::Untyped(n)) if *n == 1.0),
        "{found:?} in {text}"
    );
}
