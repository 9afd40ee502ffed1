//! Outbound queues against a real node on 127.0.0.1: control frames go ahead of queued
//! pushes and relays of every protocol version, and a peer that reads slowly but is alive is skipped for placement
//! while its queue is over budget, never disconnected.
//!
//! Workers and peers are hand-written from frames so the test decides when they read; the
//! peer stays alive by sending frames of its own while it reads nothing.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::dispatch::DispatchOptions;
use lintel::sdk::status::Standing;
use lintel::wire::{
    channel::dispatch_channel_name, DispatchResponse, DispatchResult, Frame, FrameCodec, FrameKind,
    Hello, PeerHello, Ping, Pong, PoolPresence, Presence, PresenceGroup, Relay, RelayOutcome, Role,
};
use lintel::NodeConfig;
use support::{
    cluster_config, next_frame, offering, outcome_of, plain, poll_once, request,
    small_window_client_at, small_window_worker, spawn_dispatch, submit, up, within, RawClient,
    RawWorker, TestNode,
};
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::codec::Framed;

/// A node whose links queue at most 64 KiB before they count as busy, pinging every 300 ms.
async fn node() -> TestNode {
    let mut config = cluster_config("a", &[]);
    config.outbound_queue_bytes = 64 * 1024;
    config.peer_ping_interval_ms = 300;
    config.max_missed_pings = 3;
    TestNode::with_config(config).await
}

/// A peer `hand` serving `ns`/`echo` with plenty of free slots, whose socket takes little
/// before the node's writes to it stall; past the hellos and its snapshot.
async fn slow_peer(addr: SocketAddr) -> Framed<TcpStream, FrameCodec> {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("recv buffer");
    let stream = socket.connect(addr).await.expect("connect");
    let mut framed = Framed::new(stream, FrameCodec::default());
    framed
        .send(Frame::Hello(Hello {
            min_version: 2,
            max_version: 2,
            role: Role::Peer,
            name: "hand".into(),
            auth_token: None,
        }))
        .await
        .expect("hello");
    let welcome = within("the welcome", framed.next()).await;
    assert!(matches!(welcome, Some(Ok(Frame::Welcome(_)))));
    framed.codec_mut().set_version(2);
    framed
        .send(Frame::from(PeerHello {
            node_id: "hand".into(),
            incarnation: 1,
            advertise: "127.0.0.1:1".into(),
            peers: Vec::new(),
            ..Default::default()
        }))
        .await
        .expect("peer hello");
    framed
        .send(Frame::Presence(Presence {
            reset: true,
            synced: true,
            draining: false,
            pools: vec![PoolPresence {
                channel: dispatch_channel_name("ns", "default", None),
                workers: 1,
                groups: vec![PresenceGroup {
                    activity_type: "echo".into(),
                    node: None,
                    workers: 1,
                    slots: 1_000,
                    free: 1_000,
                    full: 0,
                    draining: 0,
                    ..Default::default()
                }],
            }],
            ..Default::default()
        }))
        .await
        .expect("presence");
    framed
}

fn options() -> DispatchOptions {
    {
        let mut config = DispatchOptions::default();
        config.wait_for_worker = None;
        config.reply_timeout = Some(Duration::from_secs(60));
        config
    }
}

