//! Grants over real sockets: a token's roles and namespaces bound what its worker may
//! register into and its producer may dispatch into, with typed refusals.

use lintel_test_support as support;

use lintel::auth::{GrantConfig, GrantRole};
use lintel::sdk::{Client, ClientConfig, DispatchOptions};
use lintel::wire::{DispatchResult, Frame, Hello, RefusalCode, RefusedReason, Register, Role};
use lintel::NodeConfig;
use support::{plain, request, within, RawClient, RawWorker, TestNode};

fn granted_node_config() -> NodeConfig {
    let grant = |token: &str, roles: &[GrantRole], namespaces: &[&str]| GrantConfig {
        token: Some(token.into()),
        identity: None,
        roles: roles.to_vec(),
        namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
        fairness_key: None,
        fairness_weights: false,
    };
    NodeConfig {
        auth_token: Some("root".into()),
        grants: vec![
            grant(
                "billing-worker",
                &[GrantRole::Worker],
                &["billing", "team-*"],
            ),
            grant("billing-producer", &[GrantRole::Producer], &["billing"]),
        ],
        ..NodeConfig::default()
    }
}

async fn hello_as(node: &TestNode, role: Role, token: &str) -> (RawClient, Option<Frame>) {
    let mut raw = RawClient::connect(node.addr).await;
    raw.send(Frame::Hello(Hello {
        min_version: 1,
        max_version: 2,
        role,
        name: "granted".into(),
        auth_token: Some(token.into()),
    }))
    .await;
    let answer = raw.recv().await;
    (raw, answer)
}

async fn producer(node: &TestNode, token: &str) -> Client {
    let config = {
        let mut config = ClientConfig::default();
        config.auth_token = Some(token.into());
        config
    };
    within(
        "producer connection",
        Client::connect(node.addr.to_string(), config),
    )
    .await
    .expect("producer connects")
}

#[tokio::test]
async fn a_worker_registers_only_into_the_namespaces_its_token_grants() {
    let node = TestNode::with_config(granted_node_config()).await;
    let (mut raw, welcome) = hello_as(&node, Role::Worker, "billing-worker").await;
    assert!(matches!(welcome, Some(Frame::Welcome(_))));
    let mixed = Register {
        namespaces: ["billing", "payroll"].map(String::from).into(),
        ..plain("billing", "echo", 1, "w")
    };
    raw.send(Frame::from(mixed)).await;
    match raw.recv().await {
        Some(Frame::RegisterRefused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Unauthorized);
            assert!(refusal.reason.contains("payroll"), "{}", refusal.reason);
        }
        other => panic!("expected RegisterRefused, got {other:?}"),
    }
    // The connection stays usable, and a granted prefix is accepted.
    raw.send(Frame::from(plain("team-blue", "echo", 1, "w")))
        .await;
    assert!(matches!(raw.recv().await, Some(Frame::Registered(_))));
    assert_eq!(node.registry().worker_count(), 1);
}

#[tokio::test]
async fn a_producer_dispatches_only_into_the_namespaces_its_token_grants() {
    let node = TestNode::with_config(granted_node_config()).await;
    let (client, _) = hello_as(&node, Role::Worker, "billing-worker").await;
    let pid = 0;
    let mut worker = RawWorker::register(client, pid, plain("billing", "echo", 1, "w")).await;
    let producer = producer(&node, "billing-producer").await;

    let refused = within(
        "a dispatch outside the grant",
        producer.dispatch(
            &support::dispatch_of(request("payroll", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    match refused {
        DispatchResult::Refused(refused) => {
            assert_eq!(refused.reason, RefusedReason::NamespaceNotGranted);
            assert!(refused.detail.contains("payroll"), "{}", refused.detail);
        }
        other => panic!("expected Refused, got {other:?}"),
    }

    let granted = {
        let producer = producer.clone();
        tokio::spawn(async move {
            producer
                .dispatch(
                    &support::dispatch_of(request("billing", "echo", "x")),
                    &DispatchOptions::default(),
                )
                .await
        })
    };
    let push = worker.next_push().await;
    worker.reply(&push, "paid").await;
    let granted = within("the granted dispatch", granted)
        .await
        .expect("task")
        .expect("connection stays up");
    assert!(
        matches!(granted, DispatchResult::Completed(_)),
        "{granted:?}"
    );
    assert_eq!(node.node.status().counters.refused, 1);
}

#[tokio::test]
async fn a_token_used_outside_its_roles_or_an_unknown_token_is_refused_at_hello() {
    let node = TestNode::with_config(granted_node_config()).await;
    for (role, token) in [
        (Role::Producer, "billing-worker"),
        (Role::Worker, "billing-producer"),
        (Role::Worker, "nobody"),
    ] {
        let (_, answer) = hello_as(&node, role, token).await;
        match answer {
            Some(Frame::HelloRefused(refusal)) => {
                assert_eq!(refusal.code, RefusalCode::Unauthorized, "{role:?} {token}");
            }
            other => panic!("expected HelloRefused for {role:?} {token}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_single_auth_token_still_grants_every_role_and_namespace() {
    let node = TestNode::with_config(granted_node_config()).await;
    let (mut raw, welcome) = hello_as(&node, Role::Worker, "root").await;
    assert!(matches!(welcome, Some(Frame::Welcome(_))));
    raw.send(Frame::from(plain("anything", "echo", 1, "w")))
        .await;
    assert!(matches!(raw.recv().await, Some(Frame::Registered(_))));
    let producer = producer(&node, "root").await;
    let result = within(
        "a dispatch anywhere",
        producer.dispatch(
            &support::dispatch_of(request("elsewhere", "echo", "x")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("connection stays up");
    assert!(matches!(result, DispatchResult::NoWorker(_)), "{result:?}");
}
