//! The node's lifecycle events over real sockets: `lintel watch` (the built binary), the admin
//! listener's `/events` and the SDK's subscription see a worker register, be excluded,
//! restored and killed, in order and with reasons; peer links come up and go down; only the
//! observer role may subscribe where credentials are required; `Cancel` ends a subscription;
//! a subscriber that reads nothing stays within its budget and hears what it missed first.
//!
//! Every wait is on a line, a frame or an event, bounded by `within`.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::process::Stdio;

use futures_util::StreamExt;
use lintel::auth::{GrantConfig, GrantRole};
use lintel::sdk::{Client, ClientConfig, ClientError, Subscription, SubscriptionError};
use lintel::wire::{
    DepartureReason, Drain, Drained, Event, EventTopic, ExclusionReason, Frame, NodeEvent,
    RefusalCode, Register, Role, StatusQuery, Subscribe,
};
use lintel::NodeConfig;
use serde_json::Value;
use support::{
    admin_get, answer_again, client, cluster_config, fall_silent, next_frame, plain, registration,
    small_window_client_at, watchful, within, RawClient, RawWorker, TestNode,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// The pool of the workers `plain("ns", ..)` registers.
const POOL: &str = "aion.dispatch.ns.default";

/// `lintel watch` against a node, subscribed: its stdout, line by line.
struct Watch {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Kept open, so what it says on stderr later never meets a closed pipe.
    _errors: Lines<BufReader<ChildStderr>>,
}

impl Watch {
    /// Starts `lintel watch --connect addr` with `extra` flags and waits until it says it
    /// watches: every event from then on is in its output.
    async fn start(addr: SocketAddr, extra: &[&str]) -> Self {
        let mut child = watch_command(addr, extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start lintel watch");
        let stderr = child.stderr.take().expect("stderr");
        let mut errors = BufReader::new(stderr).lines();
        within("lintel watch to subscribe", async {
            loop {
                let line = errors.next_line().await.expect("read stderr");
                match line {
                    Some(line) if line.contains("watching node") => return,
                    Some(_) => {}
                    None => panic!("lintel watch exited before it watched"),
                }
            }
        })
        .await;
        let stdout = child.stdout.take().expect("stdout");
        Self {
            _child: child,
            lines: BufReader::new(stdout).lines(),
            _errors: errors,
        }
    }

    /// The next line, as JSON.
    async fn next(&mut self) -> Value {
        let line = within("a line from lintel watch", self.lines.next_line())
            .await
            .expect("read stdout")
            .expect("lintel watch still runs");
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("{line:?} is not JSON: {err}"))
    }
}

/// `lintel watch --connect addr` with `extra` flags, free of the caller's settings.
fn watch_command(addr: SocketAddr, extra: &[&str]) -> Command {
    let mut command = Command::from(support::lintel());
    command
        .args(["watch", "--connect", &addr.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The admin listener's `/events`, read as a plain HTTP/1.0 client reads it.
struct Sse {
    stream: TcpStream,
    text: String,
}

impl Sse {
    /// GETs `/events` with `token` as a bearer token when given: the status code, and the
    /// stream once it opened (every event from then on is in it).
    async fn open(admin: SocketAddr, token: Option<&str>) -> (u16, Self) {
        let mut stream = within("connect to the admin listener", TcpStream::connect(admin))
            .await
            .expect("connect");
        let authorization = token
            .map(|token| format!("Authorization: Bearer {token}\r\n"))
            .unwrap_or_default();
        let head = format!("GET /events HTTP/1.0\r\nHost: lintel\r\n{authorization}\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut sse = Self {
            stream,
            text: String::new(),
        };
        let head = sse.until("\r\n\r\n").await;
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status code");
        if code == 200 {
            sse.until(": lintel events\n\n").await;
        }
        (code, sse)
    }

    /// Reads until `end`, and returns what came before it.
    async fn until(&mut self, end: &str) -> String {
        within(&format!("{end:?} from /events"), async {
            loop {
                if let Some(at) = self.text.find(end) {
                    let before = self.text[..at].to_owned();
                    self.text.drain(..at + end.len());
                    return before;
                }
                let mut buffer = [0u8; 4096];
                let read = self.stream.read(&mut buffer).await.expect("read /events");
                assert!(read > 0, "/events closed; read so far: {:?}", self.text);
                self.text
                    .push_str(std::str::from_utf8(&buffer[..read]).expect("UTF-8"));
            }
        })
        .await
    }

    /// The next event's `data:`, as JSON, checking its `id:` is its `seq`.
    async fn next(&mut self) -> Value {
        let message = self.until("\n\n").await;
        let (id, data) = message
            .split_once("\ndata: ")
            .unwrap_or_else(|| panic!("not an event: {message:?}"));
        let data: Value = serde_json::from_str(data).expect("JSON data");
        assert_eq!(id, format!("id: {}", data["seq"]));
        data
    }
}

/// What a worker's line says happened: the event and its reason, if any.
fn happened(line: &Value) -> (String, Option<String>) {
    (
        line["event"].as_str().expect("event").to_owned(),
        line["reason"].as_str().map(str::to_owned),
    )
}

/// The life of one worker in `w`'s pool, as the test drives it below.
fn a_worker_life() -> Vec<(String, Option<String>)> {
    [
        ("worker_registered", None),
        ("worker_excluded", Some("probation")),
        ("worker_restored", None),
        ("worker_excluded", Some("unreachable")),
        ("worker_restored", None),
        ("worker_departed", Some("disconnected")),
    ]
    .iter()
    .map(|(event, reason)| ((*event).to_owned(), reason.map(str::to_owned)))
    .collect()
}

/// Checks the lines tell of worker `worker_id`, named `w`, in `POOL`, each later than the last.
fn of_worker(lines: &[Value], worker_id: u64) -> Vec<u64> {
    let seqs: Vec<u64> = lines
        .iter()
        .map(|line| line["seq"].as_u64().expect("seq"))
        .collect();
    for line in lines {
        assert_eq!(line["worker_id"], worker_id, "{line}");
        assert_eq!(line["identity"], "w", "{line}");
        assert_eq!(line["pool"], POOL, "{line}");
        assert!(
            line["at_unix_ms"].as_u64().is_some_and(|at| at > 0),
            "{line}"
        );
    }
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
    seqs
}

/// The next event of a subscription.
async fn next_event(subscription: &mut Subscription) -> Event {
    match within("an event", subscription.next()).await {
        Some(Ok(event)) => event,
        other => panic!("expected an event, got {other:?}"),
    }
}

#[tokio::test]
async fn lintel_watch_and_admin_events_see_a_worker_registered_excluded_restored_and_killed() {
    let (node, admin) = TestNode::with_admin(watchful()).await;
    let mut watch = Watch::start(node.addr, &[]).await;
    let (code, mut sse) = Sse::open(admin, None).await;
    assert_eq!(code, 200);

    // Registered in probation, which its first answered ping ends.
    let mut worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let worker_id = worker.worker_id;
    // It stops answering: by the second unanswered ping the node holds it unreachable; it
    // answers again, and is restored; then it is killed: its socket closes.
    let latest = fall_silent(&node, &mut worker).await;
    answer_again(&mut worker, latest).await;
    drop(worker);

    let mut from_watch = Vec::new();
    let mut from_sse = Vec::new();
    for _ in a_worker_life() {
        from_watch.push(watch.next().await);
        from_sse.push(sse.next().await);
    }
    assert_eq!(
        from_watch.iter().map(happened).collect::<Vec<_>>(),
        a_worker_life()
    );
    assert_eq!(
        from_sse, from_watch,
        "/events serves what lintel watch prints"
    );
    let seqs = of_worker(&from_watch, worker_id);
    assert_eq!(seqs.first(), Some(&1), "the node's first event");
}

#[tokio::test]
async fn peer_links_coming_up_and_going_down_are_events_of_the_peers_topic() {
    let a = TestNode::with_config(cluster_config("a", &[])).await;
    let watcher = client(a.addr).await;
    let mut peers = within("a subscription", watcher.subscribe(&[EventTopic::Peers]))
        .await
        .expect("subscribed");
    let b = TestNode::joined("b", &[&a]).await;

    let up = next_event(&mut peers).await;
    let NodeEvent::PeerUp {
        node_id,
        incarnation,
        address,
    } = up.event.clone()
    else {
        panic!("expected PeerUp, got {up:?}");
    };
    assert_eq!((node_id.as_str(), address), ("b", b.addr.to_string()));
    // A worker's events are of the other topic: not sent to this subscription.
    let _worker = RawWorker::start(a.addr, plain("ns", "act", 1, "w")).await;
    b.shutdown().await;

    let down = next_event(&mut peers).await;
    match &down.event {
        NodeEvent::PeerDown {
            node_id,
            incarnation: down_incarnation,
            reason,
        } => {
            assert_eq!((node_id.as_str(), *down_incarnation), ("b", incarnation));
            assert!(!reason.is_empty());
        }
        other => panic!("expected PeerDown, got {other:?}"),
    }
    assert!(
        down.seq > up.seq + 3,
        "the worker's three events were numbered between: {} then {}",
        up.seq,
        down.seq
    );
}

#[tokio::test]
async fn without_the_observer_role_a_subscription_is_unauthorized() {
    let grant = |token: &str, roles: &[GrantRole]| GrantConfig {
        token: Some(token.into()),
        identity: None,
        roles: roles.to_vec(),
        namespaces: vec!["ns".into()],
        fairness_key: None,
        fairness_weights: false,
    };
    let node = TestNode::with_config(NodeConfig {
        grants: vec![
            grant("send", &[GrantRole::Producer]),
            grant("look", &[GrantRole::Observer]),
            grant("both", &[GrantRole::Producer, GrantRole::Observer]),
        ],
        ..NodeConfig::default()
    })
    .await;
    let with = |token: &str| {
        let mut config = ClientConfig::default();
        config.auth_token = Some(token.into());
        config
    };

    let sender = Client::connect(node.addr, with("send"))
        .await
        .expect("connect");
    match within("a refusal", sender.subscribe(&[])).await {
        Err(ClientError::Refused { code, reason }) => {
            assert_eq!(code, RefusalCode::Unauthorized);
            assert!(reason.contains("observer"), "{reason}");
        }
        other => panic!("expected Unauthorized, got {other:?}"),
    }
    assert!(sender.status().await.is_ok(), "the connection stays");

    let refused = within(
        "lintel watch without the observer role",
        watch_command(node.addr, &["--auth-token", "send"]).output(),
    )
    .await
    .expect("run lintel watch");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Unauthorized"), "{stderr}");

    for token in ["look", "both"] {
        let observer = Client::connect(node.addr, with(token))
            .await
            .expect("connect");
        let subscribed = within("a subscription", observer.subscribe(&[])).await;
        assert!(subscribed.is_ok(), "{token}: {subscribed:?}");
    }
}

#[tokio::test]
async fn cancel_ends_a_subscription_with_cancelled_after_the_events_sent_before() {
    let node = TestNode::start().await;
    let watcher = client(node.addr).await;
    let mut events = within("a subscription", watcher.subscribe(&[]))
        .await
        .expect("subscribed");
    let _worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    let first = next_event(&mut events).await;
    assert!(
        matches!(first.event, NodeEvent::WorkerRegistered(_)),
        "{first:?}"
    );

    events.cancel();
    let mut after = Vec::new();
    let end = within("the end of the subscription", async {
        loop {
            match events.next().await {
                Some(Ok(event)) => after.push(event.event),
                Some(Err(end)) => return end,
                None => panic!("ended without saying why"),
            }
        }
    })
    .await;
    assert_eq!(
        end,
        SubscriptionError::Ended {
            code: RefusalCode::Cancelled,
            reason: "cancelled".into()
        }
    );
    assert!(events.next().await.is_none(), "nothing after the end");
    // The probation's two events came before the cancel was read.
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(watcher.status().await.is_ok(), "the connection stays");
}

#[tokio::test]
async fn with_an_admin_token_events_and_the_other_endpoints_need_it_but_health_does_not() {
    let (node, admin) = TestNode::with_admin(NodeConfig {
        admin_token: Some("adm-secret".into()),
        ..NodeConfig::default()
    })
    .await;
    assert_eq!(admin_get(admin, "/health").await.0, 200);
    for path in [
        "/events",
        "/metrics",
        "/status",
        "/ready",
        "/window",
        "/endpoints",
    ] {
        assert_eq!(admin_get(admin, path).await.0, 401, "{path}");
    }
    assert_eq!(Sse::open(admin, Some("wrong")).await.0, 401);

    let (code, mut sse) = Sse::open(admin, Some("adm-secret")).await;
    assert_eq!(code, 200);
    let _worker = RawWorker::start(node.addr, plain("ns", "act", 1, "w")).await;
    assert_eq!(sse.next().await["event"], "worker_registered");
}

/// A registration into 64 namespaces of 250 bytes: each of its events names 64 pools, some 17
/// KiB, so a few hundred fill the sockets between node and subscriber (up to 4 MiB on Linux).
fn wide(identity: &str) -> Register {
    let namespaces: Vec<String> = (0..64)
        .map(|n| format!("{n:02}{}", "n".repeat(248)))
        .collect();
    let namespaces: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    registration(&namespaces, "", None, &["act"], 1, identity)
}

/// Registers a worker and closes it at once: two events.
async fn register_and_leave(addr: SocketAddr) {
    let (mut worker, _) = RawClient::hello(addr, Role::Worker).await;
    worker.send(Frame::from(wide("flood"))).await;
    match next_frame(&mut worker).await {
        Some(Frame::Registered(_)) => {}
        other => panic!("expected Registered, got {other:?}"),
    }
}

#[tokio::test]
async fn a_subscriber_that_reads_nothing_stays_within_its_budget_and_hears_what_it_missed_first() {
    const BUDGET: usize = 64 * 1024;
    const FLOOD: usize = 1_000;
    let (node, admin) = TestNode::with_admin(NodeConfig {
        outbound_queue_bytes: BUDGET,
        worker_probation_pings: 0,
        ping_interval_ms: 600_000,
        ..NodeConfig::default()
    })
    .await;
    let (mut slow, _) = small_window_client_at(node.addr, Role::Producer, 3).await;
    slow.send(Frame::Subscribe(Subscribe {
        correlation: 1,
        topics: Vec::new(),
    }))
    .await;
    // Answered in order: once the status arrives, the subscription is live.
    slow.send(Frame::StatusQuery(StatusQuery { correlation: 2 }))
        .await;
    assert!(matches!(
        next_frame(&mut slow).await,
        Some(Frame::StatusDocument(_))
    ));

    // Two events per worker, each naming 64 pools: far more than the ring (1024 events), the
    // subscriber's share of its queue and the sockets between hold, while it reads nothing.
    let flooding: Vec<_> = (0..4)
        .map(|_| {
            let addr = node.addr;
            tokio::spawn(async move {
                for _ in 0..FLOOD / 4 {
                    register_and_leave(addr).await;
                }
            })
        })
        .collect();
    // Bounded in count, and in time generously: each worker is some 64 pools to set up.
    let flood = tokio::time::timeout(6 * support::WAIT, futures_util::future::join_all(flooding));
    for flooding in flood.await.expect("the flood ends") {
        flooding.expect("flooding worker");
    }
    let last = RawWorker::start(node.addr, plain("ns", "act", 1, "last")).await;

    let (_, metrics) = admin_get(admin, "/metrics").await;
    let queued = metrics
        .lines()
        .find(|line| line.starts_with("lintel_outbound_queued_bytes{role=\"producer\"}"))
        .and_then(|line| line.split_whitespace().last())
        .and_then(|value| value.parse::<f64>().ok())
        .expect("queued bytes of producers");
    assert!(
        queued <= BUDGET as f64,
        "{queued} bytes queued for a subscriber over its budget of {BUDGET}"
    );

    // It reads again: every event in order, and where some were lost a `Missed` that says how
    // many, before the event after them.
    let (mut seq, mut missed, mut events) = (0u64, 0u64, 0u64);
    within("the marker worker's registration", async {
        loop {
            let event = match slow.recv().await {
                Some(Frame::Event(event)) => event,
                Some(Frame::Ping(_)) => continue,
                other => panic!("expected an event, got {other:?}"),
            };
            assert_eq!(event.correlation, 1);
            match &event.event {
                NodeEvent::Missed { count } => {
                    assert!(*count > 0);
                    assert_eq!(event.seq, seq + count, "a Missed stands for the gap");
                    missed += count;
                }
                other => {
                    assert_eq!(event.seq, seq + 1, "no gap without a Missed: {other:?}");
                    events += 1;
                }
            }
            seq = event.seq;
            if let NodeEvent::WorkerRegistered(worker) = &event.event {
                if worker.worker_id == last.worker_id {
                    return;
                }
            }
        }
    })
    .await;
    println!("the subscriber read {events} events and missed {missed}; {queued} bytes queued");
    assert!(missed > 0, "a subscriber that read nothing missed nothing");
    assert_eq!(missed + events, 2 * FLOOD as u64 + 1);
}

/// Events of a subscription until the departure of `identity`, that departure's worker id and
/// reason, and what came before it for the same identity.
async fn departure_of(
    subscription: &mut Subscription,
    identity: &str,
) -> (Vec<NodeEvent>, u64, DepartureReason) {
    let mut before = Vec::new();
    loop {
        let event = next_event(subscription).await.event;
        let worker = match &event {
            NodeEvent::WorkerRegistered(worker) | NodeEvent::WorkerRestored(worker) => worker,
            NodeEvent::WorkerExcluded { worker, .. } => worker,
            NodeEvent::WorkerDeparted { worker, reason } => {
                if worker.identity == identity {
                    return (before, worker.worker_id, *reason);
                }
                continue;
            }
            _ => continue,
        };
        if worker.identity == identity {
            before.push(event);
        }
    }
}

#[tokio::test]
async fn each_departure_names_the_reason_the_node_can_prove() {
    let node = TestNode::with_config(NodeConfig {
        ping_interval_ms: 100,
        worker_ping_timeout_ms: 50,
        max_missed_pings: 2,
        worker_probation_pings: 0,
        ..NodeConfig::default()
    })
    .await;
    let watcher = client(node.addr).await;
    let mut events = within("a subscription", watcher.subscribe(&[EventTopic::Workers]))
        .await
        .expect("subscribed");

    // Refused at registration: never registered, so worker id 0.
    let (mut refused, _) = RawClient::hello(node.addr, Role::Worker).await;
    refused
        .send(Frame::from(plain("ns", "act", 0, "zero")))
        .await;
    assert!(matches!(
        next_frame(&mut refused).await,
        Some(Frame::RegisterRefused(_))
    ));
    let (before, worker_id, reason) = departure_of(&mut events, "zero").await;
    assert_eq!(
        (before.len(), worker_id, reason),
        (0, 0, DepartureReason::RefusedAtRegistration)
    );

    // Drained: it said so before it left.
    let mut drained = RawWorker::start(node.addr, plain("ns", "act", 1, "drained")).await;
    drained
        .client
        .send(Frame::Drain(Drain { grace_ms: 0 }))
        .await;
    drained
        .client
        .send(Frame::Drained(Drained { completed: 0 }))
        .await;
    drained.sync().await;
    let drained_id = drained.worker_id;
    drop(drained);
    let (before, worker_id, reason) = departure_of(&mut events, "drained").await;
    assert_eq!((worker_id, reason), (drained_id, DepartureReason::Drained));
    assert!(matches!(
        before.last(),
        Some(NodeEvent::WorkerExcluded {
            reason: ExclusionReason::Draining,
            ..
        })
    ));

    // A protocol error: a frame no worker sends.
    let mut rude = RawWorker::start(node.addr, plain("ns", "act", 1, "rude")).await;
    rude.client
        .send(Frame::StatusQuery(StatusQuery { correlation: 1 }))
        .await;
    rude.client.closed().await;
    let (_, _, reason) = departure_of(&mut events, "rude").await;
    assert_eq!(reason, DepartureReason::ProtocolError);

    // Missed pings: it reads nothing more, so its pings go unanswered: first unreachable,
    // then gone.
    let mut silent = RawWorker::start(node.addr, plain("ns", "act", 1, "silent")).await;
    let (before, _, reason) = departure_of(&mut events, "silent").await;
    assert_eq!(reason, DepartureReason::MissedPings);
    assert!(
        before.iter().any(|event| matches!(
            event,
            NodeEvent::WorkerExcluded {
                reason: ExclusionReason::Unreachable,
                ..
            }
        )),
        "{before:?}"
    );
    silent.client.closed().await;
}
