//! Tenants side by side over real sockets: a producer or an observer reads the status and the
//! events of the namespaces its grant names and nothing of the others, in every protocol
//! version and through `lintel status`; node-wide counts read 0 to it; the admin listener's
//! `/status` stays whole; an observer that dispatches is refused for its role.

use lintel_test_support as support;

use std::net::SocketAddr;

use futures_util::StreamExt;
use lintel::auth::{GrantConfig, GrantRole};
use lintel::sdk::{Client, ClientConfig};
use lintel::status::Status;
use lintel::wire::{
    DispatchResult, FeatureSet, Features, Frame, Hello, NodeEvent, RefusedReason, Register, Role,
    StatusQuery,
};
use lintel::NodeConfig;
use support::{
    admin_request, hello_at, lintel, next_frame, plain, request, submit, within, RawClient,
    RawWorker, TestNode,
};

fn grant(token: &str, roles: &[GrantRole], namespaces: &[&str]) -> GrantConfig {
    GrantConfig {
        token: Some(token.into()),
        identity: None,
        roles: roles.to_vec(),
        namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
        fairness_key: None,
        fairness_weights: false,
    }
}

/// Two tenants' grants, an observer of the `team-` prefix, one of every namespace and a
/// producer granted a namespace no pool has.
fn tenants_config() -> NodeConfig {
    NodeConfig {
        auth_token: Some("root".into()),
        admin_token: Some("admin-secret".into()),
        grants: vec![
            grant("billing-producer", &[GrantRole::Producer], &["billing"]),
            grant("team-observer", &[GrantRole::Observer], &["team-*"]),
            grant("observer", &[GrantRole::Observer], &[]),
            grant("empty-producer", &[GrantRole::Producer], &["nobody-here"]),
        ],
        ..NodeConfig::default()
    }
}

/// A raw connection in `role` at `version` presenting `token`, listing `listed` on version 4.
async fn raw_as(
    addr: SocketAddr,
    role: Role,
    version: u16,
    token: &str,
    listed: FeatureSet,
) -> (RawClient, u64) {
    let mut raw = RawClient::connect(addr).await;
    raw.send(Frame::Hello(Hello {
        auth_token: Some(token.into()),
        ..hello_at(role, version)
    }))
    .await;
    let pid = match raw.recv().await {
        Some(Frame::Welcome(welcome)) => {
            assert_eq!(welcome.version, version);
            if version >= 4 {
                raw.send(Frame::from(Features::of(listed))).await;
            }
            welcome.pid
        }
        other => panic!("expected a welcome at version {version}, got {other:?}"),
    };
    raw.speak(version);
    (raw, pid)
}

/// A worker presenting the node's token, registered as `register`.
async fn worker(addr: SocketAddr, register: Register) -> RawWorker {
    let (client, pid) = raw_as(addr, Role::Worker, 2, "root", FeatureSet::NONE).await;
    RawWorker::register(client, pid, register).await
}

/// The status a producer of `version` presenting `token` is answered, as a status view.
async fn status_at(addr: SocketAddr, version: u16, token: &str) -> Status {
    let (mut raw, _) = raw_as(addr, Role::Producer, version, token, FeatureSet::NONE).await;
    raw.send(Frame::from(StatusQuery { correlation: 9 })).await;
    match next_frame(&mut raw).await {
        Some(Frame::Status(report)) => Status::new(report.status, Vec::new(), 0),
        Some(Frame::ClusterStatus(report)) => {
            Status::new(report.status, report.peers, report.peer_lost)
        }
        Some(Frame::StatusDocument(document)) => {
            serde_json::from_slice(&document.json).expect("a status document")
        }
        other => panic!("expected a status report at version {version}, got {other:?}"),
    }
}

fn namespaces(status: &Status) -> Vec<&str> {
    status
        .pools
        .iter()
        .map(|pool| pool.namespace.as_str())
        .collect()
}

fn identities(status: &Status) -> Vec<&str> {
    status
        .pools
        .iter()
        .flat_map(|pool| &pool.workers)
        .map(|worker| worker.identity.as_str())
        .collect()
}

