//! The protocol over real sockets: the handshake, bad bytes and frames out of place, and
//! replies that match nothing.
//!
//! Every bad connection must get its `Error` (or refusal) and then the close, while another
//! registered worker with a dispatch in flight carries on: that dispatch still completes.
//! Every wait is on a frame or a notifier event, bounded by `within`; nothing sleeps.

use lintel_test_support as support;

use bytes::Bytes;
use futures_util::SinkExt;
use lintel::wire::{
    ActivityOutcome, CapacityUpdate, DispatchRequest, DispatchResponse, DispatchResult, ErrorCode,
    ErrorFrame, Frame, FrameKind, Goodbye, Hello, NodeRouting, OutcomeFrame, Ping, Pong, Push,
    RefusalCode, Register, Registered, Reply, Role, StatusQuery, Submit, DEFAULT_MAX_FRAME_LEN,
};
use lintel::NodeConfig;
use support::{hello, hello_at, next_frame, register, request, within, RawClient, TestNode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ---------------------------------------------------------------------------------------------
// Helpers.

/// Writes `bytes` to the socket as they are, around the codec.
async fn send_bytes(client: &mut RawClient, bytes: &[u8]) {
    client
        .framed
        .get_mut()
        .write_all(bytes)
        .await
        .expect("write raw bytes");
}

/// Expects `Error{code}` and then the close, with nothing in between.
async fn expect_error_then_close(client: &mut RawClient, code: ErrorCode) {
    match next_frame(client).await {
        Some(Frame::Error(ErrorFrame { code: got, reason })) => {
            assert_eq!(got, code, "error reason: {reason}");
        }
        other => panic!("expected Error{{{code:?}}}, got {other:?}"),
    }
    expect_close(client).await;
}

/// Expects `HelloRefused{code}` and then the close.
async fn expect_refused_then_close(client: &mut RawClient, code: RefusalCode) {
    match next_frame(client).await {
        Some(Frame::HelloRefused(refusal)) => assert_eq!(refusal.code, code, "{}", refusal.reason),
        other => panic!("expected HelloRefused{{{code:?}}}, got {other:?}"),
    }
    expect_close(client).await;
}

async fn expect_close(client: &mut RawClient) {
    let after = client.recv().await;
    assert!(after.is_none(), "expected the close, got {after:?}");
}

/// Sends `registration` and returns the worker id the node acked it with.
async fn expect_registered(client: &mut RawClient, registration: Register) -> u64 {
    client.send(Frame::from(registration)).await;
    match next_frame(client).await {
        Some(Frame::Registered(Registered { worker_id })) => worker_id,
        other => panic!("expected Registered, got {other:?}"),
    }
}

/// Waits until the node has handled every frame `client` sent before this call: a connection's
/// frames are handled in order, so the pong to this ping comes back after all of them.
async fn settle(client: &mut RawClient, nonce: u64) {
    client.send(Frame::Ping(Ping { nonce })).await;
    match next_frame(client).await {
        Some(Frame::Pong(Pong { nonce: got })) if got == nonce => {}
        other => panic!("expected Pong{{{nonce}}}, got {other:?}"),
    }
}

fn submit(correlation: u64, request: DispatchRequest, reply_timeout_ms: u64) -> Frame {
    Frame::from(Submit {
        correlation,
        request,
        wait_for_worker_ms: None,
        reply_timeout_ms: Some(reply_timeout_ms),
        routing: NodeRouting::Any,
        extras: Default::default(),
    })
}

/// A reply with `correlation` answering `push`, whose output is `output`.
fn reply(correlation: u64, push: &Push, output: &'static str) -> Frame {
    Frame::Reply(Reply {
        correlation,
        response: DispatchResponse {
            workflow_id: push.request.workflow_id.clone(),
            ordinal: push.request.ordinal,
            run_id: push.request.run_id.clone(),
            outcome: ActivityOutcome::Success(Bytes::from_static(output.as_bytes())),
        },
    })
}

async fn expect_push(worker: &mut RawClient) -> Push {
    match next_frame(worker).await {
        Some(Frame::Push(push)) => *push,
        other => panic!("expected a Push, got {other:?}"),
    }
}

/// Expects the outcome of submission `correlation` to be `Completed` with `output`.
async fn expect_completed(producer: &mut RawClient, correlation: u64, output: &str) {
    match next_frame(producer).await {
        Some(Frame::Outcome(OutcomeFrame {
            correlation: got,
            result: DispatchResult::Completed(response),
        })) if got == correlation => {
            assert_eq!(
                response.outcome,
                ActivityOutcome::Success(Bytes::copy_from_slice(output.as_bytes()))
            );
        }
        other => panic!("expected Outcome{{{correlation}, Completed}}, got {other:?}"),
    }
}

fn dropped_replies(node: &TestNode) -> u64 {
    node.node.status().counters.dropped_replies
}

/// A registered raw worker with a producer's dispatch pushed to it and not yet answered.
struct InFlight {
    worker: RawClient,
    worker_pid: u64,
    producer: RawClient,
    push: Push,
}

impl InFlight {
    const CORRELATION: u64 = 41;

    async fn start(node: &TestNode) -> Self {
        let (mut worker, worker_pid) = RawClient::hello(node.addr, Role::Worker).await;
        expect_registered(&mut worker, register("ns", "echo", 1)).await;
        let (mut producer, _) = RawClient::hello(node.addr, Role::Producer).await;
        producer
            .send(submit(
                Self::CORRELATION,
                request("ns", "echo", "in flight"),
                10_000,
            ))
            .await;
        let push = expect_push(&mut worker).await;
        Self {
            worker,
            worker_pid,
            producer,
            push,
        }
    }

    /// The worker replies now; the dispatch completes with that reply.
    async fn finish(mut self, node: &TestNode) {
        assert_eq!(node.events.unregistered(self.worker_pid), 0);
        let correlation = self.push.correlation;
        self.worker
            .send(reply(correlation, &self.push, "unaffected"))
            .await;
        expect_completed(&mut self.producer, Self::CORRELATION, "unaffected").await;
        assert_eq!(node.events.unregistered(self.worker_pid), 0);
        assert_eq!(node.events.registered(self.worker_pid), 1);
    }
}

// ---------------------------------------------------------------------------------------------
// Handshake.

#[tokio::test]
async fn a_hello_sharing_no_version_with_the_node_is_refused_with_version_mismatch() {
    let node = TestNode::start().await;
    for (min_version, max_version) in [(5, 9), (0, 0), (3, 2)] {
        let mut client = RawClient::connect(node.addr).await;
        client
            .send(Frame::Hello(Hello {
                min_version,
                max_version,
                ..hello(Role::Worker)
            }))
            .await;
        expect_refused_then_close(&mut client, RefusalCode::VersionMismatch).await;
    }
    // Overlapping ranges meet the node's 1..=4 at their highest common version; version 3
    // and 4 are welcomed with `Welcome3`.
    for (min_version, max_version, agreed) in [(0, 1, 1), (2, 2, 2), (2, 3, 3), (2, 9, 4)] {
        let mut client = RawClient::connect(node.addr).await;
        client
            .send(Frame::Hello(Hello {
                min_version,
                max_version,
                ..hello(Role::Worker)
            }))
            .await;
        let welcomed = match next_frame(&mut client).await {
            Some(Frame::Welcome(welcome)) => welcome.version,
            other => panic!("expected a welcome, got {other:?}"),
        };
        assert_eq!(welcomed, agreed, "{min_version}..={max_version}");
        let kind = match agreed {
            3.. => FrameKind::Welcome3,
            _ => FrameKind::Welcome,
        };
        assert_eq!(client.last_kind(), Some(kind), "welcomed at {agreed}");
    }
}

#[tokio::test]
async fn a_node_capped_at_version_2_refuses_version_3_alone_and_welcomes_the_rest_at_2() {
    let node = TestNode::with_config(NodeConfig {
        max_protocol_version: 2,
        ..NodeConfig::default()
    })
    .await;
    let mut up_to_3 = RawClient::connect(node.addr).await;
    up_to_3
        .send(Frame::Hello(hello_at(Role::Producer, 3)))
        .await;
    let mut client = RawClient::connect(node.addr).await;
    client
        .send(Frame::Hello(Hello {
            min_version: 3,
            ..hello_at(Role::Producer, 3)
        }))
        .await;
    expect_refused_then_close(&mut client, RefusalCode::VersionMismatch).await;
    assert!(matches!(
        next_frame(&mut up_to_3).await,
        Some(Frame::Welcome(welcome)) if welcome.version == 2
    ));
}

#[tokio::test]
async fn with_an_auth_token_a_missing_or_wrong_token_is_refused_and_the_right_one_welcomed() {
    let node = TestNode::with_config(NodeConfig {
        auth_token: Some("s3cret".into()),
        ..NodeConfig::default()
    })
    .await;
    for token in [
        None,
        Some(""),
        Some("wrong!"),
        Some("s3cre"),
        Some("s3cret "),
    ] {
        let mut client = RawClient::connect(node.addr).await;
        client
            .send(Frame::Hello(Hello {
                auth_token: token.map(str::to_owned),
                ..hello(Role::Worker)
            }))
            .await;
        match next_frame(&mut client).await {
            Some(Frame::HelloRefused(refusal)) => {
                assert_eq!(refusal.code, RefusalCode::Unauthorized, "token {token:?}");
            }
            other => panic!("token {token:?}: expected HelloRefused, got {other:?}"),
        }
        expect_close(&mut client).await;
    }
    let mut client = RawClient::connect(node.addr).await;
    client
        .send(Frame::Hello(Hello {
            auth_token: Some("s3cret".into()),
            ..hello(Role::Worker)
        }))
        .await;
    assert!(matches!(
        next_frame(&mut client).await,
        Some(Frame::Welcome(_))
    ));
    assert_eq!(node.events.total_registered(), 0);
}

#[tokio::test]
async fn a_version_1_peer_hello_is_refused_with_version_mismatch() {
    let node = TestNode::start().await;
    let mut client = RawClient::connect(node.addr).await;
    client.send(Frame::Hello(hello(Role::Peer))).await;
    expect_refused_then_close(&mut client, RefusalCode::VersionMismatch).await;
}

#[tokio::test]
async fn a_version_2_kind_on_a_version_1_producer_connection_is_an_unexpected_frame() {
    let node = TestNode::start().await;
    let (mut client, _) = RawClient::hello(node.addr, Role::Producer).await;
    // Written as a version-2 connection writes it, on the version-1 one.
    client.speak(2);
    client
        .send(Frame::Presence(lintel::wire::Presence {
            reset: true,
            synced: true,
            draining: false,
            pools: Vec::new(),
            ..Default::default()
        }))
        .await;
    expect_error_then_close(&mut client, ErrorCode::UnexpectedFrame).await;
}

#[tokio::test]
async fn silence_past_the_handshake_timeout_gets_handshake_timeout_then_close() {
    let node = TestNode::with_config(NodeConfig {
        handshake_timeout_ms: 100,
        ..NodeConfig::default()
    })
    .await;
    let mut client = RawClient::connect(node.addr).await;
    expect_error_then_close(&mut client, ErrorCode::HandshakeTimeout).await;
}

#[tokio::test]
async fn a_first_frame_other_than_hello_is_an_unexpected_frame() {
    let node = TestNode::start().await;
    let mut client = RawClient::connect(node.addr).await;
    client.send(Frame::from(register("ns", "echo", 1))).await;
    expect_error_then_close(&mut client, ErrorCode::UnexpectedFrame).await;
    assert_eq!(node.registry().worker_count(), 0);
}

#[tokio::test]
async fn a_hello_split_into_single_bytes_is_reassembled() {
    let node = TestNode::start().await;
    let mut client = RawClient::connect(node.addr).await;
    let mut encoded = bytes::BytesMut::new();
    lintel::wire::encode_frame(
        &Frame::Hello(hello(Role::Producer)),
        lintel::wire::PROTOCOL_VERSION,
        &mut encoded,
        DEFAULT_MAX_FRAME_LEN,
    )
    .expect("encode");
    for byte in encoded.iter() {
        send_bytes(&mut client, &[*byte]).await;
        client.framed.get_mut().flush().await.expect("flush");
    }
    assert!(matches!(
        next_frame(&mut client).await,
        Some(Frame::Welcome(_))
    ));
}

/// Connects and says hello as a producer; `Ok` when welcomed, `Err` with the refusal code.
async fn try_hello(node: &TestNode) -> Result<RawClient, RefusalCode> {
    let mut client = RawClient::connect(node.addr).await;
    // The node may refuse before reading the hello; a failed write then changes nothing.
    let _ = client
        .framed
        .send(Frame::Hello(hello(Role::Producer)))
        .await;
    match next_frame(&mut client).await {
        Some(Frame::Welcome(_)) => Ok(client),
        Some(Frame::HelloRefused(refusal)) => {
            expect_close(&mut client).await;
            Err(refusal.code)
        }
        other => panic!("expected Welcome or HelloRefused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_connection_over_max_connections_is_refused_until_one_closes() {
    let node = TestNode::with_config(NodeConfig {
        max_connections: 2,
        ..NodeConfig::default()
    })
    .await;
    let (mut first, _) = RawClient::hello(node.addr, Role::Worker).await;
    let (mut second, _) = RawClient::hello(node.addr, Role::Producer).await;

    assert_eq!(
        try_hello(&node).await.err(),
        Some(RefusalCode::TooManyConnections)
    );
    assert_eq!(
        try_hello(&node).await.err(),
        Some(RefusalCode::TooManyConnections),
        "a refused connection does not take a slot"
    );

    first
        .send(Frame::Goodbye(Goodbye {
            reason: "make room".into(),
        }))
        .await;
    first.closed().await;
    // The slot is released just after the close reaches us, so retry until it is.
    let mut third = within("a welcome after a close", async {
        loop {
            match try_hello(&node).await {
                Ok(client) => return client,
                Err(RefusalCode::TooManyConnections) => tokio::task::yield_now().await,
                Err(code) => panic!("unexpected refusal {code:?}"),
            }
        }
    })
    .await;

    // Both live connections work, and the limit holds again.
    for (client, correlation) in [(&mut second, 1), (&mut third, 2)] {
        client
            .send(Frame::StatusQuery(StatusQuery { correlation }))
            .await;
        assert!(matches!(
            next_frame(client).await,
            Some(Frame::Status(report)) if report.correlation == correlation
        ));
    }
    assert_eq!(
        try_hello(&node).await.err(),
        Some(RefusalCode::TooManyConnections)
    );
}

// ---------------------------------------------------------------------------------------------
// Bad bytes: each gets its Error and the close; the dispatch in flight elsewhere completes.

#[tokio::test]
async fn garbage_bytes_are_malformed_and_close_only_their_connection() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, _) = RawClient::hello(node.addr, Role::Worker).await;

    // A well-formed length around a body that is not a frame: kind 0 (`Hello`), then a
    // `min_version` varint that runs past the three bytes a u16 may take.
    send_bytes(&mut bad, &[0, 0, 0, 5, 0x00, 0xde, 0xad, 0xbe, 0xef]).await;

    expect_error_then_close(&mut bad, ErrorCode::Malformed).await;
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn an_oversize_length_prefix_is_refused_and_closes_only_its_connection() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, _) = RawClient::hello(node.addr, Role::Producer).await;

    let len = u32::try_from(DEFAULT_MAX_FRAME_LEN + 1).expect("fits");
    send_bytes(&mut bad, &len.to_be_bytes()).await;
    send_bytes(&mut bad, &[9; 16]).await;

    expect_error_then_close(&mut bad, ErrorCode::Oversize).await;
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn an_http_request_is_answered_in_plain_text_and_closed() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let mut bad = RawClient::connect(node.addr).await;

    // "GET " read as a length would be 1195725856 bytes: the node looks first.
    send_bytes(&mut bad, b"GET / HTTP/1.1\r\nHost: lintel\r\n\r\n").await;

    let mut answer = Vec::new();
    within(
        "the answer and the close",
        bad.framed.get_mut().read_to_end(&mut answer),
    )
    .await
    .expect("read the answer");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn a_truncated_frame_then_half_close_is_malformed_and_closes_only_its_connection() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, _) = RawClient::hello(node.addr, Role::Producer).await;

    // A `Submit` announcing 64 bytes, of which three arrive before our write side shuts.
    send_bytes(&mut bad, &[0, 0, 0, 64, 9, 1, 2]).await;
    bad.framed
        .get_mut()
        .shutdown()
        .await
        .expect("shut the write half");

    expect_error_then_close(&mut bad, ErrorCode::Malformed).await;
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn an_unknown_frame_kind_is_refused_and_closes_only_its_connection() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, _) = RawClient::hello(node.addr, Role::Worker).await;

    // Kind 47 is the first version 4 does not know.
    send_bytes(&mut bad, &[0, 0, 0, 1, 47]).await;

    expect_error_then_close(&mut bad, ErrorCode::UnknownFrameKind).await;
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn a_push_before_hello_is_an_unexpected_frame() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let mut bad = RawClient::connect(node.addr).await;

    bad.send(Frame::from(Push {
        correlation: 1,
        request: request("ns", "echo", "x"),
        extras: Default::default(),
    }))
    .await;

    expect_error_then_close(&mut bad, ErrorCode::UnexpectedFrame).await;
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn a_reply_from_a_producer_is_an_unexpected_frame() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, _) = RawClient::hello(node.addr, Role::Producer).await;

    // Even with the correlation the worker holds, a producer's reply completes nothing.
    bad.send(reply(in_flight.push.correlation, &in_flight.push, "forged"))
        .await;

    expect_error_then_close(&mut bad, ErrorCode::UnexpectedFrame).await;
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn a_submit_from_a_worker_is_an_unexpected_frame() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, pid) = RawClient::hello(node.addr, Role::Worker).await;
    expect_registered(&mut bad, register("elsewhere", "echo", 1)).await;

    bad.send(submit(1, request("ns", "echo", "x"), 10_000))
        .await;

    expect_error_then_close(&mut bad, ErrorCode::UnexpectedFrame).await;
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.events.unregistered(pid), 1);
    in_flight.finish(&node).await;
    assert_eq!(
        node.node.status().counters.submitted,
        1,
        "nothing was submitted"
    );
}

