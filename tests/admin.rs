//! The admin listener of a real node under load: `/metrics` parsed as Prometheus text,
//! `/health`, `/ready`, `/linked`, `/status`, `/window` (node-wide and each pool's own), and
//! the console's files with their Content-Security-Policy (`tests/console.rs` loads the
//! console in a browser).

use lintel_test_support as support;

use lintel::sdk::{handler_fn, DispatchOptions};
use lintel::wire::{ActivityOutcome, DispatchResult, Frame, PeerAddress, PeerHello, Presence};
use lintel::NodeConfig;
use prometheus_parse::{Scrape, Value};
use support::{
    admin_get as get, client, cluster_config, hand_peer, plain, request, sdk_worker, TestNode,
};

fn sample(scrape: &Scrape, name: &str, label: Option<(&str, &str)>) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == name)
        .find(|sample| label.is_none_or(|(key, value)| sample.labels.get(key) == Some(value)))
        .and_then(|sample| match &sample.value {
            Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => Some(*value),
            _ => None,
        })
}

#[tokio::test]
async fn metrics_health_ready_and_status_describe_a_node_under_load() {
    let (node, admin) = TestNode::with_admin(NodeConfig {
        node_id: "metered".into(),
        ..NodeConfig::default()
    })
    .await;
    let echo = handler_fn(|request: lintel::sdk::Request| {
        std::future::ready(ActivityOutcome::Success(request.input))
    });
    let _worker = sdk_worker(node.addr, plain("ns", "echo", 8, "w"), echo).await;
    let producer = client(node.addr).await;
    let waiting = DispatchOptions::default().wait_for_worker(std::time::Duration::from_secs(10));
    let mut dispatches = tokio::task::JoinSet::new();
    for i in 0..200 {
        let producer = producer.clone();
        let waiting = waiting.clone();
        dispatches.spawn(async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", &i.to_string())),
                    &waiting,
                )
                .await
        });
    }
    while let Some(done) = dispatches.join_next().await {
        let result = done.expect("task").expect("connection stays up");
        assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
    }
    for _ in 0..5 {
        let missing = producer
            .dispatch(
                &support::dispatch_of(request("nowhere", "echo", "x")),
                &DispatchOptions::default(),
            )
            .await
            .expect("connection stays up");
        assert!(matches!(missing, DispatchResult::NoWorker(_)));
    }

    // A refused hello, a refused dispatch and a protocol error, to be counted by code.
    let mut stranger = support::RawClient::connect(node.addr).await;
    stranger
        .send(lintel::wire::Frame::Hello(lintel::wire::Hello {
            min_version: 9,
            max_version: 9,
            ..support::hello(lintel::wire::Role::Producer)
        }))
        .await;
    stranger.closed().await;
    // A priority out of range: the node refuses it, where the SDK refuses an empty name itself.
    let invalid = producer
        .dispatch(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default().priority(0),
        )
        .await
        .expect("connection stays up");
    assert!(matches!(invalid, DispatchResult::Refused(_)));
    let (mut rude, _) = support::RawClient::hello(node.addr, lintel::wire::Role::Producer).await;
    rude.send(lintel::wire::Frame::from(plain("ns", "echo", 1, "x")))
        .await;
    rude.closed().await;

    let (code, text) = get(admin, "/metrics").await;
    assert_eq!(code, 200);
    let scrape =
        Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("Prometheus text");
    let completed = sample(
        &scrape,
        "lintel_dispatches_total",
        Some(("outcome", "completed")),
    );
    assert_eq!(completed, Some(200.0));
    let no_worker = sample(
        &scrape,
        "lintel_dispatches_total",
        Some(("outcome", "no-worker")),
    );
    assert_eq!(no_worker, Some(5.0));
    let channel = "aion.dispatch.ns.default";
    assert_eq!(
        sample(&scrape, "lintel_pool_workers", Some(("pool", channel))),
        Some(1.0)
    );
    assert_eq!(
        sample(&scrape, "lintel_pool_slots", Some(("pool", channel))),
        Some(8.0)
    );
    assert_eq!(
        sample(&scrape, "lintel_pool_free_slots", Some(("pool", channel))),
        Some(8.0)
    );
    assert_eq!(
        sample(&scrape, "lintel_dispatches_in_flight", None),
        Some(0.0)
    );
    let by_role = |role| sample(&scrape, "lintel_connections_by_role", Some(("role", role)));
    assert_eq!(
        (by_role("worker"), by_role("producer")),
        (Some(1.0), Some(1.0))
    );
    let refusals = |stage: &str, code: &str| {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == "lintel_refusals_total")
            .find(|s| s.labels.get("stage") == Some(stage) && s.labels.get("code") == Some(code))
            .and_then(|s| match s.value {
                Value::Counter(v) | Value::Untyped(v) | Value::Gauge(v) => Some(v),
                _ => None,
            })
    };
    assert_eq!(refusals("hello", "VersionMismatch"), Some(1.0));
    assert_eq!(refusals("dispatch", "InvalidRequest"), Some(1.0));
    let errors = sample(
        &scrape,
        "lintel_errors_total",
        Some(("code", "UnexpectedFrame")),
    );
    assert_eq!(errors, Some(1.0));
    assert!(sample(
        &scrape,
        "lintel_outbound_queued_bytes",
        Some(("role", "worker"))
    )
    .is_some());
    let latency = scrape
        .samples
        .iter()
        .find(|sample| sample.metric == "lintel_dispatch_duration_seconds")
        .expect("the latency histogram");
    match &latency.value {
        Value::Histogram(buckets) => {
            let total = buckets.last().map(|bucket| bucket.count);
            assert_eq!(total, Some(206.0), "every dispatch was timed");
        }
        other => panic!("expected a histogram, got {other:?}"),
    }

    assert_eq!(get(admin, "/health").await.0, 200);
    assert_eq!(get(admin, "/ready").await.0, 200);
    let (code, status) = get(admin, "/status").await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(status["node_id"], "metered");
    assert_eq!(status["counters"]["completed"], 200);
    assert!(status["peers"].is_array());
    assert_eq!(get(admin, "/nowhere").await.0, 404);
    let (code, index) = get(admin, "/endpoints").await;
    assert_eq!(code, 200);
    for endpoint in [
        "/metrics", "/health", "/ready", "/linked", "/status", "/window",
    ] {
        assert!(index.contains(endpoint), "{index}");
    }
    assert!(status["tls"].is_null(), "TLS is off");
}