/// A node serving `billing` and `secret-tenant`, with one dispatch done in `secret-tenant` so
/// its counters are not all 0.
async fn two_tenants() -> (TestNode, SocketAddr, Vec<RawWorker>) {
    let (node, admin) = TestNode::with_admin(tenants_config()).await;
    let billing = worker(node.addr, plain("billing", "echo", 1, "billing-worker")).await;
    let mut secret = worker(
        node.addr,
        plain("secret-tenant", "echo", 1, "secret-worker"),
    )
    .await;
    let root = Client::connect(node.addr, ClientConfig::default().auth_token("root"))
        .await
        .expect("root connects");
    let dispatched = tokio::spawn(async move {
        root.dispatch(
            &support::dispatch_of(request("secret-tenant", "echo", "x")),
            &Default::default(),
        )
        .await
    });
    let push = secret.next_push().await;
    secret.reply(&push, "done").await;
    let done = within("the secret tenant's dispatch", dispatched)
        .await
        .expect("task")
        .expect("dispatched");
    assert!(matches!(done, DispatchResult::Completed(_)), "{done:?}");
    (node, admin, vec![billing, secret])
}

#[tokio::test]
async fn a_producer_reads_only_its_namespaces_pools_and_zero_node_counts_in_every_version() {
    let (node, _admin, _workers) = two_tenants().await;
    for version in 1..=4 {
        let scoped = status_at(node.addr, version, "billing-producer").await;
        assert_eq!(namespaces(&scoped), ["billing"], "version {version}");
        assert_eq!(identities(&scoped), ["billing-worker"], "version {version}");
        assert_eq!(scoped.counters, Default::default(), "version {version}");
        assert_eq!(scoped.connections, 0, "version {version}");
        assert!(scoped.waiting.is_empty(), "version {version}");
        assert_eq!(scoped.node_id, node.node.status().node_id);
        let shown = format!("{scoped:?}");
        assert!(!shown.contains("secret"), "version {version}: {shown}");
        if version >= 3 {
            assert_eq!(scoped.fairness, Default::default(), "version {version}");
        }

        let whole = status_at(node.addr, version, "root").await;
        let mut all = namespaces(&whole);
        all.sort_unstable();
        assert_eq!(all, ["billing", "secret-tenant"], "version {version}");
        assert_eq!(whole.counters.completed, 1, "version {version}");
        assert!(whole.connections > 0, "version {version}");
    }
}

#[tokio::test]
async fn lintel_status_and_its_json_show_a_producer_only_its_namespaces() {
    let (node, _admin, _workers) = two_tenants().await;
    let addr = node.addr.to_string();
    let run = |json: bool| {
        let mut command = lintel();
        command.args([
            "status",
            "--connect",
            &addr,
            "--auth-token",
            "billing-producer",
        ]);
        if json {
            command.arg("--json");
        }
        tokio::task::spawn_blocking(move || command.output().expect("run lintel status"))
    };
    let text = within("lintel status", run(false)).await.expect("task");
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert!(stdout.contains("billing-worker"), "{stdout}");
    assert!(!stdout.contains("secret"), "{stdout}");

    let json = within("lintel status --json", run(true))
        .await
        .expect("task");
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let status: Status = serde_json::from_slice(&json.stdout).expect("status JSON");
    assert_eq!(namespaces(&status), ["billing"]);
    assert_eq!(status.counters, Default::default());
    assert!(!String::from_utf8_lossy(&json.stdout).contains("secret"));
}

#[tokio::test]
async fn a_producer_granted_no_pool_reads_an_empty_status_not_an_error() {
    let (node, _admin, _workers) = two_tenants().await;
    for version in 1..=4 {
        let status = status_at(node.addr, version, "empty-producer").await;
        assert!(status.pools.is_empty(), "version {version}: {status:?}");
        assert!(status.waiting.is_empty(), "version {version}");
        assert_eq!(status.counters, Default::default(), "version {version}");
    }
    let sdk = Client::connect(
        node.addr,
        ClientConfig::default().auth_token("empty-producer"),
    )
    .await
    .expect("connects");
    let status = within("the SDK's status", sdk.status())
        .await
        .expect("a status, not an error");
    assert!(status.pools.is_empty(), "{status:?}");
}

#[tokio::test]
async fn the_admin_status_behind_its_token_stays_complete() {
    let (_node, admin, _workers) = two_tenants().await;
    let (code, body) = admin_request(admin, ("GET", "/status"), None, Some("admin-secret")).await;
    assert_eq!(code, 200, "{body}");
    let status: Status = serde_json::from_str(&body).expect("status JSON");
    let mut all = namespaces(&status);
    all.sort_unstable();
    assert_eq!(all, ["billing", "secret-tenant"]);
    assert_eq!(status.counters.completed, 1);
    assert!(status.connections > 0);
    let (refused, _) = admin_request(admin, ("GET", "/status"), None, Some("root")).await;
    assert_eq!(refused, 401, "the admin listener takes its own token only");
}

