//! Frame bodies, grouped by the conversation they belong to.

mod control;
mod dispatch;
mod events;
mod extras;
mod handshake;
pub(crate) mod items;
mod peer;
mod registration;
mod status;

pub use control::{Cancel, Drain, Drained, ErrorCode, ErrorFrame, Farewell, Goodbye, Ping, Pong};
pub use dispatch::{
    ActivityOutcome, Census, Census3, DispatchRequest, DispatchResponse, DispatchResult,
    NoWorkerReason, NodeRouting, OutcomeFrame, Push, Push3, Push3Ref, RefusedDispatch,
    RefusedReason, Reply, RequestRef, ResponseRef, ResultRef, RoutingRef, Submit, Submit3,
    Submit3Ref,
};
pub use events::{
    DepartureReason, Event, EventTopic, ExclusionReason, NodeEvent, Subscribe, SubscriptionEnded,
    WorkerEvent,
};
pub use extras::{feature, ExtrasRef, HeaderLimits, RequestExtras};
pub use handshake::{
    Hello, Limits, Refusal, RefusalCode, Role, Welcome, Welcome3, PROTOCOL_VERSION,
};
pub use items::{is_header_name, unknown_critical, Extension, ExtensionRef, Header, HeaderRef};
pub use peer::{
    ClusterStatusReport, PeerAddress, PeerHello, PeerHello3, PeerLinkState, PeerStatus,
    PoolPresence, PoolPresence3, PoolSetting, PoolSettings, Presence, Presence3, PresenceGroup,
    PresenceGroup3, Relay, Relay3, Relay3Ref, RelayAck, RelayOutcome, Resume, Resumed,
    ServedOutcome,
};
pub use registration::{CapacityUpdate, Register, Register3, Registered};
pub use status::{
    Counters, NodeStatus, PoolStatus, StatusDocument, StatusQuery, StatusReport, WaitingStatus,
    WorkerStatus,
};
