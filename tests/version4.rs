//! Protocol version 4 against a real node: the `Features` a client lists after its welcome,
//! the writer's downgrade of version-4 outcomes for a reader that did not list them, an unknown
//! critical extension refused as `Unsupported`, a worker's progress reaching the producer that
//! asked (sessions and heartbeats themselves: tests/worker_resume.rs, tests/heartbeats.rs),
//! and version-1 to version-3 clients and peers beside it seeing only their own version's
//! frames, in one node and across a mesh of a version-3 and a version-4 node.

use lintel_test_support as support;

use bytes::Bytes;
use lintel::dispatch::DispatchOptions;
use lintel::sdk::transport::{self, SendError};
use lintel::wire::{
    feature, ActivityOutcome, DispatchResult, ErrorCode, Extension, FeatureSet, Features, Frame,
    FrameCodec, FrameKind, Hello, PeerHello, Progress, RefusalCode, RefusedDispatch, RefusedReason,
    RequestExtras, ResumeSession, Role, ServedOutcome, Submit,
};
use lintel::NodeConfig;
use support::{
    client, cluster_config, hello_at, next_frame, plain, register, request, submit, within,
    RawClient, RawWorker, TestNode,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream_compat::next_decoded;

/// What the node lists in its welcome and peer hello of version 3.
const FEATURES: [&str; 10] = support::VERSION_3_FEATURES;

/// What the node lists in its welcome and peer hello of version 4: version 3's, and every one
/// of version 4's.
fn features_4() -> Vec<&'static str> {
    FEATURES
        .into_iter()
        .chain([
            feature::HEARTBEAT_TIMEOUT,
            feature::ROLE_NOT_GRANTED,
            feature::PROGRESS,
            feature::WORKER_RESUME,
        ])
        .collect()
}

/// A critical extension of a tag no version allocates.
fn unknown_critical() -> Extension {
    Extension {
        tag: 77,
        critical: true,
        value: Bytes::new(),
    }
}

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

/// A submission of version 3 with `extras`.
fn submit3(correlation: u64, extras: RequestExtras) -> Frame {
    Frame::from(Submit {
        correlation,
        request: request("ns", "echo", "x"),
        extras,
        wait_for_worker_ms: None,
        reply_timeout_ms: None,
        routing: Default::default(),
    })
}

/// The result of the next outcome `producer` is sent, with the kind it came as.
async fn outcome(producer: &mut RawClient) -> (DispatchResult, Option<FrameKind>) {
    match next_frame(producer).await {
        Some(Frame::Outcome(outcome)) => (outcome.result, producer.last_kind()),
        Some(Frame::ServedOutcome(outcome)) => (outcome.result, producer.last_kind()),
        other => panic!("expected an outcome, got {other:?}"),
    }
}

/// A raw worker of version `version` (listing nothing on version 4) registered for `echo`.
async fn raw_worker(addr: std::net::SocketAddr, version: u16) -> RawWorker {
    let (client, pid) = RawClient::hello_at(addr, Role::Worker, version).await;
    RawWorker::register(client, pid, register("ns", "echo", 1)).await
}

/// What a worker of `version` is pushed and its producer of the same version is sent back, for
/// one dispatch answered `ok` and one that finds no worker: the frames and the kinds they came
/// as.
async fn one_round(node: &TestNode, version: u16) -> Vec<(String, Option<FrameKind>)> {
    let mut seen = Vec::new();
    let mut worker = raw_worker(node.addr, version).await;
    let (mut producer, _) = RawClient::hello_at(node.addr, Role::Producer, version).await;
    let welcome_kind = producer.last_kind();
    seen.push(("welcome".to_owned(), welcome_kind));
    producer
        .send(submit(1, request("ns", "echo", "x"), None))
        .await;
    let Some(Frame::Push(push)) = next_frame(&mut worker.client).await else {
        panic!("a version-{version} worker is pushed");
    };
    seen.push((format!("{:?}", push.request), worker.client.last_kind()));
    worker.client.send(support::reply_frame(&push, "ok")).await;
    let (result, kind) = outcome(&mut producer).await;
    assert_eq!(payload(&result), "ok");
    seen.push((format!("{result:?}"), kind));
    drop(worker);
    node.wait_registry("the worker gone", |registry| registry.worker_count() == 0)
        .await;
    producer
        .send(submit(2, request("ns", "echo", "x"), None))
        .await;
    let (mut result, kind) = outcome(&mut producer).await;
    let DispatchResult::NoWorker(census) = &mut result else {
        panic!("expected NoWorker, got {result:?}");
    };
    // How long ago the worker left depends on the moment, not on the version: whether it is
    // stated is compared, not its value.
    census.last_departure_ms_ago = census.last_departure_ms_ago.map(|_| 0);
    seen.push((format!("{result:?}"), kind));
    seen
}

