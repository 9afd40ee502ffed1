//! The names a `Welcome3` or `PeerHello3` lists in `features`: what its sender implements. A
//! client must not rely on one its node does not list. From version 4 a client lists in
//! `Features` those of version 4 and later it understands, and a peer's hello says the same of
//! it: a node sends their kinds and variants only to a reader that listed them.

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
