//! Protocol version 3 against a real node: what a version-3 client and peer are sent and may
//! send, headers carried end to end, refusals of what the node does not implement, the status
//! document, and version-1 and version-2 clients and peers beside them seeing only their own
//! version's frames, in one node and across a mesh of a version-2 and a version-3 node.

use lintel_test_support as support;

use bytes::Bytes;
use lintel::dispatch::DispatchOptions;
use lintel::sdk::Worker;
use lintel::wire::{
    feature, ActivityOutcome, Cancel, DispatchResult, ErrorCode, Extension, Farewell, Frame,
    FrameKind, Header, NoWorkerReason, PeerHello, Presence, RefusalCode, RefusedReason, Register,
    RelayAck, RequestExtras, Resume, Resumed, Role, StatusQuery, Submit, Subscribe,
};
use lintel::NodeConfig;
use support::{
    client, cluster_config, hand_peer_written_at, header_echo, next_frame, plain, register,
    request, response_to, submit, within, RawClient, RawWorker, TestNode, WAIT,
};

/// An SDK worker (version 3) at `addr` serving `echo` in `ns` with `header_echo`.
async fn traced_worker(addr: std::net::SocketAddr, name: &str) -> lintel::sdk::WorkerHandle {
    support::sdk_worker(addr, plain("ns", "echo", 4, name), header_echo()).await
}

/// A raw worker speaking up to `version`, registered at `addr` for `echo` in `ns` with
/// `capacity`.
async fn raw_worker(addr: std::net::SocketAddr, version: u16, capacity: u32) -> RawClient {
    let (client, pid) = RawClient::hello_at(addr, Role::Worker, version).await;
    RawWorker::register(client, pid, register("ns", "echo", capacity))
        .await
        .client
}

fn traced() -> DispatchOptions {
    DispatchOptions::default()
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .header("baggage", "tenant=a")
        .header("baggage", "region=eu")
}

const TRACED_ECHO: &str = "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n\
                           baggage=tenant=a\nbaggage=region=eu";

