//! Deployments: workers register a deployment and an instance id; a dispatch may require a
//! deployment, here and across the mesh; a pool's current deployment (config, or an admin
//! call every node learns) routes dispatches that name none; a second registration of an
//! instance supersedes the first. Real sockets on 127.0.0.1 throughout.

use lintel_test_support as support;

use std::net::SocketAddr;

use bytes::Bytes;
use lintel::config::PoolConfig;
use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, WorkerConfig, WorkerHandle};
use lintel::wire::{
    ActivityOutcome, DispatchResult, Frame, Goodbye, NoWorkerReason, Register, Role,
};
use lintel::NodeConfig;
use support::{
    admin_post, cluster_config, dispatch, lintel, next_frame, no_worker, outcome_of, plain,
    request, served_by, spawn_dispatch, submit, within, RawClient, RawWorker, Served, TestNode,
    WAIT,
};

/// An SDK worker of `deployment` (and `instance`) serving `echo` in `ns` that answers with
/// its `name`, registered and out of probation.
async fn deployed(
    node: &TestNode,
    name: &'static str,
    deployment: Option<&str>,
    instance: Option<&str>,
) -> WorkerHandle {
    let mut register = plain("ns", "echo", 4, name);
    register.deployment = deployment.map(str::to_owned);
    register.instance_id = instance.map(str::to_owned);
    let config = support::worker_config(node.addr.to_string(), register);
    spawn_named(node, config, name).await
}

async fn spawn_named(node: &TestNode, config: WorkerConfig, name: &'static str) -> WorkerHandle {
    let handle = lintel::sdk::Worker::spawn(
        config,
        handler_fn(move |_request| async move {
            ActivityOutcome::Success(Bytes::from_static(name.as_bytes()))
        }),
    );
    let worker_id = within("worker registration", handle.wait_registered(WAIT))
        .await
        .expect("worker registered");
    node.wait_registry("the worker out of probation", |registry| {
        registry
            .states()
            .iter()
            .any(|(id, state)| *id == worker_id && state.as_str() == "eligible")
    })
    .await;
    handle
}

fn requiring(deployment: &str) -> DispatchOptions {
    DispatchOptions::default().deployment(deployment)
}

async fn served(node: &TestNode, options: DispatchOptions) -> String {
    served_by(&dispatch(node, request("ns", "echo", "x"), options).await)
}

#[tokio::test]
async fn a_required_deployment_is_served_only_by_its_workers() {
    let node = TestNode::start().await;
    let _v1 = deployed(&node, "v1", Some("v1"), None).await;
    let _v2 = deployed(&node, "v2", Some("v2"), None).await;
    let _plain = deployed(&node, "plain", None, None).await;
    for _ in 0..6 {
        assert_eq!(served(&node, requiring("v2")).await, "v2");
    }
    let mut any = std::collections::BTreeSet::new();
    for _ in 0..6 {
        any.insert(served(&node, DispatchOptions::default()).await);
    }
    assert_eq!(any.len(), 3, "naming none takes every worker: {any:?}");
}

#[tokio::test]
async fn with_no_worker_of_the_deployment_it_ends_no_worker_deployment_matched_nobody() {
    let node = TestNode::with_config(NodeConfig {
        pools: vec![PoolConfig {
            namespace: "ns".into(),
            task_queue: String::new(),
            deployment: "v9".into(),
        }],
        ..NodeConfig::default()
    })
    .await;
    let _v1 = deployed(&node, "v1", Some("v1"), None).await;
    let census = no_worker(dispatch(&node, request("ns", "echo", "x"), requiring("v3")).await);
    assert_eq!(census.reason, NoWorkerReason::DeploymentMatchedNobody);
    assert_eq!(
        (census.compatible_workers, census.deployment_workers),
        (1, 0)
    );
    // A version-2 producer cannot name a deployment, but the pool's current one applies to
    // its dispatch too: it reads the reason it knows.
    let (mut producer, _) = RawClient::hello_at(node.addr, Role::Producer, 2).await;
    producer
        .send(submit(1, request("ns", "echo", "x"), None))
        .await;
    match next_frame(&mut producer).await {
        Some(Frame::ServedOutcome(outcome)) => match outcome.result {
            DispatchResult::NoWorker(census) => {
                assert_eq!(census.reason, NoWorkerReason::NodeFilterMatchedNobody);
            }
            other => panic!("expected NoWorker, got {other:?}"),
        },
        other => panic!("expected an outcome, got {other:?}"),
    }
}