#[tokio::test]
async fn the_console_is_served_with_a_policy_that_runs_only_its_own_script() {
    let (_node, admin) = TestNode::with_admin(NodeConfig::default()).await;
    for (path, kind, holds) in [
        ("/", "text/html", "/console.js"),
        ("/console.js", "text/javascript", "textContent"),
        ("/console.css", "text/css", ".pool"),
    ] {
        let (code, head, body) = support::admin_response(admin, path).await;
        assert_eq!(code, 200, "{path}");
        assert!(
            head.contains(&format!("content-type: {kind}")),
            "{path}: {head}"
        );
        assert!(body.contains(holds), "{path}");
        let policy = head
            .lines()
            .find_map(|line| line.strip_prefix("content-security-policy: "))
            .unwrap_or_else(|| panic!("{path} has a Content-Security-Policy: {head}"));
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "connect-src 'self'",
        ] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"));
        assert!(head.contains("x-content-type-options: nosniff"), "{path}");
    }
}

#[tokio::test]
async fn the_window_gives_each_second_outcome_rates_and_latency_percentiles() {
    let (node, admin) = TestNode::with_admin(NodeConfig::default()).await;
    let echo = handler_fn(|request: lintel::sdk::Request| {
        std::future::ready(ActivityOutcome::Success(request.input))
    });
    let _worker = sdk_worker(node.addr, plain("ns", "echo", 8, "w"), echo).await;
    let producer = client(node.addr).await;
    // Dispatch until a reading of the counters falls after some completions.
    let window = support::within("a second with completions in /window", async {
        loop {
            let result = producer
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "x")),
                    &DispatchOptions::default(),
                )
                .await
                .expect("connection stays up");
            assert!(matches!(result, DispatchResult::Completed(_)));
            let (code, window) = get(admin, "/window").await;
            assert_eq!(code, 200);
            let window: serde_json::Value = serde_json::from_str(&window).expect("JSON");
            let served = window["points"].as_array().is_some_and(|points| {
                points
                    .iter()
                    .any(|point| point["rates"]["completed"].as_f64() > Some(0.0))
            });
            if served {
                return window;
            }
        }
    })
    .await;
    assert_eq!(window["interval_ms"], 1000);
    let point = window["points"]
        .as_array()
        .and_then(|points| {
            points
                .iter()
                .find(|point| point["rates"]["completed"].as_f64() > Some(0.0))
        })
        .expect("a point with completions");
    let p50 = point["p50_ms"].as_f64().expect("a p50");
    let p99 = point["p99_ms"].as_f64().expect("a p99");
    assert!(p50 > 0.0 && p50 <= p99, "{point}");
    assert!(window["last_minute"]["rates"]["completed"].as_f64() > Some(0.0));
}

