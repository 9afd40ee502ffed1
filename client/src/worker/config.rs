//! What a worker connects to, what it registers and how it retries.

use std::time::Duration;

use bytes::Bytes;
use lintel_wire::{Extension, Register, DEFAULT_MAX_FRAME_LEN};

use crate::tls::ClientTls;

/// Jittered exponential reconnect delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after a lost connection, before jitter.
    pub initial: Duration,
    /// The cap on the delay, before jitter.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (zero-based): `initial * 2^attempt` capped at
    /// `max`, of which a random half is taken off so reconnecting workers spread out.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt);
        let full = self.initial.saturating_mul(factor).min(self.max);
        let half = full / 2;
        let half_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half.saturating_add(Duration::from_nanos(fastrand::u64(0..=half_nanos)))
    }
}

/// Where to connect, what to register and how to behave on the way; build one with
/// [`WorkerConfig::builder`], then adjust its public fields if need be.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerConfig {
    /// `host:port` of each node it may register with (a name resolving to several addresses
    /// counts as each). It registers with one; when that node drains or is lost it tries the
    /// others first, then comes back.
    pub nodes: Vec<String>,
    /// Sent after every handshake; `max_concurrency` is replaced by the latest
    /// [`WorkerHandle::set_capacity`](super::WorkerHandle::set_capacity). Its deployment and
    /// instance id need a version-3 node: an earlier one is sent the registration without
    /// them, and a warning is logged.
    pub(crate) registration: Register,
    /// Free-form client name in `Hello`, for the node's logs.
    pub name: String,
    /// The token of a node that requires one; `None` by default.
    pub auth_token: Option<String>,
    /// Bounds the connect plus `Welcome`, and separately the wait for `Registered`.
    pub handshake_timeout: Duration,
    /// Delays between reconnection attempts.
    pub reconnect: Backoff,
    /// Largest frame body this side reads or writes.
    pub max_frame_len: usize,
    /// Frames the outbound queue holds before the runtime waits for room.
    pub queue_len: usize,
    /// Speak TLS to the node; `None` is plaintext. The node's certificate is checked against
    /// the TLS server name, else the host of the address it was given.
    pub tls: Option<ClientTls>,
    /// Where its connection runs; see [`ConnectionThread`].
    pub connection_thread: ConnectionThread,
}

/// Where a worker's connection (its socket, pings and pongs) runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionThread {
    /// A thread of its own: a handler that blocks its thread holds up neither pongs nor the
    /// socket. The default.
    #[default]
    Own,
    /// The runtime the handlers run on: no hand-over between threads for each request, so a
    /// lower latency, for handlers that never block their thread. One that does holds up the
    /// pongs too, and the node takes the worker for unreachable.
    Shared,
}

impl WorkerConfig {
    /// A config for `nodes` registering `registration`, with default timeouts, backoff and
    /// limits, named after the registration identity.
    pub(crate) fn with_nodes(nodes: Vec<String>, registration: Register) -> Self {
        Self {
            nodes,
            name: registration.identity.clone(),
            registration,
            auth_token: None,
            handshake_timeout: Duration::from_secs(10),
            reconnect: Backoff::default(),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            queue_len: 1024,
            tls: None,
            connection_thread: ConnectionThread::Own,
        }
    }

    /// The most requests it runs at once, as registered (before any
    /// [`WorkerHandle::set_capacity`](super::WorkerHandle::set_capacity)).
    pub fn concurrency(&self) -> u32 {
        self.registration.max_concurrency
    }

    /// The placement label it registers, if any; see [`WorkerConfigBuilder::label`].
    pub fn label(&self) -> Option<&str> {
        self.registration.node.as_deref()
    }

    /// Its identity in the node's status and logs; see [`WorkerConfigBuilder::identity`].
    pub fn identity(&self) -> &str {
        &self.registration.identity
    }
}

/// Builds a [`WorkerConfig`]: where to connect, what the worker serves, and how it
/// introduces itself. Only the nodes, a namespace and an activity type are required.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use lintel_client::WorkerConfig;
///
/// let config = WorkerConfig::builder()
///     .nodes(["node-a:7400", "node-b:7400"])
///     .namespace("billing")
///     .activity("charge")
///     .activity("refund")
///     .identity("billing-worker-1")
///     .concurrency(8)
///     .handshake_timeout(Duration::from_secs(3))
///     .build()?;
/// assert_eq!(config.nodes.len(), 2);
/// assert_eq!(config.concurrency(), 8);
/// # Ok::<(), lintel_client::WorkerConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct WorkerConfigBuilder {
    nodes: Vec<String>,
    register: Register,
    name: Option<String>,
    auth_token: Option<String>,
    handshake_timeout: Option<Duration>,
    reconnect: Option<Backoff>,
    max_frame_len: Option<usize>,
    queue_len: Option<usize>,
    tls: Option<ClientTls>,
    connection_thread: ConnectionThread,
}

