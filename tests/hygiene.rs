//! Connection hygiene past the handshake: producers are pinged like workers, and one that
//! answers nothing is closed, while one that answers stays.

mod support;

use lintel::wire::{ErrorCode, Frame, Pong, Role, StatusQuery};
use lintel::NodeConfig;
use support::{RawClient, TestNode};

fn pinging_node() -> NodeConfig {
    NodeConfig {
        ping_interval_ms: 50,
        max_missed_pings: 3,
        ..NodeConfig::default()
    }
}

#[tokio::test]
async fn a_silent_producer_is_closed_for_liveness_after_its_missed_pings() {
    let node = TestNode::with_config(pinging_node()).await;
    let (mut silent, _) = RawClient::hello(node.addr, Role::Producer).await;
    let mut pings = 0;
    let error = loop {
        match silent.recv().await {
            Some(Frame::Ping(_)) => pings += 1,
            Some(Frame::Error(error)) => break error,
            other => panic!("expected pings then an Error, got {other:?}"),
        }
    };
    assert_eq!(error.code, ErrorCode::LivenessTimeout, "{}", error.reason);
    assert_eq!(pings, 3);
    assert!(
        silent.recv().await.is_none(),
        "the node closed the connection"
    );
}

#[tokio::test]
async fn a_producer_that_answers_its_pings_stays_connected() {
    let node = TestNode::with_config(pinging_node()).await;
    let (mut producer, _) = RawClient::hello(node.addr, Role::Producer).await;
    let mut answered = 0;
    while answered < 8 {
        match producer.recv().await {
            Some(Frame::Ping(ping)) => {
                producer.send(Frame::Pong(Pong { nonce: ping.nonce })).await;
                answered += 1;
            }
            other => panic!("expected a ping, got {other:?}"),
        }
    }
    producer
        .send(Frame::StatusQuery(StatusQuery { correlation: 1 }))
        .await;
    loop {
        match producer.recv().await {
            Some(Frame::Ping(ping)) => producer.send(Frame::Pong(Pong { nonce: ping.nonce })).await,
            Some(Frame::Status(report)) => {
                assert_eq!(report.correlation, 1);
                break;
            }
            other => panic!("expected the status, got {other:?}"),
        }
    }
}
