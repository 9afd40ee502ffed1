//! Registration over real sockets: admission and refusal, and the one unregistration every
//! registered connection gets on each way it can close.
//!
//! Every wait is on a frame or a notifier event, bounded by `within`; nothing sleeps.

use lintel_test_support as support;

use std::sync::Arc;
use std::time::Duration;

use lintel::sdk::{handler_fn, Worker, WorkerState};
use lintel::wire::{
    ActivityOutcome, Drain, Drained, ErrorCode, ErrorFrame, Frame, Goodbye, Ping, Pong, Refusal,
    RefusalCode, Register, Registered, Role,
};
use lintel::NodeConfig;
use socket2::SockRef;
use support::{next_frame, register, within, RawClient, TestNode, WAIT};
use tokio::io::AsyncWriteExt;

/// Sends `registration` and returns the worker id the node acked it with.
async fn expect_registered(client: &mut RawClient, registration: Register) -> u64 {
    client.send(Frame::from(registration)).await;
    match next_frame(client).await {
        Some(Frame::Registered(Registered { worker_id })) => worker_id,
        other => panic!("expected Registered, got {other:?}"),
    }
}

/// A raw worker connection registered in `ns` for `echo`: the client, its pid, its worker id.
async fn registered_worker(node: &TestNode) -> (RawClient, u64, u64) {
    let (mut client, pid) = RawClient::hello(node.addr, Role::Worker).await;
    let worker_id = expect_registered(&mut client, register("ns", "echo", 1)).await;
    assert_eq!(node.events.registered(pid), 1);
    assert_eq!(node.registry().worker_count(), 1);
    (client, pid, worker_id)
}

/// Expects `Error{code}` and then the close, with nothing in between.
async fn expect_error_then_close(client: &mut RawClient, code: ErrorCode) {
    match next_frame(client).await {
        Some(Frame::Error(ErrorFrame { code: got, reason })) => {
            assert_eq!(got, code, "error reason: {reason}");
        }
        other => panic!("expected Error{{{code:?}}}, got {other:?}"),
    }
    let after = client.recv().await;
    assert!(after.is_none(), "expected the close, got {after:?}");
}

/// Waits for `pid`'s unregistration and checks it happened once and left the registry empty;
/// then shuts the node down, which waits for every connection task, and checks again so a
/// late second unregistration would be seen.
async fn assert_unregistered_once(node: TestNode, pid: u64) {
    node.events.wait_unregistered(pid).await;
    assert_eq!(node.events.unregistered(pid), 1);
    assert_eq!(node.registry().worker_count(), 0);
    let events = Arc::clone(&node.events);
    node.shutdown().await;
    assert_eq!(events.registered(pid), 1);
    assert_eq!(events.unregistered(pid), 1, "after the node stopped");
}

// ---------------------------------------------------------------------------------------------
// Admission.

#[tokio::test]
async fn a_valid_registration_is_acked_with_a_worker_id_and_notified_once() {
    let node = TestNode::start().await;
    let (mut client, pid) = RawClient::hello(node.addr, Role::Worker).await;
    assert_eq!(
        node.events.registered(pid),
        0,
        "hello alone registers nothing"
    );

    let worker_id = expect_registered(&mut client, register("ns", "echo", 3)).await;

    assert_eq!(node.events.registered(pid), 1);
    assert_eq!(node.events.total_registered(), 1);
    assert_eq!(node.events.unregistered(pid), 0);
    assert_eq!(node.registry().worker_count(), 1);
    let status = node.node.status();
    let [pool] = status.pools.as_slice() else {
        panic!("expected one pool, got {:?}", status.pools);
    };
    assert_eq!(
        (pool.namespace.as_str(), pool.task_queue.as_str()),
        ("ns", "default")
    );
    let [worker] = pool.workers.as_slice() else {
        panic!("expected one worker, got {:?}", pool.workers);
    };
    assert_eq!(worker.worker_id, worker_id);
    assert_eq!(worker.pid, pid);
    assert_eq!(worker.max_concurrency, 3);
    drop(client);
    node.shutdown().await;
}