#[tokio::test]
async fn a_required_deployment_is_served_on_another_node_too() {
    let b = TestNode::joined("b", &[]).await;
    let _remote_v2 = deployed(&b, "b-v2", Some("v2"), None).await;
    let a = TestNode::joined("a", &[&b]).await;
    let _local_v1 = deployed(&a, "a-v1", Some("v1"), None).await;
    a.wait_linked(&["b"]).await;
    a.wait_announced(
        "b",
        &lintel::wire::channel::dispatch_channel_name("ns", "default", None),
    )
    .await;
    for _ in 0..4 {
        assert_eq!(served(&a, requiring("v2")).await, "b-v2");
        assert_eq!(served(&a, requiring("v1")).await, "a-v1");
    }
    let census = no_worker(dispatch(&a, request("ns", "echo", "x"), requiring("v3")).await);
    assert_eq!(census.reason, NoWorkerReason::DeploymentMatchedNobody);
    assert_eq!(census.compatible_workers, 2, "local and remote counted");
}

#[tokio::test]
async fn a_second_registration_of_an_instance_supersedes_the_first() {
    let node = TestNode::start().await;
    let identified = Register {
        deployment: Some("v1".into()),
        instance_id: Some("pod-1".into()),
        ..plain("ns", "echo", 1, "first")
    };
    let (client, pid) = RawClient::hello_at(node.addr, Role::Worker, 3).await;
    let mut first =
        RawWorker::register_frame(client, pid, Frame::Register(Box::new(identified))).await;
    let running = spawn_dispatch(
        &node,
        request("ns", "echo", "x"),
        DispatchOptions::default(),
    );
    match next_frame(&mut first.client).await {
        Some(Frame::Push(_)) => {}
        other => panic!("expected the dispatch pushed, got {other:?}"),
    }
    let _second = deployed(&node, "second", Some("v1"), Some("pod-1")).await;
    match outcome_of(running).await {
        DispatchResult::WorkerLost { worker_id } => assert_eq!(worker_id, first.worker_id),
        other => panic!("expected WorkerLost, got {other:?}"),
    }
    match next_frame(&mut first.client).await {
        Some(Frame::Goodbye(goodbye)) => assert_eq!(goodbye.reason, Goodbye::SUPERSEDED),
        other => panic!("expected Goodbye, got {other:?}"),
    }
    first.client.closed().await;
    assert_eq!(node.registry().worker_count(), 1);
    assert_eq!(
        node.registry()
            .departed(lintel::wire::DepartureReason::Superseded),
        1
    );
    assert_eq!(served(&node, DispatchOptions::default()).await, "second");
}

#[tokio::test]
async fn the_pools_current_deployment_from_config_routes_a_dispatch_naming_none() {
    let node = TestNode::with_config(NodeConfig {
        pools: vec![PoolConfig {
            namespace: "ns".into(),
            task_queue: "default".into(),
            deployment: "v2".into(),
        }],
        ..NodeConfig::default()
    })
    .await;
    let _v1 = deployed(&node, "v1", Some("v1"), None).await;
    let _v2 = deployed(&node, "v2", Some("v2"), None).await;
    for _ in 0..4 {
        assert_eq!(served(&node, DispatchOptions::default()).await, "v2");
        assert_eq!(served(&node, requiring("v1")).await, "v1");
    }
    let (settings, _) = node.node.dispatcher().settings().since(0);
    assert_eq!(settings.len(), 1);
    let setting = &settings[0];
    assert_eq!(
        (
            setting.current_deployment.as_deref(),
            setting.set_at_unix_ms
        ),
        (Some("v2"), 0),
        "config is written at time 0, so any admin call is later"
    );
}

