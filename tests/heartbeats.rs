//! Heartbeats and progress over real sockets: an activity that heartbeats runs several times
//! its heartbeat timeout and completes; one that stops ends `HeartbeatTimeout` (`Timeout` for a
//! producer that did not list `heartbeat-timeout`) within the timeout plus a margin; a heartbeat
//! request goes only to a worker that listed the feature; progress details reach the producer
//! across two nodes, at most `PROGRESS_PER_SECOND` a second per push.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lintel::dispatch::DispatchOptions;
use lintel::wire::{
    DispatchResult, FeatureSet, Frame, Progress, Push, RequestExtras, Role, Submit,
};
use lintel::NodeConfig;
use support::{
    cluster_config, next_frame, outcome_of, register, reply_frame, request, spawn_dispatch, within,
    RawClient, TestNode,
};

/// The heartbeat timeout the tests ask for.
const HEARTBEAT: Duration = Duration::from_millis(200);
/// How late past its timeout a heartbeat timeout may end the dispatch: the node's timer fires
/// within a millisecond or two; this allows a loaded machine.
const MARGIN: Duration = Duration::from_millis(500);

fn config() -> NodeConfig {
    NodeConfig {
        worker_probation_pings: 0,
        ..NodeConfig::default()
    }
}

/// A version-4 worker on `addr` listing `listed`, registered for `echo`.
async fn worker(addr: SocketAddr, listed: FeatureSet) -> RawClient {
    let (mut client, _) = RawClient::hello_listing(addr, Role::Worker, listed).await;
    client.framed.codec_mut().set_listed(FeatureSet::ALL);
    client.send(Frame::from(register("ns", "echo", 4))).await;
    assert!(matches!(
        next_frame(&mut client).await,
        Some(Frame::Registered(_))
    ));
    client
}

/// Extras with a heartbeat timeout of [`HEARTBEAT`], and a wish for progress if `progress`.
fn heartbeat(progress: bool) -> RequestExtras {
    let mut extras = RequestExtras::default();
    extras.set_heartbeat_timeout(Some(HEARTBEAT));
    extras.set_progress(progress);
    extras
}

fn options(extras: RequestExtras) -> DispatchOptions {
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(10))
        .reply_timeout(Duration::from_secs(30));
    extras.extensions.into_iter().fold(options, |options, tag| {
        options.extension(tag.tag, tag.critical, tag.value)
    })
}

async fn push(client: &mut RawClient) -> Push {
    match next_frame(client).await {
        Some(Frame::Push(push)) => *push,
        other => panic!("expected a push, got {other:?}"),
    }
}

async fn beat(client: &mut RawClient, push: &Push, details: &'static [u8]) {
    let progress = Progress {
        correlation: push.correlation,
        details: Bytes::from_static(details),
    };
    client.send(Frame::from(progress)).await;
}

#[tokio::test]
async fn a_heartbeating_activity_runs_several_times_its_timeout_and_completes() {
    let node = TestNode::with_config(config()).await;
    let mut worker = worker(node.addr, FeatureSet::HEARTBEAT_TIMEOUT).await;
    let dispatch = spawn_dispatch(
        &node,
        request("ns", "echo", "long"),
        options(heartbeat(false)),
    );
    let push = push(&mut worker).await;
    let started = Instant::now();
    // The activity's own pace: a beat every quarter of the timeout, for five timeouts.
    let mut beats = tokio::time::interval(HEARTBEAT / 4);
    while started.elapsed() < HEARTBEAT * 5 {
        beats.tick().await;
        beat(&mut worker, &push, b"").await;
    }
    worker.send(reply_frame(&push, "long")).await;
    match outcome_of(dispatch).await {
        DispatchResult::Completed(_) => {}
        other => panic!("expected a completion, got {other:?}"),
    }
}

