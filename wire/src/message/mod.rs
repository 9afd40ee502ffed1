//! Frame bodies, grouped by the conversation they belong to.

mod control;
mod dispatch;
mod handshake;
mod peer;
mod registration;
mod status;

pub use control::{Cancel, Drain, Drained, ErrorCode, ErrorFrame, Goodbye, Ping, Pong};
pub use dispatch::{
    ActivityOutcome, Census, DispatchRequest, DispatchResponse, DispatchResult, NoWorkerReason,
    NodeRouting, OutcomeFrame, Push, RefusedDispatch, RefusedReason, Reply, RequestRef,
    ResponseRef, ResultRef, RoutingRef, Submit,
};
pub use handshake::{Hello, Limits, Refusal, RefusalCode, Role, Welcome, PROTOCOL_VERSION};
pub use peer::{
    ClusterStatusReport, PeerAddress, PeerHello, PeerLinkState, PeerStatus, PoolPresence, Presence,
    PresenceGroup, Relay, RelayOutcome, ServedOutcome,
};
pub use registration::{CapacityUpdate, Register, Registered};
pub use status::{
    Counters, NodeStatus, PoolStatus, StatusQuery, StatusReport, WaitingStatus, WorkerStatus,
};
