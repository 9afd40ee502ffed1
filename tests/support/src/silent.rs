//! A raw worker that stops answering the node's pings, and answers again, on a node whose
//! pings tell it apart.

use lintel::status::Standing;
use lintel::wire::{Frame, Ping, Pong};
use lintel::NodeConfig;

use super::node::TestNode;
use super::peers::RawWorker;
use super::raw::RawClient;

/// Pings far enough apart that the timeout (half a period) tells a silent worker overdue
/// before its next ping, and long enough that an answering worker is never late on a busy
/// machine.
pub fn watchful() -> NodeConfig {
    NodeConfig {
        ping_interval_ms: 1_000,
        worker_ping_timeout_ms: 500,
        max_missed_pings: 1_000,
        ..NodeConfig::default()
    }
}

/// The next frame, which must be a ping; left unanswered.
pub async fn unanswered_ping(client: &mut RawClient) -> Ping {
    match client.recv().await {
        Some(Frame::Ping(ping)) => ping,
        other => panic!("expected a ping, got {other:?}"),
    }
}

/// The worker stops answering: it reads two pings without a word, and by the second the node
/// holds it unreachable.
pub async fn fall_silent(node: &TestNode, worker: &mut RawWorker) -> Ping {
    unanswered_ping(&mut worker.client).await;
    let latest = unanswered_ping(&mut worker.client).await;
    let state = node
        .registry()
        .states()
        .into_iter()
        .find(|(id, _)| *id == worker.worker_id)
        .map(|(_, standing)| standing);
    assert_eq!(
        state,
        Some(Standing::Unreachable),
        "excluded before the next ping after the timeout"
    );
    latest
}

/// The worker answers again: the latest ping, then whatever the node sent meanwhile.
pub async fn answer_again(worker: &mut RawWorker, latest: Ping) {
    worker
        .client
        .send(Frame::Pong(Pong {
            nonce: latest.nonce,
        }))
        .await;
    worker.settle().await;
}