#[tokio::test]
async fn one_that_stops_heartbeating_ends_heartbeat_timeout_within_the_timeout_and_margin() {
    let node = TestNode::with_config(config()).await;
    let mut worker = worker(node.addr, FeatureSet::HEARTBEAT_TIMEOUT).await;

    // In process, and to a producer that listed the feature: `HeartbeatTimeout`; to one that
    // did not: `Timeout`, same fields.
    let dispatch = spawn_dispatch(&node, request("ns", "echo", "x"), options(heartbeat(false)));
    let first = push(&mut worker).await;
    beat(&mut worker, &first, b"").await;
    let stopped = Instant::now();
    match outcome_of(dispatch).await {
        DispatchResult::HeartbeatTimeout { worker_id, .. } => assert!(worker_id > 0),
        other => panic!("expected HeartbeatTimeout, got {other:?}"),
    }
    let after = stopped.elapsed();
    assert!(after >= HEARTBEAT - Duration::from_millis(20), "{after:?}");
    assert!(after < HEARTBEAT + MARGIN, "{after:?}");
    match next_frame(&mut worker).await {
        Some(Frame::Cancel(cancel)) => assert_eq!(cancel.correlation, first.correlation),
        other => panic!("expected Cancel, got {other:?}"),
    }

    for (listed, heartbeat_timeout) in [
        (FeatureSet::HEARTBEAT_TIMEOUT, true),
        (FeatureSet::NONE, false),
    ] {
        let (mut producer, _) = RawClient::hello_listing(node.addr, Role::Producer, listed).await;
        producer
            .send(Frame::from(Submit {
                correlation: 7,
                request: request("ns", "echo", "x"),
                extras: heartbeat(false),
                wait_for_worker_ms: Some(10_000),
                reply_timeout_ms: Some(30_000),
                routing: Default::default(),
            }))
            .await;
        let _push = push(&mut worker).await;
        let result = match next_frame(&mut producer).await {
            Some(Frame::Outcome(outcome)) => outcome.result,
            Some(Frame::ServedOutcome(outcome)) => outcome.result,
            other => panic!("expected an outcome, got {other:?}"),
        };
        match (heartbeat_timeout, result) {
            (true, DispatchResult::HeartbeatTimeout { .. }) => {}
            (false, DispatchResult::Timeout { .. }) => {}
            (_, other) => panic!("listing {listed:?}: got {other:?}"),
        }
        assert!(matches!(
            next_frame(&mut worker).await,
            Some(Frame::Cancel(_))
        ));
    }
}

#[tokio::test]
async fn a_heartbeat_request_goes_only_to_a_worker_that_listed_heartbeat_timeout() {
    let node = TestNode::with_config(config()).await;
    let mut unlisted = worker(node.addr, FeatureSet::NONE).await;
    let mut no_wait = options(heartbeat(false));
    no_wait.wait_for_worker = None;
    let result = outcome_of(spawn_dispatch(&node, request("ns", "echo", "x"), no_wait)).await;
    assert!(matches!(result, DispatchResult::NoWorker(_)), "{result:?}");
    // The same worker takes a request without one.
    let plain = spawn_dispatch(
        &node,
        request("ns", "echo", "y"),
        options(RequestExtras::default()),
    );
    let push = push(&mut unlisted).await;
    unlisted.send(reply_frame(&push, "y")).await;
    assert!(matches!(
        outcome_of(plain).await,
        DispatchResult::Completed(_)
    ));
}

