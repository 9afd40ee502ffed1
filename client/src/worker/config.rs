//! What a worker connects to, what it registers and how it retries.

use std::time::Duration;

use lintel_wire::{Register, DEFAULT_MAX_FRAME_LEN};

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

/// Where to connect, what to register and how to behave on the way.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// `host:port` of each node it may register with (a name resolving to several addresses
    /// counts as each). It registers with one; when that node drains or is lost it tries the
    /// others first, then comes back.
    pub nodes: Vec<String>,
    /// Sent after every handshake; `max_concurrency` is replaced by the latest
    /// [`WorkerHandle::set_capacity`](super::WorkerHandle::set_capacity). Its deployment and
    /// instance id need a version-3 node: an earlier one is sent the registration without
    /// them, and a warning is logged.
    pub registration: Register,
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
}

impl WorkerConfig {
    /// A config for the node at `addr` with default timeouts, backoff and limits, named after
    /// the registration identity.
    pub fn new(addr: impl Into<String>, registration: Register) -> Self {
        Self::with_nodes([addr.into()], registration)
    }

    /// As [`WorkerConfig::new`], for several nodes: it registers with one at a time.
    pub fn with_nodes<I, S>(nodes: I, registration: Register) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            nodes: nodes.into_iter().map(Into::into).collect(),
            name: registration.identity.clone(),
            registration,
            auth_token: None,
            handshake_timeout: Duration::from_secs(10),
            reconnect: Backoff::default(),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            queue_len: 1024,
            tls: None,
        }
    }
}