/// `/window` until `holds` is true of it, read every 100 ms within the test's bound.
async fn window_until(
    admin: std::net::SocketAddr,
    what: &str,
    holds: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut every = tokio::time::interval(std::time::Duration::from_millis(100));
    support::within(what, async {
        loop {
            every.tick().await;
            let (code, window) = get(admin, "/window").await;
            assert_eq!(code, 200, "{window}");
            let window: serde_json::Value = serde_json::from_str(&window).expect("JSON");
            if holds(&window) {
                return window;
            }
        }
    })
    .await
}

#[tokio::test]
async fn the_window_gives_each_pool_its_own_outcomes_and_latency() {
    const DISPATCHES: u64 = 7;
    let (node, admin) = TestNode::with_admin(NodeConfig::default()).await;
    let echo = || {
        handler_fn(|request: lintel::sdk::Request| {
            std::future::ready(ActivityOutcome::Success(request.input))
        })
    };
    let _billing = sdk_worker(node.addr, plain("billing", "echo", 4, "b"), echo()).await;
    let _reports = sdk_worker(node.addr, plain("reports", "echo", 4, "r"), echo()).await;
    // Once two readings are taken, the span starts before anything dispatched from here on.
    window_until(admin, "a span in /window's pools", |window| {
        window["pools"]["span_ms"].as_u64() > Some(0)
    })
    .await;
    let producer = client(node.addr).await;
    for i in 0..DISPATCHES {
        let result = producer
            .dispatch(
                &support::dispatch_of(request("billing", "echo", &i.to_string())),
                &DispatchOptions::default(),
            )
            .await
            .expect("connection stays up");
        assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
    }
    let billing = "aion.dispatch.billing.default";
    let window = window_until(
        admin,
        "the billing pool's completions in /window",
        |window| {
            window["pools"]["channels"][billing]["counts"]["completed"].as_u64() >= Some(DISPATCHES)
        },
    )
    .await;
    let pools = &window["pools"];
    let figures = &pools["channels"][billing];
    assert_eq!(
        figures["counts"],
        serde_json::json!({ "completed": DISPATCHES })
    );
    let seconds = pools["span_ms"].as_f64().expect("a span") / 1e3;
    let rate = figures["rates"]["completed"].as_f64().expect("a rate");
    // The span is served in whole milliseconds, of a second or more.
    let wanted = DISPATCHES as f64 / seconds;
    assert!((rate - wanted).abs() <= wanted * 1e-3, "{pools}");
    let p50 = figures["p50_ms"].as_f64().expect("a p50");
    let p99 = figures["p99_ms"].as_f64().expect("a p99");
    assert!(p50 > 0.0 && p50 <= p99, "{figures}");
    // The other pool served nothing, and what no pool was named under is empty.
    let reports = &pools["channels"]["aion.dispatch.reports.default"];
    assert_eq!(reports["counts"], serde_json::json!({}), "{pools}");
    assert_eq!(reports["p99_ms"], serde_json::Value::Null);
    assert_eq!(pools["channels"]["other"]["counts"], serde_json::json!({}));
}

