//! The node's settings, every one with a working default, and their checks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::auth::{self, Authenticator, FairnessKeySource, GrantConfig};
use crate::dispatch::{DispatchLimits, Placement, DEFAULT_REPLY_TIMEOUT, MAX_TIMEOUT};
use crate::registry::fairness::{KeyPolicy, PolicyError, DEFAULT_AGING};
use crate::registry::{AdmissionLimits, FairnessPolicy};
use crate::tls::{NodeTls, TlsFiles, TlsSetupError};
use lintel_transport::resolve::is_host_port;
use lintel_transport::QueueLimits;

/// A lost worker's session waits this long for its resume: a reset to `SessionResumed` on
/// loopback takes about 1 ms, and the SDK's first six redials (100 ms doubling) about 6.3 s at
/// most, leaving ~3.7 s for noticing the loss and the handshake; its slots stay held meanwhile.
const DEFAULT_WORKER_RESUME_GRACE_MS: u64 = 10_000;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid setting {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
    #[error("invalid grants: {0}")]
    Grants(#[from] auth::GrantError),
    #[error("invalid fairness: {0}")]
    Fairness(#[from] PolicyError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsSetupError),
}

/// The default byte budget of a connection's outbound queue. With it, a producer holds at most
/// 8 MiB of inputs in flight plus 32 MiB of owed outcomes, and a worker 8 MiB of pushes, so the
/// node's memory grows with connections that stop reading by tens of MiB each, not by GiB.
pub(crate) const DEFAULT_OUTBOUND_QUEUE_BYTES: usize = 8 * 1024 * 1024;

/// A producer's owed outcomes may reach this many times `outbound_queue_bytes` before it is
/// closed as a slow consumer at once, without waiting out the grace.
pub(crate) const OWED_CEILING_FACTOR: usize = 4;

/// The default bound on kept relay outcomes: acknowledged about every 128 outcomes and every
/// peer ping, a link keeps far less; a cut link's outcomes fit in it by the thousand.
pub(crate) const DEFAULT_RELAY_RETENTION_BYTES: usize = 16 * 1024 * 1024;

/// How often a peer name is resolved again by default: the TTL cluster DNS (CoreDNS) gives a
/// Kubernetes service's records, so a pod that appears is dialled within about that long, for
/// one lookup per name each time.
pub(crate) const DEFAULT_PEER_RESOLVE_INTERVAL_MS: u64 = 5_000;

/// Everything a node needs to run. Every field has a working default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Address the listener binds.
    pub listen: SocketAddr,
    /// The node's name in welcomes and status; empty means `lintel-<port>`.
    pub node_id: String,
    /// Listen backlog.
    pub backlog: u32,
    /// Most connections at once; more are refused with `TooManyConnections`.
    pub max_connections: usize,
    /// A connection must say hello within this many milliseconds.
    pub handshake_timeout_ms: u64,
    /// After the handshake, a frame must arrive whole within this many milliseconds of its
    /// first byte; a slower one closes the connection with `Error{FrameTimeout}`.
    pub frame_timeout_ms: u64,
    /// The node pings each worker this often.
    pub ping_interval_ms: u64,
    /// Consecutive unanswered pings before a worker's connection is closed.
    pub max_missed_pings: u32,
    /// Pings a newly registered worker must answer before it is selected; the first goes out
    /// at once. 0 selects it as soon as it registers.
    pub worker_probation_pings: u32,
    /// A worker whose ping has waited this long for its answer is unreachable: excluded from
    /// selection, keeping what it runs, until it answers one.
    pub worker_ping_timeout_ms: u64,
    /// Reply timeout for dispatches that state none.
    pub reply_timeout_ms: u64,
    /// On shutdown, how long in-flight dispatches may take before connections close.
    pub drain_timeout_ms: u64,
    /// How long a push that ended without its reply (timed out, cancelled) keeps its worker
    /// slot while the worker may still run it; a late reply frees it sooner.
    pub late_reply_grace_ms: u64,
    /// How long a lost worker connection's session keeps its pushes (slots held, out of
    /// selection) for the worker to resume it; 0 gives workers no sessions.
    pub worker_resume_grace_ms: u64,
    /// Most worker sessions kept for a resume at once; a connection lost beyond it ends its
    /// pushes `worker-lost` at once.
    pub worker_resume_max_sessions: usize,
    /// Most pushes one kept session holds; a connection lost holding more ends them
    /// `worker-lost` at once.
    pub worker_resume_max_pushes: usize,
    /// Frames queued per connection before pushes to it see back-pressure; a producer whose
    /// queue is this full is read no further until it drains.
    pub outbound_queue: usize,
    /// Largest frame body accepted or sent.
    pub max_frame_len: usize,
    /// Most submissions a producer connection may have in flight.
    pub max_in_flight_per_producer: u32,
    /// Most dispatches the node runs at once, across every producer and in-process caller.
    pub max_active_dispatches: usize,
    /// Longest name in a registration or request.
    pub max_name_len: usize,
    /// Most namespaces or activity types in a registration.
    pub max_set_len: usize,
    /// Most headers in one request (stated in a version-3 welcome).
    pub max_headers: u32,
    /// Most bytes of header names and values in one request (stated in a version-3 welcome).
    pub max_header_bytes: u32,
    /// The highest protocol version the node speaks, 2 to 4: a node kept lower links with
    /// peers of that version as one of them, while a mesh is upgraded.
    pub max_protocol_version: u16,
    /// When set, every hello must carry this token (or one of `grants`); it grants every role
    /// and namespace.
    pub auth_token: Option<String>,
    /// Tokens granting some roles and namespaces each; when any is set, hellos need a token.
    pub grants: Vec<GrantConfig>,
    /// Runtime threads for `lintel serve`: 1 is one thread, N > 1 a pool of N, 0 the default (1).
    pub threads: usize,
    /// Other nodes to link with, as `host:port`; one member is enough to join the whole mesh.
    /// A name is dialled at every address it resolves to.
    pub peers: Vec<String>,
    /// How often a `peers` name is resolved again: addresses it gained are dialled, and those
    /// it lost no longer (a live link stays).
    pub peer_resolve_interval_ms: u64,
    /// When set, peers must present it (instead of `auth_token`) to link.
    pub cluster_secret: Option<String>,
    /// Where peers dial this node; empty means the listen address.
    pub advertise: String,
    /// How a dispatch weighs this node's workers against its peers': `local-first` or
    /// `weighted`.
    pub placement: Placement,
    /// The node pings each peer this often; `max_missed_pings` unanswered close the link.
    pub peer_ping_interval_ms: u64,
    /// Address of the admin HTTP listener (`/metrics`, `/health`, `/ready`, `/status`); off
    /// when unset.
    pub admin_listen: Option<SocketAddr>,
    /// When set, every admin request but `/health` must carry `Authorization: Bearer` with it.
    pub admin_token: Option<String>,
    /// Pools `/metrics` labels by channel name: the first this many named by a registration or
    /// an admitted dispatch; later pools are summed under `pool="other"`.
    pub metrics_max_pools: usize,
    /// PEM certificate chain the listener presents; with `tls_key`, every connection speaks
    /// TLS and peers are dialled over TLS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates client certificates must chain to; when set, every connection must
    /// present one (mutual TLS), and its identity may hold a grant.
    pub tls_client_ca: Option<PathBuf>,
    /// PEM CA certificates a peer's certificate must chain to when this node dials it;
    /// default `tls_client_ca`.
    pub tls_ca: Option<PathBuf>,
    /// Bytes queued per connection, beside `outbound_queue` frames, before pushes to it see
    /// back-pressure, a producer is read no further and a peer is skipped for placement.
    pub outbound_queue_bytes: usize,
    /// How long a producer's queue may stay at its bound before the producer is closed with
    /// `Error{SlowConsumer}`.
    pub slow_consumer_grace_ms: u64,
    /// How often the node reads its TLS files again, taking them up when they changed; 0 reads
    /// them only on `Node::reload_tls` (SIGHUP for `lintel serve`).
    pub tls_poll_ms: u64,
    /// Where a peer's admin console is, for the console's links: an `http://` or `https://`
    /// URL in which `{host}` stands for the host of the peer's address and `{node_id}` for its
    /// id; empty links none.
    pub peer_console: String,
    /// Where a producer's dispatches take their fairness key from: `grant` (the producer's
    /// grant; the request's key when it holds none) or `request`.
    pub fairness_key_source: FairnessKeySource,
    /// A waiting dispatch ranks as if it had arrived this many milliseconds later for each
    /// priority step below 1, so a lower priority that waited that much longer goes first;
    /// 0 is strict priority.
    pub priority_aging_ms: u64,
    /// Bytes of relay outcomes this node keeps, across every peer, until the peer that
    /// relayed says it holds them; past it each peer's oldest are dropped (and counted).
    pub relay_retention_bytes: usize,
    /// How long relays over a cut peer link wait for a new link to the same peer process to
    /// resume them before they end `PeerLost` (and the peer cancels what it ran for them);
    /// 0 ends them at once.
    pub peer_relink_grace_ms: u64,
    /// Per fairness key: a cap on its dispatches running on this node's workers
    /// (`max_in_flight`) and a weight that replaces the one its requests ask for.
    pub fairness: Vec<KeyPolicy>,
    /// Per pool: its current deployment, required of a dispatch that names none. An admin
    /// call (`POST /pools`) on any node of the mesh overrides it.
    pub pools: Vec<PoolConfig>,
}

/// One `[[pools]]` entry of the node's config: a pool and its current deployment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub namespace: String,
    /// Empty is `default`.
    #[serde(default)]
    pub task_queue: String,
    pub deployment: String,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7400)),
            node_id: String::new(),
            backlog: 1024,
            max_connections: 16_384,
            handshake_timeout_ms: 5_000,
            frame_timeout_ms: 30_000,
            ping_interval_ms: 5_000,
            max_missed_pings: 3,
            worker_probation_pings: 1,
            worker_ping_timeout_ms: 1_000,
            reply_timeout_ms: u64::try_from(DEFAULT_REPLY_TIMEOUT.as_millis()).unwrap_or(30_000),
            drain_timeout_ms: 10_000,
            late_reply_grace_ms: 60_000,
            worker_resume_grace_ms: DEFAULT_WORKER_RESUME_GRACE_MS,
            worker_resume_max_sessions: 1_024,
            worker_resume_max_pushes: lintel_wire::ResumeSession::MAX_HOLDING,
            outbound_queue: 1_024,
            max_frame_len: lintel_wire::DEFAULT_MAX_FRAME_LEN,
            max_in_flight_per_producer: 4_096,
            max_active_dispatches: 262_144,
            max_name_len: 256,
            max_set_len: 64,
            max_headers: lintel_wire::HeaderLimits::default().max_headers,
            max_header_bytes: lintel_wire::HeaderLimits::default().max_header_bytes,
            max_protocol_version: lintel_wire::PROTOCOL_VERSION,
            auth_token: None,
            grants: Vec::new(),
            threads: 0,
            peers: Vec::new(),
            peer_resolve_interval_ms: DEFAULT_PEER_RESOLVE_INTERVAL_MS,
            cluster_secret: None,
            advertise: String::new(),
            placement: Placement::LocalFirst,
            peer_ping_interval_ms: 1_000,
            admin_listen: None,
            admin_token: None,
            metrics_max_pools: crate::pool_metrics::DEFAULT_MAX_POOLS,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            tls_ca: None,
            outbound_queue_bytes: DEFAULT_OUTBOUND_QUEUE_BYTES,
            slow_consumer_grace_ms: 10_000,
            tls_poll_ms: 5_000,
            peer_console: String::new(),
            fairness_key_source: FairnessKeySource::Grant,
            priority_aging_ms: u64::try_from(DEFAULT_AGING.as_millis()).unwrap_or(10_000),
            relay_retention_bytes: DEFAULT_RELAY_RETENTION_BYTES,
            peer_relink_grace_ms: 1_000,
            fairness: Vec::new(),
            pools: Vec::new(),
        }
    }
}

