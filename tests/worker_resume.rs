//! Worker sessions over real sockets, the worker's link cut by a proxy: a worker holding 64
//! pushes resumes and each completes exactly once; pushes it no longer lists, or that ended
//! meanwhile, are lost or unknown; past the grace they end `worker-lost` promptly; a token
//! shown by another credential is refused; an older worker sees today's behaviour.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lintel::auth::{GrantConfig, GrantRole};
use lintel::dispatch::DispatchOptions;
use lintel::wire::{
    ActivityOutcome, DispatchResult, FeatureSet, Frame, Hello, Push, RefusalCode, ResumeSession,
    Role, Session, SessionResumed,
};
use lintel::NodeConfig;
use support::faulty::Proxy;
use support::{
    admin_get, hello_at, next_frame, outcome_of, register, reply_frame, request, spawn_dispatch,
    within, RawClient, TestNode,
};
use tokio::task::JoinHandle;

/// Pushes a worker holds in the reset test.
const HELD: usize = 64;

/// A node that selects a worker as soon as it registers and keeps a lost session `grace_ms`.
fn config(grace_ms: u64) -> NodeConfig {
    NodeConfig {
        worker_probation_pings: 0,
        worker_resume_grace_ms: grace_ms,
        ..NodeConfig::default()
    }
}

/// Options for a dispatch that waits for a worker and for its reply far longer than a test.
fn patient() -> DispatchOptions {
    DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(20))
        .reply_timeout(Duration::from_secs(60))
}

/// A version-4 worker connection to `addr` presenting `token` (if any), listing `listed`.
async fn connect(addr: SocketAddr, token: Option<&str>, listed: FeatureSet) -> RawClient {
    connect_pid(addr, token, listed).await.0
}

/// As [`connect`], with the connection's pid.
async fn connect_pid(
    addr: SocketAddr,
    token: Option<&str>,
    listed: FeatureSet,
) -> (RawClient, u64) {
    let mut client = RawClient::connect(addr).await;
    client
        .send(Frame::Hello(Hello {
            auth_token: token.map(str::to_owned),
            ..hello_at(Role::Worker, 4)
        }))
        .await;
    let pid = match client.recv().await {
        Some(Frame::Welcome(welcome)) => {
            assert_eq!(welcome.version, 4);
            welcome.pid
        }
        other => panic!("expected a welcome, got {other:?}"),
    };
    client
        .send(Frame::from(lintel::wire::Features::of(listed)))
        .await;
    client.framed.codec_mut().set_listed(listed);
    (client, pid)
}

/// Registers `client` for `echo` with `capacity`; returns its worker id and the session it
/// was given.
async fn register_with_session(client: &mut RawClient, capacity: u32) -> (u64, Session) {
    client
        .send(Frame::from(register("ns", "echo", capacity)))
        .await;
    let worker_id = match next_frame(client).await {
        Some(Frame::Registered(registered)) => registered.worker_id,
        other => panic!("expected Registered, got {other:?}"),
    };
    match next_frame(client).await {
        Some(Frame::Session(session)) => (worker_id, session),
        other => panic!("expected Session right behind Registered, got {other:?}"),
    }
}

/// Sends `registration` and reads `Registered`; returns the worker id.
async fn registered_as(client: &mut RawClient, registration: lintel::wire::Register) -> u64 {
    client.send(Frame::from(registration)).await;
    match next_frame(client).await {
        Some(Frame::Registered(registered)) => registered.worker_id,
        other => panic!("expected Registered, got {other:?}"),
    }
}

/// The next `n` pushes `client` is sent.
async fn pushes(client: &mut RawClient, n: usize) -> Vec<Push> {
    let mut pushes = Vec::with_capacity(n);
    while pushes.len() < n {
        match next_frame(client).await {
            Some(Frame::Push(push)) => pushes.push(*push),
            other => panic!("expected a push, got {other:?}"),
        }
    }
    pushes
}

/// `n` dispatches of `echo`, input `i` for the i-th.
fn dispatches(node: &TestNode, n: usize) -> Vec<JoinHandle<DispatchResult>> {
    (0..n)
        .map(|i| spawn_dispatch(node, request("ns", "echo", &i.to_string()), patient()))
        .collect()
}

/// Waits until `node` keeps the session of `worker_id`: its connection's loss was handled.
async fn parked(node: &TestNode, worker_id: u64) {
    node.wait_registry("the lost worker out of selection", |registry| {
        registry.states().iter().any(|(id, standing)| {
            *id == worker_id && *standing == lintel::sdk::status::Standing::Unreachable
        })
    })
    .await;
}