#[tokio::test]
async fn a_slow_but_alive_peer_is_skipped_for_placement_and_never_disconnected() {
    let a = node().await;
    let mut hand = slow_peer(a.addr).await;
    a.wait_announced("hand", &dispatch_channel_name("ns", "default", None))
        .await;

    // The only place for `echo` is the peer: the first dispatch is relayed to it, and its
    // 3 MiB input is more than the loopback socket takes (about 1.3 MiB), so the link's queue
    // is over its budget.
    let big = request("ns", "echo", "");
    let first = spawn_dispatch(
        &a,
        lintel::wire::DispatchRequest {
            input: Bytes::from(vec![b'r'; 3 * 1024 * 1024]),
            ..big.clone()
        },
        options(),
    );
    // The relay leaves in the dispatch's first poll; the mesh signals no change for it.
    within("the relay sent", async {
        while !a
            .peers()
            .iter()
            .any(|p| p.node_id == "hand" && p.relays_sent == 1)
        {
            assert!(!first.is_finished(), "the first dispatch was not relayed");
            tokio::task::yield_now().await;
        }
    })
    .await;

    // A busy peer is skipped: nothing else serves `echo`, so the next dispatch finds no
    // worker at once instead of queuing behind the backlog.
    let second = outcome_of(spawn_dispatch(&a, request("ns", "echo", "x"), options())).await;
    assert!(
        matches!(second, DispatchResult::NoWorker(_)),
        "expected NoWorker, got {second:?}"
    );

    // The peer reads nothing for more than three of the node's ping intervals, but speaks:
    // it is alive, so the link stays up however long its queue stays over budget.
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    for nonce in 0..20 {
        ticks.tick().await;
        hand.send(Frame::Ping(Ping { nonce })).await.expect("ping");
    }
    assert!(up(&a.peers(), "hand"), "the busy peer was disconnected");
    assert!(!first.is_finished(), "the relay is still in flight");

    // Once it reads, its backlog drains: pings and pongs went ahead of the relay, and the
    // relay's outcome completes the first dispatch.
    let correlation = within("the relay", async {
        loop {
            match hand.next().await.expect("open").expect("a frame") {
                Frame::Relay(relay) => return relay.correlation,
                Frame::Ping(ping) => {
                    hand.send(Frame::Pong(Pong { nonce: ping.nonce }))
                        .await
                        .expect("pong");
                }
                _ => {}
            }
        }
    })
    .await;
    hand.send(Frame::RelayOutcome(RelayOutcome {
        correlation,
        result: DispatchResult::Completed(DispatchResponse {
            workflow_id: big.workflow_id.clone(),
            ordinal: big.ordinal,
            run_id: None,
            outcome: lintel::wire::ActivityOutcome::Success(Bytes::from_static(b"done")),
        }),
    }))
    .await
    .expect("relay outcome");
    let first = outcome_of(first).await;
    assert!(
        matches!(first, DispatchResult::Completed(_)),
        "expected Completed, got {first:?}"
    );
    assert!(up(&a.peers(), "hand"));
}

#[tokio::test]
async fn a_cancel_goes_to_a_slow_worker_ahead_of_the_pushes_queued_before_it() {
    let node = TestNode::start().await;
    let mut worker = small_window_worker(node.addr, plain("ns", "echo", 8, "slow")).await;
    let dispatcher = std::sync::Arc::clone(node.node.dispatcher());
    let options = options();
    // Three 2 MiB pushes, each queued in its dispatch's first poll: more than the socket takes.
    let big = |n: u8| lintel::wire::DispatchRequest {
        input: Bytes::from(vec![n; 2 * 1024 * 1024]),
        ..request("ns", "echo", "")
    };
    let mut first = Box::pin(dispatcher.dispatch(big(1), &options));
    let mut second = Box::pin(dispatcher.dispatch(big(2), &options));
    let mut third = Box::pin(dispatcher.dispatch(big(3), &options));
    for pending in [&mut first, &mut second, &mut third] {
        assert!(poll_once(pending).await.is_pending());
    }
    // Dropping the third cancels it: its `Cancel` names the worker's third correlation.
    drop(third);

    let mut order = Vec::new();
    while !order.contains(&"push 3") {
        order.push(match next_frame(&mut worker.client).await {
            Some(Frame::Push(push)) if push.correlation == 1 => "push 1",
            Some(Frame::Push(push)) if push.correlation == 2 => "push 2",
            Some(Frame::Push(push)) if push.correlation == 3 => "push 3",
            Some(Frame::Cancel(cancel)) if cancel.correlation == 3 => "cancel 3",
            other => panic!("unexpected {other:?}"),
        });
    }
    let at = |what| order.iter().position(|seen| *seen == what).unwrap();
    assert_eq!(at("push 1"), 0, "{order:?}");
    assert!(at("cancel 3") < at("push 3"), "{order:?}");
    drop((first, second));
}