#[tokio::test]
async fn a_registration_at_every_limit_is_admitted() {
    let node = TestNode::start().await;
    let limits = NodeConfig::default();
    let (mut client, pid) = RawClient::hello(node.addr, Role::Worker).await;
    let long = "n".repeat(limits.max_name_len);
    let registration = Register {
        namespaces: (0..limits.max_set_len).map(|i| format!("ns-{i}")).collect(),
        task_queue: long.clone(),
        node: Some(long.clone()),
        activity_types: (0..limits.max_set_len)
            .map(|i| format!("{i:0>width$}", width = limits.max_name_len))
            .collect(),
        identity: long,
        max_concurrency: u32::MAX,
        ..Default::default()
    };
    expect_registered(&mut client, registration).await;
    assert_eq!(node.events.registered(pid), 1);
    assert_eq!(node.registry().worker_count(), 1);
    drop(client);
    node.shutdown().await;
}

#[tokio::test]
async fn each_invalid_registration_is_refused_with_its_code_and_the_connection_stays_usable() {
    let node = TestNode::start().await;
    let limits = NodeConfig::default();
    let too_long = "x".repeat(limits.max_name_len + 1);
    let too_many: Vec<String> = (0..=limits.max_set_len).map(|i| format!("a{i}")).collect();
    let cases: Vec<(&str, Register, RefusalCode)> = vec![
        (
            "no namespace",
            Register {
                namespaces: vec![],
                ..register("ns", "echo", 1)
            },
            RefusalCode::EmptyNamespaces,
        ),
        (
            "no activity type",
            Register {
                activity_types: vec![],
                ..register("ns", "echo", 1)
            },
            RefusalCode::EmptyActivityTypes,
        ),
        (
            "zero capacity",
            register("ns", "echo", 0),
            RefusalCode::ZeroCapacity,
        ),
        (
            "an empty namespace",
            register("", "echo", 1),
            RefusalCode::InvalidField,
        ),
        (
            "an empty activity type",
            register("ns", "", 1),
            RefusalCode::InvalidField,
        ),
        (
            "a namespace over max_name_len",
            register(&too_long, "echo", 1),
            RefusalCode::InvalidField,
        ),
        (
            "an activity type over max_name_len",
            register("ns", &too_long, 1),
            RefusalCode::InvalidField,
        ),
        (
            "a task queue over max_name_len",
            Register {
                task_queue: too_long.clone(),
                ..register("ns", "echo", 1)
            },
            RefusalCode::InvalidField,
        ),
        (
            "a node over max_name_len",
            Register {
                node: Some(too_long.clone()),
                ..register("ns", "echo", 1)
            },
            RefusalCode::InvalidField,
        ),
        (
            "an identity over max_name_len",
            Register {
                identity: too_long.clone(),
                ..register("ns", "echo", 1)
            },
            RefusalCode::InvalidField,
        ),
        (
            "more activity types than max_set_len",
            Register {
                activity_types: too_many.clone(),
                ..register("ns", "echo", 1)
            },
            RefusalCode::LimitExceeded,
        ),
        (
            "more namespaces than max_set_len",
            Register {
                namespaces: too_many.clone(),
                ..register("ns", "echo", 1)
            },
            RefusalCode::LimitExceeded,
        ),
    ];
    for (what, registration, code) in cases {
        let (mut client, pid) = RawClient::hello(node.addr, Role::Worker).await;
        client.send(Frame::from(registration)).await;
        match next_frame(&mut client).await {
            Some(Frame::RegisterRefused(Refusal { code: got, .. })) => {
                assert_eq!(got, code, "{what}");
            }
            other => panic!("{what}: expected RegisterRefused, got {other:?}"),
        }
        assert_eq!(node.registry().worker_count(), 0, "{what}: registry");
        assert!(node.node.status().pools.is_empty(), "{what}: pools");
        assert_eq!(node.events.registered(pid), 0, "{what}: notifier");

        // Still usable: a valid registration on the same connection is admitted.
        expect_registered(&mut client, register("ns", "echo", 1)).await;
        assert_eq!(node.registry().worker_count(), 1, "{what}: after retry");
        assert_eq!(node.events.registered(pid), 1, "{what}: after retry");

        client
            .send(Frame::Goodbye(Goodbye {
                reason: "next case".into(),
            }))
            .await;
        node.events.wait_unregistered(pid).await;
        assert_eq!(node.events.unregistered(pid), 1, "{what}");
        assert_eq!(node.registry().worker_count(), 0, "{what}");
    }
    node.shutdown().await;
}