#[tokio::test]
async fn a_reply_before_register_is_an_unexpected_frame() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, pid) = RawClient::hello(node.addr, Role::Worker).await;

    bad.send(reply(in_flight.push.correlation, &in_flight.push, "forged"))
        .await;

    expect_error_then_close(&mut bad, ErrorCode::UnexpectedFrame).await;
    assert_eq!(node.events.registered(pid), 0);
    in_flight.finish(&node).await;
}

#[tokio::test]
async fn a_capacity_update_to_zero_is_a_zero_capacity_error() {
    let node = TestNode::start().await;
    let in_flight = InFlight::start(&node).await;
    let (mut bad, pid) = RawClient::hello(node.addr, Role::Worker).await;
    let worker_id = expect_registered(&mut bad, register("elsewhere", "echo", 1)).await;

    // A non-zero update is taken...
    bad.send(Frame::CapacityUpdate(CapacityUpdate { max_concurrency: 5 }))
        .await;
    settle(&mut bad, 1).await;
    let capacity = node
        .node
        .status()
        .pools
        .iter()
        .flat_map(|pool| &pool.workers)
        .find(|worker| worker.worker_id == worker_id)
        .map(|worker| worker.max_concurrency);
    assert_eq!(capacity, Some(5));

    // ...and zero is a protocol error.
    bad.send(Frame::CapacityUpdate(CapacityUpdate { max_concurrency: 0 }))
        .await;

    expect_error_then_close(&mut bad, ErrorCode::ZeroCapacity).await;
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.events.unregistered(pid), 1);
    in_flight.finish(&node).await;
}