#[tokio::test]
async fn a_producer_with_its_input_budget_in_flight_is_read_no_further_yet_stays_connected() {
    let node = TestNode::with_config(lintel::config::NodeConfig {
        outbound_queue_bytes: 64 * 1024,
        ping_interval_ms: 100,
        max_missed_pings: 3,
        ..lintel::config::NodeConfig::default()
    })
    .await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 10, "held")).await;
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    // The worker answers the node's pings throughout, holds the first push until released,
    // then answers both.
    let held = tokio::spawn(async move {
        let first = worker.next_push().await;
        let mut released = released;
        loop {
            tokio::select! {
                _ = &mut released => break,
                frame = worker.client.framed.next() => match frame {
                    Some(Ok(Frame::Ping(ping))) => {
                        worker.client.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
                    }
                    other => panic!("the worker got {other:?} while holding its push"),
                },
            }
        }
        worker.reply(&first, "one").await;
        let second = worker.next_push().await;
        assert_eq!(second.request.input.len(), 100 * 1024);
        worker.reply(&second, "two").await;
        // Answers pings until the test ends.
        while let Some(Ok(frame)) = worker.client.framed.next().await {
            if let Frame::Ping(ping) = frame {
                worker
                    .client
                    .send(Frame::Pong(Pong { nonce: ping.nonce }))
                    .await;
            }
        }
    });
    let (mut producer, _pid) = RawClient::hello(node.addr, Role::Producer).await;
    let input = |n: u8| lintel::wire::DispatchRequest {
        input: Bytes::from(vec![n; 100 * 1024]),
        ..request("ns", "act", "")
    };
    // The first input alone is over the 64 KiB budget: the second waits unread.
    producer.send(submit(1, input(1), None)).await;
    producer.send(submit(2, input(2), None)).await;

    // Five pings with nothing read back: the node counts none of them while it reads nothing.
    let mut pings = 0;
    while pings < 5 {
        match producer.recv().await {
            Some(Frame::Ping(ping)) => {
                pings += 1;
                producer.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
            }
            other => panic!("expected pings while the worker holds the push, got {other:?}"),
        }
    }

    // The first outcome frees the budget, and the second submission is read and pushed.
    release.send(()).expect("the worker holds its push");
    let mut outcomes = Vec::new();
    while outcomes.len() < 2 {
        match next_frame(&mut producer).await {
            Some(Frame::Outcome(outcome)) => outcomes.push(outcome.correlation),
            other => panic!("expected outcomes, got {other:?}"),
        }
    }
    outcomes.sort_unstable();
    assert_eq!(outcomes, [1, 2]);
    held.abort();
}

// Two threads, so a node loop that spun instead of ending could not starve the test's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_gone_while_its_input_budget_is_in_flight_is_let_go_and_its_dispatch_cancelled()
{
    let node = TestNode::with_config(lintel::config::NodeConfig {
        outbound_queue_bytes: 64 * 1024,
        ping_interval_ms: 100,
        ..lintel::config::NodeConfig::default()
    })
    .await;
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 10, "held")).await;
    let (mut producer, _pid) = RawClient::hello(node.addr, Role::Producer).await;
    let input = lintel::wire::DispatchRequest {
        input: Bytes::from(vec![7; 100 * 1024]),
        ..request("ns", "act", "")
    };
    // Over the budget on its own: the node reads this producer no further while it runs.
    producer.send(submit(1, input, None)).await;
    let push = worker.next_push().await;
    drop(producer);

    // The node's next write to the gone producer fails; it must end the connection, and with
    // it the dispatch, rather than wait on a budget that only an outcome could free.
    within("the held push to be cancelled", async {
        loop {
            match worker.client.framed.next().await {
                Some(Ok(Frame::Ping(ping))) => {
                    worker
                        .client
                        .send(Frame::Pong(Pong { nonce: ping.nonce }))
                        .await;
                }
                Some(Ok(Frame::Cancel(cancel))) => {
                    assert_eq!(cancel.correlation, push.correlation);
                    break;
                }
                other => panic!("the worker got {other:?} while holding its push"),
            }
        }
    })
    .await;
}

/// A request for `activity` in `ns` whose input is `n` repeated over 2 MiB: more than a small
/// socket window takes, so a few of them back up a connection's queue.
fn two_mib(activity: &str, n: u8) -> lintel::wire::DispatchRequest {
    lintel::wire::DispatchRequest {
        input: Bytes::from(vec![n; 2 * 1024 * 1024]),
        ..request("ns", activity, "")
    }
}

/// Where the first frame `what` picks lies among `order` of frames read, and where the first
/// and last bulk frames (pushes or relays) lie.
fn positions(order: &[Frame], what: fn(&Frame) -> bool) -> (Option<usize>, usize, usize) {
    let bulk: Vec<usize> = (0..order.len())
        .filter(|&at| matches!(order[at], Frame::Push(_) | Frame::Relay(_)))
        .collect();
    let (first, last) = (bulk[0], bulk[bulk.len() - 1]);
    (order.iter().position(what), first, last)
}

