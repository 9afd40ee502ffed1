//! Version 3: what a request carries beside its [`DispatchRequest`](super::DispatchRequest)
//! (headers, scheduling fields, a required deployment, extensions), the bounds on headers a
//! welcome states, and the names of the features a node may implement.

use serde::{Deserialize, Serialize};

use crate::ownership::{Borrowed, Owned, Ownership};

/// The fields a version-3 request carries after its `DispatchRequest`, in wire order. All
/// absent (the [`Default`]) is what a version-2 request means.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Headers: Serialize, O::Extensions: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Headers: Deserialize<'de>, O::Extensions: Deserialize<'de>"
))]
pub struct RequestExtras<O: Ownership = Owned> {
    /// In order; a name may repeat, and its values stay in order.
    pub headers: O::Headers,
    /// 1 (highest) to 5 (lowest); `None` is 3.
    pub priority: Option<u8>,
    /// The key whose share of a full pool the dispatch draws on; `None` is the shared key.
    pub fairness_key: Option<O::Str>,
    /// The key's weight in thousandths (1000 is 1.0), 1 to 1,000,000; `None` is 1000.
    pub fairness_weight: Option<u32>,
    /// Only workers registered with this deployment are eligible.
    pub deployment: Option<O::Str>,
    pub extensions: O::Extensions,
}

/// Extras read field by field where they lie, or lent field by field: what
/// [`ExtrasRef::read`] gives.
pub type ExtrasView<'a> = RequestExtras<Borrowed<'a>>;

/// A request's extras lent, in two words: as they lie in a frame (checked once when it was
/// read) or from owned extras. Read their fields with [`ExtrasRef::read`].
#[derive(Clone, Copy)]
pub struct ExtrasRef<'a>(pub(crate) LentExtras<'a>);

#[derive(Clone, Copy)]
pub(crate) enum LentExtras<'a> {
    /// Extras with a field, as postcard lays them out, read once and found well formed; no
    /// bytes at all for no extras (nearly every request).
    Wire(&'a [u8]),
    /// Owned extras with a field.
    Lent(&'a RequestExtras),
}

/// Bounds on a request's headers, sent in `Welcome3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderLimits {
    /// Most headers in one request.
    pub max_headers: u32,
    /// Most bytes of header names plus values in one request.
    pub max_header_bytes: u32,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        Self {
            max_headers: 32,
            max_header_bytes: 8192,
        }
    }
}

/// The names a `Welcome3` or `PeerHello3` lists in `features`: what its sender implements. A
/// client must not rely on one its node does not list. From version 4 a client lists in
/// `Features` those of version 4 and later it understands, and a peer's hello says the same of
/// it: a node sends their kinds and variants only to a reader that listed them.
pub mod feature {
    /// Requests carry headers to the worker, across a relay too.
    pub const HEADERS: &str = "headers";
    /// Waiters are ordered by a request's priority.
    pub const PRIORITY: &str = "priority";
    /// Capacity is shared among fairness keys by weight.
    pub const FAIRNESS: &str = "fairness";
    /// Workers register a deployment and a request may require one.
    pub const DEPLOYMENTS: &str = "deployments";
    /// `Subscribe` is answered with the node's lifecycle events.
    pub const EVENTS: &str = "events";
    /// `StatusQuery` is answered with a `StatusDocument`.
    pub const STATUS_DOCUMENT: &str = "status-document";
    /// A new worker is selected only once it has answered pings.
    pub const PROBATION: &str = "probation";
    /// A peer retiring a link says `Farewell`.
    pub const FAREWELL: &str = "farewell";
    /// Relays survive a link's replacement (`RelayAck`, `Resume`, `Resumed`).
    pub const RELAY_RESUME: &str = "relay-resume";
    /// A pool's current deployment is shared across the mesh (`PoolSettings`).
    pub const POOL_SETTINGS: &str = "pool-settings";
    /// Version 4. A node: it ends a dispatch whose worker sends no `Progress` within the
    /// request's heartbeat timeout. A reader: it reads `DispatchResult::HeartbeatTimeout` (a
    /// producer, a peer) or may be pushed requests with a heartbeat timeout (a worker).
    pub const HEARTBEAT_TIMEOUT: &str = "heartbeat-timeout";
    /// Version 4. A node: it reads workers' `Progress` and passes it to producers that asked.
    /// A reader: it may be sent `Progress`.
    pub const PROGRESS: &str = "progress";
    /// Version 4, listed by a client: it reads `RefusedReason::RoleNotGranted`.
    pub const ROLE_NOT_GRANTED: &str = "role-not-granted";
    /// Version 4. A node: it gives workers sessions a reconnect resumes. A worker: it may be
    /// sent `Session` after `Registered`.
    pub const WORKER_RESUME: &str = "worker-resume";

    /// Every feature name of version 3.
    pub const ALL: [&str; 10] = [
        HEADERS,
        PRIORITY,
        FAIRNESS,
        DEPLOYMENTS,
        EVENTS,
        STATUS_DOCUMENT,
        PROBATION,
        FAREWELL,
        RELAY_RESUME,
        POOL_SETTINGS,
    ];

    /// Every feature name of version 4: what a client may list in `Features`.
    pub const SINCE_4: [&str; 4] = [HEARTBEAT_TIMEOUT, ROLE_NOT_GRANTED, PROGRESS, WORKER_RESUME];
}
