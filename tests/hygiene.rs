//! Connection hygiene past the handshake: producers are pinged like workers, and one that
//! answers nothing is closed, while one that answers stays.

use lintel_test_support as support;

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

fn slow_frames_node() -> NodeConfig {
    NodeConfig {
        frame_timeout_ms: 200,
        ..NodeConfig::default()
    }
}

/// Sends the first half of a `StatusQuery` frame and nothing more.
async fn half_a_frame(client: &mut RawClient) {
    use tokio::io::AsyncWriteExt;
    let mut bytes = bytes::BytesMut::new();
    lintel::wire::encode_frame(
        &Frame::StatusQuery(StatusQuery { correlation: 1 }),
        lintel::wire::PROTOCOL_VERSION,
        &mut bytes,
        1 << 20,
    )
    .expect("encode");
    let half = bytes.len() / 2;
    client
        .framed
        .get_mut()
        .write_all(&bytes[..half])
        .await
        .expect("write");
}

#[tokio::test]
async fn a_frame_dribbled_past_the_frame_timeout_closes_with_frame_timeout() {
    let node = TestNode::with_config(slow_frames_node()).await;
    let mut client = RawClient::connect(node.addr).await;
    client
        .send(Frame::Hello(support::hello_at(Role::Producer, 2)))
        .await;
    assert!(matches!(client.recv().await, Some(Frame::Welcome(_))));
    half_a_frame(&mut client).await;
    match client.recv().await {
        Some(Frame::Error(error)) => assert_eq!(error.code, ErrorCode::FrameTimeout),
        other => panic!("expected Error{{FrameTimeout}}, got {other:?}"),
    }
    assert!(
        client.recv().await.is_none(),
        "the node closed the connection"
    );
}

#[tokio::test]
async fn a_version_1_client_too_slow_with_a_frame_is_closed_without_a_frame_it_cannot_read() {
    let node = TestNode::with_config(slow_frames_node()).await;
    let (mut client, _) = RawClient::hello(node.addr, Role::Producer).await;
    half_a_frame(&mut client).await;
    assert!(
        client.recv().await.is_none(),
        "closed, with nothing version 1 cannot decode"
    );
}