#[tokio::test]
async fn a_connection_that_never_registered_is_never_unregistered() {
    let node = TestNode::start().await;
    let (mut client, pid) = RawClient::hello(node.addr, Role::Worker).await;
    client.send(Frame::from(register("ns", "echo", 0))).await;
    assert!(matches!(
        next_frame(&mut client).await,
        Some(Frame::RegisterRefused(_))
    ));
    client
        .send(Frame::Goodbye(Goodbye {
            reason: "never mind".into(),
        }))
        .await;
    client.closed().await;

    // Shutdown waits for every connection task, so a stray unregistration would have landed.
    let events = Arc::clone(&node.events);
    node.shutdown().await;
    assert_eq!(events.registered(pid), 0);
    assert_eq!(events.unregistered(pid), 0);
    assert_eq!(events.total_unregistered(), 0);
}

#[tokio::test]
async fn registering_twice_is_an_unexpected_frame_that_closes_and_unregisters_the_first_once() {
    let node = TestNode::start().await;
    let (mut client, pid, _) = registered_worker(&node).await;

    client.send(Frame::from(register("other", "echo", 1))).await;

    expect_error_then_close(&mut client, ErrorCode::UnexpectedFrame).await;
    assert_eq!(
        node.events.registered(pid),
        1,
        "the second was never admitted"
    );
    assert_unregistered_once(node, pid).await;
}

// ---------------------------------------------------------------------------------------------
// One unregistration per registered connection, on every close path.

#[tokio::test]
async fn goodbye_unregisters_once() {
    let node = TestNode::start().await;
    let (mut client, pid, _) = registered_worker(&node).await;

    client
        .send(Frame::Goodbye(Goodbye {
            reason: "done".into(),
        }))
        .await;

    client.closed().await;
    assert_unregistered_once(node, pid).await;
}

#[tokio::test]
async fn eof_unregisters_once() {
    let node = TestNode::start().await;
    let (client, pid, _) = registered_worker(&node).await;

    drop(client);

    assert_unregistered_once(node, pid).await;
}

#[tokio::test]
async fn a_connection_reset_unregisters_once() {
    let node = TestNode::start().await;
    let (client, pid, _) = registered_worker(&node).await;

    // Linger zero makes the drop send RST instead of FIN.
    SockRef::from(client.framed.get_ref())
        .set_linger(Some(Duration::ZERO))
        .expect("set SO_LINGER");
    drop(client);

    assert_unregistered_once(node, pid).await;
}

#[tokio::test]
async fn a_protocol_error_unregisters_once() {
    let node = TestNode::start().await;
    let (mut client, pid, _) = registered_worker(&node).await;

    // A frame of four bytes whose kind varint never ends.
    client
        .framed
        .get_mut()
        .write_all(&[0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff])
        .await
        .expect("write garbage");

    expect_error_then_close(&mut client, ErrorCode::Malformed).await;
    assert_unregistered_once(node, pid).await;
}

fn fast_liveness() -> NodeConfig {
    NodeConfig {
        ping_interval_ms: 50,
        max_missed_pings: 2,
        ..NodeConfig::default()
    }
}

#[tokio::test]
async fn a_worker_that_never_answers_pings_gets_liveness_timeout_and_unregisters_once() {
    let node = TestNode::with_config(fast_liveness()).await;
    let (mut client, pid, _) = registered_worker(&node).await;

    let mut pings = 0;
    let error = loop {
        match client.recv().await {
            Some(Frame::Ping(_)) => pings += 1,
            Some(Frame::Error(error)) => break error,
            other => panic!("expected pings then an Error, got {other:?}"),
        }
    };
    assert_eq!(error.code, ErrorCode::LivenessTimeout, "{}", error.reason);
    assert_eq!(
        pings, 2,
        "max_missed_pings pings go unanswered before the close"
    );
    let after = client.recv().await;
    assert!(after.is_none(), "expected the close, got {after:?}");
    assert_unregistered_once(node, pid).await;
}

