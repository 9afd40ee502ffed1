//! How a dispatch may be routed, how long it may wait, and what it carries beside its request.

use std::time::Duration;

use lintel_wire::{Header, NodeRouting, RequestExtras};

/// Reply timeout when a caller states none.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of one dispatch, shared by the in-process API and the producer SDK.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchOptions {
    /// Which nodes may serve it.
    pub routing: NodeRouting,
    /// How long to wait for an eligible worker; `None` fails at once with no-worker.
    pub wait_for_worker: Option<Duration>,
    /// How long to wait for the reply once pushed; `None` takes the node's default.
    pub reply_timeout: Option<Duration>,
    /// Protocol version 3: headers, priority, fairness and a required deployment, carried
    /// beside the request; they need a version-3 node.
    pub extras: RequestExtras,
}

impl DispatchOptions {
    /// Only workers on `node`.
    pub fn pin(mut self, node: impl Into<String>) -> Self {
        self.routing = NodeRouting::Pin(node.into());
        self
    }

    /// Workers on these nodes in order, then any worker.
    pub fn prefer<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.routing = NodeRouting::Prefer(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// Only workers on one of these nodes.
    pub fn require<I, S>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.routing = NodeRouting::Require(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// Wait up to `wait` for an eligible worker.
    pub fn wait_for_worker(mut self, wait: Duration) -> Self {
        self.wait_for_worker = Some(wait);
        self
    }

    /// Wait up to `timeout` for the reply.
    pub fn reply_timeout(mut self, timeout: Duration) -> Self {
        self.reply_timeout = Some(timeout);
        self
    }

    /// Adds a header, its name written lowercase; headers go to the worker in order.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extras.headers.push(Header::new(name, value));
        self
    }

    /// Priority 1 (highest) to 5 (lowest); needs a node that lists the feature `priority`.
    pub fn priority(mut self, priority: u8) -> Self {
        self.extras.priority = Some(priority);
        self
    }

    /// The fairness key the dispatch draws on; needs a node that lists `fairness`.
    pub fn fairness_key(mut self, key: impl Into<String>) -> Self {
        self.extras.fairness_key = Some(key.into());
        self
    }

    /// The key's weight in thousandths (1000 is 1.0); needs a node that lists `fairness`.
    pub fn fairness_weight(mut self, weight: u32) -> Self {
        self.extras.fairness_weight = Some(weight);
        self
    }

    /// Only workers of this deployment may run it; needs a node that lists `deployments`.
    pub fn deployment(mut self, deployment: impl Into<String>) -> Self {
        self.extras.deployment = Some(deployment.into());
        self
    }

    /// Options from a wire submission's fields.
    pub fn from_wire(
        routing: NodeRouting,
        wait_for_worker_ms: Option<u64>,
        reply_timeout_ms: Option<u64>,
    ) -> Self {
        Self {
            routing,
            wait_for_worker: wait_for_worker_ms.map(Duration::from_millis),
            reply_timeout: reply_timeout_ms.map(Duration::from_millis),
            extras: RequestExtras::default(),
        }
    }

    /// `wait_for_worker` in wire milliseconds, saturating.
    pub fn wait_for_worker_ms(&self) -> Option<u64> {
        self.wait_for_worker.map(duration_ms)
    }

    /// `reply_timeout` in wire milliseconds, saturating.
    pub fn reply_timeout_ms(&self) -> Option<u64> {
        self.reply_timeout.map(duration_ms)
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