#[tokio::test]
async fn on_a_version_3_worker_a_ping_queued_behind_8_mib_of_pushes_goes_before_those_still_queued()
{
    let node = TestNode::with_config(NodeConfig {
        ping_interval_ms: 200,
        worker_ping_timeout_ms: 100,
        max_missed_pings: 1_000,
        outbound_queue_bytes: 64 * 1024 * 1024,
        ..NodeConfig::default()
    })
    .await;
    let (client, pid) = small_window_client_at(node.addr, Role::Worker, 3).await;
    let mut worker = RawWorker::register(client, pid, plain("ns", "echo", 8, "slow")).await;
    let dispatcher = Arc::clone(node.node.dispatcher());
    let options = options();
    // Four 2 MiB pushes, each queued in its dispatch's first poll; the worker reads nothing.
    let mut pending = Vec::new();
    for n in 1..=4 {
        let mut dispatch = Box::pin(dispatcher.dispatch(two_mib("echo", n), &options));
        assert!(poll_once(&mut dispatch).await.is_pending());
        pending.push(dispatch);
    }
    // A ping the node sent once the pushes were queued waits unanswered: the worker turns
    // unreachable.
    node.wait_registry("a ping unanswered behind the pushes", |registry| {
        registry
            .states()
            .iter()
            .any(|(_, standing)| *standing == Standing::Unreachable)
    })
    .await;

    let mut order = Vec::new();
    while order
        .iter()
        .filter(|f: &&Frame| matches!(f, Frame::Push(_)))
        .count()
        < 4
    {
        let frame = within("the worker's next frame", worker.client.framed.next())
            .await
            .expect("open")
            .expect("a frame");
        let kind = worker.client.last_kind();
        assert!(
            matches!(kind, Some(FrameKind::Push3 | FrameKind::Ping)),
            "a version-3 worker is pushed Push3: {kind:?}"
        );
        order.push(frame);
    }
    let (ping, first, last) = positions(&order, |frame| matches!(frame, Frame::Ping(_)));
    let ping = ping.expect("the node's ping");
    assert!(
        first < ping && ping < last,
        "the ping overtook the pushes still queued: {:?}",
        order.iter().map(Frame::name).collect::<Vec<_>>()
    );
    drop(pending);
}

#[tokio::test]
async fn on_a_version_3_peer_link_a_relay_outcome_goes_before_the_relays_still_queued() {
    let node = TestNode::with_config(NodeConfig {
        outbound_queue_bytes: 64 * 1024 * 1024,
        ..cluster_config("n", &[])
    })
    .await;
    // A version-3 peer whose socket takes little, offering `far` in `ns`.
    let (mut hand, _) = small_window_client_at(node.addr, Role::Peer, 3).await;
    hand.send(Frame::from(PeerHello {
        node_id: "hand".into(),
        incarnation: 1,
        advertise: "127.0.0.1:1".into(),
        peers: Vec::new(),
        features: Vec::new(),
        extensions: Vec::new(),
    }))
    .await;
    hand.send(Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: vec![offering(
            dispatch_channel_name("ns", "default", None),
            "far",
            8,
        )],
        ..Default::default()
    }))
    .await;
    node.wait_announced("hand", &dispatch_channel_name("ns", "default", None))
        .await;

    // Four 2 MiB relays to the peer, each sent in its dispatch's first poll; it reads nothing.
    let dispatcher = Arc::clone(node.node.dispatcher());
    let options = options();
    let mut pending = Vec::new();
    for n in 1..=4 {
        let mut dispatch = Box::pin(dispatcher.dispatch(two_mib("far", n), &options));
        assert!(poll_once(&mut dispatch).await.is_pending());
        pending.push(dispatch);
    }
    // The peer relays a dispatch no worker here serves: its outcome is queued behind them.
    hand.send(Frame::from(Relay {
        correlation: 1,
        request: request("ns", "nobody", "x"),
        extras: Default::default(),
        routing: Default::default(),
        reply_timeout_ms: 5_000,
    }))
    .await;
    let counters = Arc::clone(node.node.dispatcher().counters());
    within("the relay's outcome decided", async {
        while counters.snapshot().no_worker == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;

    let mut order = Vec::new();
    while order
        .iter()
        .filter(|f: &&Frame| matches!(f, Frame::Relay(_)))
        .count()
        < 4
    {
        match next_frame(&mut hand).await.expect("the link's frames") {
            Frame::Relay(_) if hand.last_kind() != Some(FrameKind::Relay3) => {
                panic!("a version-3 link is sent Relay3")
            }
            frame @ (Frame::Relay(_) | Frame::RelayOutcome(_)) => order.push(frame),
            _ => {}
        }
    }
    let (outcome, first, last) = positions(
        &order,
        |frame| matches!(frame, Frame::RelayOutcome(outcome) if outcome.correlation == 1),
    );
    let outcome = outcome.expect("the relay's outcome");
    assert!(
        first < outcome && outcome < last,
        "the outcome overtook the relays still queued: {:?}",
        order.iter().map(Frame::name).collect::<Vec<_>>()
    );
    drop(pending);
}