/// The identity and pools of the next worker registered that `subscription` hears, with the
/// pools of every worker event it hears until then added to `pools`.
async fn next_registered(
    subscription: &mut lintel::sdk::Subscription,
    pools: &mut Vec<String>,
) -> (String, Vec<String>) {
    loop {
        let event = match within("an event", subscription.next()).await {
            Some(Ok(event)) => event.event,
            other => panic!("expected an event, got {other:?}"),
        };
        let (worker, registered) = match event {
            NodeEvent::WorkerRegistered(worker) => (worker, true),
            NodeEvent::WorkerExcluded { worker, .. }
            | NodeEvent::WorkerRestored(worker)
            | NodeEvent::WorkerDeparted { worker, .. } => (worker, false),
            _ => continue,
        };
        pools.extend(worker.channels.iter().cloned());
        if registered {
            return (worker.identity, worker.channels);
        }
    }
}

#[tokio::test]
async fn an_observer_scoped_to_a_prefix_reads_and_hears_only_those_namespaces() {
    let node = TestNode::with_config(tenants_config()).await;
    let connect =
        |token: &'static str| Client::connect(node.addr, ClientConfig::default().auth_token(token));
    let team = connect("team-observer").await.expect("connects");
    let everything = connect("observer").await.expect("connects");
    let mut heard = within("a scoped subscription", team.subscribe(&[]))
        .await
        .expect("subscribed");
    let mut all_heard = within("a subscription", everything.subscribe(&[]))
        .await
        .expect("subscribed");

    let _other = worker(node.addr, plain("other", "echo", 1, "other-worker")).await;
    let _both = worker(
        node.addr,
        Register {
            namespaces: ["elsewhere", "team-blue"].map(String::from).into(),
            ..plain("elsewhere", "echo", 1, "both-worker")
        },
    )
    .await;
    let _team = worker(node.addr, plain("team-red", "echo", 1, "team-worker")).await;

    // The observer of every namespace hears all three, in order.
    let mut all_pools = Vec::new();
    for identity in ["other-worker", "both-worker", "team-worker"] {
        let (heard_identity, _) = next_registered(&mut all_heard, &mut all_pools).await;
        assert_eq!(heard_identity, identity);
    }
    assert!(all_pools.contains(&"aion.dispatch.other.default".to_owned()));
    // The prefix's observer hears nothing of `other`, and of the worker in two namespaces
    // only the pool it sees.
    let mut team_pools = Vec::new();
    assert_eq!(
        next_registered(&mut heard, &mut team_pools).await,
        (
            "both-worker".to_owned(),
            vec!["aion.dispatch.team-blue.default".to_owned()]
        )
    );
    assert_eq!(
        next_registered(&mut heard, &mut team_pools).await,
        (
            "team-worker".to_owned(),
            vec!["aion.dispatch.team-red.default".to_owned()]
        )
    );
    assert!(
        team_pools
            .iter()
            .all(|pool| pool.starts_with("aion.dispatch.team-")),
        "{team_pools:?}"
    );

    let scoped = within("the scoped status", team.status())
        .await
        .expect("status");
    let mut seen = namespaces(&scoped);
    seen.sort_unstable();
    assert_eq!(seen, ["team-blue", "team-red"]);
    assert_eq!(scoped.counters, Default::default());
    let whole = within("the whole status", everything.status())
        .await
        .expect("status");
    assert_eq!(
        whole.pools.len(),
        4,
        "an observer naming no namespace reads them all"
    );
}

/// The reason and detail an observer's dispatch at `version`, listing `listed`, is refused
/// with.
async fn observer_dispatch(
    addr: SocketAddr,
    version: u16,
    listed: FeatureSet,
) -> (RefusedReason, String) {
    let (mut raw, _) = raw_as(addr, Role::Producer, version, "observer", listed).await;
    raw.send(submit(1, request("billing", "echo", "x"), None))
        .await;
    let result = match next_frame(&mut raw).await {
        Some(Frame::Outcome(outcome)) => outcome.result,
        Some(Frame::ServedOutcome(outcome)) => outcome.result,
        other => panic!("expected an outcome at version {version}, got {other:?}"),
    };
    match result {
        DispatchResult::Refused(refused) => (refused.reason, refused.detail),
        other => panic!("expected a refusal at version {version}, got {other:?}"),
    }
}