#[tokio::test]
async fn progress_details_reach_the_producer_across_two_nodes_within_the_rate_bound() {
    let serving = TestNode::with_config(NodeConfig {
        worker_probation_pings: 0,
        ..cluster_config("serving", &[])
    })
    .await;
    let origin = TestNode::with_config(cluster_config("origin", &[serving.addr])).await;
    origin.wait_linked(&["serving"]).await;
    let mut worker = worker(
        serving.addr,
        FeatureSet::HEARTBEAT_TIMEOUT.with(FeatureSet::PROGRESS),
    )
    .await;
    let channel = lintel::wire::channel::dispatch_channel_name("ns", "default", None);
    origin.wait_announced("serving", &channel).await;

    let listed = FeatureSet::PROGRESS.with(FeatureSet::HEARTBEAT_TIMEOUT);
    let (mut producer, _) = RawClient::hello_listing(origin.addr, Role::Producer, listed).await;
    producer
        .send(Frame::from(Submit {
            correlation: 5,
            request: request("ns", "echo", "x"),
            extras: heartbeat(true),
            wait_for_worker_ms: Some(10_000),
            reply_timeout_ms: Some(30_000),
            routing: Default::default(),
        }))
        .await;
    let push = push(&mut worker).await;
    beat(&mut worker, &push, b"25%").await;
    beat(&mut worker, &push, b"50%").await;
    for details in [&b"25%"[..], b"50%"] {
        match next_frame(&mut producer).await {
            Some(Frame::Progress(progress)) => {
                assert_eq!(progress.correlation, 5);
                assert_eq!(&progress.details[..], details);
            }
            other => panic!("expected Progress, got {other:?}"),
        }
    }
    // A burst past the bound: what passes is at most the bound a second, the rest is counted.
    for _ in 0..3 * lintel::dispatch::PROGRESS_PER_SECOND {
        beat(&mut worker, &push, b"busy").await;
    }
    worker.send(reply_frame(&push, "done")).await;
    let mut passed = 0;
    let result = within("the outcome after the progress", async {
        loop {
            match next_frame(&mut producer).await {
                Some(Frame::Progress(_)) => passed += 1,
                Some(Frame::ServedOutcome(outcome)) => return outcome,
                other => panic!("expected Progress or the outcome, got {other:?}"),
            }
        }
    })
    .await;
    assert_eq!(result.served_by, "serving");
    assert!(matches!(result.result, DispatchResult::Completed(_)));
    assert!(
        passed <= lintel::dispatch::PROGRESS_PER_SECOND,
        "{passed} passed on"
    );
    let dropped = serving.node.dispatcher().counters().dropped_progress()
        + origin.node.dispatcher().counters().dropped_progress();
    assert!(
        dropped >= u64::from(2 * lintel::dispatch::PROGRESS_PER_SECOND),
        "{dropped} dropped"
    );
}

#[tokio::test]
async fn the_sdk_workers_sleep_heartbeats_past_its_timeout_and_its_progress_reaches_the_producer() {
    let node = TestNode::with_config(config()).await;
    let _sleeper = support::sdk_worker(
        node.addr,
        support::plain("ns", "sleep", 1, "sleeper"),
        lintel::activities::BuiltIn,
    )
    .await;
    let listed = FeatureSet::PROGRESS.with(FeatureSet::HEARTBEAT_TIMEOUT);
    let (mut producer, _) = RawClient::hello_listing(node.addr, Role::Producer, listed).await;
    // Sleeps four heartbeat timeouts, heartbeating three times per timeout.
    let sleep = HEARTBEAT * 4;
    producer
        .send(Frame::from(Submit {
            correlation: 9,
            request: request("ns", "sleep", &sleep.as_millis().to_string()),
            extras: heartbeat(true),
            wait_for_worker_ms: Some(10_000),
            reply_timeout_ms: Some(30_000),
            routing: Default::default(),
        }))
        .await;
    let mut progress = Vec::new();
    let outcome = within("the sleep's outcome", async {
        loop {
            match next_frame(&mut producer).await {
                Some(Frame::Progress(heard)) => {
                    assert_eq!(heard.correlation, 9);
                    progress.push(String::from_utf8_lossy(&heard.details).into_owned());
                }
                Some(Frame::Outcome(outcome)) => return outcome.result,
                Some(Frame::ServedOutcome(outcome)) => return outcome.result,
                other => panic!("expected Progress or the outcome, got {other:?}"),
            }
        }
    })
    .await;
    match outcome {
        DispatchResult::Completed(response) => match response.outcome {
            lintel::wire::ActivityOutcome::Success(slept) => {
                assert_eq!(
                    &slept[..],
                    format!("slept {} ms", sleep.as_millis()).as_bytes()
                );
            }
            other => panic!("the sleep failed: {other:?}"),
        },
        other => panic!("expected a completion, got {other:?}"),
    }
    assert!(progress.len() >= 3, "{progress:?}");
    assert!(progress[0].starts_with("slept "), "{progress:?}");
}

