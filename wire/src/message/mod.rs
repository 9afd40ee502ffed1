//! Frame bodies, grouped by the conversation they belong to.

mod bounded;
mod control;
mod dispatch;
mod events;
mod extras;
mod handshake;
pub(crate) mod items;
mod peer;
mod progress;
mod registration;
mod status;
mod tags;

pub use crate::feature;
pub use control::{Cancel, Drain, Drained, ErrorCode, ErrorFrame, Farewell, Goodbye, Ping, Pong};
pub use dispatch::{
    ActivityOutcome, Census, DispatchRequest, DispatchResponse, DispatchResult, NoWorkerReason,
    NodeRouting, OutcomeFrame, Push, RefusedDispatch, RefusedReason, Reply, RequestRef,
    ResponseRef, ResultRef, RoutingRef, Submit,
};
pub use events::{
    DepartureReason, Event, EventTopic, ExclusionReason, NodeEvent, Subscribe, SubscriptionEnded,
    WorkerEvent,
};
pub(crate) use extras::LentExtras;
pub use extras::{ExtrasRef, ExtrasView, HeaderLimits, RequestExtras};
pub use handshake::{
    Features, Hello, Limits, Refusal, RefusalCode, Role, Welcome, PROTOCOL_VERSION,
};
pub use items::{is_header_name, unknown_critical, Extension, ExtensionRef, Header, HeaderRef};
pub use peer::{
    ClusterStatusReport, PeerAddress, PeerHello, PeerLinkState, PeerStatus, PoolPresence,
    PoolSetting, PoolSettings, Presence, PresenceGroup, Relay, RelayAck, RelayOutcome, Resume,
    Resumed, ServedOutcome,
};
pub use progress::Progress;
pub use registration::{
    CapacityUpdate, Register, Registered, ResumeSession, Session, SessionResumed,
};
pub use status::{
    Counters, NodeStatus, PoolStatus, StatusDocument, StatusQuery, StatusReport, WaitingStatus,
    WorkerStatus,
};
pub use tags::{tag, ExtensionError, NotImplemented, MAX_HEARTBEAT_TIMEOUT_MS};