#[tokio::test]
async fn an_observer_that_dispatches_is_refused_role_not_granted_where_the_client_reads_it() {
    let node = TestNode::with_config(tenants_config()).await;
    let (reason, detail) = observer_dispatch(node.addr, 4, FeatureSet::ROLE_NOT_GRANTED).await;
    assert_eq!(reason, RefusedReason::RoleNotGranted);
    assert!(detail.contains("producer role"), "{detail}");

    // Versions 2 and 3, and a version-4 client that did not list the feature, read the
    // version-2 reason, whose detail names the role.
    for (version, listed) in [
        (2, FeatureSet::NONE),
        (3, FeatureSet::NONE),
        (4, FeatureSet::NONE),
    ] {
        let (reason, detail) = observer_dispatch(node.addr, version, listed).await;
        assert_eq!(
            reason,
            RefusedReason::NamespaceNotGranted,
            "version {version}"
        );
        assert!(
            detail.contains("observer role"),
            "version {version}: {detail}"
        );
        assert!(
            detail.contains("producer role"),
            "version {version}: {detail}"
        );
    }

    // A producer outside its namespaces is still refused for the namespace.
    let (mut raw, _) = raw_as(
        node.addr,
        Role::Producer,
        4,
        "billing-producer",
        FeatureSet::ROLE_NOT_GRANTED,
    )
    .await;
    raw.send(submit(1, request("payroll", "echo", "x"), None))
        .await;
    match next_frame(&mut raw).await {
        Some(Frame::ServedOutcome(outcome)) => match outcome.result {
            DispatchResult::Refused(refused) => {
                assert_eq!(refused.reason, RefusedReason::NamespaceNotGranted);
                assert!(refused.detail.contains("payroll"), "{}", refused.detail);
            }
            other => panic!("expected a refusal, got {other:?}"),
        },
        other => panic!("expected a ServedOutcome, got {other:?}"),
    }
}

#[tokio::test]
async fn a_producer_reads_only_its_namespaces_pools_on_its_peers() {
    let mesh = |node_id: &str, seeds: &[SocketAddr]| NodeConfig {
        cluster_secret: Some("mesh".into()),
        ..support::cluster_config(node_id, seeds)
    };
    let a = TestNode::with_config(NodeConfig {
        cluster_secret: Some("mesh".into()),
        node_id: "a".into(),
        peer_ping_interval_ms: 100,
        ..tenants_config()
    })
    .await;
    let b = TestNode::with_config(NodeConfig {
        auth_token: Some("root".into()),
        ..mesh("b", &[a.addr])
    })
    .await;
    let _billing = worker(b.addr, plain("billing", "echo", 1, "billing-worker")).await;
    let _secret = worker(b.addr, plain("secret-tenant", "echo", 1, "secret-worker")).await;
    a.wait_peers("b announcing both pools", |peers| {
        peers
            .iter()
            .any(|peer| peer.node_id == "b" && peer.pools.len() == 2)
    })
    .await;

    for version in 2..=4 {
        let scoped = status_at(a.addr, version, "billing-producer").await;
        assert!(
            scoped.pools.is_empty(),
            "version {version}: no pool on a itself"
        );
        let [peer] = scoped.peers.as_slice() else {
            panic!("version {version}: one peer, got {:?}", scoped.peers);
        };
        assert_eq!(peer.link.node_id, "b", "version {version}");
        assert_eq!(
            peer.link.pools,
            ["aion.dispatch.billing.default"],
            "version {version}"
        );
        assert!(
            peer.remote_pools
                .iter()
                .all(|pool| pool.channel == "aion.dispatch.billing.default"),
            "version {version}: {:?}",
            peer.remote_pools
        );
        assert_eq!(peer.link.relays_sent, 0, "version {version}");
        let shown = format!("{scoped:?}");
        assert!(!shown.contains("secret"), "version {version}: {shown}");

        let whole = status_at(a.addr, version, "root").await;
        assert_eq!(
            whole.peers.first().map(|peer| peer.link.pools.len()),
            Some(2)
        );
    }
}
