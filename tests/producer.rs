//! The producer SDK over several nodes: what it says when none answers, how it leaves a
//! draining node and retries only what proves nothing ran, and the typed errors of its
//! builders. In-process nodes on loopback; tests/failover.rs kills and restarts processes.

mod support;

use std::time::Duration;

use lintel::sdk::{Client, ClientConfig, ConnectError};
use support::within;
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
    let config = ClientConfig {
        handshake_timeout: timeout,
        ..ClientConfig::default()
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