#[track_caller]
fn payload(result: &DispatchResult) -> String {
    match result {
        DispatchResult::Completed(response) => match &response.outcome {
            ActivityOutcome::Success(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("the activity failed: {other:?}"),
        },
        other => panic!("expected a completion, got {other:?}"),
    }
}

#[track_caller]
fn refused(result: &DispatchResult) -> (RefusedReason, &str) {
    match result {
        DispatchResult::Refused(refused) => (refused.reason, refused.detail.as_str()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// One node.

/// What the node lists in its welcome and peer hello of version 3.
const FEATURES: [&str; 10] = support::VERSION_3_FEATURES;

#[tokio::test]
async fn a_version_3_welcome_lists_what_the_node_implements_and_its_header_limits() {
    let node = TestNode::with_config(NodeConfig {
        max_headers: 5,
        max_header_bytes: 100,
        max_protocol_version: 3,
        ..NodeConfig::default()
    })
    .await;
    let producer = client(node.addr).await;
    let welcome = producer.node_info();
    assert_eq!(welcome.version, 3);
    assert_eq!(welcome.features, FEATURES);
    assert_eq!(
        (welcome.limits.max_headers, welcome.limits.max_header_bytes),
        (Some(5), Some(100))
    );
}

#[tokio::test]
async fn headers_reach_the_worker_in_order_with_duplicates_kept() {
    let node = TestNode::start().await;
    let _worker = traced_worker(node.addr, "traced").await;
    let producer = client(node.addr).await;
    let result = within(
        "a traced dispatch",
        producer.dispatch(&support::dispatch_of(request("ns", "echo", "x")), &traced()),
    )
    .await
    .expect("connection stays up");
    assert_eq!(payload(&result), TRACED_ECHO);
    let plain = within(
        "a plain dispatch",
        producer.dispatch(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(payload(&plain), "", "no headers, and no Submit needed");
}

#[tokio::test]
async fn a_raw_version_3_worker_is_pushed_push3_with_the_headers_as_sent() {
    let node = TestNode::start().await;
    let mut worker = raw_worker(node.addr, 3, 1).await;
    let producer = client(node.addr).await;
    let dispatch = tokio::spawn(async move {
        producer
            .dispatch(&support::dispatch_of(request("ns", "echo", "x")), &traced())
            .await
    });
    let Some(Frame::Push(push)) = next_frame(&mut worker).await else {
        panic!("a version-3 worker is pushed Push3");
    };
    assert_eq!(worker.last_kind(), Some(FrameKind::Push3));
    let names: Vec<&str> = push
        .extras
        .headers
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["traceparent", "baggage", "baggage"]);
    assert_eq!(push.extras.headers[2].value, "region=eu");
    let push = lintel::wire::Push {
        correlation: push.correlation,
        request: push.request,
        extras: Default::default(),
    };
    worker.send(support::reply_frame(&push, "done")).await;
    let result = within("the outcome", dispatch).await.expect("task");
    assert_eq!(payload(&result.expect("connection stays up")), "done");
}

#[tokio::test]
async fn a_version_2_worker_is_no_candidate_for_headers_and_a_version_3_one_is_waited_for() {
    let node = TestNode::start().await;
    let mut old = raw_worker(node.addr, 2, 4).await;
    let producer = client(node.addr).await;

    let missed = within(
        "a traced dispatch with no version-3 worker",
        producer.dispatch(&support::dispatch_of(request("ns", "echo", "x")), &traced()),
    )
    .await
    .expect("connection stays up");
    let DispatchResult::NoWorker(census) = missed else {
        panic!("expected NoWorker3, got {missed:?}");
    };
    assert_eq!(census.reason, NoWorkerReason::CapabilityMatchedNobody);
    assert_eq!((census.compatible_workers, census.at_capacity), (1, 0));

    // A plain dispatch still goes to the version-2 worker, as a `Push`.
    let plain = tokio::spawn({
        let producer = producer.clone();
        async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("ns", "echo", "x")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });
    let Some(Frame::Push(push)) = next_frame(&mut old).await else {
        panic!("a version-2 worker is pushed Push");
    };
    assert_eq!(old.last_kind(), Some(FrameKind::Push));
    old.send(support::reply_frame(&push, "old")).await;
    let plain = within("the plain outcome", plain).await.expect("task");
    assert_eq!(payload(&plain.expect("connection stays up")), "old");

    // A traced dispatch that may wait is served by the version-3 worker that registers.
    let waiting = tokio::spawn({
        let producer = producer.clone();
        async move {
            let options = traced().wait_for_worker(WAIT);
            producer
                .dispatch(&support::dispatch_of(request("ns", "echo", "x")), &options)
                .await
        }
    });
    node.wait_registry("the traced dispatch waiting", |registry| {
        registry.waiting() == 1
    })
    .await;
    let _new = traced_worker(node.addr, "new").await;
    let served = within("the waiting outcome", waiting).await.expect("task");
    assert_eq!(payload(&served.expect("connection stays up")), TRACED_ECHO);
}

#[tokio::test]
async fn what_the_node_does_not_implement_is_refused_and_named_never_ignored() {
    let node = TestNode::start().await;
    let _worker = traced_worker(node.addr, "w").await;
    let producer = client(node.addr).await;
    let critical = DispatchOptions::default().extension(7, true, Bytes::from_static(b"?"));
    let plain_extension =
        DispatchOptions::default()
            .header("a", "b")
            .extension(8, false, Bytes::from_static(b"?"));
    for (options, named) in [(critical, "extension 7")] {
        let result = within(
            "a refused dispatch",
            producer.dispatch(&support::dispatch_of(request("ns", "echo", "x")), &options),
        )
        .await
        .expect("connection stays up");
        let (reason, detail) = refused(&result);
        assert_eq!(reason, RefusedReason::Unsupported, "{detail}");
        assert!(detail.contains(named), "{detail:?} names {named}");
    }
    let ignored = within(
        "a dispatch with an unknown plain extension",
        producer.dispatch(
            &support::dispatch_of(request("ns", "echo", "x")),
            &plain_extension,
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(payload(&ignored), "a=b");
    // A header name the SDK would have written lowercase, so as raw frames.
    let (mut uppercase, _) = RawClient::hello_at(node.addr, Role::Producer, 3).await;
    uppercase
        .send(Frame::from(Submit {
            correlation: 1,
            request: request("ns", "echo", "x"),
            extras: RequestExtras {
                headers: vec![Header {
                    name: "TraceParent".into(),
                    value: String::new(),
                }],
                ..RequestExtras::default()
            },
            wait_for_worker_ms: None,
            reply_timeout_ms: None,
            routing: Default::default(),
        }))
        .await;
    let invalid = match next_frame(&mut uppercase).await {
        Some(Frame::Outcome(outcome)) => outcome.result,
        Some(Frame::ServedOutcome(outcome)) => outcome.result,
        other => {
            panic!("expected the outcome of a dispatch with an uppercase header, got {other:?}")
        }
    };
    assert_eq!(refused(&invalid).0, RefusedReason::InvalidRequest);

    // A subscription lives until cancelled, then says so.
    let (mut raw, _) = RawClient::hello_at(node.addr, Role::Producer, 3).await;
    raw.send(Frame::Subscribe(Subscribe {
        correlation: 4,
        topics: Vec::new(),
    }))
    .await;
    raw.send(Frame::Cancel(Cancel { correlation: 4 })).await;
    match next_frame(&mut raw).await {
        Some(Frame::SubscriptionEnded(ended)) => {
            assert_eq!((ended.correlation, ended.code), (4, RefusalCode::Cancelled));
        }
        other => panic!("expected SubscriptionEnded, got {other:?}"),
    }

    // A registration with an unknown critical extension is refused; the connection stays.
    let (mut worker, _) = RawClient::hello_at(node.addr, Role::Worker, 3).await;
    let with_critical = Register {
        extensions: vec![Extension {
            tag: 9,
            critical: true,
            value: Bytes::new(),
        }],
        ..register("ns", "echo", 1)
    };
    worker.send(Frame::from(with_critical)).await;
    match next_frame(&mut worker).await {
        Some(Frame::RegisterRefused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Unsupported, "{}", refusal.reason);
        }
        other => panic!("expected RegisterRefused, got {other:?}"),
    }
    worker.send(Frame::from(register("ns", "echo", 1))).await;
    assert!(matches!(
        next_frame(&mut worker).await,
        Some(Frame::Registered(_))
    ));
}

#[tokio::test]
async fn version_1_and_2_clients_see_only_their_own_versions_frames() {
    let node = TestNode::start().await;
    for version in [1, 2] {
        let mut worker = raw_worker(node.addr, version, 1).await;
        let (mut producer, _) = RawClient::hello_at(node.addr, Role::Producer, version).await;
        producer
            .send(submit(1, request("ns", "echo", "x"), None))
            .await;
        let Some(Frame::Push(push)) = next_frame(&mut worker).await else {
            panic!("a version-{version} worker is pushed Push");
        };
        assert_eq!(worker.last_kind(), Some(FrameKind::Push));
        worker.send(support::reply_frame(&push, "ok")).await;
        let outcome = next_frame(&mut producer).await;
        match (version, outcome) {
            (1, Some(Frame::Outcome(outcome))) => assert_eq!(payload(&outcome.result), "ok"),
            (2, Some(Frame::ServedOutcome(outcome))) => {
                assert_eq!(payload(&outcome.result), "ok");
            }
            (_, other) => panic!("version {version}: unexpected {other:?}"),
        }
        // Nobody left to serve it: the census is a version-2 `NoWorker`.
        drop(worker);
        node.wait_registry("the worker gone", |registry| registry.worker_count() == 0)
            .await;
        producer
            .send(submit(2, request("ns", "echo", "x"), None))
            .await;
        let result = match next_frame(&mut producer).await {
            Some(Frame::Outcome(outcome)) => outcome.result,
            Some(Frame::ServedOutcome(outcome)) => outcome.result,
            other => panic!("expected an outcome, got {other:?}"),
        };
        let DispatchResult::NoWorker(census) = result else {
            panic!("expected NoWorker, got {result:?}");
        };
        assert_eq!(
            (census.probation, census.unreachable),
            (None, None),
            "a version-{version} census, which does not count them apart"
        );
        producer
            .send(Frame::StatusQuery(StatusQuery { correlation: 3 }))
            .await;
        match (version, next_frame(&mut producer).await) {
            (1, Some(Frame::Status(_))) | (2, Some(Frame::ClusterStatus(_))) => {}
            (_, other) => panic!("version {version}: unexpected {other:?}"),
        }
        // A version-3 kind is not theirs to send: a submission with extras, written as a
        // version-3 producer writes it.
        producer.speak(3);
        producer
            .send(Frame::from(Submit {
                correlation: 4,
                request: request("ns", "echo", "x"),
                extras: RequestExtras {
                    priority: Some(1),
                    ..RequestExtras::default()
                },
                wait_for_worker_ms: None,
                reply_timeout_ms: None,
                routing: Default::default(),
            }))
            .await;
        match next_frame(&mut producer).await {
            Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::UnexpectedFrame),
            other => panic!("expected Error{{UnexpectedFrame}}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_status_document_is_the_json_of_lintel_status_with_each_workers_deployment() {
    let node = TestNode::start().await;
    let config = support::worker_builder(node.addr.to_string(), plain("ns", "echo", 2, "pod"))
        .deployment("v42")
        .instance_id("pod-7f3c")
        .build()
        .expect("a worker config");
    let worker = Worker::spawn(config, header_echo());
    within("registration", worker.wait_registered(WAIT))
        .await
        .expect("registered");
    // Out of probation first, so both reads below see the same standing.
    node.wait_registry("the worker eligible", |registry| {
        let states = registry.states();
        !states.is_empty()
            && states
                .iter()
                .all(|(_, standing)| *standing == lintel::sdk::status::Standing::Eligible)
    })
    .await;

    let (mut raw, _) = RawClient::hello_at(node.addr, Role::Producer, 3).await;
    raw.send(Frame::StatusQuery(StatusQuery { correlation: 9 }))
        .await;
    let Some(Frame::StatusDocument(document)) = next_frame(&mut raw).await else {
        panic!("a version-3 producer is answered a StatusDocument");
    };
    assert_eq!(document.correlation, 9);
    let json: serde_json::Value = serde_json::from_slice(&document.json).expect("JSON");
    let keys = |value: &serde_json::Value| -> Vec<String> {
        let mut keys: Vec<String> = value
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    let printed = lintel_status(node.addr, true).await;
    assert!(printed.status.success());
    let printed: serde_json::Value =
        serde_json::from_slice(&printed.stdout).expect("lintel status --json prints JSON");
    assert_eq!(keys(&json), keys(&printed), "the same document");
    let worker_of = |status: &serde_json::Value| status["pools"][0]["workers"][0].clone();
    assert_eq!(worker_of(&json)["deployment"], "v42");
    assert_eq!(worker_of(&json)["instance_id"], "pod-7f3c");
    assert_eq!(worker_of(&json), worker_of(&printed));

    let text = lintel_status(node.addr, false).await;
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("deployment v42  instance pod-7f3c"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// A mesh of a version-2 node and version-3 nodes.

/// A node named `id`, dialling `seeds`, speaking up to `version`.
async fn node_at(id: &str, seeds: &[&TestNode], version: u16) -> TestNode {
    let seeds: Vec<_> = seeds.iter().map(|node| node.addr).collect();
    TestNode::with_config(NodeConfig {
        max_protocol_version: version,
        ..cluster_config(id, &seeds)
    })
    .await
}

/// The channel of the pool the tests' workers serve `echo` in.
fn echo_channel() -> String {
    lintel::wire::channel::dispatch_channel_name("ns", "default", None)
}

/// Version-3 nodes `a` and `b` linked, a traced worker on `b` announced to `a`, and a
/// producer at `a`.
async fn b_serving_a() -> (
    TestNode,
    TestNode,
    lintel::sdk::WorkerHandle,
    lintel::sdk::Client,
) {
    let a = node_at("a", &[], 3).await;
    let b = node_at("b", &[&a], 3).await;
    a.wait_linked(&["b"]).await;
    let on_b = traced_worker(b.addr, "on-b").await;
    a.wait_announced("b", &echo_channel()).await;
    let at_a = client(a.addr).await;
    (a, b, on_b, at_a)
}

/// What `lintel status` (with `--json` when `json`) prints about the node at `addr`.
async fn lintel_status(addr: std::net::SocketAddr, json: bool) -> std::process::Output {
    let addr = addr.to_string();
    let mut args = vec!["status", "--connect", &addr];
    if json {
        args.push("--json");
    }
    within(
        "lintel status",
        tokio::process::Command::new(env!("CARGO_BIN_EXE_lintel"))
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("run lintel status")
}

#[tokio::test]
async fn a_version_2_node_and_a_version_3_node_relay_both_ways_but_headers_never_cross() {
    let new = node_at("new", &[], 3).await;
    let old = node_at("old", &[&new], 2).await;
    new.wait_linked(&["old"]).await;
    old.wait_linked(&["new"]).await;
    let channel = echo_channel();

    // A worker on the old node only: the new node relays to it, plain requests only.
    let on_old = traced_worker(old.addr, "on-old").await;
    new.wait_announced("old", &channel).await;
    let at_new = client(new.addr).await;
    let plain = within(
        "a plain dispatch relayed to the version-2 node",
        at_new.submit(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(plain.served_by.as_deref(), Some("old"));
    let missed = within(
        "a traced dispatch that no link can carry",
        at_new.dispatch(&support::dispatch_of(request("ns", "echo", "x")), &traced()),
    )
    .await
    .expect("connection stays up");
    let DispatchResult::NoWorker(census) = missed else {
        panic!("expected NoWorker3, got {missed:?}");
    };
    assert_eq!(census.reason, NoWorkerReason::CapabilityMatchedNobody);
    let to_old = new
        .peers()
        .into_iter()
        .find(|p| p.node_id == "old")
        .expect("old");
    assert_eq!(to_old.relays_sent, 1, "the traced dispatch was not relayed");
    drop(on_old);

    // A worker on the new node only: the old node relays to it (a version-2 `Relay`).
    let _on_new = traced_worker(new.addr, "on-new").await;
    old.wait_announced("new", &channel).await;
    let at_old = client(old.addr).await;
    assert_eq!(
        at_old.node_info().version,
        2,
        "the old node speaks version 2"
    );
    let relayed = within(
        "a plain dispatch relayed to the version-3 node",
        at_old.submit(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(relayed.served_by.as_deref(), Some("new"));
    assert_eq!(payload(&relayed.result), "");
}

#[tokio::test]
async fn a_dispatch_with_headers_is_placed_past_a_version_2_worker_and_link_onto_one_that_carries_them(
) {
    let a = node_at("a", &[], 3).await;
    let old = node_at("old", &[&a], 2).await;
    let b = node_at("b", &[&a], 3).await;
    a.wait_linked(&["old", "b"]).await;
    let channel = echo_channel();
    // A version-2 worker on a itself, a worker behind the version-2 link to old, and a
    // version-3 worker on b: only b's can carry headers.
    let mut local_v2 = raw_worker(a.addr, 2, 4).await;
    let _on_old = traced_worker(old.addr, "on-old").await;
    let _on_b = traced_worker(b.addr, "on-b").await;
    a.wait_announced("old", &channel).await;
    a.wait_announced("b", &channel).await;
    let at_a = client(a.addr).await;
    for _ in 0..4 {
        let placed = within(
            "a traced dispatch",
            at_a.submit(
                &support::dispatch_of(request("ns", "echo", "traced")),
                &traced(),
            ),
        )
        .await
        .expect("connection stays up");
        assert_eq!(placed.served_by.as_deref(), Some("b"));
        assert_eq!(payload(&placed.result), TRACED_ECHO, "every header arrived");
    }
    // A plain dispatch stays local (local-first): the first push the version-2 worker sees.
    let plain = tokio::spawn({
        let at_a = at_a.clone();
        async move {
            at_a.dispatch(
                &support::dispatch_of(request("ns", "echo", "plain")),
                &DispatchOptions::default(),
            )
            .await
        }
    });
    let Some(Frame::Push(push)) = next_frame(&mut local_v2).await else {
        panic!("the version-2 worker is pushed the plain dispatch");
    };
    assert_eq!(local_v2.last_kind(), Some(FrameKind::Push));
    assert_eq!(
        &push.request.input[..],
        b"plain",
        "no traced dispatch reached it"
    );
    local_v2.send(support::reply_frame(&push, "local")).await;
    let plain = within("the plain outcome", plain).await.expect("task");
    assert_eq!(payload(&plain.expect("connection stays up")), "local");
    let to_old = a.peers().into_iter().find(|p| p.node_id == "old");
    assert_eq!(
        to_old.map(|p| p.relays_sent),
        Some(0),
        "nothing crossed the version-2 link"
    );
}

#[tokio::test]
async fn headers_cross_a_version_3_link_to_the_worker_and_status_shows_remote_capacity() {
    let (a, _b, _on_b, at_a) = b_serving_a().await;
    let channel = echo_channel();
    let relayed = within(
        "a traced dispatch relayed",
        at_a.submit(&support::dispatch_of(request("ns", "echo", "x")), &traced()),
    )
    .await
    .expect("connection stays up");
    assert_eq!(relayed.served_by.as_deref(), Some("b"));
    assert_eq!(payload(&relayed.result), TRACED_ECHO);

    let status = within("a's status", at_a.status()).await.expect("status");
    let peer = status
        .peers
        .iter()
        .find(|peer| peer.link.node_id == "b")
        .expect("b in a's status");
    assert_eq!(peer.link.relays_sent, 1);
    let [pool] = &peer.remote_pools[..] else {
        panic!("one remote pool: {:?}", peer.remote_pools);
    };
    assert_eq!(
        (
            pool.channel.as_str(),
            pool.activity_type.as_str(),
            pool.workers,
            pool.slots
        ),
        (channel.as_str(), "echo", 1, 4)
    );
    let text = lintel_status(a.addr, false).await;
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("remote {channel} echo  workers 1  slots 4")),
        "{text}"
    );
}

#[tokio::test]
async fn the_status_document_keeps_a_members_counts_across_its_links_and_names_join_points() {
    let (a, b, _on_b, at_a) = b_serving_a().await;
    let relayed = within(
        "a dispatch relayed to b",
        at_a.submit(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(relayed.served_by.as_deref(), Some("b"));

    // b goes, and a node of the same id comes back: one member, its second link.
    b.shutdown().await;
    a.wait_peers("b's link down", |peers| !support::up(peers, "b"))
        .await;
    let b_again = node_at("b", &[&a], 3).await;
    a.wait_linked(&["b"]).await;
    let status = within("a's status", at_a.status()).await.expect("status");
    let [peer] = &status.peers[..] else {
        panic!("one member: {:?}", status.peers);
    };
    assert_eq!(
        (
            peer.link.node_id.as_str(),
            peer.link.relays_sent,
            peer.link_ups,
            peer.link_downs
        ),
        ("b", 1, 2, 1),
        "the relay on the first link still counts"
    );
    let at_b = client(b_again.addr).await;
    let status = within("b's status", at_b.status()).await.expect("status");
    let [join_point] = &status.join_points[..] else {
        panic!("one join point: {:?}", status.join_points);
    };
    assert_eq!(
        (join_point.address.clone(), join_point.node_id.as_deref()),
        (a.addr.to_string(), Some("a"))
    );
}

fn hello3(extensions: Vec<Extension>) -> Frame {
    Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation: 1,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        features: Vec::new(),
        extensions,
    })
}

#[tokio::test]
async fn a_version_3_peer_is_answered_in_version_3_and_refused_what_the_node_lacks() {
    let node = TestNode::joined("n", &[]).await;
    // A plain `PeerHello` is accepted on a version-3 link, and answered `PeerHello`.
    let mut raw = hand_peer_written_at(
        node.addr,
        Frame::from(PeerHello {
            node_id: "hand".into(),
            incarnation: 1,
            advertise: "127.0.0.1:1".into(),
            peers: Vec::new(),
            ..Default::default()
        }),
        2,
    )
    .await;
    match raw.recv().await {
        Some(Frame::PeerHello(hello)) => {
            assert_eq!(hello.node_id, "n");
            assert_eq!(hello.features, FEATURES);
        }
        other => panic!("expected PeerHello, got {other:?}"),
    }
    assert_eq!(raw.last_kind(), Some(FrameKind::PeerHello3));
    assert!(matches!(raw.recv().await, Some(Frame::Presence(_))));
    assert_eq!(raw.last_kind(), Some(FrameKind::Presence3));
    raw.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: Vec::new(),
        ..Default::default()
    }))
    .await;
    // A farewell is heard: the node retires the link too, saying `Goodbye` to a peer whose
    // hello did not list `farewell`, and closes.
    raw.send(Frame::Farewell(Farewell {
        reason: "draining".into(),
    }))
    .await;
    match next_frame(&mut raw).await {
        Some(Frame::Goodbye(goodbye)) => assert_eq!(goodbye.reason, "the peer said farewell"),
        other => panic!("expected Goodbye, got {other:?}"),
    }
    raw.closed().await;
    // A resumption frame from a peer whose hello did not list `relay-resume` closes the link
    // with `Error{Unsupported}` naming the feature.
    for (frame, named) in [
        (
            Frame::RelayAck(RelayAck {
                below: 1,
                also: Vec::new(),
            }),
            feature::RELAY_RESUME,
        ),
        (
            Frame::Resume(Resume {
                unanswered: vec![1],
                last: true,
            }),
            feature::RELAY_RESUME,
        ),
        (
            Frame::Resumed(Resumed {
                handled_up_to: 0,
                running: Vec::new(),
                unknown: Vec::new(),
                last: true,
            }),
            feature::RELAY_RESUME,
        ),
    ] {
        let mut link = hand_peer_written_at(node.addr, hello3(Vec::new()), 3).await;
        link.send(frame).await;
        let error = within("the refusal", async {
            loop {
                match next_frame(&mut link).await {
                    Some(Frame::Error(error)) => return error,
                    Some(_) => {}
                    None => panic!("the link closed without an error"),
                }
            }
        })
        .await;
        assert_eq!(error.code, ErrorCode::Unsupported, "{}", error.reason);
        assert!(error.reason.contains(named), "{}", error.reason);
    }

    // A hello with an unknown critical extension is refused; an unknown plain one is not.
    let critical = Extension {
        tag: 5,
        critical: true,
        value: Bytes::new(),
    };
    let mut raw = hand_peer_written_at(node.addr, hello3(vec![critical]), 3).await;
    match raw.recv().await {
        Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::Unsupported),
        other => panic!("expected Error{{Unsupported}}, got {other:?}"),
    }
    let plain = Extension {
        tag: 5,
        critical: false,
        value: Bytes::new(),
    };
    let mut raw = hand_peer_written_at(node.addr, hello3(vec![plain]), 3).await;
    assert!(matches!(raw.recv().await, Some(Frame::PeerHello(_))));
}

#[tokio::test]
async fn a_relay3_from_a_version_3_peer_is_pushed_with_its_headers_and_answered() {
    let node = TestNode::joined("n", &[]).await;
    let mut worker = raw_worker(node.addr, 3, 2).await;
    let mut raw = hand_peer_written_at(node.addr, hello3(Vec::new()), 3).await;
    raw.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: Vec::new(),
        ..Default::default()
    }))
    .await;
    let relay3 = Frame::from(lintel::wire::Relay {
        correlation: 1,
        request: request("ns", "echo", "x"),
        extras: RequestExtras {
            headers: vec![Header::new("traceparent", "00-abc-01")],
            ..RequestExtras::default()
        },
        routing: Default::default(),
        reply_timeout_ms: 5_000,
    });
    raw.send(relay3).await;
    let Some(Frame::Push(push)) = next_frame(&mut worker).await else {
        panic!("the relayed request is pushed with its headers");
    };
    assert_eq!(worker.last_kind(), Some(FrameKind::Push3));
    assert_eq!(push.extras.headers[0].value, "00-abc-01");
    let push = lintel::wire::Push {
        correlation: push.correlation,
        request: push.request,
        extras: Default::default(),
    };
    worker
        .send(Frame::Reply(lintel::wire::Reply {
            correlation: push.correlation,
            response: response_to(&push, "relayed"),
        }))
        .await;
    let outcome = within("the relay outcome", async {
        loop {
            match next_frame(&mut raw).await {
                Some(Frame::RelayOutcome(outcome)) => return outcome,
                Some(_) => {}
                None => panic!("the link closed"),
            }
        }
    })
    .await;
    assert_eq!(outcome.correlation, 1);
    assert_eq!(payload(&outcome.result), "relayed");
}
