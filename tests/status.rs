//! Status reports of a node too large to describe in one frame: they arrive cut to fit, with
//! a marker, over the SDK, to a version-1 producer and through `lintel status`.

use lintel_test_support as support;

use std::process::Stdio;

use lintel::config::NodeConfig;
use lintel::sdk::{Client, ClientConfig};
use lintel::wire::{Frame, Register, Role, StatusQuery};
use support::{within, RawClient, RawWorker, TestNode};
use tokio::process::Command;

/// The smallest frame limit a node takes.
const FRAME_LIMIT: usize = 64 * 1024;

/// A registration of 64 namespaces and 64 long activity types: it fits in a frame, but the
/// status lists the worker once per namespace, with every activity each time.
fn wide(identity: &str) -> Register {
    Register {
        namespaces: (0..64)
            .map(|n| format!("ns-{n:02}-{}", "n".repeat(150)))
            .collect(),
        task_queue: String::new(),
        node: None,
        activity_types: (0..64)
            .map(|n| format!("act-{n:02}-{}", "a".repeat(200)))
            .collect(),
        identity: identity.to_owned(),
        max_concurrency: 4,
        ..Default::default()
    }
}

async fn crowded_node() -> (TestNode, Vec<RawWorker>) {
    let node = TestNode::with_config(NodeConfig {
        max_frame_len: FRAME_LIMIT,
        ..NodeConfig::default()
    })
    .await;
    let mut workers = Vec::new();
    for n in 0..3 {
        workers.push(RawWorker::start(node.addr, wide(&format!("wide-{n}"))).await);
    }
    (node, workers)
}

#[tokio::test]
async fn a_status_too_large_for_a_frame_arrives_truncated_with_a_marker() {
    let (node, _workers) = crowded_node().await;
    let client = Client::connect(node.addr, {
        let mut config = ClientConfig::default();
        config.max_frame_len = FRAME_LIMIT;
        config
    })
    .await
    .expect("connect");
    // Over version 3 the status arrives as a JSON document, cut to fit the same way.
    let status = within("the status document", client.status())
        .await
        .expect("a status document");
    let marker = status.pools.last().expect("a marker pool");
    assert!(marker.namespace.is_empty() && marker.workers.is_empty());
    assert!(
        marker.channel.starts_with("truncated: "),
        "{}",
        marker.channel
    );
    let shown: usize = status.pools.iter().map(|p| p.workers.len()).sum();
    assert!(shown < 3 * 64, "{shown} of 192 worker entries shown");

    // A version-2 producer reads the same marker in a `ClusterStatus`.
    let (mut raw, _pid) = RawClient::hello_at(node.addr, Role::Producer, 2).await;
    raw.send(Frame::StatusQuery(StatusQuery { correlation: 4 }))
        .await;
    match raw.recv().await {
        Some(Frame::ClusterStatus(report)) => {
            let marker = report.status.pools.last().expect("a marker pool");
            assert!(marker.channel.starts_with("truncated: "));
        }
        other => panic!("expected a ClusterStatus, got {other:?}"),
    }

    // A version-1 producer reads the same marker in a `Status`.
    let (mut raw, _pid) = RawClient::hello(node.addr, Role::Producer).await;
    raw.send(Frame::StatusQuery(StatusQuery { correlation: 5 }))
        .await;
    match raw.recv().await {
        Some(Frame::Status(status)) => {
            let marker = status.status.pools.last().expect("a marker pool");
            assert!(marker.channel.starts_with("truncated: "));
        }
        other => panic!("expected a Status, got {other:?}"),
    }
}

#[tokio::test]
async fn lintel_status_returns_for_a_node_too_large_to_describe_in_one_frame() {
    let (node, _workers) = crowded_node().await;
    let output = within(
        "lintel status",
        Command::new(env!("CARGO_BIN_EXE_lintel"))
            .args(["status", "--connect", &node.addr.to_string()])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("run lintel status");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("\ntruncated: "), "{stdout}");
}