#[tokio::test]
async fn the_pools_current_deployment_set_by_the_admin_call_routes_dispatches_on_every_node() {
    let admin_addr = free_port();
    let a = TestNode::with_config(NodeConfig {
        admin_listen: Some(admin_addr),
        admin_token: Some("admin-secret".into()),
        ..cluster_config("a", &[])
    })
    .await;
    let b = TestNode::joined("b", &[&a]).await;
    b.wait_linked(&["a"]).await;
    let _v1 = deployed(&b, "v1", Some("v1"), None).await;
    let _v2 = deployed(&b, "v2", Some("v2"), None).await;
    let body = r#"{"namespace": "ns", "task_queue": "", "deployment": "v1"}"#;
    let (code, refused) = admin_post(admin_addr, "/pools", body, None).await;
    assert_eq!(code, 401, "{refused}");
    let (code, set) = admin_post(admin_addr, "/pools", body, Some("admin-secret")).await;
    assert_eq!(code, 200, "{set}");
    assert!(set.contains(r#""set_by":"a""#), "{set}");
    let settings = b.node.dispatcher().settings();
    within("b learning the pool's current deployment", async {
        loop {
            let mut seen = settings.changes().epoch();
            if settings.current("ns", "").as_deref() == Some("v1") {
                return;
            }
            settings.changes().changed(&mut seen).await;
        }
    })
    .await;
    let (code, status) =
        support::admin_request(admin_addr, ("GET", "/status"), None, Some("admin-secret")).await;
    assert_eq!(code, 200);
    assert!(status.contains(r#""deployment": "v1""#), "{status}");
    let producer = support::client(b.addr).await;
    for _ in 0..4 {
        let result = within(
            "a dispatch naming no deployment",
            producer.dispatch(
                &support::dispatch_of(request("ns", "echo", "x")),
                &DispatchOptions::default(),
            ),
        )
        .await
        .expect("connection stays up");
        assert_eq!(served_by(&result), "v1");
    }
    let cleared = r#"{"namespace": "ns", "deployment": null}"#;
    let (code, _) = admin_post(admin_addr, "/pools", cleared, Some("admin-secret")).await;
    assert_eq!(code, 200);
    within("b learning it was cleared", async {
        loop {
            let mut seen = settings.changes().epoch();
            if settings.current("ns", "").is_none() {
                return;
            }
            settings.changes().changed(&mut seen).await;
        }
    })
    .await;
}

#[tokio::test]
async fn past_max_set_len_presence_groups_merge_and_the_link_stays_up() {
    let small = |node_id: &str, seeds: &[SocketAddr]| NodeConfig {
        max_set_len: 2,
        ..cluster_config(node_id, seeds)
    };
    let b = TestNode::with_config(small("b", &[])).await;
    let _v1 = deployed(&b, "b-v1", Some("v1"), None).await;
    let _v2 = deployed(&b, "b-v2", Some("v2"), None).await;
    let _v3 = deployed(&b, "b-v3", Some("v3"), None).await;
    let a = TestNode::with_config(small("a", &[b.addr])).await;
    a.wait_linked(&["b"]).await;
    let channel = lintel::wire::channel::dispatch_channel_name("ns", "default", None);
    a.wait_announced("b", &channel).await;
    // Three deployments are three groups, one past the cap: b merges them into one group of
    // no deployment, which a dispatch requiring one does not see, and one naming none uses.
    let census = no_worker(dispatch(&a, request("ns", "echo", "x"), requiring("v1")).await);
    assert_eq!(census.reason, NoWorkerReason::DeploymentMatchedNobody);
    assert_eq!(census.compatible_workers, 3);
    assert!(served(&a, DispatchOptions::default())
        .await
        .starts_with("b-v"));
    a.wait_linked(&["b"]).await;
    assert!(support::up(&b.peers(), "a"), "the link never closes for it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_worker_and_dispatch_round_trip_a_deployment() {
    let node = TestNode::start().await;
    let addr = node.addr.to_string();
    let mut worker = lintel();
    worker.args([
        "worker",
        "--connect",
        &addr,
        "--namespace",
        "ns",
        "--activity",
        "echo",
        "--deployment",
        "v7",
        "--instance-id",
        "cli-1",
    ]);
    let mut worker = Served::spawn(worker);
    worker.wait_for("registered as worker");
    node.wait_registry("the CLI worker out of probation", |registry| {
        registry.deployments() == vec![(1, Some("v7".to_owned()), Some("cli-1".to_owned()))]
            && registry
                .states()
                .iter()
                .all(|(_, s)| s.as_str() == "eligible")
    })
    .await;
    let dispatch_with = |deployment: &str| {
        lintel()
            .args([
                "dispatch",
                "--connect",
                &addr,
                "--namespace",
                "ns",
                "--activity",
                "echo",
                "--input",
                "hello",
                "--deployment",
                deployment,
            ])
            .output()
            .expect("lintel dispatch runs")
    };
    let (served, missed) =
        tokio::task::block_in_place(|| (dispatch_with("v7"), dispatch_with("v8")));
    assert!(served.status.success(), "{served:?}");
    assert_eq!(String::from_utf8_lossy(&served.stdout), "hello\n");
    assert_eq!(missed.status.code(), Some(11), "{missed:?}");
    let stderr = String::from_utf8_lossy(&missed.stderr);
    assert!(stderr.contains("DeploymentMatchedNobody"), "{stderr}");
}

/// A free loopback port for an admin listener.
fn free_port() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    probe.local_addr().expect("addr")
}

#[tokio::test]
async fn a_peers_workers_in_probation_are_announced_and_counted_as_such() {
    let b = TestNode::with_config(NodeConfig {
        worker_ping_timeout_ms: 600_000,
        ..cluster_config("b", &[])
    })
    .await;
    // Registered, and never answering its opening ping: in probation for the whole test.
    let (mut silent, _) = RawClient::hello_at(b.addr, Role::Worker, 3).await;
    silent
        .send(Frame::from(plain("ns", "echo", 1, "silent")))
        .await;
    match silent.recv().await {
        Some(Frame::Registered(_)) => {}
        other => panic!("expected Registered, got {other:?}"),
    }
    let a = TestNode::with_config(NodeConfig {
        worker_probation_pings: 0,
        ..cluster_config("a", &[b.addr])
    })
    .await;
    a.wait_linked(&["b"]).await;
    let channel = lintel::wire::channel::dispatch_channel_name("ns", "default", None);
    a.wait_announced("b", &channel).await;
    let census =
        no_worker(dispatch(&a, request("ns", "echo", "x"), DispatchOptions::default()).await);
    assert_eq!(
        (census.reason, census.probation, census.draining),
        (NoWorkerReason::AllInProbation, Some(1), 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_endpoint_lists_clears_only_when_told_and_says_what_it_takes() {
    let (node, admin) = TestNode::with_admin(cluster_config("a", &[])).await;
    let (code, listed) = support::admin_get(admin, "/pools").await;
    assert_eq!((code, listed.as_str()), (200, "[]"));

    let set = r#"{"namespace": "ns", "deployment": "v2"}"#;
    let (code, body) = admin_post(admin, "/pools", set, None).await;
    assert_eq!(code, 200, "{body}");
    let (code, listed) = support::admin_get(admin, "/pools").await;
    assert_eq!(code, 200, "{listed}");
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    assert_eq!(listed[0]["channel"], "aion.dispatch.ns.default");
    assert_eq!(listed[0]["deployment"], "v2");
    assert_eq!(listed[0]["set_by"], "a");

    // A body without the field is not a clear.
    let (code, body) = admin_post(admin, "/pools", r#"{"namespace": "ns"}"#, None).await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("names no \"deployment\""), "{body}");
    assert!(
        body.contains(r#"{"namespace": "demo""#),
        "an example body: {body}"
    );
    assert_eq!(
        node.node
            .dispatcher()
            .settings()
            .current("ns", "")
            .as_deref(),
        Some("v2")
    );
    // Nor is a body that is not JSON.
    let (code, body) = admin_post(admin, "/pools", "namespace=ns&deployment=v3", None).await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body.starts_with("POST /pools takes a JSON object such as {\"namespace\": \"demo\""),
        "{body}"
    );

    // `lintel status` prints when it was set as RFC 3339, and names the connection column.
    let _worker = deployed(&node, "w", Some("v2"), None).await;
    let status = tokio::task::block_in_place(|| {
        lintel()
            .args(["status", "--connect", &node.addr.to_string()])
            .output()
            .expect("lintel status runs")
    });
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    let line = status
        .lines()
        .find(|line| line.contains("current deployment v2"))
        .unwrap_or_else(|| panic!("no current deployment line: {status}"));
    let at = line
        .split_once(" at ")
        .map(|(_, at)| at.trim_end_matches(')'))
        .unwrap_or_else(|| panic!("no time: {line}"));
    assert!(humantime_like(at), "not RFC 3339: {line}");
    let header = status
        .lines()
        .find(|line| line.trim_start().starts_with("worker "))
        .unwrap_or_else(|| panic!("no worker table: {status}"));
    assert!(
        header.contains(" connection ") && !header.contains(" pid "),
        "{header}"
    );

    let clear = r#"{"namespace": "ns", "deployment": null}"#;
    let (code, body) = admin_post(admin, "/pools", clear, None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(node.node.dispatcher().settings().current("ns", ""), None);
}

/// `2026-01-02T03:04:05Z`, as RFC 3339 in UTC to the second reads.
fn humantime_like(text: &str) -> bool {
    let shape = "dddd-dd-ddTdd:dd:ddZ";
    text.len() == shape.len()
        && text.chars().zip(shape.chars()).all(|(c, s)| match s {
            'd' => c.is_ascii_digit(),
            other => c == other,
        })
}
