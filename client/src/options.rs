//! How a dispatch may be routed, how long it may wait, and what it carries beside its request.

use std::time::Duration;

use bytes::Bytes;
use lintel_wire::{DispatchResult, Extension, Header, NodeRouting, RefusedReason, RequestExtras};

/// Reply timeout when a caller states none.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of one dispatch, shared by the in-process API and the producer SDK: where it may
/// run ([`pin`](Self::pin), [`prefer`](Self::prefer), [`require`](Self::require); any node by
/// default), how long it may wait, what it carries beside its request (headers, a trace
/// context, priority, fairness, a deployment) and what is retried.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use lintel_client::DispatchOptions;
///
/// let options = DispatchOptions::default()
///     .prefer(["eu-1", "eu-2"])
///     .wait_for_worker(Duration::from_millis(200))
///     .reply_timeout(Duration::from_secs(5))
///     .header("tenant", "acme")
///     .priority(2)
///     .fairness_key("acme");
/// assert_eq!(options.reply_timeout, Some(Duration::from_secs(5)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DispatchOptions {
    /// Which nodes may serve it: set by [`pin`](Self::pin), [`prefer`](Self::prefer) and
    /// [`require`](Self::require).
    pub(crate) routing: NodeRouting,
    /// How long to wait for an eligible worker; `None` fails at once with no-worker.
    pub wait_for_worker: Option<Duration>,
    /// How long to wait for the reply once pushed; `None` takes the node's default.
    pub reply_timeout: Option<Duration>,
    /// Protocol version 3: headers, priority, fairness and a required deployment, carried
    /// beside the request; they need a version-3 node. Set by the builder methods.
    pub(crate) extras: RequestExtras,
    /// What the producer SDK retries: on the connection in use, or on another node's once it
    /// left a draining node or a lost connection. The node's in-process API ignores it.
    pub retry: RetryPolicy,
}

/// What a dispatch is tried again on, and how often, within its time budget.
///
/// By default only what proves nothing ran is retried, up to 3 attempts in all: a `draining`
/// outcome; a refusal decided before any push that another node or connection may not repeat
/// (`WorkerBackpressure`, `TooManyInFlight`, `FairnessCapReached`, `Unsupported`); a
/// connection lost before the submission was written whole, and no node reachable, which
/// reached no node and so count against [`MAX_UNSENT_ATTEMPTS`] instead, unless the policy
/// is [`RetryPolicy::never`]. A `no-worker`
/// outcome is retried only with [`RetryPolicy::retry_no_worker`]. What may have run
/// (`worker-lost`, `timeout`, a missed heartbeat, `peer-lost`, `shut-down`, a connection lost
/// after the submission was written) only with [`RetryPolicy::idempotent`].
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use lintel_client::{DispatchOptions, RetryPolicy};
///
/// let options = DispatchOptions::default()
///     .retry(RetryPolicy::default().attempts(5).retry_no_worker().budget(Duration::from_secs(20)));
/// assert_eq!(options.retry.max_attempts(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    no_worker: bool,
    idempotent: bool,
    budget: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            no_worker: false,
            idempotent: false,
            budget: None,
        }
    }
}

/// Why an attempt was tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// The node answered `draining`.
    Draining,
    /// The node refused it before any push, for a reason another node may not share.
    Refused(RefusedReason),
    /// No eligible worker, and the policy retries that.
    NoWorker,
    /// The connection was lost before the submission was written whole.
    NotSent,
    /// No node could be reached; nothing was sent.
    Unreachable,
    /// It may have run (`worker-lost`, `timeout`, a missed heartbeat, `peer-lost`,
    /// `shut-down`, or the connection lost after it was written), and it is marked idempotent.
    MayHaveRun,
}

/// Attempts in all past which a failure that reached no node (a connection lost before the
/// write, no node reachable) is not tried again: the budget bounds it first, this a tight loop.
pub const MAX_UNSENT_ATTEMPTS: u32 = 64;

impl RetryReason {
    /// The attempt reached no node: nothing of it can have run.
    pub(crate) fn proves_unsent(self) -> bool {
        matches!(self, Self::NotSent | Self::Unreachable)
    }
}