// ---------------------------------------------------------------------------------------------
// One node.

#[tokio::test]
async fn a_version_4_welcome_lists_role_not_granted_of_version_4_and_the_sdk_sends_its_features() {
    let node = TestNode::start().await;
    let mut raw = RawClient::connect(node.addr).await;
    raw.send(Frame::Hello(hello_at(Role::Producer, 4))).await;
    match raw.recv().await {
        Some(Frame::Welcome(welcome)) => {
            assert_eq!(welcome.version, 4);
            assert_eq!(welcome.features, features_4());
            assert!(welcome.header_limits.is_some());
        }
        other => panic!("expected a welcome, got {other:?}"),
    }
    assert_eq!(raw.last_kind(), Some(FrameKind::Welcome3));
    // Anything but `Features` first is refused, and the connection closed.
    raw.send(Frame::from(lintel::wire::StatusQuery { correlation: 1 }))
        .await;
    match next_frame(&mut raw).await {
        Some(Frame::Error(error)) => {
            assert_eq!(error.code, ErrorCode::UnexpectedFrame, "{}", error.reason);
            assert!(error.reason.contains("Features"), "{}", error.reason);
        }
        other => panic!("expected Error{{UnexpectedFrame}}, got {other:?}"),
    }
    raw.closed().await;

    // A `Features` over the node's bounds closes the connection.
    let mut raw = RawClient::connect(node.addr).await;
    raw.send(Frame::Hello(hello_at(Role::Producer, 4))).await;
    assert!(matches!(raw.recv().await, Some(Frame::Welcome(_))));
    raw.send(Frame::from(Features {
        features: vec![String::new()],
        extensions: Vec::new(),
    }))
    .await;
    match next_frame(&mut raw).await {
        Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::LimitExceeded),
        other => panic!("expected Error{{LimitExceeded}}, got {other:?}"),
    }

    // The SDK speaks version 4 to it, and its worker and producer work as before.
    let _worker = support::sdk_worker(
        node.addr,
        plain("ns", "echo", 1, "sdk"),
        lintel::activities::BuiltIn,
    )
    .await;
    let producer = client(node.addr).await;
    assert_eq!(producer.node_info().version, 4);
    let done = within(
        "an SDK dispatch on version 4",
        producer.dispatch(
            &support::dispatch_of(request("ns", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(payload(&done), "x");

    // A producer over several nodes sends its `Features` too, or the node would refuse it.
    let nodes = lintel::sdk::Client::connect_nodes(
        [node.addr.to_string()],
        lintel::sdk::ClientConfig::default(),
    )
    .await
    .expect("connects over the node list");
    assert_eq!(nodes.node_info().version, 4);
    let done = within(
        "a dispatch over the node list on version 4",
        nodes.dispatch(
            &support::dispatch_of(request("ns", "echo", "y")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(payload(&done), "y");
}

#[tokio::test]
async fn a_version_4_client_that_lists_nothing_is_sent_what_a_version_3_client_is() {
    let node = TestNode::start().await;
    let v3 = one_round(&node, 3).await;
    let v4 = one_round(&node, 4).await;
    assert_eq!(v3, v4);
    assert_eq!(
        v4.first().map(|seen| seen.1),
        Some(Some(FrameKind::Welcome3))
    );
    assert_eq!(v4.get(1).map(|seen| seen.1), Some(Some(FrameKind::Push3)));
    assert_eq!(
        v4.get(2).map(|seen| seen.1),
        Some(Some(FrameKind::ServedOutcome))
    );
}

#[tokio::test]
async fn version_1_to_3_clients_see_only_their_own_versions_kinds() {
    let node = TestNode::start().await;
    for (version, welcome, push, outcome) in [
        (1, FrameKind::Welcome, FrameKind::Push, FrameKind::Outcome),
        (
            2,
            FrameKind::Welcome,
            FrameKind::Push,
            FrameKind::ServedOutcome,
        ),
        (
            3,
            FrameKind::Welcome3,
            FrameKind::Push3,
            FrameKind::ServedOutcome,
        ),
    ] {
        let seen = one_round(&node, version).await;
        let kinds: Vec<_> = seen.iter().map(|seen| seen.1).collect();
        assert_eq!(
            kinds.get(..3),
            Some(&[Some(welcome), Some(push), Some(outcome)][..]),
            "version {version}"
        );
        // A version-4 kind is not theirs to send.
        let (mut producer, _) = RawClient::hello_at(node.addr, Role::Producer, version).await;
        producer.speak(4);
        producer
            .send(Frame::from(Features::of(FeatureSet::NONE)))
            .await;
        match next_frame(&mut producer).await {
            Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::UnexpectedFrame),
            other => panic!("version {version}: expected Error{{UnexpectedFrame}}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_writer_sends_a_version_4_outcome_whole_only_to_a_reader_that_listed_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (dialled, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (_reader, outbound, _writer) = transport::split(
        transport::Socket::from(dialled.expect("connect")),
        1 << 20,
        64,
    );
    let (accepted, _) = accepted.expect("accept");
    let mut read = tokio_util::codec::FramedRead::new(accepted, FrameCodec::default());
    outbound.speak(4);

    let heartbeat = DispatchResult::HeartbeatTimeout {
        worker_id: 7,
        after_ms: 1500,
    };
    let role = DispatchResult::Refused(RefusedDispatch {
        reason: RefusedReason::RoleNotGranted,
        detail: "role `submit` in ns".into(),
    });
    let sent = |result: &DispatchResult| {
        Frame::from(ServedOutcome {
            correlation: 1,
            served_by: "n".into(),
            result: result.clone(),
        })
    };
    let read_back = |frame: Option<Frame>| match frame {
        Some(Frame::ServedOutcome(outcome)) => outcome.result,
        other => panic!("expected a ServedOutcome, got {other:?}"),
    };

    // Listing nothing: the nearest version-3 outcome, same fields.
    for result in [&heartbeat, &role] {
        outbound.send(sent(result)).await.expect("queued");
    }
    assert_eq!(
        read_back(next_decoded(&mut read).await),
        DispatchResult::Timeout {
            worker_id: 7,
            after_ms: 1500
        }
    );
    assert_eq!(
        read_back(next_decoded(&mut read).await),
        DispatchResult::Refused(RefusedDispatch {
            reason: RefusedReason::NamespaceNotGranted,
            detail: "role `submit` in ns".into(),
        })
    );
    // A version-4 kind is refused at the writer, never sent, to a reader that did not list it.
    let progress = Frame::from(Progress {
        correlation: 1,
        details: Bytes::from_static(b"half"),
    });
    match outbound.send(progress.clone()).await {
        Err(SendError::Unsupported { kind, field, .. }) => {
            assert_eq!(kind, FrameKind::Progress);
            assert_eq!(field, Some(feature::PROGRESS));
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }

    // Listing them: sent whole.
    outbound.listen(FeatureSet::ALL);
    for result in [&heartbeat, &role] {
        outbound.send(sent(result)).await.expect("queued");
    }
    assert_eq!(read_back(next_decoded(&mut read).await), heartbeat);
    assert_eq!(read_back(next_decoded(&mut read).await), role);
    outbound.send(progress.clone()).await.expect("queued");
    assert_eq!(next_decoded(&mut read).await, Some(progress));
}

#[tokio::test]
async fn an_unknown_critical_tag_is_refused_and_a_workers_progress_reaches_the_producer() {
    let node = TestNode::start().await;
    let mut worker = raw_worker(node.addr, 4).await;

    // A critical tag the node does not know is refused, at version 4 and 3 alike.
    let unknown = RequestExtras {
        extensions: vec![unknown_critical()],
        ..RequestExtras::default()
    };
    for version in [3, 4] {
        let (mut producer, _) = RawClient::hello_at(node.addr, Role::Producer, version).await;
        producer.send(submit3(1, unknown.clone())).await;
        match outcome(&mut producer).await.0 {
            DispatchResult::Refused(refused) => {
                assert_eq!(refused.reason, RefusedReason::Unsupported);
            }
            other => panic!("version {version}: expected a refusal, got {other:?}"),
        }
    }

    // A wish for progress is carried to the worker, and the worker's progress reaches the
    // producer, under the submission's correlation, before the outcome.
    let mut progress = RequestExtras::default();
    progress.set_progress(true);
    let (mut producer, _) =
        RawClient::hello_listing(node.addr, Role::Producer, FeatureSet::PROGRESS).await;
    producer.send(submit3(2, progress)).await;
    let Some(Frame::Push(push)) = next_frame(&mut worker.client).await else {
        panic!("the worker is pushed");
    };
    assert!(push.extras.progress(), "the wish is carried to the worker");
    // Written as to a node that listed it: the SDK's writer would not send it otherwise.
    worker.client.framed.codec_mut().set_listed(FeatureSet::ALL);
    worker
        .client
        .send(Frame::from(Progress {
            correlation: push.correlation,
            details: Bytes::from_static(b"half"),
        }))
        .await;
    match next_frame(&mut producer).await {
        Some(Frame::Progress(heard)) => assert_eq!(
            heard,
            Progress {
                correlation: 2,
                details: Bytes::from_static(b"half"),
            }
        ),
        other => panic!("expected Progress, got {other:?}"),
    }
    worker.reply(&push, "done").await;
    let (result, _) = outcome(&mut producer).await;
    assert_eq!(payload(&result), "done");

    // A resume of a session the node does not keep is refused; the connection may register
    // anew.
    let (mut resuming, _) = RawClient::hello_at(node.addr, Role::Worker, 4).await;
    resuming.framed.codec_mut().set_listed(FeatureSet::ALL);
    resuming
        .send(Frame::from(ResumeSession {
            token: Bytes::from_static(&[7; 16]),
            holding: vec![1, 2],
        }))
        .await;
    match next_frame(&mut resuming).await {
        Some(Frame::RegisterRefused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::SessionUnknown);
        }
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }
    resuming.send(Frame::from(register("ns", "echo", 1))).await;
    assert!(matches!(
        next_frame(&mut resuming).await,
        Some(Frame::Registered(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Peers.

/// A hand-written peer named `name` speaking up to `version`, past the handshake, having sent
/// its hello (with `extensions`).
async fn hand_peer(
    node: std::net::SocketAddr,
    name: &str,
    version: u16,
    extensions: Vec<Extension>,
) -> RawClient {
    let mut raw = RawClient::connect(node).await;
    raw.send(Frame::Hello(Hello {
        min_version: 2,
        ..hello_at(Role::Peer, version)
    }))
    .await;
    assert!(matches!(raw.recv().await, Some(Frame::Welcome(_))));
    raw.send(Frame::from(PeerHello {
        node_id: name.into(),
        incarnation: 1,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        features: Vec::new(),
        extensions,
    }))
    .await;
    raw
}

#[tokio::test]
async fn version_2_to_4_peers_are_answered_in_their_own_version_and_refused_what_the_node_lacks() {
    let node = TestNode::joined("n", &[]).await;
    for (version, hello, presence) in [
        (2, FrameKind::PeerHello, FrameKind::Presence),
        (3, FrameKind::PeerHello3, FrameKind::Presence3),
        (4, FrameKind::PeerHello3, FrameKind::Presence3),
    ] {
        let mut raw = hand_peer(node.addr, &format!("v{version}"), version, Vec::new()).await;
        match raw.recv().await {
            Some(Frame::PeerHello(heard)) if version >= 4 => {
                assert_eq!(heard.features, features_4());
            }
            Some(Frame::PeerHello(heard)) if version == 3 => {
                assert_eq!(heard.features, FEATURES);
            }
            Some(Frame::PeerHello(heard)) => assert!(heard.features.is_empty()),
            other => panic!("version {version}: expected PeerHello, got {other:?}"),
        }
        assert_eq!(raw.last_kind(), Some(hello), "version {version}");
        assert!(matches!(raw.recv().await, Some(Frame::Presence(_))));
        assert_eq!(raw.last_kind(), Some(presence), "version {version}");
    }

    // Tag 3 (a lost link) is not critical: a node that does not act on it ignores it.
    let mut lost = lintel::wire::PeerHello::default();
    lost.set_lost_link_to(Some(42));
    let mut raw = hand_peer(node.addr, "lost", 4, lost.extensions).await;
    assert!(matches!(raw.recv().await, Some(Frame::PeerHello(_))));

    // A critical tag the node does not know is refused.
    let mut raw = hand_peer(node.addr, "critical", 4, vec![unknown_critical()]).await;
    match raw.recv().await {
        Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::Unsupported),
        other => panic!("expected Error{{Unsupported}}, got {other:?}"),
    }

    // Progress naming no relay is dropped; the link stays up.
    let mut link = hand_peer(node.addr, "progress", 4, Vec::new()).await;
    link.framed.codec_mut().set_listed(FeatureSet::ALL);
    link.send(Frame::from(Progress {
        correlation: 1,
        details: Bytes::new(),
    }))
    .await;
    link.send(Frame::Ping(lintel::wire::Ping { nonce: 9 }))
        .await;
    within("the pong", async {
        loop {
            match next_frame(&mut link).await {
                Some(Frame::Pong(pong)) if pong.nonce == 9 => return,
                Some(Frame::Error(error)) => panic!("refused: {error:?}"),
                Some(_) => {}
                None => panic!("the link closed"),
            }
        }
    })
    .await;
}

/// A node named `id`, dialling `seeds`, speaking up to `version`.
async fn node_at(id: &str, seeds: &[&TestNode], version: u16) -> TestNode {
    let seeds: Vec<_> = seeds.iter().map(|node| node.addr).collect();
    TestNode::with_config(NodeConfig {
        max_protocol_version: version,
        ..cluster_config(id, &seeds)
    })
    .await
}

#[tokio::test]
async fn a_version_3_node_and_a_version_4_node_relay_both_ways() {
    let new = node_at("new", &[], 4).await;
    let old = node_at("old", &[&new], 3).await;
    new.wait_linked(&["old"]).await;
    old.wait_linked(&["new"]).await;
    let channel = lintel::wire::channel::dispatch_channel_name("ns", "default", None);

    // A worker on the old node only: the new node relays to it.
    let on_old = support::sdk_worker(
        old.addr,
        plain("ns", "echo", 1, "on-old"),
        lintel::activities::BuiltIn,
    )
    .await;
    new.wait_announced("old", &channel).await;
    let at_new = client(new.addr).await;
    assert_eq!(at_new.node_info().version, 4);
    let relayed = within(
        "a dispatch relayed to the version-3 node",
        at_new.submit(
            &support::dispatch_of(request("ns", "echo", "to-old")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(relayed.served_by.as_deref(), Some("old"));
    assert_eq!(payload(&relayed.result), "to-old");
    drop(on_old);

    // A worker on the new node only: the old node relays to it.
    let _on_new = support::sdk_worker(
        new.addr,
        plain("ns", "echo", 1, "on-new"),
        lintel::activities::BuiltIn,
    )
    .await;
    old.wait_announced("new", &channel).await;
    let at_old = client(old.addr).await;
    assert_eq!(
        at_old.node_info().version,
        3,
        "the old node speaks version 3"
    );
    let relayed = within(
        "a dispatch relayed to the version-4 node",
        at_old.submit(
            &support::dispatch_of(request("ns", "echo", "to-new")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert_eq!(relayed.served_by.as_deref(), Some("new"));
    assert_eq!(payload(&relayed.result), "to-new");
}

/// Reading one frame from a `FramedRead`, bounded.
mod tokio_stream_compat {
    use futures_util::StreamExt;
    use lintel::wire::{Frame, FrameCodec};
    use tokio::net::TcpStream;
    use tokio_util::codec::FramedRead;

    use super::within;

    /// The next frame `read` decodes; `None` at its end or on an error.
    pub(super) async fn next_decoded(
        read: &mut FramedRead<TcpStream, FrameCodec>,
    ) -> Option<Frame> {
        within("a frame from the writer", read.next())
            .await
            .and_then(Result::ok)
    }
}