impl NodeConfig {
    /// Checks settings that would make the node unusable.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max_connections", self.max_connections as u64),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("frame_timeout_ms", self.frame_timeout_ms),
            ("ping_interval_ms", self.ping_interval_ms),
            ("max_missed_pings", u64::from(self.max_missed_pings)),
            ("worker_ping_timeout_ms", self.worker_ping_timeout_ms),
            ("outbound_queue", self.outbound_queue as u64),
            (
                "max_in_flight_per_producer",
                u64::from(self.max_in_flight_per_producer),
            ),
            ("max_active_dispatches", self.max_active_dispatches as u64),
            ("max_name_len", self.max_name_len as u64),
            ("max_set_len", self.max_set_len as u64),
            ("late_reply_grace_ms", self.late_reply_grace_ms),
            ("reply_timeout_ms", self.reply_timeout_ms),
            ("peer_ping_interval_ms", self.peer_ping_interval_ms),
            ("peer_resolve_interval_ms", self.peer_resolve_interval_ms),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    name,
                    reason: "must be at least 1".into(),
                });
            }
        }
        for (name, value) in [
            ("reply_timeout_ms", self.reply_timeout_ms),
            ("worker_ping_timeout_ms", self.worker_ping_timeout_ms),
        ] {
            if Duration::from_millis(value) > MAX_TIMEOUT {
                return Err(ConfigError::Invalid {
                    name,
                    reason: format!("must be at most {} ms", MAX_TIMEOUT.as_millis()),
                });
            }
        }
        auth::validate(&self.grants)?;
        self.fairness_policy().validate(self.max_name_len)?;
        if let Some(index) = self.grants.iter().position(|grant| {
            grant
                .fairness_key
                .as_ref()
                .is_some_and(|key| key.len() > self.max_name_len)
        }) {
            return Err(ConfigError::Invalid {
                name: "grants",
                reason: format!(
                    "grant {index}: the fairness key is longer than max_name_len ({} bytes)",
                    self.max_name_len
                ),
            });
        }
        for (name, value) in [
            ("priority_aging_ms", self.priority_aging_ms),
            ("peer_relink_grace_ms", self.peer_relink_grace_ms),
            ("peer_resolve_interval_ms", self.peer_resolve_interval_ms),
        ] {
            if Duration::from_millis(value) > MAX_TIMEOUT {
                return Err(ConfigError::Invalid {
                    name,
                    reason: format!("must be at most {} ms", MAX_TIMEOUT.as_millis()),
                });
            }
        }
        if self.metrics_max_pools > crate::pool_metrics::MAX_POOLS {
            return Err(ConfigError::Invalid {
                name: "metrics_max_pools",
                reason: format!("must be at most {}", crate::pool_metrics::MAX_POOLS),
            });
        }
        self.validate_tls()?;
        self.validate_pools()?;
        self.validate_peers()?;
        for (name, value) in [
            ("outbound_queue_bytes", self.outbound_queue_bytes as u64),
            ("slow_consumer_grace_ms", self.slow_consumer_grace_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    name,
                    reason: "must be at least 1".into(),
                });
            }
        }
        if !self.peer_console.is_empty()
            && !["http://", "https://"]
                .iter()
                .any(|scheme| self.peer_console.starts_with(scheme))
        {
            return Err(ConfigError::Invalid {
                name: "peer_console",
                reason: "must be an http:// or https:// URL, such as http://{host}:9400/".into(),
            });
        }
        if !(2..=lintel_wire::PROTOCOL_VERSION).contains(&self.max_protocol_version) {
            return Err(ConfigError::Invalid {
                name: "max_protocol_version",
                reason: format!("must be 2 to {}", lintel_wire::PROTOCOL_VERSION),
            });
        }
        if self.max_frame_len < 64 * 1024 || u32::try_from(self.max_frame_len).is_err() {
            return Err(ConfigError::Invalid {
                name: "max_frame_len",
                reason: "must be between 64 KiB and 4 GiB".into(),
            });
        }
        Ok(())
    }

    /// Each pool named once, its deployment a name within `max_name_len`, and no more pools
    /// than a node holds settings for.
    fn validate_pools(&self) -> Result<(), ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid {
            name: "pools",
            reason,
        };
        if self.pools.len() > crate::cluster::MAX_SETTINGS {
            return Err(invalid(format!(
                "more than {} pools",
                crate::cluster::MAX_SETTINGS
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for (index, pool) in self.pools.iter().enumerate() {
            let deployment = &pool.deployment;
            if deployment.is_empty() || deployment.len() > self.max_name_len {
                return Err(invalid(format!(
                    "pool {index}: the deployment must be 1 to max_name_len ({}) bytes",
                    self.max_name_len
                )));
            }
            let task_queue = crate::registry::normalize_task_queue(&pool.task_queue);
            if !seen.insert((pool.namespace.as_str(), task_queue)) {
                return Err(invalid(format!(
                    "pool {index}: {}/{task_queue} is named twice",
                    pool.namespace
                )));
            }
        }
        Ok(())
    }

    /// Each peer `host:port`, and no more than a node keeps join points for.
    fn validate_peers(&self) -> Result<(), ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid {
            name: "peers",
            reason,
        };
        if self.peers.len() > crate::cluster::MAX_MEMBERS {
            return Err(invalid(format!(
                "more than {} peers",
                crate::cluster::MAX_MEMBERS
            )));
        }
        match self.peers.iter().find(|peer| !is_host_port(peer)) {
            Some(peer) => Err(invalid(format!(
                "{peer:?} is not host:port (an address or a name, and a port)"
            ))),
            None => Ok(()),
        }
    }

    /// TLS needs a certificate and its key together, and CAs only mean something with them.
    fn validate_tls(&self) -> Result<(), ConfigError> {
        let invalid = |name: &'static str, reason: &str| {
            Err(ConfigError::Invalid {
                name,
                reason: reason.to_owned(),
            })
        };
        let without_cert = "the node's CAs apply only with its own certificate: set tls_cert and \
                            tls_key too";
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => invalid("tls_cert", "needs tls_key, the certificate's private key"),
            (None, Some(_)) => invalid(
                "tls_key",
                "needs tls_cert, the certificate it is the key of",
            ),
            (None, None) if self.tls_client_ca.is_some() => invalid("tls_client_ca", without_cert),
            (None, None) if self.tls_ca.is_some() => invalid("tls_ca", without_cert),
            (Some(_), Some(_))
                if !self.peers.is_empty()
                    && self.tls_ca.is_none()
                    && self.tls_client_ca.is_none() =>
            {
                invalid(
                    "tls_ca",
                    "peers are dialled over TLS: name the CA their certificates chain to",
                )
            }
            _ => Ok(()),
        }
    }

    /// The node's TLS, loaded from the files the config names; off without `tls_cert`.
    ///
    /// # Errors
    /// [`ConfigError::Tls`] naming a file that cannot be read or used.
    pub fn load_tls(&self) -> Result<NodeTls, ConfigError> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(NodeTls::default());
        };
        Ok(NodeTls::load(TlsFiles {
            cert,
            key,
            client_ca: self.tls_client_ca.as_deref(),
            peer_ca: self.tls_ca.as_deref(),
        })?)
    }

    /// True when the listener speaks TLS.
    pub fn tls_enabled(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }

    /// The node id, or `lintel-<port>` when none was set.
    pub fn effective_node_id(&self, port: u16) -> String {
        if self.node_id.is_empty() {
            format!("lintel-{port}")
        } else {
            self.node_id.clone()
        }
    }

    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    pub fn frame_timeout(&self) -> Duration {
        Duration::from_millis(self.frame_timeout_ms)
    }

    pub fn ping_interval(&self) -> Duration {
        Duration::from_millis(self.ping_interval_ms)
    }

    pub fn worker_ping_timeout(&self) -> Duration {
        Duration::from_millis(self.worker_ping_timeout_ms)
    }

    pub fn peer_relink_grace(&self) -> Duration {
        Duration::from_millis(self.peer_relink_grace_ms)
    }

    pub fn peer_resolve_interval(&self) -> Duration {
        Duration::from_millis(self.peer_resolve_interval_ms)
    }

    pub fn peer_ping_interval(&self) -> Duration {
        Duration::from_millis(self.peer_ping_interval_ms)
    }

    /// Where peers dial this node, given the address its listener bound.
    pub fn effective_advertise(&self, bound: SocketAddr) -> String {
        if self.advertise.is_empty() {
            bound.to_string()
        } else {
            self.advertise.clone()
        }
    }

    pub fn drain_timeout(&self) -> Duration {
        Duration::from_millis(self.drain_timeout_ms)
    }

    pub fn worker_resume_grace(&self) -> Duration {
        Duration::from_millis(self.worker_resume_grace_ms)
    }

    pub fn late_reply_grace(&self) -> Duration {
        Duration::from_millis(self.late_reply_grace_ms)
    }

    /// How often the TLS files are read again; `None` when only on request.
    pub fn tls_poll(&self) -> Option<Duration> {
        (self.tls_poll_ms > 0).then(|| Duration::from_millis(self.tls_poll_ms))
    }

    /// The URL of the console of the peer `node_id` dialled at `address`, when `peer_console`
    /// is set and the values it takes are plain URL characters.
    pub fn peer_console_url(&self, node_id: &str, address: &str) -> Option<String> {
        if self.peer_console.is_empty() || node_id.is_empty() {
            return None;
        }
        let host = lintel_client::tls::host_of(address);
        let plain = |text: &str| {
            !text.is_empty()
                && text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~:[]".contains(&b))
        };
        (plain(node_id) && plain(host)).then(|| {
            self.peer_console
                .replace("{host}", host)
                .replace("{node_id}", node_id)
        })
    }

    pub fn slow_consumer_grace(&self) -> Duration {
        Duration::from_millis(self.slow_consumer_grace_ms)
    }

    /// A connection's outbound queue bounds; owed frames are never refused (`owed_ceiling`
    /// unbounded), as a worker's and a peer's are bounded elsewhere.
    pub fn queue_limits(&self) -> QueueLimits {
        QueueLimits {
            frames: self.outbound_queue,
            bytes: self.outbound_queue_bytes,
            owed_ceiling: usize::MAX,
        }
    }

    /// A producer's outbound queue bounds: owed outcomes stop at a ceiling, past which the
    /// producer is closed as a slow consumer.
    pub fn producer_queue_limits(&self) -> QueueLimits {
        QueueLimits {
            owed_ceiling: self
                .outbound_queue_bytes
                .saturating_mul(OWED_CEILING_FACTOR),
            ..self.queue_limits()
        }
    }

    /// Who may connect, and to do what.
    pub fn authenticator(&self) -> Authenticator<'_> {
        Authenticator {
            auth_token: self.auth_token.as_deref(),
            cluster_secret: self.cluster_secret.as_deref(),
            grants: &self.grants,
            fairness_key_source: self.fairness_key_source,
        }
    }

    /// How full pools are shared: priority aging and the `[[fairness]]` entries.
    pub fn fairness_policy(&self) -> FairnessPolicy {
        FairnessPolicy {
            aging: Duration::from_millis(self.priority_aging_ms),
            keys: self.fairness.clone(),
        }
    }

    /// The registry's admission limits.
    pub fn admission_limits(&self) -> AdmissionLimits {
        AdmissionLimits {
            max_name_len: self.max_name_len,
            max_set_len: self.max_set_len,
        }
    }

    /// The dispatcher's limits.
    pub fn dispatch_limits(&self) -> DispatchLimits {
        DispatchLimits {
            default_reply_timeout: Duration::from_millis(self.reply_timeout_ms),
            max_name_len: self.max_name_len,
            max_set_len: self.max_set_len,
            max_frame_len: self.max_frame_len,
            max_active: self.max_active_dispatches,
            max_headers: self.max_headers as usize,
            max_header_bytes: self.max_header_bytes as usize,
        }
    }

    /// The bounds on a request's headers announced in a version-3 welcome.
    pub fn header_limits(&self) -> lintel_wire::HeaderLimits {
        lintel_wire::HeaderLimits {
            max_headers: self.max_headers,
            max_header_bytes: self.max_header_bytes,
        }
    }

    /// The limits announced in every welcome.
    pub fn wire_limits(&self) -> lintel_wire::Limits {
        lintel_wire::Limits {
            max_frame_len: u32::try_from(self.max_frame_len).unwrap_or(u32::MAX),
            max_in_flight: self.max_in_flight_per_producer,
            ping_interval_ms: self.ping_interval_ms,
            max_missed_pings: self.max_missed_pings,
            max_name_len: u32::try_from(self.max_name_len).unwrap_or(u32::MAX),
            max_set_len: u32::try_from(self.max_set_len).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_valid() {
        assert!(NodeConfig::default().validate().is_ok());
    }

    #[test]
    fn a_partial_file_keeps_the_other_defaults() {
        let config: NodeConfig =
            toml::from_str("listen = \"127.0.0.1:9000\"\nmax_missed_pings = 5\n").unwrap();
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.max_missed_pings, 5);
        assert_eq!(config.backlog, NodeConfig::default().backlog);
    }

    #[test]
    fn grants_are_read_from_the_file_and_validated() {
        let config: NodeConfig = toml::from_str(
            "[[grants]]\ntoken = \"t\"\nroles = [\"worker\"]\nnamespaces = [\"billing\", \"team-*\"]\n",
        )
        .unwrap();
        assert_eq!(config.grants.len(), 1);
        assert!(config.validate().is_ok());
        let empty: NodeConfig =
            toml::from_str("[[grants]]\ntoken = \"t\"\nroles = []\nnamespaces = [\"a\"]\n")
                .unwrap();
        assert!(matches!(empty.validate(), Err(ConfigError::Grants(_))));
    }

    #[test]
    fn a_tls_certificate_needs_its_key_and_cas_need_both() {
        for (toml, name) in [
            ("tls_cert = \"c.pem\"", "tls_cert"),
            ("tls_key = \"k.pem\"", "tls_key"),
            ("tls_client_ca = \"ca.pem\"", "tls_client_ca"),
            ("tls_ca = \"ca.pem\"", "tls_ca"),
        ] {
            let config: NodeConfig = toml::from_str(toml).unwrap();
            assert!(
                matches!(config.validate(), Err(ConfigError::Invalid { name: n, .. }) if n == name),
                "{toml}"
            );
        }
        let config: NodeConfig =
            toml::from_str("tls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n").unwrap();
        assert!(config.validate().is_ok() && config.tls_enabled());
    }

    #[test]
    fn a_peer_console_url_takes_the_peer_host_and_id() {
        let config = NodeConfig {
            peer_console: "http://{host}:9400/#{node_id}".into(),
            ..NodeConfig::default()
        };
        assert!(config.validate().is_ok());
        assert_eq!(
            config.peer_console_url("b", "10.0.0.2:7400").as_deref(),
            Some("http://10.0.0.2:9400/#b")
        );
        assert_eq!(config.peer_console_url("<b>", "10.0.0.2:7400"), None);
        assert_eq!(NodeConfig::default().peer_console_url("b", "h:1"), None);
        let script = NodeConfig {
            peer_console: "javascript:alert(1)".into(),
            ..NodeConfig::default()
        };
        assert!(matches!(
            script.validate(),
            Err(ConfigError::Invalid {
                name: "peer_console",
                ..
            })
        ));
    }

    #[test]
    fn peers_are_host_port_and_resolved_again_at_a_positive_interval() {
        for (toml, name) in [
            ("peers = [\"node-b\"]", "peers"),
            ("peers = [\"node-b:port\"]", "peers"),
            ("peer_resolve_interval_ms = 0", "peer_resolve_interval_ms"),
            (
                "peer_resolve_interval_ms = 999999999999",
                "peer_resolve_interval_ms",
            ),
        ] {
            let config: NodeConfig = toml::from_str(toml).unwrap();
            assert!(
                matches!(config.validate(), Err(ConfigError::Invalid { name: n, .. }) if n == name),
                "{toml}"
            );
        }
        let config: NodeConfig = toml::from_str(
            "peers = [\"lintel-peers.default.svc:7400\", \"10.0.0.2:7400\", \"[::1]:7400\"]",
        )
        .unwrap();
        assert!(config.validate().is_ok());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<NodeConfig>("listn = \"x\"").is_err());
    }
}
