//! Fairness under load: SDK workers that log what they completed, in order, and the options
//! of a dispatch that waits at a priority under a key.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use lintel::dispatch::DispatchOptions;
use lintel::sdk::{handler_fn, WorkerHandle};
use lintel::wire::ActivityOutcome;
use tokio::sync::Notify;

use lintel::registry::fairness::FairnessStatus;

use super::cluster::sdk_worker;
use super::frames::plain;
use super::node::{within, TestNode};

/// How long each task of a logging worker takes in the fairness tests.
pub const TASK: Duration = Duration::from_millis(20);

/// The inputs of the pushes an SDK worker completed, in order.
#[derive(Default)]
pub struct Log {
    completed: Mutex<Vec<String>>,
    changed: Notify,
}

impl Log {
    pub fn completed(&self) -> Vec<String> {
        self.completed.lock().unwrap().clone()
    }

    /// Waits until `holds` is true of the completed inputs, looking again on every change.
    pub async fn wait(&self, what: &str, holds: impl Fn(&[String]) -> bool) {
        within(what, async {
            loop {
                let notified = self.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if holds(&self.completed()) {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }
}

/// How many of `inputs` start with `prefix`.
pub fn count_with(inputs: &[String], prefix: &str) -> usize {
    inputs
        .iter()
        .filter(|input| input.starts_with(prefix))
        .count()
}

/// An SDK worker at `addr` of `capacity` slots on `ns`/`work` whose tasks take `task`,
/// logging into the returned [`Log`].
pub async fn logging_worker(
    addr: SocketAddr,
    capacity: u32,
    task: Duration,
) -> (WorkerHandle, Arc<Log>) {
    let log = Arc::new(Log::default());
    let seen = Arc::clone(&log);
    let handler = handler_fn(move |request: lintel::sdk::Request| {
        let log = Arc::clone(&seen);
        async move {
            let input = String::from_utf8_lossy(&request.input).into_owned();
            if !task.is_zero() {
                tokio::time::sleep(task).await;
            }
            log.completed.lock().unwrap().push(input.clone());
            log.changed.notify_waiters();
            ActivityOutcome::Success(Bytes::from(input))
        }
    });
    let worker = sdk_worker(addr, plain("ns", "work", capacity, "logging"), handler).await;
    (worker, log)
}

/// Options of a dispatch that waits for a worker, at `priority` under `key` (none: the
/// shared key) with `weight`.
pub fn waiting(priority: u8, key: &str, weight: u32) -> DispatchOptions {
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(60))
        .reply_timeout(Duration::from_secs(60))
        .priority(priority)
        .fairness_weight(weight);
    if key.is_empty() {
        options
    } else {
        options.fairness_key(key)
    }
}

/// Waits until `node`'s fairness status satisfies `holds`, looking again on every change.
pub async fn wait_fairness(node: &TestNode, what: &str, holds: impl Fn(&FairnessStatus) -> bool) {
    let registry = node.registry();
    within(what, async {
        loop {
            let mut seen = registry.changes().epoch();
            if holds(&registry.fairness()) {
                return;
            }
            registry.changes().changed(&mut seen).await;
        }
    })
    .await;
}

/// Asserts that the ten dispatches `b:0` to `b:9` queued behind another key's completed first
/// come first served, the last within 25 completions after the `mark`-th: first come first
/// served across keys would have put them after every earlier waiter.
pub fn assert_b_served_within_25(completed: &[String], mark: usize) {
    let last_b = completed
        .iter()
        .rposition(|input| input.starts_with("b:"))
        .expect("b completed");
    assert!(
        last_b < mark + 25,
        "the last b was completion {} after they queued: {:?}",
        last_b + 1 - mark,
        completed.get(mark..)
    );
    let order: Vec<&String> = completed.iter().filter(|i| i.starts_with("b:")).collect();
    let expected: Vec<String> = (0..10).map(|i| format!("b:{i}")).collect();
    assert_eq!(
        order,
        expected.iter().collect::<Vec<_>>(),
        "first come first served within b"
    );
}