/// Sends `ResumeSession` and reads the answer.
async fn resume(client: &mut RawClient, token: &Bytes, holding: Vec<u64>) -> Frame {
    client
        .send(Frame::from(ResumeSession {
            token: token.clone(),
            holding,
        }))
        .await;
    next_frame(client).await.expect("an answer to the resume")
}

fn completed(result: &DispatchResult) -> String {
    match result {
        DispatchResult::Completed(response) => match &response.outcome {
            ActivityOutcome::Success(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("the activity failed: {other:?}"),
        },
        other => panic!("expected a completion, got {other:?}"),
    }
}

#[tokio::test]
async fn a_worker_holding_64_pushes_resumes_after_a_reset_and_each_completes_exactly_once() {
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, HELD as u32).await;
    assert_eq!(session.resume_grace_ms, 10_000);
    assert_eq!(session.token.len(), 32);
    let handles = dispatches(&node, HELD);
    let held = pushes(&mut worker, HELD).await;

    let cut = Instant::now();
    proxy.reset();
    worker.closed().await;
    parked(&node, worker_id).await;
    let (mut resumed, pid) = connect_pid(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let holding: Vec<u64> = held.iter().map(|push| push.correlation).collect();
    match resume(&mut resumed, &session.token, holding.clone()).await {
        Frame::SessionResumed(answer) => assert_eq!(
            answer,
            SessionResumed {
                worker_id,
                attached: holding,
                unknown: Vec::new(),
            }
        ),
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    eprintln!("reset to resumed on loopback: {:?}", cut.elapsed());
    let (pools, _) = node.registry().snapshot();
    let status = pools
        .iter()
        .flat_map(|pool| &pool.workers)
        .find(|worker| worker.worker_id == worker_id)
        .expect("the resumed worker in status");
    assert_eq!(status.pid, pid, "status names the connection it resumed on");

    // Each result is sent twice: the first completes its dispatch, the second is dropped.
    let dropped = node.node.dispatcher().counters().snapshot().dropped_replies;
    for push in &held {
        let input = String::from_utf8_lossy(&push.request.input).into_owned();
        resumed.send(reply_frame(push, &input)).await;
        resumed.send(reply_frame(push, &input)).await;
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(completed(&outcome_of(handle).await), i.to_string());
    }
    let counters = node.node.dispatcher().counters();
    within("the duplicates counted as dropped", async {
        while counters.snapshot().dropped_replies < dropped + HELD as u64 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(counters.snapshot().dropped_replies, dropped + HELD as u64);
    assert_eq!(counters.snapshot().worker_lost, 0);

    // The resumed connection is the worker's: it is pushed new work.
    let next = spawn_dispatch(&node, request("ns", "echo", "after"), patient());
    let push = pushes(&mut resumed, 1).await.remove(0);
    resumed.send(reply_frame(&push, "after")).await;
    assert_eq!(completed(&outcome_of(next).await), "after");
}

#[tokio::test]
async fn unlisted_pushes_end_worker_lost_and_one_ended_meanwhile_is_unknown() {
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, 4).await;
    let mut handles = dispatches(&node, 2);
    let short = patient().reply_timeout(Duration::from_millis(200));
    handles.push(spawn_dispatch(&node, request("ns", "echo", "2"), short));
    let held = pushes(&mut worker, 3).await;
    let by_input = |input: &str| {
        held.iter()
            .find(|push| push.request.input == input.as_bytes())
            .expect("pushed")
            .correlation
    };
    let (kept, dropped, timed_out) = (by_input("0"), by_input("1"), by_input("2"));

    proxy.reset();
    parked(&node, worker_id).await;
    let mut handles = handles.into_iter();
    let (kept_handle, dropped_handle, timed_out_handle) = (
        handles.next().expect("0"),
        handles.next().expect("1"),
        handles.next().expect("2"),
    );
    // A deadline still ends its dispatch while the session waits.
    assert!(matches!(
        outcome_of(timed_out_handle).await,
        DispatchResult::Timeout { .. }
    ));

    let mut resumed = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    match resume(&mut resumed, &session.token, vec![kept, timed_out, 999]).await {
        Frame::SessionResumed(answer) => {
            assert_eq!(answer.attached, [kept]);
            assert_eq!(answer.unknown, [timed_out, 999]);
        }
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    assert!(
        matches!(
            outcome_of(dropped_handle).await,
            DispatchResult::WorkerLost { .. }
        ),
        "a push the worker no longer holds is lost"
    );
    let push = held
        .iter()
        .find(|push| push.correlation == kept)
        .expect("kept");
    resumed.send(reply_frame(push, "0")).await;
    assert_eq!(completed(&outcome_of(kept_handle).await), "0");
    let _ = dropped;
}

#[tokio::test]
async fn a_worker_not_back_within_the_grace_loses_its_pushes_promptly_after_it() {
    const GRACE: Duration = Duration::from_millis(300);
    let node = TestNode::with_config(config(300)).await;
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, 4).await;
    let handles = dispatches(&node, 4);
    let _held = pushes(&mut worker, 4).await;

    proxy.reset();
    parked(&node, worker_id).await;
    let parked_at = Instant::now();
    for handle in handles {
        let result = outcome_of(handle).await;
        assert!(
            matches!(result, DispatchResult::WorkerLost { .. }),
            "{result:?}"
        );
    }
    let after = parked_at.elapsed();
    assert!(
        after >= GRACE - Duration::from_millis(50),
        "lost only once the grace passed: {after:?}"
    );
    assert!(
        after < GRACE + Duration::from_secs(2),
        "lost promptly after the grace: {after:?}"
    );

    // The session is gone: a resume is refused, and the connection may register anew.
    let mut late = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    match resume(&mut late, &session.token, Vec::new()).await {
        Frame::RegisterRefused(refusal) => assert_eq!(refusal.code, RefusalCode::SessionUnknown),
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }
    let (_, _) = register_with_session(&mut late, 1).await;
}

#[tokio::test]
async fn a_token_presented_by_another_credential_is_refused_and_stays_the_workers() {
    let grant = |token: &str| GrantConfig {
        token: Some(token.into()),
        identity: None,
        roles: vec![GrantRole::Worker, GrantRole::Producer],
        namespaces: vec!["ns".into()],
        fairness_key: None,
        fairness_weights: false,
    };
    let node = TestNode::with_config(NodeConfig {
        grants: vec![grant("alice"), grant("mallory")],
        ..config(10_000)
    })
    .await;
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, Some("alice"), FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, 2).await;
    let handles = dispatches(&node, 1);
    let held = pushes(&mut worker, 1).await;
    proxy.reset();
    parked(&node, worker_id).await;

    let mut other = connect(proxy.addr, Some("mallory"), FeatureSet::WORKER_RESUME).await;
    match resume(&mut other, &session.token, vec![held[0].correlation]).await {
        Frame::RegisterRefused(refusal) => assert_eq!(refusal.code, RefusalCode::SessionUnknown),
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }
    let mut forged = session.token.to_vec();
    forged[0] ^= 1;
    match resume(&mut other, &Bytes::from(forged), Vec::new()).await {
        Frame::RegisterRefused(refusal) => assert_eq!(refusal.code, RefusalCode::SessionUnknown),
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }

    let mut resumed = connect(proxy.addr, Some("alice"), FeatureSet::WORKER_RESUME).await;
    match resume(&mut resumed, &session.token, vec![held[0].correlation]).await {
        Frame::SessionResumed(answer) => assert_eq!(answer.attached, [held[0].correlation]),
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    resumed.send(reply_frame(&held[0], "0")).await;
    for handle in handles {
        assert_eq!(completed(&outcome_of(handle).await), "0");
    }
}

#[tokio::test]
async fn older_workers_and_ones_not_listing_worker_resume_get_no_session_and_lose_at_once() {
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    for version in [3, 4] {
        let mut worker = if version == 4 {
            connect(proxy.addr, None, FeatureSet::NONE).await
        } else {
            RawClient::hello_at(proxy.addr, Role::Worker, 3).await.0
        };
        registered_as(&mut worker, register("ns", "echo", 1)).await;
        let handles = dispatches(&node, 1);
        // The push comes right behind `Registered`: no `Session` between them.
        let _held = pushes(&mut worker, 1).await;
        let cut = Instant::now();
        proxy.reset();
        for handle in handles {
            let result = outcome_of(handle).await;
            assert!(
                matches!(result, DispatchResult::WorkerLost { .. }),
                "version {version}: {result:?}"
            );
        }
        assert!(
            cut.elapsed() < Duration::from_secs(2),
            "version {version}: lost at once, not after a grace"
        );
    }
}

#[tokio::test]
async fn a_resume_while_the_old_connection_still_looks_up_closes_it_and_takes_its_pushes() {
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, 8).await;
    let handles = dispatches(&node, 8);
    let held = pushes(&mut worker, 8).await;

    // Silent, not closed: the node has not found the old connection lost when the worker
    // comes back by another path.
    proxy.partition();
    let mut resumed = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    let holding: Vec<u64> = held.iter().map(|push| push.correlation).collect();
    match resume(&mut resumed, &session.token, holding.clone()).await {
        Frame::SessionResumed(answer) => {
            assert_eq!((answer.worker_id, answer.attached), (worker_id, holding));
        }
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    for push in &held {
        let input = String::from_utf8_lossy(&push.request.input).into_owned();
        resumed.send(reply_frame(push, &input)).await;
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(completed(&outcome_of(handle).await), i.to_string());
    }
    assert_eq!(node.node.dispatcher().counters().snapshot().worker_lost, 0);
}

#[tokio::test]
async fn a_registration_of_the_same_instance_supersedes_a_kept_session() {
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let instance = lintel::wire::Register {
        instance_id: Some("pod-7".into()),
        ..register("ns", "echo", 2)
    };
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let worker_id = registered_as(&mut worker, instance.clone()).await;
    let Some(Frame::Session(session)) = next_frame(&mut worker).await else {
        panic!("expected a session");
    };
    let handles = dispatches(&node, 1);
    let _held = pushes(&mut worker, 1).await;
    proxy.reset();
    parked(&node, worker_id).await;

    // The instance restarted: what the kept session held is gone.
    let mut restarted = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    registered_as(&mut restarted, instance).await;
    for handle in handles {
        let result = outcome_of(handle).await;
        assert!(
            matches!(result, DispatchResult::WorkerLost { .. }),
            "{result:?}"
        );
    }
    let mut late = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    match resume(&mut late, &session.token, Vec::new()).await {
        Frame::RegisterRefused(refusal) => assert_eq!(refusal.code, RefusalCode::SessionUnknown),
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_connection_lost_beyond_the_kept_sessions_bound_loses_its_pushes_at_once() {
    let node = TestNode::with_config(NodeConfig {
        worker_resume_max_sessions: 1,
        ..config(10_000)
    })
    .await;
    let proxy = Proxy::start(node.addr).await;
    let mut first = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (first_id, _) = register_with_session(&mut first, 1).await;
    let mut second = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (second_id, _) = register_with_session(&mut second, 1).await;
    let handles = dispatches(&node, 2);
    let mut held = pushes(&mut first, 1).await;
    held.extend(pushes(&mut second, 1).await);

    proxy.reset();
    // One session is kept; the other connection's push ends at once.
    let mut handles = handles.into_iter();
    let (mut a, mut b) = (handles.next().expect("a"), handles.next().expect("b"));
    let (lost, mut other) = within("one dispatch lost at once", async {
        tokio::select! {
            lost = &mut a => (lost, b),
            lost = &mut b => (lost, a),
        }
    })
    .await;
    let lost = lost.expect("dispatch task");
    assert!(
        matches!(lost, DispatchResult::WorkerLost { .. }),
        "{lost:?}"
    );
    node.wait_registry("only the kept session's worker registered", |registry| {
        registry.worker_count() == 1
    })
    .await;
    assert!(
        support::poll_once(&mut other).await.is_pending(),
        "the kept session's push waits for a resume"
    );
    let states = node.registry().states();
    let kept = [first_id, second_id]
        .into_iter()
        .filter(|id| states.iter().any(|(worker, _)| worker == id))
        .count();
    assert_eq!(kept, 1, "the kept session's worker stays registered");
}

#[tokio::test]
async fn heartbeat_timers_wait_while_the_session_waits_and_restart_on_resume() {
    const HEARTBEAT: Duration = Duration::from_millis(100);
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let listed = FeatureSet::WORKER_RESUME.with(FeatureSet::HEARTBEAT_TIMEOUT);
    let mut worker = connect(proxy.addr, None, listed).await;
    let (worker_id, session) = register_with_session(&mut worker, 1).await;
    let mut extras = lintel::wire::RequestExtras::default();
    extras.set_heartbeat_timeout(Some(HEARTBEAT));
    let options = extras
        .extensions
        .into_iter()
        .fold(patient(), |options, tag| {
            options.extension(tag.tag, tag.critical, tag.value)
        });
    let dispatch = spawn_dispatch(&node, request("ns", "echo", "0"), options);
    let held = pushes(&mut worker, 1).await;

    proxy.reset();
    parked(&node, worker_id).await;
    // The outage lasts several heartbeat timeouts; no Progress can come meanwhile.
    tokio::time::sleep(HEARTBEAT * 4).await;
    let mut resumed = connect(proxy.addr, None, listed).await;
    match resume(&mut resumed, &session.token, vec![held[0].correlation]).await {
        Frame::SessionResumed(answer) => assert_eq!(answer.attached, [held[0].correlation]),
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    resumed.send(reply_frame(&held[0], "0")).await;
    assert_eq!(completed(&outcome_of(dispatch).await), "0");
}

#[tokio::test]
async fn a_kept_session_ends_worker_lost_when_the_node_starts_draining() {
    let mut node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, _session) = register_with_session(&mut worker, 1).await;
    let handles = dispatches(&node, 1);
    let _held = pushes(&mut worker, 1).await;
    proxy.reset();
    parked(&node, worker_id).await;

    // No worker may connect to a draining node, so none can resume: not kept for the grace.
    let drained = Instant::now();
    node.begin_shutdown();
    for handle in handles {
        let result = outcome_of(handle).await;
        assert!(
            matches!(result, DispatchResult::WorkerLost { .. }),
            "{result:?}"
        );
    }
    assert!(
        drained.elapsed() < Duration::from_secs(5),
        "not at the grace's end"
    );
}

#[tokio::test]
async fn a_resume_listing_less_than_the_sessions_worker_is_refused_and_the_session_stays() {
    let node = TestNode::with_config(config(10_000)).await;
    let proxy = Proxy::start(node.addr).await;
    let listed = FeatureSet::WORKER_RESUME.with(FeatureSet::HEARTBEAT_TIMEOUT);
    let mut worker = connect(proxy.addr, None, listed).await;
    let (worker_id, session) = register_with_session(&mut worker, 1).await;
    let handles = dispatches(&node, 1);
    let held = pushes(&mut worker, 1).await;
    proxy.reset();
    parked(&node, worker_id).await;

    let mut less = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    match resume(&mut less, &session.token, vec![held[0].correlation]).await {
        Frame::RegisterRefused(refusal) => assert_eq!(refusal.code, RefusalCode::SessionUnknown),
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }
    let mut resumed = connect(proxy.addr, None, listed).await;
    match resume(&mut resumed, &session.token, vec![held[0].correlation]).await {
        Frame::SessionResumed(answer) => assert_eq!(answer.attached, [held[0].correlation]),
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    resumed.send(reply_frame(&held[0], "0")).await;
    for handle in handles {
        assert_eq!(completed(&outcome_of(handle).await), "0");
    }
}

#[tokio::test]
async fn a_worker_that_says_goodbye_keeps_no_session_and_loses_its_pushes_at_once() {
    let node = TestNode::with_config(config(10_000)).await;
    let mut worker = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    let (_, session) = register_with_session(&mut worker, 2).await;
    let handles = dispatches(&node, 2);
    let _held = pushes(&mut worker, 2).await;

    let left = Instant::now();
    worker
        .send(Frame::Goodbye(lintel::wire::Goodbye {
            reason: "leaving".into(),
        }))
        .await;
    for handle in handles {
        let result = outcome_of(handle).await;
        assert!(
            matches!(result, DispatchResult::WorkerLost { .. }),
            "{result:?}"
        );
    }
    assert!(
        left.elapsed() < Duration::from_secs(5),
        "lost at once, well under the 10 s grace: {:?}",
        left.elapsed()
    );
    let mut back = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    match resume(&mut back, &session.token, Vec::new()).await {
        Frame::RegisterRefused(refusal) => assert_eq!(refusal.code, RefusalCode::SessionUnknown),
        other => panic!("expected RegisterRefused{{SessionUnknown}}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_connection_that_ends_mid_frame_keeps_its_session_for_a_resume() {
    use tokio::io::AsyncWriteExt;

    let node = TestNode::with_config(config(10_000)).await;
    let mut worker = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, 1).await;
    let handles = dispatches(&node, 1);
    let held = pushes(&mut worker, 1).await;

    // A frame's first bytes, then the end of the stream: cut while the worker was writing.
    let stream = worker.framed.get_mut();
    stream
        .write_all(&[0, 0, 0, 200, 1, 2, 3])
        .await
        .expect("partial frame written");
    stream.shutdown().await.expect("write side closed");
    parked(&node, worker_id).await;

    let mut back = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    let holding: Vec<u64> = held.iter().map(|push| push.correlation).collect();
    match resume(&mut back, &session.token, holding.clone()).await {
        Frame::SessionResumed(answer) => assert_eq!(answer.attached, holding),
        other => panic!("expected SessionResumed, got {other:?}"),
    }
    for push in &held {
        let input = String::from_utf8_lossy(&push.request.input).into_owned();
        back.send(reply_frame(push, &input)).await;
    }
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(completed(&outcome_of(handle).await), i.to_string());
    }
}

/// The value of the `/metrics` sample named exactly `sample` (name and labels), if present.
fn sample(text: &str, sample: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn the_metrics_count_sessions_kept_resumed_and_expired() {
    let (node, admin) = TestNode::with_admin(config(400)).await;
    let scrape = || async { admin_get(admin, "/metrics").await.1 };

    // One session kept, then resumed.
    let proxy = Proxy::start(node.addr).await;
    let mut worker = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (worker_id, session) = register_with_session(&mut worker, 1).await;
    let handles = dispatches(&node, 1);
    let held = pushes(&mut worker, 1).await;
    proxy.reset();
    parked(&node, worker_id).await;
    let text = scrape().await;
    assert_eq!(
        sample(&text, "lintel_worker_sessions_parked"),
        Some(1),
        "{text}"
    );
    assert_eq!(sample(&text, "lintel_worker_sessions_kept_total"), Some(1));
    let mut resumed = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let holding = vec![held[0].correlation];
    assert!(matches!(
        resume(&mut resumed, &session.token, holding).await,
        Frame::SessionResumed(_)
    ));
    resumed.send(reply_frame(&held[0], "0")).await;
    for handle in handles {
        assert_eq!(completed(&outcome_of(handle).await), "0");
    }

    // Another kept and not resumed: it expires once the grace passes.
    let lost = Proxy::start(node.addr).await;
    let mut other = connect(lost.addr, None, FeatureSet::WORKER_RESUME).await;
    let (other_id, _) = register_with_session(&mut other, 1).await;
    let handles = dispatches(&node, 1);
    let _held = pushes(&mut other, 1).await;
    lost.reset();
    parked(&node, other_id).await;
    for handle in handles {
        let result = outcome_of(handle).await;
        assert!(
            matches!(result, DispatchResult::WorkerLost { .. }),
            "{result:?}"
        );
    }
    let text = scrape().await;
    let result = |name: &str| {
        let labelled = format!("lintel_worker_sessions_total{{result=\"{name}\"}}");
        sample(&text, &labelled)
    };
    assert_eq!(
        (result("resumed"), result("expired"), result("refused")),
        (Some(1), Some(1), Some(0)),
        "{text}"
    );
    assert_eq!(sample(&text, "lintel_worker_sessions_kept_total"), Some(2));
    assert_eq!(sample(&text, "lintel_worker_sessions_parked"), Some(0));
}

#[tokio::test]
async fn a_kept_session_superseded_by_its_instance_leaves_room_for_another() {
    let node = TestNode::with_config(NodeConfig {
        worker_resume_max_sessions: 1,
        ..config(10_000)
    })
    .await;
    let proxy = Proxy::start(node.addr).await;
    let instance = lintel::wire::Register {
        instance_id: Some("pod-7".into()),
        ..register("ns", "echo", 1)
    };
    let mut first = connect(proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let first_id = registered_as(&mut first, instance).await;
    proxy.reset();
    parked(&node, first_id).await;
    // The instance restarts serving another activity, so the next push goes elsewhere.
    let mut restarted = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    let elsewhere = lintel::wire::Register {
        instance_id: Some("pod-7".into()),
        ..register("ns", "idle", 1)
    };
    registered_as(&mut restarted, elsewhere).await;
    // The only kept session is superseded: another lost connection's session takes its room.
    let other_proxy = Proxy::start(node.addr).await;
    let mut other = connect(other_proxy.addr, None, FeatureSet::WORKER_RESUME).await;
    let (other_id, session) = register_with_session(&mut other, 1).await;
    let handles = dispatches(&node, 1);
    let held = pushes(&mut other, 1).await;
    other_proxy.reset();
    parked(&node, other_id).await;
    let mut resumed = connect(node.addr, None, FeatureSet::WORKER_RESUME).await;
    let holding = vec![held[0].correlation];
    assert!(matches!(
        resume(&mut resumed, &session.token, holding).await,
        Frame::SessionResumed(_)
    ));
    resumed.send(reply_frame(&held[0], "0")).await;
    for handle in handles {
        assert_eq!(completed(&outcome_of(handle).await), "0");
    }
}