impl RetryPolicy {
    /// Attempts in all past which a failure that reached no node is not tried again:
    /// [`MAX_UNSENT_ATTEMPTS`], or one under [`RetryPolicy::never`].
    pub fn max_unsent_attempts(&self) -> u32 {
        if self.max_attempts == 1 {
            1
        } else {
            MAX_UNSENT_ATTEMPTS.max(self.max_attempts)
        }
    }

    /// No retry: one attempt.
    pub fn never() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// At most `attempts` attempts in all, the first included (at least 1).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Also retry a `no-worker` outcome (on the same connection: the node places it again,
    /// across its peers).
    pub fn retry_no_worker(mut self) -> Self {
        self.no_worker = true;
        self
    }

    /// The dispatch may run more than once: also retry what may have run.
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// Start no attempt later than `budget` after the call; without one, no attempt starts
    /// later than the reply timeout after the call ([`DEFAULT_REPLY_TIMEOUT`] when unset).
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// At most this many attempts in all.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Whether `no-worker` is retried.
    pub fn retries_no_worker(&self) -> bool {
        self.no_worker
    }

    /// Whether what may have run is retried.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The time budget, when one is set.
    pub fn time_budget(&self) -> Option<Duration> {
        self.budget
    }

    /// Why `result` is worth another attempt under this policy; `None` when it stands.
    pub fn retries(&self, result: &DispatchResult) -> Option<RetryReason> {
        match result {
            DispatchResult::Draining => Some(RetryReason::Draining),
            DispatchResult::Refused(refused) => match refused.reason {
                RefusedReason::WorkerBackpressure
                | RefusedReason::TooManyInFlight
                | RefusedReason::FairnessCapReached
                | RefusedReason::Unsupported => Some(RetryReason::Refused(refused.reason)),
                _ => None,
            },
            DispatchResult::NoWorker(_) if self.no_worker => Some(RetryReason::NoWorker),
            DispatchResult::WorkerLost { .. }
            | DispatchResult::Timeout { .. }
            | DispatchResult::HeartbeatTimeout { .. }
            | DispatchResult::PeerLost { .. }
            | DispatchResult::ShutDown { .. }
                if self.idempotent =>
            {
                Some(RetryReason::MayHaveRun)
            }
            _ => None,
        }
    }
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

    /// Any worker in the pool, the default: undoes [`pin`](Self::pin),
    /// [`prefer`](Self::prefer) and [`require`](Self::require).
    pub fn any_node(mut self) -> Self {
        self.routing = NodeRouting::Any;
        self
    }

    /// What to retry, and how often; see [`RetryPolicy`].
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
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

    /// Asks the worker to heartbeat at least every `timeout` (protocol version 4; whole
    /// milliseconds, up to 7 days): a dispatch whose worker sends none in time ends
    /// `HeartbeatTimeout`. Only workers that listed `heartbeat-timeout` are pushed it; a node
    /// that does not implement it refuses the dispatch `Unsupported`. Default: none.
    pub fn heartbeat_timeout(mut self, timeout: Duration) -> Self {
        self.extras.set_heartbeat_timeout(Some(timeout));
        self
    }

    /// Adds a protocol extension, `tag` with `value`, carried to the node beside the request
    /// (version 3). A node that does not know `tag` ignores it, unless it is `critical`: then
    /// it refuses the dispatch (`Refused{Unsupported}`). Default: none.
    pub fn extension(mut self, tag: u32, critical: bool, value: impl Into<Bytes>) -> Self {
        self.extras.extensions.push(Extension {
            tag,
            critical,
            value: value.into(),
        });
        self
    }

    /// Which nodes may serve it, as the wire carries it: for the node's in-process
    /// dispatcher, which shares this type. Not part of the API: it may change in any release.
    #[doc(hidden)]
    pub fn wire_routing(&self) -> &NodeRouting {
        &self.routing
    }

    /// The extras as the wire carries them: for the node's in-process dispatcher, which shares
    /// this type. Not part of the API: it may change in any release.
    #[doc(hidden)]
    pub fn wire_extras(&self) -> &RequestExtras {
        &self.extras
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