/// What a [`WorkerConfigBuilder`] lacks to make a worker the node would register.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerConfigError {
    /// No node address was given.
    #[error("no node address given")]
    NoNodes,
    /// No namespace was given.
    #[error("no namespace given")]
    NoNamespace,
    /// No activity type was given.
    #[error("no activity type given")]
    NoActivity,
    /// A concurrency of zero, which the node refuses.
    #[error("a concurrency of zero")]
    ZeroConcurrency,
}

impl WorkerConfig {
    /// A builder; see [`WorkerConfigBuilder`].
    pub fn builder() -> WorkerConfigBuilder {
        WorkerConfigBuilder {
            nodes: Vec::new(),
            register: Register {
                identity: "lintel-worker".to_owned(),
                max_concurrency: 1,
                ..Register::default()
            },
            name: None,
            auth_token: None,
            handshake_timeout: None,
            reconnect: None,
            max_frame_len: None,
            queue_len: None,
            tls: None,
            connection_thread: ConnectionThread::Own,
        }
    }
}

impl WorkerConfigBuilder {
    /// Adds a node address (`host:port`); a name resolving to several counts as each. At
    /// least one is required.
    pub fn node(mut self, addr: impl Into<String>) -> Self {
        self.nodes.push(addr.into());
        self
    }

    /// Adds several node addresses; the worker registers with one at a time.
    pub fn nodes<I, S>(mut self, addrs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes.extend(addrs.into_iter().map(Into::into));
        self
    }

