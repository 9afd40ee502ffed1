//! The producer SDK over several nodes: what it says when none answers, how it leaves a
//! draining node and retries only what proves nothing ran, and the typed errors of its
//! builders. In-process nodes on loopback; tests/failover.rs kills and restarts processes.

use lintel_test_support as support;

use std::time::Duration;

use lintel::dispatch::DispatchOptions;
use lintel::sdk::{
    handler_fn, Client, ClientConfig, ConnectError, Request, RetryPolicy, RetryReason,
};
use lintel::wire::{ActivityOutcome, DispatchResult, Frame};
use lintel::NodeConfig;
use support::{next_frame, plain, request, sdk_worker, within, RawWorker, TestNode};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// An address nothing listens on: a port bound and let go.
async fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn a_client_whose_nodes_are_all_down_names_each_address_and_its_error_within_its_timeout() {
    let (refused_a, refused_b) = (closed_port().await, closed_port().await);
    // Accepts (the kernel does, from its backlog) and never says a word.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let timeout = Duration::from_millis(500);
    let config = {
        let mut config = ClientConfig::default();
        config.handshake_timeout = timeout;
        config
    };
    let nodes = [refused_a.clone(), silent_addr.clone(), refused_b.clone()];

    let started = Instant::now();
    let result = within("connect", Client::connect_nodes(nodes, config)).await;
    let took = started.elapsed();

    let Err(ConnectError::AllFailed(attempts)) = result else {
        panic!("expected AllFailed, got {result:?}");
    };
    assert!(took < timeout + Duration::from_millis(250), "{took:?}");
    let mut named: Vec<&str> = attempts.iter().map(|a| a.address.as_str()).collect();
    named.sort_unstable();
    let mut given = vec![refused_a.as_str(), refused_b.as_str(), silent_addr.as_str()];
    given.sort_unstable();
    assert_eq!(named, given);
    for attempt in &attempts {
        if attempt.address == silent_addr {
            assert!(
                matches!(attempt.error, ConnectError::Timeout(_)),
                "{attempt}"
            );
        } else {
            let ConnectError::Io(io) = &attempt.error else {
                panic!("expected an i/o error for {attempt}");
            };
            assert_eq!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused,
                "{attempt}"
            );
        }
    }
    let said = ConnectError::AllFailed(attempts).to_string();
    for address in given {
        assert!(said.contains(address), "{said}");
    }
}

#[tokio::test]
async fn a_client_given_no_address_says_so() {
    let result = Client::connect_nodes(Vec::<String>::new(), ClientConfig::default()).await;
    assert!(matches!(result, Err(ConnectError::NoNodes)), "{result:?}");
}

#[tokio::test]
async fn a_dispatch_answered_draining_is_retried_on_another_node_which_takes_the_next_ones() {
    let mut x = TestNode::start().await;
    // Y's listener is bound first and served later, so the client's first node is X.
    let y_listener = lintel::listener::bind("127.0.0.1:0".parse().unwrap(), 128).unwrap();
    let y_addr = y_listener.local_addr().unwrap();
    let mut held = RawWorker::start(x.addr, plain("ns", "act", 1, "held")).await;
    let config = {
        let mut config = ClientConfig::default();
        config.handshake_timeout = Duration::from_secs(5);
        config
    };
    let nodes = [x.addr.to_string(), y_addr.to_string()];
    let client = within("connect", Client::connect_nodes(nodes, config))
        .await
        .unwrap();
    assert_eq!(client.node_addr(), Some(x.addr));
    let y = TestNode::on_listener(NodeConfig::default(), y_listener).await;
    let echo =
        handler_fn(|request: Request| async move { ActivityOutcome::Success(request.input) });
    let _echo = sdk_worker(y.addr, plain("ns", "act", 4, "echo"), echo).await;
    // X holds one dispatch in flight, so its drain waits and it answers `draining`.
    let first = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .submit(
                    &support::dispatch_of(request("ns", "act", "first")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });
    let push = held.next_push().await;
    x.begin_shutdown();
    assert!(matches!(
        next_frame(&mut held.client).await,
        Some(Frame::Drain(_))
    ));

    let retried = within(
        "the retried dispatch",
        client.submit(
            &support::dispatch_of(request("ns", "act", "again")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .unwrap();

    assert!(
        matches!(retried.result, DispatchResult::Completed(_)),
        "{retried:?}"
    );
    assert_eq!(retried.attempts(), 2);
    assert_eq!(retried.retried[0].reason, RetryReason::Draining);
    assert_eq!(retried.retried[0].node, Some(x.addr));
    assert_eq!(retried.node, Some(y_addr));
    assert_eq!(client.node_addr(), Some(y_addr));
    let next = client
        .submit(
            &support::dispatch_of(request("ns", "act", "next")),
            &DispatchOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!((next.node, next.attempts()), (Some(y_addr), 1));
    // What ran on X before its drain still answers there.
    held.reply(&push, "held").await;
    let first = within("the held dispatch", first).await.unwrap().unwrap();
    assert!(
        matches!(first.result, DispatchResult::Completed(_)),
        "{first:?}"
    );
    assert_eq!(first.node, Some(x.addr));
}

#[tokio::test]
async fn what_may_have_run_is_not_retried_and_no_worker_only_when_asked() {
    let node = TestNode::start().await;
    let client = Client::connect_nodes([node.addr.to_string()], ClientConfig::default())
        .await
        .unwrap();

    let alone = client
        .submit(
            &support::dispatch_of(request("ns", "nobody", "")),
            &DispatchOptions::default(),
        )
        .await
        .unwrap();
    assert!(matches!(alone.result, DispatchResult::NoWorker(_)));
    assert_eq!(alone.attempts(), 1);
    let asked =
        DispatchOptions::default().retry(RetryPolicy::default().attempts(3).retry_no_worker());
    let again = client
        .submit(&support::dispatch_of(request("ns", "nobody", "")), &asked)
        .await
        .unwrap();
    assert!(matches!(again.result, DispatchResult::NoWorker(_)));
    assert_eq!(again.attempts(), 3);
    assert!(again
        .retried
        .iter()
        .all(|retry| retry.reason == RetryReason::NoWorker));

    // A worker that vanishes holding the push: it may have run, so it stands.
    let mut vanishing = RawWorker::start(node.addr, plain("ns", "act", 1, "vanishing")).await;
    let dispatch = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .submit(
                    &support::dispatch_of(request("ns", "act", "once")),
                    &DispatchOptions::default(),
                )
                .await
        }
    });
    vanishing.next_push().await;
    drop(vanishing);
    let lost = within("the lost dispatch", dispatch)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(lost.result, DispatchResult::WorkerLost { .. }),
        "{lost:?}"
    );
    assert_eq!(lost.attempts(), 1);
}