#[tokio::test]
async fn a_node_whose_only_peer_is_down_is_ready() {
    // Nobody listens at port 1: the peer never links. Nodes that name each other as peers
    // start one after another (a StatefulSet waits for each to be ready): ready they must be.
    let (node, admin) = TestNode::with_admin(NodeConfig {
        peers: vec!["127.0.0.1:1".into()],
        ..NodeConfig::default()
    })
    .await;
    assert_eq!(get(admin, "/ready").await, (200, "ready\n".to_owned()));
    assert_eq!(get(admin, "/health").await.0, 200);
    let (code, why) = get(admin, "/linked").await;
    assert_eq!(code, 503, "not what a rolling restart may go on after");
    assert!(why.contains("no peer linked"), "{why}");

    // The join point says why, in status and in metrics.
    node.wait_join_points("a failed dial", |points| {
        points.iter().any(|point| point.dial_failures > 0)
    })
    .await;
    let status: serde_json::Value =
        serde_json::from_str(&get(admin, "/status").await.1).expect("JSON");
    let point = &status["join_points"][0];
    assert_eq!(point["address"], "127.0.0.1:1");
    assert_eq!(point["state"], "failing", "{point}");
    assert!(
        point["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("refused")),
        "{point}"
    );
    assert!(
        point["since_unix_ms"].as_u64() > Some(0) && point["last_error_unix_ms"].as_u64() > Some(0)
    );
    let scrape = Scrape::parse(
        get(admin, "/metrics")
            .await
            .1
            .lines()
            .map(|l| Ok(l.to_owned())),
    )
    .expect("Prometheus text");
    let at = Some(("address", "127.0.0.1:1"));
    assert_eq!(sample(&scrape, "lintel_join_point_up", at), Some(0.0));
    assert!(sample(&scrape, "lintel_join_point_dial_failures_total", at) >= Some(1.0));
}

#[tokio::test]
async fn a_node_is_linked_once_synced_with_every_member_it_knows_not_with_one_peer() {
    let a = TestNode::joined("a", &[]).await;
    let (node, admin) = TestNode::with_admin(cluster_config("n", &[a.addr])).await;
    node.wait_linked(&["a"]).await;
    assert_eq!(get(admin, "/linked").await, (200, "linked\n".to_owned()));

    // A peer that tells of a member nobody can reach: linked to one peer is not linked to all.
    let hello = Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation: 1,
        advertise: "127.0.0.1:1".into(),
        peers: vec![PeerAddress {
            node_id: "ghost".into(),
            address: "127.0.0.1:1".into(),
        }],
        ..Default::default()
    });
    let mut hand = hand_peer(node.addr, 2, hello).await;
    hand.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: Vec::new(),
        ..Default::default()
    }))
    .await;
    node.wait_linked(&["a", "hand"]).await;
    assert_eq!(get(admin, "/ready").await.0, 200);
    let (code, why) = get(admin, "/linked").await;
    assert_eq!(code, 503);
    assert!(why.contains("member ghost"), "{why}");
}

#[tokio::test]
async fn every_help_line_of_the_metrics_is_one_sentence_with_one_period() {
    // TLS, a join point and a capped key, so that every family the node can show is there.
    let pki = support::Pki::new();
    let (cert, key) = pki.node_files("node");
    let (_node, admin) = TestNode::with_admin(NodeConfig {
        tls_cert: Some(cert),
        tls_key: Some(key),
        tls_ca: Some(pki.ca_path()),
        peers: vec!["127.0.0.1:1".into()],
        fairness: toml::from_str::<NodeConfig>("fairness = [{ key = \"b\", max_in_flight = 4 }]")
            .expect("a fairness entry")
            .fairness,
        ..NodeConfig::default()
    })
    .await;
    let (code, text) = get(admin, "/metrics").await;
    assert_eq!(code, 200, "{text}");
    let help: Vec<&str> = text.lines().filter(|l| l.starts_with("# HELP ")).collect();
    assert!(help.len() > 25, "only {} HELP lines:\n{text}", help.len());
    for family in [
        "lintel_tls_reloads",
        "lintel_join_point_up",
        "lintel_fairness_key_max_in_flight",
    ] {
        assert!(
            help.iter()
                .any(|line| line.starts_with(&format!("# HELP {family} "))),
            "no HELP for {family}"
        );
    }
    let doubled: Vec<&&str> = help
        .iter()
        .filter(|line| line.ends_with("..") || !line.ends_with('.'))
        .collect();
    assert!(
        doubled.is_empty(),
        "HELP lines not ending in one period: {doubled:#?}"
    );
}