    /// Adds a namespace it serves: the node pushes it dispatches of this namespace only. At
    /// least one is required; a duplicate is ignored.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.register.namespaces.push(namespace.into());
        self
    }

    /// Adds several namespaces; see [`namespace`](Self::namespace).
    pub fn namespaces<I, S>(mut self, namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.register
            .namespaces
            .extend(namespaces.into_iter().map(Into::into));
        self
    }

    /// Adds an activity type it runs: the node pushes it dispatches of this type only. At
    /// least one is required; a duplicate is ignored.
    pub fn activity(mut self, activity_type: impl Into<String>) -> Self {
        self.register.activity_types.push(activity_type.into());
        self
    }

    /// Adds several activity types; see [`activity`](Self::activity).
    pub fn activities<I, S>(mut self, activity_types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.register
            .activity_types
            .extend(activity_types.into_iter().map(Into::into));
        self
    }

    /// The task queue it serves within its namespaces: only dispatches naming this queue
    /// reach it. Default: empty, the `default` queue.
    pub fn task_queue(mut self, task_queue: impl Into<String>) -> Self {
        self.register.task_queue = task_queue.into();
        self
    }

    /// The placement label dispatches may pin, prefer or require
    /// ([`DispatchOptions::pin`](crate::DispatchOptions::pin) and its siblings name it),
    /// such as a zone or a machine class. Default: none: a dispatch that pins or requires a
    /// label does not reach it.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.register.node = Some(label.into());
        self
    }

    /// Its identity in the node's status and logs, and its client name unless
    /// [`name`](Self::name) sets one. Default: `lintel-worker`.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.register.identity = identity.into();
        self
    }

    /// Requests it runs at once, at most; at least 1. Default: 1. Change it while running
    /// with [`WorkerHandle::set_capacity`](crate::WorkerHandle::set_capacity).
    pub fn concurrency(mut self, max: u32) -> Self {
        self.register.max_concurrency = max;
        self
    }

    /// The deployment (version of the worker's code) it runs: dispatches that require a
    /// deployment ([`DispatchOptions::deployment`](crate::DispatchOptions::deployment)) reach
    /// only workers of that one. Needs a version-3 node; an earlier one is sent the
    /// registration without it, and a warning is logged. Default: none.
    pub fn deployment(mut self, deployment: impl Into<String>) -> Self {
        self.register.deployment = Some(deployment.into());
        self
    }

    /// Its instance id, unique per deployment on a node (a pod name, say): a worker
    /// registering the same deployment and instance id supersedes this one. Needs a version-3
    /// node, as [`deployment`](Self::deployment). Default: none.
    pub fn instance_id(mut self, instance: impl Into<String>) -> Self {
        self.register.instance_id = Some(instance.into());
        self
    }

    /// Adds a protocol extension, `tag` with `value`, to the registration (version 3). A node
    /// that does not know `tag` ignores it, unless it is `critical`: then it refuses the
    /// registration. Default: none.
    pub fn extension(mut self, tag: u32, critical: bool, value: impl Into<Bytes>) -> Self {
        self.register.extensions.push(Extension {
            tag,
            critical,
            value: value.into(),
        });
        self
    }

    /// Its client name in `Hello`, for the node's logs. Default: its
    /// [`identity`](Self::identity).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The token of a node that requires one. Default: none.
    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// Speak TLS to the nodes. Default: plaintext.
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Bounds the connect plus `Welcome`, and separately the wait for `Registered`.
    /// Default: 10 s.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = Some(timeout);
        self
    }

    /// Delays between reconnection attempts. Default: [`Backoff::default`].
    pub fn reconnect(mut self, backoff: Backoff) -> Self {
        self.reconnect = Some(backoff);
        self
    }

    /// Largest frame body this side reads or writes. Default: the wire's default frame limit.
    pub fn max_frame_len(mut self, len: usize) -> Self {
        self.max_frame_len = Some(len);
        self
    }

    /// Frames the outbound queue holds before the runtime waits for room. Default: 1024.
    pub fn queue_len(mut self, len: usize) -> Self {
        self.queue_len = Some(len);
        self
    }

    /// Where the connection runs. Default: [`ConnectionThread::Own`].
    pub fn connection_thread(mut self, thread: ConnectionThread) -> Self {
        self.connection_thread = thread;
        self
    }

    /// The config; what was not set takes the defaults each method names.
    ///
    /// # Errors
    /// A [`WorkerConfigError`] naming what is missing.
    pub fn build(self) -> Result<WorkerConfig, WorkerConfigError> {
        if self.nodes.is_empty() {
            return Err(WorkerConfigError::NoNodes);
        }
        if self.register.namespaces.is_empty() {
            return Err(WorkerConfigError::NoNamespace);
        }
        if self.register.activity_types.is_empty() {
            return Err(WorkerConfigError::NoActivity);
        }
        if self.register.max_concurrency == 0 {
            return Err(WorkerConfigError::ZeroConcurrency);
        }
        let mut config = WorkerConfig::with_nodes(self.nodes, self.register);
        if let Some(name) = self.name {
            config.name = name;
        }
        config.auth_token = self.auth_token;
        config.tls = self.tls;
        config.connection_thread = self.connection_thread;
        if let Some(timeout) = self.handshake_timeout {
            config.handshake_timeout = timeout;
        }
        if let Some(backoff) = self.reconnect {
            config.reconnect = backoff;
        }
        if let Some(len) = self.max_frame_len {
            config.max_frame_len = len;
        }
        if let Some(len) = self.queue_len {
            config.queue_len = len;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::{WorkerConfig, WorkerConfigError};

    #[test]
    fn a_builder_names_what_it_lacks_and_builds_the_registration_it_was_given() {
        let full = || {
            WorkerConfig::builder()
                .node("a:7400")
                .namespace("ns")
                .activity("act")
        };
        assert_eq!(
            WorkerConfig::builder()
                .namespace("ns")
                .activity("act")
                .build()
                .err(),
            Some(WorkerConfigError::NoNodes)
        );
        assert_eq!(
            WorkerConfig::builder()
                .node("a:7400")
                .activity("act")
                .build()
                .err(),
            Some(WorkerConfigError::NoNamespace)
        );
        assert_eq!(
            WorkerConfig::builder()
                .node("a:7400")
                .namespace("ns")
                .build()
                .err(),
            Some(WorkerConfigError::NoActivity)
        );
        assert_eq!(
            full().concurrency(0).build().err(),
            Some(WorkerConfigError::ZeroConcurrency)
        );
        let config = full()
            .label("gpu")
            .identity("w-1")
            .concurrency(4)
            .build()
            .unwrap();
        assert_eq!(config.nodes, ["a:7400"]);
        assert_eq!(config.name, "w-1");
        assert_eq!(config.label(), Some("gpu"));
        assert_eq!(config.concurrency(), 4);
    }
}