#[tokio::test]
async fn an_sdk_handler_heartbeats_with_request_heartbeat() {
    let node = TestNode::with_config(config()).await;
    let handler = lintel::sdk::handler_fn(|request: lintel::sdk::Request| async move {
        for _ in 0..4 {
            tokio::time::sleep(HEARTBEAT / 2).await;
            request.heartbeat("still here").expect("a heartbeat sent");
        }
        lintel::wire::ActivityOutcome::Success(request.input)
    });
    let _worker =
        support::sdk_worker(node.addr, support::plain("ns", "echo", 1, "beats"), handler).await;
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(10))
        .reply_timeout(Duration::from_secs(30))
        .heartbeat_timeout(HEARTBEAT);
    let result = outcome_of(spawn_dispatch(
        &node,
        request("ns", "echo", "beat"),
        options,
    ))
    .await;
    assert!(matches!(result, DispatchResult::Completed(_)), "{result:?}");
    assert!(matches!(
        lintel::sdk::Request::new("ns", "echo", "").heartbeat(""),
        Err(lintel::sdk::HeartbeatError::NotPushed)
    ));
}

#[tokio::test]
async fn an_sdk_producer_asking_for_progress_receives_an_sdk_workers_details_across_two_nodes() {
    let serving = TestNode::with_config(NodeConfig {
        worker_probation_pings: 0,
        ..cluster_config("serving", &[])
    })
    .await;
    let origin = TestNode::with_config(cluster_config("origin", &[serving.addr])).await;
    origin.wait_linked(&["serving"]).await;
    let handler = lintel::sdk::handler_fn(|request: lintel::sdk::Request| async move {
        for step in ["25%", "50%", "75%"] {
            request.heartbeat(step).expect("a heartbeat sent");
            tokio::time::sleep(HEARTBEAT / 2).await;
        }
        lintel::wire::ActivityOutcome::Success(request.input)
    });
    let _worker =
        support::sdk_worker(serving.addr, support::plain("ns", "echo", 1, "w"), handler).await;
    let channel = lintel::wire::channel::dispatch_channel_name("ns", "default", None);
    origin.wait_announced("serving", &channel).await;

    let client = support::client(origin.addr).await;
    let (to, mut details) = tokio::sync::mpsc::channel(8);
    let options = lintel::sdk::DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(10))
        .reply_timeout(Duration::from_secs(30))
        .heartbeat_timeout(HEARTBEAT)
        .progress(to);
    let dispatch = lintel::sdk::Dispatch::new("ns", "echo").input("job");
    let dispatched = within("the dispatch", client.submit(&dispatch, &options))
        .await
        .expect("an outcome");
    assert!(
        matches!(dispatched.result, DispatchResult::Completed(_)),
        "{dispatched:?}"
    );
    assert_eq!(dispatched.served_by.as_deref(), Some("serving"));
    let mut heard = Vec::new();
    while let Ok(detail) = details.try_recv() {
        heard.push(String::from_utf8_lossy(&detail).into_owned());
    }
    assert_eq!(heard, ["25%", "50%", "75%"], "in order, before the outcome");
    // Once the outcome is in, nothing more is sent: the client let go of the channel.
    drop(options);
    assert!(matches!(
        details.try_recv(),
        Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
    ));
}