// ---------------------------------------------------------------------------------------------
// Replies that match nothing are dropped and counted, and complete nothing.

#[tokio::test]
async fn a_reply_with_an_unknown_correlation_is_dropped_counted_and_completes_nothing() {
    let node = TestNode::start().await;
    let mut in_flight = InFlight::start(&node).await;
    let unknown = in_flight.push.correlation + 1000;

    in_flight
        .worker
        .send(reply(unknown, &in_flight.push, "unknown"))
        .await;
    settle(&mut in_flight.worker, 1).await;

    assert_eq!(dropped_replies(&node), 1);
    assert_eq!(node.node.status().counters.completed, 0);
    // The next outcome the producer sees is the real reply's, not the unknown one's.
    in_flight.finish(&node).await;
    assert_eq!(node.node.status().counters.completed, 1);
    assert_eq!(dropped_replies(&node), 1);
}

#[tokio::test]
async fn a_late_reply_after_a_timeout_frees_the_held_slot_is_counted_and_completes_nothing() {
    let node = TestNode::start().await;
    let (mut worker, _) = RawClient::hello(node.addr, Role::Worker).await;
    let worker_id = expect_registered(&mut worker, register("ns", "echo", 1)).await;
    let (mut producer, _) = RawClient::hello(node.addr, Role::Producer).await;

    producer
        .send(submit(1, request("ns", "echo", "slow"), 50))
        .await;
    let slow = expect_push(&mut worker).await;
    match next_frame(&mut producer).await {
        Some(Frame::Outcome(OutcomeFrame {
            correlation: 1,
            result: DispatchResult::Timeout { worker_id: id, .. },
        })) => assert_eq!(id, worker_id),
        other => panic!("expected Outcome{{1, Timeout}}, got {other:?}"),
    }
    match next_frame(&mut worker).await {
        Some(Frame::Cancel(cancel)) => assert_eq!(cancel.correlation, slow.correlation),
        other => panic!("expected a Cancel for the timed-out push, got {other:?}"),
    }

    // The timed-out push holds the worker's only slot until the worker lets go of it.
    producer
        .send(submit(2, request("ns", "echo", "next"), 10_000))
        .await;
    match next_frame(&mut producer).await {
        Some(Frame::Outcome(OutcomeFrame {
            correlation: 2,
            result: DispatchResult::NoWorker(census),
        })) => assert_eq!(census.at_capacity, 1),
        other => panic!("expected Outcome{{2, NoWorker}}, got {other:?}"),
    }

    worker.send(reply(slow.correlation, &slow, "late")).await;
    settle(&mut worker, 1).await;
    let counters = node.node.status().counters;
    assert_eq!((counters.late_replies, counters.dropped_replies), (1, 0));
    assert_eq!(counters.completed, 0);
    assert_eq!(
        node.registry().reserved_slots(),
        0,
        "the late reply freed the slot"
    );

    // A third dispatch takes the freed slot on the same worker.
    producer
        .send(submit(3, request("ns", "echo", "next"), 10_000))
        .await;
    let next = expect_push(&mut worker).await;
    assert_ne!(next.correlation, slow.correlation);
    worker.send(reply(next.correlation, &next, "on time")).await;
    expect_completed(&mut producer, 3, "on time").await;
    let counters = node.node.status().counters;
    assert_eq!((counters.timed_out, counters.completed), (1, 1));
    assert_eq!(counters.late_replies, 1);
}