#[tokio::test]
async fn a_worker_that_answers_pings_stays_registered() {
    // Twice the missed-ping budget of the test above, so a slow pong is not a miss.
    let node = TestNode::with_config(NodeConfig {
        max_missed_pings: 4,
        ..fast_liveness()
    })
    .await;
    let (mut client, pid, _) = registered_worker(&node).await;

    // More pings than the budget allows unanswered: only the answers keep the worker.
    for _ in 0..8 {
        match client.recv().await {
            Some(Frame::Ping(Ping { nonce })) => client.send(Frame::Pong(Pong { nonce })).await,
            other => panic!("expected a ping, got {other:?}"),
        }
    }

    assert_eq!(node.events.unregistered(pid), 0);
    assert_eq!(node.registry().worker_count(), 1);
    drop(client);
    assert_unregistered_once(node, pid).await;
}

#[tokio::test]
async fn node_shutdown_closes_and_unregisters_once() {
    let mut node = TestNode::start().await;
    let (mut client, pid, _) = registered_worker(&node).await;
    let events = Arc::clone(&node.events);
    let registry = Arc::clone(node.registry());

    node.begin_shutdown();

    // Whether a `Drain` comes first is `node_shutdown_sends_each_registered_worker_drain_first`;
    // the worker answers it as a worker does, or the node waits out its drain timeout.
    let mut frame = next_frame(&mut client).await;
    if matches!(frame, Some(Frame::Drain(_))) {
        client.send(Frame::Drained(Drained { completed: 0 })).await;
        frame = next_frame(&mut client).await;
    }
    assert!(
        matches!(frame, Some(Frame::Goodbye(_))),
        "expected Goodbye, got {frame:?}"
    );
    let after = client.recv().await;
    assert!(after.is_none(), "expected the close, got {after:?}");
    node.shutdown().await;
    events.wait_unregistered(pid).await;
    assert_eq!(events.unregistered(pid), 1);
    assert_eq!(events.registered(pid), 1);
    assert_eq!(registry.worker_count(), 0);
}

/// PROTOCOL.md section 7: "When the node starts draining it sends `Drain{grace_ms}` to each
/// registered worker", and answers its `Drained` with `Goodbye` and the close. With nothing in
/// flight the drain settles at once, so the scenario runs many times: a node that only
/// sometimes sends the `Drain` fails it.
#[tokio::test]
async fn node_shutdown_sends_each_registered_worker_drain_first() {
    for round in 0..32 {
        let mut node = TestNode::start().await;
        let (mut client, _, _) = registered_worker(&node).await;
        node.begin_shutdown();
        let drain = next_frame(&mut client).await;
        assert!(
            matches!(drain, Some(Frame::Drain(Drain { .. }))),
            "round {round}: expected Drain, got {drain:?}"
        );
        client.send(Frame::Drained(Drained { completed: 0 })).await;
        let goodbye = next_frame(&mut client).await;
        assert!(
            matches!(goodbye, Some(Frame::Goodbye(_))),
            "round {round}: expected Goodbye after Drained, got {goodbye:?}"
        );
        let after = client.recv().await;
        assert!(
            after.is_none(),
            "round {round}: expected the close, got {after:?}"
        );
        node.shutdown().await;
    }
}

#[tokio::test]
async fn an_sdk_worker_draining_itself_unregisters_once() {
    let node = TestNode::start().await;
    let handle = Worker::spawn(
        support::worker_config(node.addr.to_string(), register("ns", "echo", 2)),
        handler_fn(|request: lintel::sdk::Request| async move {
            ActivityOutcome::Success(request.input)
        }),
    );
    let worker_id = handle.wait_registered(WAIT).await.expect("registered");
    let pid = match &*handle.state().borrow() {
        WorkerState::Registered { worker_id: id, pid } if *id == worker_id => *pid,
        other => panic!("expected Registered, got {other:?}"),
    };
    assert_eq!(node.events.registered(pid), 1);
    assert_eq!(node.registry().worker_count(), 1);

    within("the worker's drain", handle.drain(Duration::from_secs(1))).await;

    assert_eq!(*handle.state().borrow(), WorkerState::Stopped);
    node.events.wait_unregistered(pid).await;
    assert_eq!(
        node.events.total_registered(),
        1,
        "a drained worker does not come back"
    );
    assert_unregistered_once(node, pid).await;
}