#[tokio::test]
async fn a_reply_on_another_workers_connection_is_dropped_and_the_owner_still_completes() {
    let node = TestNode::start().await;
    let (mut owner, owner_pid) = RawClient::hello(node.addr, Role::Worker).await;
    expect_registered(&mut owner, register("ns", "owned", 1)).await;
    let (mut other, other_pid) = RawClient::hello(node.addr, Role::Worker).await;
    expect_registered(&mut other, register("ns", "other", 1)).await;
    let (mut producer, _) = RawClient::hello(node.addr, Role::Producer).await;

    producer
        .send(submit(7, request("ns", "owned", "x"), 10_000))
        .await;
    let push = expect_push(&mut owner).await;

    // The owner's correlation id, replied on the other worker's connection.
    other.send(reply(push.correlation, &push, "foreign")).await;
    settle(&mut other, 1).await;
    assert_eq!(dropped_replies(&node), 1);
    assert_eq!(node.node.status().counters.completed, 0);

    owner.send(reply(push.correlation, &push, "own")).await;
    expect_completed(&mut producer, 7, "own").await;
    assert_eq!(dropped_replies(&node), 1);
    assert_eq!(node.events.unregistered(owner_pid), 0);
    assert_eq!(node.events.unregistered(other_pid), 0);
}
