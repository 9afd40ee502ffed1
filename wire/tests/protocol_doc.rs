//! Keeps `PROTOCOL.md` true. Its hex dumps, byte breakdowns, varint and channel examples
//! are generated here; its frame, struct and enum tables are compared with the serde shape
//! and postcard indices of the real types; its decoding rules are exercised.
//!
//! Generated blocks sit between `<!-- hex:NAME -->` (or `bytes:`, `text:`) and
//! `<!-- /hex:NAME -->` markers, each holding one fenced `text` block. On a mismatch the
//! test prints the expected block. To rewrite every generated block in place:
//!
//! ```text
//! UPDATE_PROTOCOL_DOC=1 cargo test -p lintel-wire --test protocol_doc
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use lintel_wire::channel::dispatch_channel_name;
use lintel_wire::{
    body, decode_body, decode_frame, encode_frame, feature, ActivityOutcome, Cancel,
    CapacityUpdate, Census, ClusterStatusReport, Counters, DecodeError, DepartureReason, Dialect,
    DispatchRequest, DispatchResponse, DispatchResult, Drain, Drained, ErrorCode, ErrorFrame,
    Event, EventTopic, ExclusionReason, Extension, Farewell, FeatureSet, Features, Frame,
    FrameKind, Goodbye, Header, HeaderLimits, Hello, Limits, NoWorkerReason, NodeEvent,
    NodeRouting, NodeStatus, OutcomeFrame, PeerAddress, PeerHello, PeerLinkState, PeerStatus, Ping,
    Pong, PoolPresence, PoolSetting, PoolSettings, PoolStatus, Presence, PresenceGroup, Progress,
    Push, Refusal, RefusalCode, RefusedDispatch, RefusedReason, Register, Registered, Relay,
    RelayAck, RelayOutcome, Reply, RequestExtras, Resume, ResumeSession, Resumed, Role,
    ServedOutcome, Session, SessionResumed, StatusDocument, StatusQuery, StatusReport, Submit,
    Subscribe, SubscriptionEnded, WaitingStatus, Welcome, WorkerEvent, WorkerStatus,
    DEFAULT_MAX_FRAME_LEN, PROTOCOL_VERSION,
};

mod reference;

/// Bytes per line of a hex dump.
const HEX_LINE_BYTES: usize = 16;
/// Bytes per line of a breakdown's byte column.
const BREAKDOWN_LINE_BYTES: usize = 8;
const UPDATE_ENV: &str = "UPDATE_PROTOCOL_DOC";
/// Kinds of generated block; a marker of another kind is not checked by this file.
const BLOCK_KINDS: [&str; 3] = ["hex", "bytes", "text"];

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("PROTOCOL.md")
}

fn read_doc() -> String {
    let path = doc_path();
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

// ---------------------------------------------------------------------------------------
// Example frames
// ---------------------------------------------------------------------------------------

fn hello() -> Frame {
    Frame::Hello(Hello {
        min_version: 1,
        max_version: 1,
        role: Role::Worker,
        name: "gpu-worker".to_owned(),
        auth_token: Some("s3cret".to_owned()),
    })
}

fn welcome() -> Frame {
    Frame::from(Welcome {
        version: 1,
        node_id: "node-a".to_owned(),
        pid: 7,
        limits: Limits {
            max_frame_len: 4_194_304,
            max_in_flight: 1024,
            ping_interval_ms: 10_000,
            max_missed_pings: 3,
            max_name_len: 255,
            max_set_len: 64,
        },
        header_limits: None,
        features: Vec::new(),
    })
}

fn hello_refused() -> Frame {
    Frame::HelloRefused(Refusal {
        code: RefusalCode::VersionMismatch,
        reason: "need 2..3".to_owned(),
    })
}

fn register() -> Frame {
    Frame::from(Register {
        namespaces: vec!["remote".to_owned()],
        task_queue: "gpu".to_owned(),
        node: Some("box-7".to_owned()),
        activity_types: vec!["render".to_owned(), "encode".to_owned()],
        identity: "w1".to_owned(),
        max_concurrency: 300,
        deployment: None,
        instance_id: None,
        extensions: Vec::new(),
    })
}

fn registered() -> Frame {
    Frame::Registered(Registered { worker_id: 42 })
}

fn request() -> DispatchRequest {
    DispatchRequest {
        namespace: "remote".to_owned(),
        task_queue: "gpu".to_owned(),
        activity_type: "render".to_owned(),
        node: None,
        workflow_id: "wf-1".to_owned(),
        ordinal: 3,
        run_id: Some("r1".to_owned()),
        attempt: 1,
        input: Bytes::from_static(&[0x01, 0x02, 0x03]),
        deadline_unix_ms: Some(1_700_000_000_000),
    }
}

fn response() -> DispatchResponse {
    DispatchResponse {
        workflow_id: "wf-1".to_owned(),
        ordinal: 3,
        run_id: Some("r1".to_owned()),
        outcome: ActivityOutcome::Success(Bytes::from_static(b"ok")),
    }
}

fn push() -> Frame {
    Frame::from(Push {
        correlation: 1000,
        request: request(),
        extras: RequestExtras::default(),
    })
}

fn reply() -> Frame {
    Frame::Reply(Reply {
        correlation: 1000,
        response: response(),
    })
}

fn submit() -> Frame {
    Frame::from(Submit {
        correlation: 5,
        request: request(),
        extras: RequestExtras::default(),
        wait_for_worker_ms: Some(2000),
        reply_timeout_ms: None,
        routing: NodeRouting::Prefer(vec!["box-7".to_owned(), "box-9".to_owned()]),
    })
}

fn outcome() -> Frame {
    Frame::Outcome(OutcomeFrame {
        correlation: 5,
        result: DispatchResult::Completed(response()),
    })
}

fn outcome_no_worker() -> Frame {
    Frame::Outcome(OutcomeFrame {
        correlation: 6,
        result: DispatchResult::NoWorker(Census {
            reason: NoWorkerReason::AllAtCapacity,
            pool_workers: 3,
            serving_activity: 2,
            compatible_workers: 1,
            deployment_workers: 1,
            at_capacity: 1,
            draining: 0,
            probation: None,
            unreachable: None,
            last_departure_ms_ago: None,
        }),
    })
}

fn error() -> Frame {
    Frame::Error(ErrorFrame {
        code: ErrorCode::UnexpectedFrame,
        reason: "Submit".to_owned(),
    })
}

fn hello_peer() -> Frame {
    Frame::Hello(Hello {
        min_version: 2,
        max_version: 2,
        role: Role::Peer,
        name: "node-a".to_owned(),
        auth_token: Some("mesh-key".to_owned()),
    })
}

fn peer_hello() -> Frame {
    Frame::from(PeerHello {
        node_id: "node-b".to_owned(),
        incarnation: 1_234_567_890_123,
        advertise: "10.0.0.2:7400".to_owned(),
        peers: vec![PeerAddress {
            node_id: "node-c".to_owned(),
            address: "10.0.0.3:7400".to_owned(),
        }],
        features: Vec::new(),
        extensions: Vec::new(),
    })
}

/// The version-2 form of the example group, for its table.
fn presence_group() -> body::PresenceGroup {
    body::PresenceGroup {
        activity_type: "render".to_owned(),
        node: Some("box-7".to_owned()),
        workers: 2,
        slots: 8,
        free: 5,
        full: 0,
        draining: 0,
    }
}

/// The example presence, told a version-2 link: its group of no deployment.
fn presence() -> Frame {
    Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: vec![PoolPresence {
            channel: "aion.dispatch.remote.gpu".to_owned(),
            workers: 2,
            groups: vec![PresenceGroup {
                deployment: None,
                ..presence_group3()
            }],
        }],
        extensions: Vec::new(),
    })
}

fn relay() -> Frame {
    Frame::from(Relay {
        correlation: 17,
        request: request(),
        extras: RequestExtras::default(),
        routing: NodeRouting::Prefer(vec!["box-7".to_owned()]),
        reply_timeout_ms: 29_950,
    })
}

fn relay_outcome() -> Frame {
    Frame::RelayOutcome(RelayOutcome {
        correlation: 17,
        result: DispatchResult::Completed(response()),
    })
}

fn served_outcome() -> Frame {
    Frame::from(ServedOutcome {
        correlation: 5,
        served_by: "node-a".to_owned(),
        result: DispatchResult::PeerLost {
            peer: "node-b".to_owned(),
            after_ms: 1200,
        },
    })
}

fn peer_status() -> PeerStatus {
    PeerStatus {
        node_id: "node-b".to_owned(),
        address: "10.0.0.2:7400".to_owned(),
        state: PeerLinkState::Up,
        synced: true,
        relays_sent: 12,
        relays_received: 4,
        relays_in_flight: 1,
        pools: vec!["aion.dispatch.remote.gpu".to_owned()],
    }
}

fn cluster_status() -> Frame {
    Frame::from(ClusterStatusReport {
        correlation: 9,
        status: NodeStatus {
            node_id: "node-a".to_owned(),
            uptime_ms: 60_000,
            connections: 3,
            ..NodeStatus::default()
        },
        peers: vec![peer_status()],
        peer_lost: 0,
    })
}

// Version 3

/// A W3C trace context, the header the examples carry.
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn traceparent() -> Header {
    Header {
        name: "traceparent".to_owned(),
        value: TRACEPARENT.to_owned(),
    }
}

/// Extras with only a header, as a request traced from its producer carries.
fn traced() -> RequestExtras {
    RequestExtras {
        headers: vec![traceparent()],
        ..RequestExtras::default()
    }
}

/// Extras with every field some.
fn full_extras() -> RequestExtras {
    RequestExtras {
        headers: vec![traceparent()],
        priority: Some(2),
        fairness_key: Some("tenant-a".to_owned()),
        fairness_weight: Some(3000),
        deployment: Some("v42".to_owned()),
        extensions: Vec::new(),
    }
}

fn submit3() -> Frame {
    Frame::from(Submit {
        correlation: 5,
        request: request(),
        extras: full_extras(),
        wait_for_worker_ms: Some(2000),
        reply_timeout_ms: None,
        routing: NodeRouting::Any,
    })
}

fn push3() -> Frame {
    Frame::from(Push {
        correlation: 1000,
        request: request(),
        extras: traced(),
    })
}

fn relay3() -> Frame {
    Frame::from(Relay {
        correlation: 17,
        request: request(),
        extras: traced(),
        routing: NodeRouting::Prefer(vec!["box-7".to_owned()]),
        reply_timeout_ms: 29_950,
    })
}

fn register3() -> Frame {
    let Frame::Register(register) = register() else {
        unreachable!("register() builds a Register");
    };
    Frame::from(Register {
        deployment: Some("v42".to_owned()),
        instance_id: Some("pod-7f3c".to_owned()),
        ..*register
    })
}

fn welcome3() -> Frame {
    Frame::from(Welcome {
        version: 3,
        node_id: "node-a".to_owned(),
        pid: 7,
        limits: full_limits(),
        header_limits: Some(HeaderLimits::default()),
        features: vec![
            feature::HEADERS.to_owned(),
            feature::STATUS_DOCUMENT.to_owned(),
        ],
    })
}

fn presence_group3() -> PresenceGroup {
    PresenceGroup {
        activity_type: "render".to_owned(),
        node: Some("box-7".to_owned()),
        deployment: Some("v42".to_owned()),
        workers: 2,
        slots: 8,
        free: 5,
        full: 0,
        draining: 0,
        probation: 0,
        unreachable: 0,
    }
}

fn presence3() -> Frame {
    Frame::Presence(Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: vec![PoolPresence {
            channel: "aion.dispatch.remote.gpu".to_owned(),
            workers: 2,
            groups: vec![presence_group3()],
        }],
        extensions: Vec::new(),
    })
}

fn peer_hello3() -> Frame {
    let Frame::PeerHello(hello) = peer_hello() else {
        unreachable!("peer_hello() builds a PeerHello");
    };
    Frame::from(PeerHello {
        features: vec![
            feature::HEADERS.to_owned(),
            feature::STATUS_DOCUMENT.to_owned(),
        ],
        ..*hello
    })
}

fn subscribe() -> Frame {
    Frame::Subscribe(Subscribe {
        correlation: 3,
        topics: vec![EventTopic::Workers, EventTopic::Peers],
    })
}

fn worker_event() -> WorkerEvent {
    WorkerEvent {
        worker_id: 42,
        identity: "w1".to_owned(),
        deployment: Some("v42".to_owned()),
        instance_id: Some("pod-7f3c".to_owned()),
        channels: vec!["aion.dispatch.remote.gpu".to_owned()],
    }
}

fn event() -> Frame {
    Frame::from(Event {
        correlation: 3,
        seq: 1,
        at_unix_ms: 1_700_000_000_000,
        event: NodeEvent::WorkerExcluded {
            worker: worker_event(),
            reason: ExclusionReason::Unreachable,
        },
    })
}

fn subscription_ended() -> Frame {
    Frame::SubscriptionEnded(SubscriptionEnded {
        correlation: 3,
        code: RefusalCode::Unsupported,
        reason: "events".to_owned(),
    })
}

fn status_document() -> Frame {
    Frame::StatusDocument(StatusDocument {
        correlation: 9,
        json: Bytes::from_static(br#"{"node_id":"node-a"}"#),
    })
}

fn farewell() -> Frame {
    Frame::Farewell(Farewell {
        reason: "draining".to_owned(),
    })
}

fn relay_ack() -> Frame {
    Frame::RelayAck(RelayAck {
        below: 17,
        also: vec![19, 22],
    })
}

fn resume() -> Frame {
    Frame::Resume(Resume {
        unanswered: vec![17, 19],
        last: true,
    })
}

fn resumed() -> Frame {
    Frame::Resumed(Resumed {
        handled_up_to: 18,
        running: vec![17],
        unknown: vec![],
        last: true,
    })
}

fn pool_setting() -> PoolSetting {
    PoolSetting {
        channel: "aion.dispatch.remote.gpu".to_owned(),
        current_deployment: Some("v42".to_owned()),
        set_at_unix_ms: 1_700_000_000_000,
        set_by: "node-a".to_owned(),
    }
}

fn pool_settings() -> Frame {
    Frame::PoolSettings(PoolSettings {
        settings: vec![pool_setting()],
    })
}

fn unreachable_census() -> Census {
    Census {
        reason: NoWorkerReason::AllUnreachable,
        pool_workers: 3,
        serving_activity: 2,
        compatible_workers: 2,
        deployment_workers: 2,
        at_capacity: 0,
        draining: 0,
        probation: Some(0),
        unreachable: Some(2),
        last_departure_ms_ago: None,
    }
}

/// Sent to a version-3 producer as `NoWorker3`, and to a version-2 one (the same frame at
/// version 2) as `NoWorker`.
fn served_outcome_no_worker3() -> Frame {
    Frame::from(ServedOutcome {
        correlation: 6,
        served_by: "node-a".to_owned(),
        result: DispatchResult::NoWorker(unreachable_census()),
    })
}

/// What a version-2 producer receives for the same dispatch, read back: its census as version
/// 2 counts it.
fn served_outcome_no_worker_read_at_v2() -> Frame {
    Frame::from(ServedOutcome {
        correlation: 6,
        served_by: "node-a".to_owned(),
        result: DispatchResult::NoWorker(Census {
            reason: NoWorkerReason::AllExcluded,
            draining: 2,
            probation: None,
            unreachable: None,
            ..unreachable_census()
        }),
    })
}

fn served_outcome_unsupported() -> Frame {
    Frame::from(ServedOutcome {
        correlation: 7,
        served_by: "node-a".to_owned(),
        result: DispatchResult::Refused(RefusedDispatch {
            reason: RefusedReason::Unsupported,
            detail: "priority".to_owned(),
        }),
    })
}

fn register_refused_unsupported() -> Frame {
    Frame::RegisterRefused(Refusal {
        code: RefusalCode::Unsupported,
        reason: "extension 7".to_owned(),
    })
}

fn error_unsupported() -> Frame {
    Frame::Error(ErrorFrame {
        code: ErrorCode::Unsupported,
        reason: "extension 7".to_owned(),
    })
}

// Version 4

/// A version-4 connection whose reader listed every feature of version 4.
fn listing() -> Dialect {
    Dialect::new(4, FeatureSet::ALL)
}

/// A version-4 connection whose reader listed nothing.
fn listing_nothing() -> Dialect {
    Dialect::from(4)
}

fn welcome4() -> Frame {
    let Frame::Welcome(welcome) = welcome3() else {
        unreachable!("welcome3() builds a Welcome");
    };
    Frame::from(Welcome {
        version: 4,
        ..*welcome
    })
}

fn features() -> Frame {
    Frame::Features(Features {
        features: vec![
            feature::HEARTBEAT_TIMEOUT.to_owned(),
            feature::ROLE_NOT_GRANTED.to_owned(),
        ],
        extensions: Vec::new(),
    })
}

/// The examples' session token: 16 bytes, 0 to 15.
fn token() -> Bytes {
    Bytes::from((0u8..16).collect::<Vec<u8>>())
}

fn session() -> Frame {
    Frame::Session(Session {
        token: token(),
        resume_grace_ms: 10_000,
    })
}

fn resume_session() -> Frame {
    Frame::ResumeSession(ResumeSession {
        token: token(),
        holding: vec![1000, 1001],
    })
}

fn session_resumed() -> Frame {
    Frame::SessionResumed(SessionResumed {
        worker_id: 42,
        attached: vec![1000],
        unknown: vec![1001],
    })
}

fn register_refused_session_unknown() -> Frame {
    Frame::RegisterRefused(Refusal {
        code: RefusalCode::SessionUnknown,
        reason: "session expired".to_owned(),
    })
}

fn progress() -> Frame {
    Frame::Progress(Progress {
        correlation: 1000,
        details: Bytes::from_static(b"50%"),
    })
}

/// Extras asking for a heartbeat every 30 s and for the dispatch's progress.
fn heartbeat_extras() -> RequestExtras {
    let mut extras = RequestExtras::default();
    extras.set_heartbeat_timeout(Some(std::time::Duration::from_secs(30)));
    extras.set_progress(true);
    extras
}

fn submit3_heartbeat() -> Frame {
    Frame::from(Submit {
        correlation: 5,
        request: request(),
        extras: heartbeat_extras(),
        wait_for_worker_ms: None,
        reply_timeout_ms: None,
        routing: NodeRouting::Any,
    })
}

fn served(correlation: u64, result: DispatchResult) -> Frame {
    Frame::from(ServedOutcome {
        correlation,
        served_by: "node-a".to_owned(),
        result,
    })
}

fn served_outcome_heartbeat_timeout() -> Frame {
    served(
        5,
        DispatchResult::HeartbeatTimeout {
            worker_id: 42,
            after_ms: 31_000,
        },
    )
}

/// What a reader that did not list `heartbeat-timeout` reads for the same dispatch.
fn served_outcome_heartbeat_timeout_as_timeout() -> Frame {
    served(
        5,
        DispatchResult::Timeout {
            worker_id: 42,
            after_ms: 31_000,
        },
    )
}

fn role_refusal(reason: RefusedReason) -> Frame {
    served(
        8,
        DispatchResult::Refused(RefusedDispatch {
            reason,
            detail: "role producer".to_owned(),
        }),
    )
}

fn peer_hello4() -> Frame {
    let Frame::PeerHello(hello) = peer_hello3() else {
        unreachable!("peer_hello3() builds a PeerHello");
    };
    let mut hello = *hello;
    hello.set_lost_link_to(Some(987_654_321));
    Frame::from(hello)
}

/// Every example with a hex dump in the doc, by marker name, with the dialect of the
/// connection it is sent on (its version, and what its reader listed), and the frame it reads
/// back as.
fn examples() -> Vec<(&'static str, Dialect, Frame, Frame)> {
    let same = |name, version: u16, frame: Frame| (name, version.into(), frame.clone(), frame);
    let to = |name, dialect: Dialect, frame: Frame| (name, dialect, frame.clone(), frame);
    vec![
        same("hello", 1, hello()),
        same("welcome", 1, welcome()),
        same("hello-refused", 1, hello_refused()),
        same("register", 1, register()),
        same("registered", 1, registered()),
        same("push", 1, push()),
        same("reply", 1, reply()),
        same("submit", 1, submit()),
        same("outcome", 1, outcome()),
        same("outcome-no-worker", 1, outcome_no_worker()),
        same("error", 1, error()),
        same("hello-peer", 2, hello_peer()),
        same("peer-hello", 2, peer_hello()),
        same("presence", 2, presence()),
        same("relay", 2, relay()),
        same("relay-outcome", 2, relay_outcome()),
        same("served-outcome", 2, served_outcome()),
        same("cluster-status", 2, cluster_status()),
        same("submit3", 3, submit3()),
        same("push3", 3, push3()),
        same("relay3", 3, relay3()),
        same("register3", 3, register3()),
        same("welcome3", 3, welcome3()),
        same("presence3", 3, presence3()),
        same("peer-hello3", 3, peer_hello3()),
        same("subscribe", 3, subscribe()),
        same("event", 3, event()),
        same("subscription-ended", 3, subscription_ended()),
        same("status-document", 3, status_document()),
        same("farewell", 3, farewell()),
        same("relay-ack", 3, relay_ack()),
        same("resume", 3, resume()),
        same("resumed", 3, resumed()),
        same("pool-settings", 3, pool_settings()),
        same("served-outcome-no-worker3", 3, served_outcome_no_worker3()),
        (
            "served-outcome-no-worker3-v2",
            2.into(),
            served_outcome_no_worker3(),
            served_outcome_no_worker_read_at_v2(),
        ),
        same(
            "served-outcome-unsupported",
            3,
            served_outcome_unsupported(),
        ),
        same(
            "register-refused-unsupported",
            3,
            register_refused_unsupported(),
        ),
        same("error-unsupported", 3, error_unsupported()),
        same("welcome4", 4, welcome4()),
        same("features", 4, features()),
        to("session", listing(), session()),
        to("resume-session", listing(), resume_session()),
        to("session-resumed", listing(), session_resumed()),
        same(
            "register-refused-session-unknown",
            4,
            register_refused_session_unknown(),
        ),
        to("progress", listing(), progress()),
        same("submit3-heartbeat", 4, submit3_heartbeat()),
        to(
            "served-outcome-heartbeat-timeout",
            listing(),
            served_outcome_heartbeat_timeout(),
        ),
        (
            "served-outcome-heartbeat-timeout-unlisted",
            listing_nothing(),
            served_outcome_heartbeat_timeout(),
            served_outcome_heartbeat_timeout_as_timeout(),
        ),
        to(
            "served-outcome-role-not-granted",
            listing(),
            role_refusal(RefusedReason::RoleNotGranted),
        ),
        (
            "served-outcome-role-not-granted-unlisted",
            listing_nothing(),
            role_refusal(RefusedReason::RoleNotGranted),
            role_refusal(RefusedReason::NamespaceNotGranted),
        ),
        same("peer-hello4", 4, peer_hello4()),
    ]
}

fn encode(frame: &Frame, dialect: impl Into<Dialect>) -> Vec<u8> {
    let dialect = dialect.into();
    let mut buf = BytesMut::new();
    if let Err(error) = encode_frame(frame, dialect, &mut buf, DEFAULT_MAX_FRAME_LEN) {
        panic!("cannot encode {} as {dialect:?}: {error}", frame.name());
    }
    buf.to_vec()
}

fn hex_line(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for line in bytes.chunks(HEX_LINE_BYTES) {
        out.push_str(&hex_line(line));
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------
// Byte-by-byte breakdowns
// ---------------------------------------------------------------------------------------

/// An independent LEB128 encoder: the breakdowns are built with it and must add up to
/// what the crate's encoder produced.
fn leb128(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let low = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(low);
            return out;
        }
        out.push(low | 0x80);
    }
}

/// The pieces of one frame body, each with what it means.
#[derive(Default)]
struct Breakdown {
    pieces: Vec<(Vec<u8>, String)>,
}

impl Breakdown {
    fn piece(&mut self, bytes: Vec<u8>, label: String) -> &mut Self {
        self.pieces.push((bytes, label));
        self
    }

    fn kind(&mut self, kind: FrameKind) -> &mut Self {
        let index = kind.discriminant();
        self.piece(
            leb128(u64::from(index)),
            format!("kind: varint {index} = {kind}"),
        )
    }

    fn uint(&mut self, field: &str, ty: &str, value: u64) -> &mut Self {
        self.piece(leb128(value), format!("{field}: {ty} varint = {value}"))
    }

    fn variant(&mut self, field: &str, ty: &str, index: u32, name: &str) -> &mut Self {
        self.piece(
            leb128(u64::from(index)),
            format!("{field}: {ty} variant {index} = {name}"),
        )
    }

    fn string(&mut self, field: &str, value: &str) -> &mut Self {
        self.piece(
            leb128(value.len() as u64),
            format!("{field}: String, length {}", value.len()),
        );
        self.piece(value.as_bytes().to_vec(), format!("  UTF-8 {value:?}"))
    }

    fn byte_array(&mut self, field: &str, value: &[u8]) -> &mut Self {
        self.piece(
            leb128(value.len() as u64),
            format!("{field}: bytes, length {}", value.len()),
        );
        self.piece(value.to_vec(), "  raw bytes".to_owned())
    }

    fn boolean(&mut self, field: &str, value: bool) -> &mut Self {
        self.piece(vec![u8::from(value)], format!("{field}: bool = {value}"))
    }

    fn some(&mut self, field: &str) -> &mut Self {
        self.piece(vec![0x01], format!("{field}: Option tag 0x01 = Some"))
    }

    fn none(&mut self, field: &str) -> &mut Self {
        self.piece(vec![0x00], format!("{field}: Option tag 0x00 = None"))
    }

    fn seq(&mut self, field: &str, ty: &str, count: u64) -> &mut Self {
        self.piece(leb128(count), format!("{field}: {ty}, count {count}"))
    }

    /// Renders the breakdown after checking it adds up to `frame` encoded as `dialect` writes
    /// it.
    fn render(&self, name: &str, dialect: impl Into<Dialect>, frame: &Frame) -> String {
        let encoded = encode(frame, dialect);
        let body: Vec<u8> = self
            .pieces
            .iter()
            .flat_map(|(bytes, _)| bytes.iter().copied())
            .collect();
        assert_eq!(
            encoded.get(4..),
            Some(&body[..]),
            "the breakdown of `{name}` does not add up to the encoded frame"
        );
        let prefix = encoded.get(..4).unwrap_or_default().to_vec();
        let mut rows = vec![(
            prefix,
            format!("length prefix: u32 big-endian = {}", body.len()),
        )];
        rows.extend(self.pieces.iter().cloned());

        let width = BREAKDOWN_LINE_BYTES * 3 - 1;
        let mut out = format!("{:>4}  {:<width$}  meaning\n", "off", "bytes");
        let mut offset = 0;
        for (bytes, label) in rows {
            for (line, chunk) in bytes.chunks(BREAKDOWN_LINE_BYTES).enumerate() {
                let hex = hex_line(chunk);
                if line == 0 {
                    let row = format!("{offset:>4}  {hex:<width$}  {label}");
                    out.push_str(row.trim_end());
                } else {
                    out.push_str(&format!("{:>4}  {hex}", ""));
                }
                out.push('\n');
            }
            offset += bytes.len();
        }
        out
    }
}

fn hello_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Hello)
        .uint("min_version", "u16", 1)
        .uint("max_version", "u16", 1)
        .variant("role", "Role", 0, "Worker")
        .string("name", "gpu-worker")
        .some("auth_token")
        .string("auth_token.0", "s3cret");
    b.render("hello", 1, &hello())
}

fn register_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Register)
        .seq("namespaces", "Vec<String>", 1)
        .string("namespaces[0]", "remote")
        .string("task_queue", "gpu")
        .some("node")
        .string("node.0", "box-7")
        .seq("activity_types", "Vec<String>", 2)
        .string("activity_types[0]", "render")
        .string("activity_types[1]", "encode")
        .string("identity", "w1")
        .uint("max_concurrency", "u32", 300);
    b.render("register", 1, &register())
}

/// The pieces of the examples' `DispatchRequest`, labelled under `field`.
fn request_pieces(b: &mut Breakdown, field: &str) {
    let f = |name: &str| format!("{field}.{name}");
    b.string(&f("namespace"), "remote")
        .string(&f("task_queue"), "gpu")
        .string(&f("activity_type"), "render")
        .none(&f("node"))
        .string(&f("workflow_id"), "wf-1")
        .uint(&f("ordinal"), "u64", 3)
        .some(&f("run_id"))
        .string(&f("run_id.0"), "r1")
        .uint(&f("attempt"), "u32", 1)
        .byte_array(&f("input"), &[0x01, 0x02, 0x03])
        .some(&f("deadline_unix_ms"))
        .uint(&f("deadline_unix_ms.0"), "u64", 1_700_000_000_000);
}

fn push_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Push).uint("correlation", "u64", 1000);
    request_pieces(&mut b, "request");
    b.render("push", 1, &push())
}

fn welcome_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Welcome)
        .uint("version", "u16", 1)
        .string("node_id", "node-a")
        .uint("pid", "u64", 7)
        .uint("limits.max_frame_len", "u32", 4_194_304)
        .uint("limits.max_in_flight", "u32", 1024)
        .uint("limits.ping_interval_ms", "u64", 10_000)
        .uint("limits.max_missed_pings", "u32", 3)
        .uint("limits.max_name_len", "u32", 255)
        .uint("limits.max_set_len", "u32", 64);
    b.render("welcome", 1, &welcome())
}

fn submit_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Submit).uint("correlation", "u64", 5);
    request_pieces(&mut b, "request");
    b.some("wait_for_worker_ms")
        .uint("wait_for_worker_ms.0", "u64", 2000)
        .none("reply_timeout_ms")
        .variant("routing", "NodeRouting", 2, "Prefer")
        .seq("routing.0", "Vec<String>", 2)
        .string("routing.0[0]", "box-7")
        .string("routing.0[1]", "box-9");
    b.render("submit", 1, &submit())
}

fn outcome_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Outcome)
        .uint("correlation", "u64", 5)
        .variant("result", "DispatchResult", 0, "Completed")
        .string("result.0.workflow_id", "wf-1")
        .uint("result.0.ordinal", "u64", 3)
        .some("result.0.run_id")
        .string("result.0.run_id.0", "r1")
        .variant("result.0.outcome", "ActivityOutcome", 0, "Success")
        .byte_array("result.0.outcome.0", b"ok");
    b.render("outcome", 1, &outcome())
}

fn peer_hello_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::PeerHello)
        .string("node_id", "node-b")
        .uint("incarnation", "u64", 1_234_567_890_123)
        .string("advertise", "10.0.0.2:7400")
        .seq("peers", "Vec<PeerAddress>", 1)
        .string("peers[0].node_id", "node-c")
        .string("peers[0].address", "10.0.0.3:7400");
    b.render("peer-hello", 2, &peer_hello())
}

fn presence_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Presence)
        .boolean("reset", true)
        .boolean("synced", true)
        .boolean("draining", false)
        .seq("pools", "Vec<PoolPresence>", 1)
        .string("pools[0].channel", "aion.dispatch.remote.gpu")
        .uint("pools[0].workers", "u32", 2)
        .seq("pools[0].groups", "Vec<PresenceGroup>", 1);
    let g = |name: &str| format!("pools[0].groups[0].{name}");
    b.string(&g("activity_type"), "render")
        .some(&g("node"))
        .string(&g("node.0"), "box-7")
        .uint(&g("workers"), "u32", 2)
        .uint(&g("slots"), "u32", 8)
        .uint(&g("free"), "u32", 5)
        .uint(&g("full"), "u32", 0)
        .uint(&g("draining"), "u32", 0);
    b.render("presence", 2, &presence())
}

fn relay_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Relay).uint("correlation", "u64", 17);
    request_pieces(&mut b, "request");
    b.variant("routing", "NodeRouting", 2, "Prefer")
        .seq("routing.0", "Vec<String>", 1)
        .string("routing.0[0]", "box-7")
        .uint("reply_timeout_ms", "u64", 29_950);
    b.render("relay", 2, &relay())
}

fn served_outcome_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::ServedOutcome)
        .uint("correlation", "u64", 5)
        .string("served_by", "node-a")
        .variant("result", "DispatchResult", 7, "PeerLost")
        .string("result.peer", "node-b")
        .uint("result.after_ms", "u64", 1200);
    b.render("served-outcome", 2, &served_outcome())
}

/// The pieces of the examples' full `RequestExtras`, labelled under `field`.
fn full_extras_pieces(b: &mut Breakdown, field: &str) {
    let f = |name: &str| format!("{field}.{name}");
    b.seq(&f("headers"), "Vec<Header>", 1)
        .string(&f("headers[0].name"), "traceparent")
        .string(&f("headers[0].value"), TRACEPARENT)
        .some(&f("priority"))
        .piece(vec![2], format!("{}: u8 = 2", f("priority.0")))
        .some(&f("fairness_key"))
        .string(&f("fairness_key.0"), "tenant-a")
        .some(&f("fairness_weight"))
        .uint(&f("fairness_weight.0"), "u32", 3000)
        .some(&f("deployment"))
        .string(&f("deployment.0"), "v42")
        .seq(&f("extensions"), "Vec<Extension>", 0);
}

fn submit3_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Submit3).uint("correlation", "u64", 5);
    request_pieces(&mut b, "request");
    full_extras_pieces(&mut b, "extras");
    b.some("wait_for_worker_ms")
        .uint("wait_for_worker_ms.0", "u64", 2000)
        .none("reply_timeout_ms")
        .variant("routing", "NodeRouting", 0, "Any");
    b.render("submit3", 3, &submit3())
}

fn push3_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Push3).uint("correlation", "u64", 1000);
    request_pieces(&mut b, "request");
    b.seq("extras.headers", "Vec<Header>", 1)
        .string("extras.headers[0].name", "traceparent")
        .string("extras.headers[0].value", TRACEPARENT)
        .none("extras.priority")
        .none("extras.fairness_key")
        .none("extras.fairness_weight")
        .none("extras.deployment")
        .seq("extras.extensions", "Vec<Extension>", 0);
    b.render("push3", 3, &push3())
}

fn register3_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Register3)
        .seq("namespaces", "Vec<String>", 1)
        .string("namespaces[0]", "remote")
        .string("task_queue", "gpu")
        .some("node")
        .string("node.0", "box-7")
        .seq("activity_types", "Vec<String>", 2)
        .string("activity_types[0]", "render")
        .string("activity_types[1]", "encode")
        .string("identity", "w1")
        .uint("max_concurrency", "u32", 300)
        .some("deployment")
        .string("deployment.0", "v42")
        .some("instance_id")
        .string("instance_id.0", "pod-7f3c")
        .seq("extensions", "Vec<Extension>", 0);
    b.render("register3", 3, &register3())
}

fn welcome3_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Welcome3)
        .uint("version", "u16", 3)
        .string("node_id", "node-a")
        .uint("pid", "u64", 7)
        .uint("limits.max_frame_len", "u32", 4_194_304)
        .uint("limits.max_in_flight", "u32", 1024)
        .uint("limits.ping_interval_ms", "u64", 10_000)
        .uint("limits.max_missed_pings", "u32", 3)
        .uint("limits.max_name_len", "u32", 255)
        .uint("limits.max_set_len", "u32", 64)
        .uint("header_limits.max_headers", "u32", 32)
        .uint("header_limits.max_header_bytes", "u32", 8192)
        .seq("features", "Vec<String>", 2)
        .string("features[0]", feature::HEADERS)
        .string("features[1]", feature::STATUS_DOCUMENT);
    b.render("welcome3", 3, &welcome3())
}

fn presence3_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Presence3)
        .boolean("reset", true)
        .boolean("synced", true)
        .boolean("draining", false)
        .seq("pools", "Vec<PoolPresence3>", 1)
        .string("pools[0].channel", "aion.dispatch.remote.gpu")
        .uint("pools[0].workers", "u32", 2)
        .seq("pools[0].groups", "Vec<PresenceGroup3>", 1);
    let g = |name: &str| format!("pools[0].groups[0].{name}");
    b.string(&g("activity_type"), "render")
        .some(&g("node"))
        .string(&g("node.0"), "box-7")
        .some(&g("deployment"))
        .string(&g("deployment.0"), "v42")
        .uint(&g("workers"), "u32", 2)
        .uint(&g("slots"), "u32", 8)
        .uint(&g("free"), "u32", 5)
        .uint(&g("full"), "u32", 0)
        .uint(&g("draining"), "u32", 0)
        .uint(&g("probation"), "u32", 0)
        .uint(&g("unreachable"), "u32", 0)
        .seq("extensions", "Vec<Extension>", 0);
    b.render("presence3", 3, &presence3())
}

fn event_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Event)
        .uint("correlation", "u64", 3)
        .uint("seq", "u64", 1)
        .uint("at_unix_ms", "u64", 1_700_000_000_000)
        .variant("event", "NodeEvent", 1, "WorkerExcluded")
        .uint("event.worker.worker_id", "u64", 42)
        .string("event.worker.identity", "w1")
        .some("event.worker.deployment")
        .string("event.worker.deployment.0", "v42")
        .some("event.worker.instance_id")
        .string("event.worker.instance_id.0", "pod-7f3c")
        .seq("event.worker.channels", "Vec<String>", 1)
        .string("event.worker.channels[0]", "aion.dispatch.remote.gpu")
        .variant("event.reason", "ExclusionReason", 0, "Unreachable");
    b.render("event", 3, &event())
}

fn served_outcome_no_worker3_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::ServedOutcome)
        .uint("correlation", "u64", 6)
        .string("served_by", "node-a")
        .variant("result", "DispatchResult", 9, "NoWorker3")
        .variant("result.0.reason", "NoWorkerReason", 5, "AllUnreachable")
        .uint("result.0.pool_workers", "u32", 3)
        .uint("result.0.serving_activity", "u32", 2)
        .uint("result.0.compatible_workers", "u32", 2)
        .uint("result.0.deployment_workers", "u32", 2)
        .uint("result.0.at_capacity", "u32", 0)
        .uint("result.0.draining", "u32", 0)
        .uint("result.0.probation", "u32", 0)
        .uint("result.0.unreachable", "u32", 2)
        .none("result.0.last_departure_ms_ago");
    b.render("served-outcome-no-worker3", 3, &served_outcome_no_worker3())
}

fn features_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Features)
        .seq("features", "Vec<String>", 2)
        .string("features[0]", feature::HEARTBEAT_TIMEOUT)
        .string("features[1]", feature::ROLE_NOT_GRANTED)
        .seq("extensions", "Vec<Extension>", 0);
    b.render("features", 4, &features())
}

fn session_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Session)
        .byte_array("token", &token())
        .uint("resume_grace_ms", "u64", 10_000);
    b.render("session", listing(), &session())
}

fn resume_session_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::ResumeSession)
        .byte_array("token", &token())
        .seq("holding", "Vec<u64>", 2)
        .uint("holding[0]", "u64", 1000)
        .uint("holding[1]", "u64", 1001);
    b.render("resume-session", listing(), &resume_session())
}

fn progress_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Progress)
        .uint("correlation", "u64", 1000)
        .byte_array("details", b"50%");
    b.render("progress", listing(), &progress())
}

fn submit3_heartbeat_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::Submit3).uint("correlation", "u64", 5);
    request_pieces(&mut b, "request");
    b.seq("extras.headers", "Vec<Header>", 0)
        .none("extras.priority")
        .none("extras.fairness_key")
        .none("extras.fairness_weight")
        .none("extras.deployment")
        .seq("extras.extensions", "Vec<Extension>", 2)
        .uint("extras.extensions[0].tag", "u32", 1)
        .boolean("extras.extensions[0].critical", true)
        .piece(
            vec![0x03],
            "extras.extensions[0].value: bytes, length 3".to_owned(),
        )
        .uint("  varint: heartbeat timeout ms", "u64", 30_000)
        .uint("extras.extensions[1].tag", "u32", 2)
        .boolean("extras.extensions[1].critical", false)
        .piece(
            vec![0x00],
            "extras.extensions[1].value: bytes, length 0".to_owned(),
        )
        .none("wait_for_worker_ms")
        .none("reply_timeout_ms")
        .variant("routing", "NodeRouting", 0, "Any");
    b.render("submit3-heartbeat", 4, &submit3_heartbeat())
}

fn served_outcome_heartbeat_timeout_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::ServedOutcome)
        .uint("correlation", "u64", 5)
        .string("served_by", "node-a")
        .variant("result", "DispatchResult", 10, "HeartbeatTimeout")
        .uint("result.worker_id", "u64", 42)
        .uint("result.after_ms", "u64", 31_000);
    b.render(
        "served-outcome-heartbeat-timeout",
        listing(),
        &served_outcome_heartbeat_timeout(),
    )
}

fn peer_hello4_breakdown() -> String {
    let mut b = Breakdown::default();
    b.kind(FrameKind::PeerHello3)
        .string("node_id", "node-b")
        .uint("incarnation", "u64", 1_234_567_890_123)
        .string("advertise", "10.0.0.2:7400")
        .seq("peers", "Vec<PeerAddress>", 1)
        .string("peers[0].node_id", "node-c")
        .string("peers[0].address", "10.0.0.3:7400")
        .seq("features", "Vec<String>", 2)
        .string("features[0]", feature::HEADERS)
        .string("features[1]", feature::STATUS_DOCUMENT)
        .seq("extensions", "Vec<Extension>", 1)
        .uint("extensions[0].tag", "u32", 3)
        .boolean("extensions[0].critical", false)
        .piece(
            vec![0x05],
            "extensions[0].value: bytes, length 5".to_owned(),
        )
        .uint("  varint: lost link to incarnation", "u64", 987_654_321);
    b.render("peer-hello4", 4, &peer_hello4())
}

/// Every variant version 4 appends to an enum of an earlier version, each with a value's
/// whole encoding.
fn version_4_variants() -> String {
    fn bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
        postcard::to_stdvec(value).unwrap_or_default()
    }
    let heartbeat = reference::DispatchResult::HeartbeatTimeout {
        worker_id: 42,
        after_ms: 31_000,
    };
    let rows = [
        (
            "DispatchResult::HeartbeatTimeout { worker_id: 42, after_ms: 31000 }".to_owned(),
            bytes(&heartbeat),
        ),
        (
            format!("RefusedReason::{:?}", RefusedReason::RoleNotGranted),
            bytes(&RefusedReason::RoleNotGranted),
        ),
        (
            format!("RefusalCode::{:?}", RefusalCode::SessionUnknown),
            bytes(&RefusalCode::SessionUnknown),
        ),
    ];
    let width = rows.iter().map(|(value, _)| value.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (value, encoded) in rows {
        let _ = writeln!(out, "{value:<width$}  {}", hex_line(&encoded));
    }
    out
}

/// Each extension tag version 4 allocates, as its typed field writes it: the whole
/// `Extension` (tag, critical, value).
fn version_4_tags() -> String {
    let mut extras = RequestExtras::default();
    extras.set_heartbeat_timeout(Some(std::time::Duration::from_secs(30)));
    let heartbeat = extras.extensions.clone();
    extras.set_heartbeat_timeout(None);
    extras.set_progress(true);
    let progress = extras.extensions.clone();
    let mut hello = PeerHello::default();
    hello.set_lost_link_to(Some(987_654_321));
    let rows = [
        (
            "RequestExtras::set_heartbeat_timeout(Some(30 s))",
            heartbeat,
        ),
        ("RequestExtras::set_progress(true)", progress),
        (
            "PeerHello::set_lost_link_to(Some(987654321))",
            hello.extensions,
        ),
    ];
    let width = rows.iter().map(|(call, _)| call.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (call, extensions) in rows {
        let [extension] = &extensions[..] else {
            panic!("{call} writes one extension: {extensions:?}");
        };
        let encoded = postcard::to_stdvec(extension).unwrap_or_default();
        let _ = writeln!(out, "{call:<width$}  {}", hex_line(&encoded));
    }
    out
}

/// Every variant version 3 appends to an enum of version 1 or 2, and every variant of the
/// enums it adds, each with a value's whole encoding; `W` stands for the smallest worker an
/// event names.
fn version_3_variants() -> String {
    let worker = format!("{:?}", least_worker_event());
    let row = |ty: &str, value: &dyn std::fmt::Debug, encoded: Vec<u8>| {
        let shown = format!("{ty}::{value:?}").replace(&worker, "W");
        (shown, hex_line(&encoded))
    };
    fn bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
        postcard::to_stdvec(value).unwrap_or_default()
    }
    let mut rows: Vec<(String, String)> = Vec::new();
    for reason in [
        NoWorkerReason::AllUnreachable,
        NoWorkerReason::AllInProbation,
        NoWorkerReason::DeploymentMatchedNobody,
        NoWorkerReason::CapabilityMatchedNobody,
    ] {
        rows.push(row("NoWorkerReason", &reason, bytes(&reason)));
    }
    for reason in [
        RefusedReason::Unsupported,
        RefusedReason::FairnessCapReached,
    ] {
        rows.push(row("RefusedReason", &reason, bytes(&reason)));
    }
    for code in [
        RefusalCode::Unsupported,
        RefusalCode::Superseded,
        RefusalCode::Cancelled,
    ] {
        rows.push(row("RefusalCode", &code, bytes(&code)));
    }
    rows.push(row(
        "ErrorCode",
        &ErrorCode::Unsupported,
        bytes(&ErrorCode::Unsupported),
    ));
    for topic in event_topic_values() {
        rows.push(row("EventTopic", &topic, bytes(&topic)));
    }
    for reason in exclusion_reason_values() {
        rows.push(row("ExclusionReason", &reason, bytes(&reason)));
    }
    for reason in departure_reason_values() {
        rows.push(row("DepartureReason", &reason, bytes(&reason)));
    }
    for event in node_event_values(least_worker_event) {
        rows.push(row("NodeEvent", &event, bytes(&event)));
    }
    let width = rows.iter().map(|(value, _)| value.len()).max().unwrap_or(0);
    let mut out = format!("W = {worker}\n\n");
    for (value, bytes) in rows {
        let _ = writeln!(out, "{value:<width$}  {bytes}");
    }
    out
}

// ---------------------------------------------------------------------------------------
// Varint examples
// ---------------------------------------------------------------------------------------

fn varint_examples() -> String {
    fn row<T: serde::Serialize + std::fmt::Display>(ty: &str, value: T) -> String {
        let encoded = postcard::to_stdvec(&value).unwrap_or_default();
        format!("{value:>20}  {ty:<4}  {}\n", hex_line(&encoded))
    }
    let mut out = format!("{:>20}  {:<4}  bytes\n", "value", "type");
    out.push_str(&row("u16", 0u16));
    out.push_str(&row("u16", 127u16));
    out.push_str(&row("u16", 128u16));
    out.push_str(&row("u32", 300u32));
    out.push_str(&row("u64", 1000u64));
    out.push_str(&row("u16", 16_384u16));
    out.push_str(&row("u16", u16::MAX));
    out.push_str(&row("u32", 4_194_304u32));
    out.push_str(&row("u32", u32::MAX));
    out.push_str(&row("u64", 1_700_000_000_000u64));
    out.push_str(&row("u64", u64::MAX));
    out
}

// ---------------------------------------------------------------------------------------
// Channel examples
// ---------------------------------------------------------------------------------------

fn channel_examples() -> String {
    let cases: [(&str, &str, Option<&str>); 6] = [
        ("remote", "gpu", None),
        ("remote", "gpu", Some("box-7")),
        ("a.b", "%", None),
        ("%2E", "x", None),
        ("a", "b.c", None),
        ("a", "b", Some("c")),
    ];
    let rows: Vec<(String, String)> = cases
        .iter()
        .map(|&(namespace, task_queue, node)| {
            let shown = node.map_or_else(|| "none".to_owned(), |node| format!("{node:?}"));
            (
                format!("{namespace:?}, {task_queue:?}, {shown}"),
                dispatch_channel_name(namespace, task_queue, node),
            )
        })
        .collect();
    let width = rows.iter().map(|(input, _)| input.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (input, name) in rows {
        let _ = writeln!(out, "{input:<width$}  ->  {name}");
    }
    out
}

// ---------------------------------------------------------------------------------------
// Generated blocks
// ---------------------------------------------------------------------------------------

/// Every generated block: (marker, content without the fence).
fn generated_blocks() -> Vec<(String, String)> {
    let mut blocks: Vec<(String, String)> = examples()
        .into_iter()
        .map(|(name, dialect, frame, _)| {
            (format!("hex:{name}"), hex_dump(&encode(&frame, dialect)))
        })
        .collect();
    blocks.push(("bytes:hello".to_owned(), hello_breakdown()));
    blocks.push(("bytes:welcome".to_owned(), welcome_breakdown()));
    blocks.push(("bytes:register".to_owned(), register_breakdown()));
    blocks.push(("bytes:push".to_owned(), push_breakdown()));
    blocks.push(("bytes:submit".to_owned(), submit_breakdown()));
    blocks.push(("bytes:outcome".to_owned(), outcome_breakdown()));
    blocks.push(("bytes:peer-hello".to_owned(), peer_hello_breakdown()));
    blocks.push(("bytes:presence".to_owned(), presence_breakdown()));
    blocks.push(("bytes:relay".to_owned(), relay_breakdown()));
    blocks.push((
        "bytes:served-outcome".to_owned(),
        served_outcome_breakdown(),
    ));
    blocks.push(("bytes:submit3".to_owned(), submit3_breakdown()));
    blocks.push(("bytes:push3".to_owned(), push3_breakdown()));
    blocks.push(("bytes:register3".to_owned(), register3_breakdown()));
    blocks.push(("bytes:welcome3".to_owned(), welcome3_breakdown()));
    blocks.push(("bytes:presence3".to_owned(), presence3_breakdown()));
    blocks.push(("bytes:event".to_owned(), event_breakdown()));
    blocks.push((
        "bytes:served-outcome-no-worker3".to_owned(),
        served_outcome_no_worker3_breakdown(),
    ));
    blocks.push(("text:v3-variants".to_owned(), version_3_variants()));
    blocks.push(("bytes:features".to_owned(), features_breakdown()));
    blocks.push(("bytes:session".to_owned(), session_breakdown()));
    blocks.push((
        "bytes:resume-session".to_owned(),
        resume_session_breakdown(),
    ));
    blocks.push(("bytes:progress".to_owned(), progress_breakdown()));
    blocks.push((
        "bytes:submit3-heartbeat".to_owned(),
        submit3_heartbeat_breakdown(),
    ));
    blocks.push((
        "bytes:served-outcome-heartbeat-timeout".to_owned(),
        served_outcome_heartbeat_timeout_breakdown(),
    ));
    blocks.push(("bytes:peer-hello4".to_owned(), peer_hello4_breakdown()));
    blocks.push(("text:v4-variants".to_owned(), version_4_variants()));
    blocks.push(("text:v4-tags".to_owned(), version_4_tags()));
    blocks.push(("text:varints".to_owned(), varint_examples()));
    blocks.push(("text:channels".to_owned(), channel_examples()));
    blocks
}

fn open_marker(marker: &str) -> String {
    format!("<!-- {marker} -->")
}

fn close_marker(marker: &str) -> String {
    format!("<!-- /{marker} -->")
}

/// What sits between a block's markers.
fn fenced(content: &str) -> String {
    format!("\n```text\n{content}```\n")
}

/// The byte range between a block's open and close markers.
fn block_range(doc: &str, marker: &str) -> Option<std::ops::Range<usize>> {
    let open = open_marker(marker);
    let start = doc.find(&open)? + open.len();
    let end = start + doc.get(start..)?.find(&close_marker(marker))?;
    Some(start..end)
}

#[test]
fn generated_blocks_match_the_encoder() {
    let mut doc = read_doc();
    let update = std::env::var_os(UPDATE_ENV).is_some_and(|value| value == "1");
    let mut stale = Vec::new();
    let mut missing = Vec::new();
    for (marker, content) in generated_blocks() {
        let expected = fenced(&content);
        let Some(range) = block_range(&doc, &marker) else {
            eprintln!(
                "PROTOCOL.md has no `{}` ... `{}` block; add:\n{}{expected}{}\n",
                open_marker(&marker),
                close_marker(&marker),
                open_marker(&marker),
                close_marker(&marker),
            );
            missing.push(marker);
            continue;
        };
        if doc.get(range.clone()) == Some(expected.as_str()) {
            continue;
        }
        if update {
            doc.replace_range(range, &expected);
        } else {
            eprintln!(
                "PROTOCOL.md block `{marker}` is stale; expected:\n{}{expected}{}\n",
                open_marker(&marker),
                close_marker(&marker),
            );
            stale.push(marker);
        }
    }
    if update {
        // Write beside the doc and rename, so tests reading it in parallel never see a
        // half-written file.
        let path = doc_path();
        let staged = path.with_extension("md.update");
        if let Err(error) =
            std::fs::write(&staged, &doc).and_then(|()| std::fs::rename(&staged, &path))
        {
            panic!("cannot write {}: {error}", path.display());
        }
    }
    assert!(
        missing.is_empty(),
        "blocks missing from PROTOCOL.md: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "stale blocks in PROTOCOL.md: {stale:?}; paste the blocks printed above or run \
         `{UPDATE_ENV}=1 cargo test -p lintel-wire --test protocol_doc`"
    );
}

#[test]
fn every_generated_block_in_the_doc_is_checked() {
    let doc = read_doc();
    let known: Vec<String> = generated_blocks()
        .into_iter()
        .map(|(marker, _)| marker)
        .collect();
    for kind in BLOCK_KINDS {
        let open = format!("<!-- {kind}:");
        for (at, _) in doc.match_indices(&open) {
            let rest = doc.get(at + 5..).unwrap_or_default();
            let marker = rest.split(" -->").next().unwrap_or_default();
            assert!(
                known.iter().any(|known| known == marker),
                "PROTOCOL.md has a `{marker}` block this test does not generate"
            );
        }
    }
}
// ---------------------------------------------------------------------------------------
// Shapes: field names and types, read from the serde impls
// ---------------------------------------------------------------------------------------

/// The serde shape of a value: what a table in the doc must say about its type.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    /// A primitive (`u16`, `bool`, `String`, `bytes`, ...).
    Leaf(&'static str),
    Option(Box<Shape>),
    Seq(Box<Shape>),
    Struct {
        name: &'static str,
        fields: Vec<(&'static str, Shape)>,
    },
    Variant {
        enum_name: &'static str,
        variant: &'static str,
        payload: Payload,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Payload {
    Unit,
    Newtype(Box<Shape>),
    Struct(Vec<(&'static str, Shape)>),
}

impl Shape {
    /// The type as the doc writes it: `u64`, `Option<String>`, `Vec<String>`, `Limits`.
    fn type_name(&self) -> String {
        match self {
            Shape::Leaf(name) => (*name).to_owned(),
            Shape::Option(inner) => format!("Option<{}>", inner.type_name()),
            Shape::Seq(inner) => format!("Vec<{}>", inner.type_name()),
            Shape::Struct { name, .. } => (*name).to_owned(),
            Shape::Variant { enum_name, .. } => (*enum_name).to_owned(),
        }
    }

    /// The fields of a struct, or of the struct inside a newtype variant (a frame body).
    fn fields(&self) -> Vec<(&'static str, Shape)> {
        match self {
            Shape::Struct { fields, .. } => fields.clone(),
            Shape::Variant {
                payload: Payload::Newtype(inner),
                ..
            } => inner.fields(),
            other => panic!("{other:?} has no fields"),
        }
    }

    /// A variant's payload as the doc writes it: `—`, a type, or `{ field: Type, ... }`.
    fn payload(&self) -> String {
        match self {
            Shape::Variant { payload, .. } => match payload {
                Payload::Unit => "—".to_owned(),
                Payload::Newtype(inner) => inner.type_name(),
                Payload::Struct(fields) => format!("{{ {} }}", field_list(fields)),
            },
            other => panic!("{other:?} is not an enum variant"),
        }
    }
}

/// `name: Type, name: Type`, as in the frame table's body column.
fn field_list(fields: &[(&'static str, Shape)]) -> String {
    fields
        .iter()
        .map(|(name, shape)| format!("{name}: {}", shape.type_name()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug)]
struct ShapeError(String);

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

impl serde::ser::Error for ShapeError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        ShapeError(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> Result<T, ShapeError> {
    Err(ShapeError(format!("{what} is not used by the protocol")))
}

/// A serializer that records shapes instead of bytes. Samples must hold `Some` in every
/// option and at least one element in every sequence, or the inner type is unknown.
struct Describe;

fn shape_of<T: serde::Serialize + ?Sized>(value: &T) -> Shape {
    value
        .serialize(Describe)
        .unwrap_or_else(|error| panic!("cannot describe a sample: {error}"))
}

struct SeqShape(Option<Shape>);

struct StructShape {
    name: &'static str,
    fields: Vec<(&'static str, Shape)>,
}

struct VariantShape {
    enum_name: &'static str,
    variant: &'static str,
    fields: Vec<(&'static str, Shape)>,
}

impl serde::Serializer for Describe {
    type Ok = Shape;
    type Error = ShapeError;
    type SerializeSeq = SeqShape;
    type SerializeTuple = serde::ser::Impossible<Shape, ShapeError>;
    type SerializeTupleStruct = serde::ser::Impossible<Shape, ShapeError>;
    type SerializeTupleVariant = serde::ser::Impossible<Shape, ShapeError>;
    type SerializeMap = serde::ser::Impossible<Shape, ShapeError>;
    type SerializeStruct = StructShape;
    type SerializeStructVariant = VariantShape;

    fn serialize_bool(self, _: bool) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("bool"))
    }
    fn serialize_i8(self, _: i8) -> Result<Shape, ShapeError> {
        unsupported("i8")
    }
    fn serialize_i16(self, _: i16) -> Result<Shape, ShapeError> {
        unsupported("i16")
    }
    fn serialize_i32(self, _: i32) -> Result<Shape, ShapeError> {
        unsupported("i32")
    }
    fn serialize_i64(self, _: i64) -> Result<Shape, ShapeError> {
        unsupported("i64")
    }
    fn serialize_u8(self, _: u8) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("u8"))
    }
    fn serialize_u16(self, _: u16) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("u16"))
    }
    fn serialize_u32(self, _: u32) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("u32"))
    }
    fn serialize_u64(self, _: u64) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("u64"))
    }
    fn serialize_f32(self, _: f32) -> Result<Shape, ShapeError> {
        unsupported("f32")
    }
    fn serialize_f64(self, _: f64) -> Result<Shape, ShapeError> {
        unsupported("f64")
    }
    fn serialize_char(self, _: char) -> Result<Shape, ShapeError> {
        unsupported("char")
    }
    fn serialize_str(self, _: &str) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("String"))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Shape, ShapeError> {
        Ok(Shape::Leaf("bytes"))
    }
    fn serialize_none(self) -> Result<Shape, ShapeError> {
        unsupported("a None sample (its inner type is unknown)")
    }
    fn serialize_some<T: serde::Serialize + ?Sized>(self, value: &T) -> Result<Shape, ShapeError> {
        Ok(Shape::Option(Box::new(value.serialize(Describe)?)))
    }
    fn serialize_unit(self) -> Result<Shape, ShapeError> {
        unsupported("unit")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<Shape, ShapeError> {
        unsupported("a unit struct")
    }
    fn serialize_unit_variant(
        self,
        enum_name: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Shape, ShapeError> {
        Ok(Shape::Variant {
            enum_name,
            variant,
            payload: Payload::Unit,
        })
    }
    fn serialize_newtype_struct<T: serde::Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<Shape, ShapeError> {
        unsupported("a newtype struct")
    }
    fn serialize_newtype_variant<T: serde::Serialize + ?Sized>(
        self,
        enum_name: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Shape, ShapeError> {
        Ok(Shape::Variant {
            enum_name,
            variant,
            payload: Payload::Newtype(Box::new(value.serialize(Describe)?)),
        })
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<SeqShape, ShapeError> {
        Ok(SeqShape(None))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, ShapeError> {
        unsupported("a tuple")
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, ShapeError> {
        unsupported("a tuple struct")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, ShapeError> {
        unsupported("a tuple variant")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, ShapeError> {
        unsupported("a map")
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<StructShape, ShapeError> {
        Ok(StructShape {
            name,
            fields: Vec::new(),
        })
    }
    fn serialize_struct_variant(
        self,
        enum_name: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<VariantShape, ShapeError> {
        Ok(VariantShape {
            enum_name,
            variant,
            fields: Vec::new(),
        })
    }
}

impl serde::ser::SerializeSeq for SeqShape {
    type Ok = Shape;
    type Error = ShapeError;

    fn serialize_element<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), ShapeError> {
        if self.0.is_none() {
            self.0 = Some(value.serialize(Describe)?);
        }
        Ok(())
    }

    fn end(self) -> Result<Shape, ShapeError> {
        match self.0 {
            Some(element) => Ok(Shape::Seq(Box::new(element))),
            None => unsupported("an empty sequence sample (its element type is unknown)"),
        }
    }
}

impl serde::ser::SerializeStruct for StructShape {
    type Ok = Shape;
    type Error = ShapeError;

    fn serialize_field<T: serde::Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ShapeError> {
        self.fields.push((key, value.serialize(Describe)?));
        Ok(())
    }

    fn end(self) -> Result<Shape, ShapeError> {
        Ok(Shape::Struct {
            name: self.name,
            fields: self.fields,
        })
    }
}

impl serde::ser::SerializeStructVariant for VariantShape {
    type Ok = Shape;
    type Error = ShapeError;

    fn serialize_field<T: serde::Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), ShapeError> {
        self.fields.push((key, value.serialize(Describe)?));
        Ok(())
    }

    fn end(self) -> Result<Shape, ShapeError> {
        Ok(Shape::Variant {
            enum_name: self.enum_name,
            variant: self.variant,
            payload: Payload::Struct(self.fields),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Samples: one value of every frame kind, struct and variant, with every option `Some`
// and every sequence non-empty
// ---------------------------------------------------------------------------------------

fn full_request() -> DispatchRequest {
    DispatchRequest {
        node: Some("box-7".to_owned()),
        ..request()
    }
}

/// A version-2 census, as a status report and `NoWorker` carry it.
fn full_census() -> body::Census {
    body::Census {
        reason: NoWorkerReason::PoolEmpty,
        pool_workers: 0,
        serving_activity: 0,
        compatible_workers: 0,
        at_capacity: 0,
        excluded: 0,
        last_departure_ms_ago: Some(0),
    }
}

fn full_limits() -> Limits {
    match welcome() {
        Frame::Welcome(welcome) => welcome.limits,
        other => panic!("welcome() built {}", other.name()),
    }
}

fn worker_status() -> WorkerStatus {
    WorkerStatus {
        worker_id: 1,
        pid: 1,
        identity: "w1".to_owned(),
        node: Some("box-7".to_owned()),
        activity_types: vec!["render".to_owned()],
        max_concurrency: 1,
        in_flight: 0,
        draining: false,
    }
}

fn pool_status() -> PoolStatus {
    PoolStatus {
        namespace: "remote".to_owned(),
        task_queue: "gpu".to_owned(),
        channel: "aion.dispatch.remote.gpu".to_owned(),
        workers: vec![worker_status()],
    }
}

fn waiting_status() -> WaitingStatus {
    WaitingStatus {
        namespace: "remote".to_owned(),
        task_queue: "gpu".to_owned(),
        activity_type: "render".to_owned(),
        waiting: 1,
        census: Census::from(full_census()),
    }
}

fn node_status() -> NodeStatus {
    NodeStatus {
        node_id: "node-a".to_owned(),
        uptime_ms: 0,
        connections: 0,
        draining: false,
        pools: vec![pool_status()],
        waiting: vec![waiting_status()],
        counters: Counters::default(),
    }
}

fn refusal() -> Refusal {
    Refusal {
        code: RefusalCode::Rejected,
        reason: String::new(),
    }
}

fn full_relay() -> reference::Relay {
    reference::Relay {
        correlation: 1,
        request: full_request(),
        routing: NodeRouting::Any,
        reply_timeout_ms: 1,
    }
}

fn full_extension() -> Extension {
    Extension {
        tag: 7,
        critical: true,
        value: Bytes::from_static(b"x"),
    }
}

fn full_request_extras() -> RequestExtras {
    RequestExtras {
        extensions: vec![full_extension()],
        ..full_extras()
    }
}

fn full_register3() -> Register {
    body_of(register3(), |frame| match frame {
        Frame::Register(body) => Some(Register {
            extensions: vec![full_extension()],
            ..*body
        }),
        _ => None,
    })
}

fn full_census3() -> reference::Census3 {
    let reference::DispatchResult::NoWorker3(census) =
        reference::census_on_wire(&unreachable_census(), 3)
    else {
        unreachable!("a version-3 census is sent as NoWorker3");
    };
    reference::Census3 {
        last_departure_ms_ago: Some(0),
        ..census
    }
}

fn full_presence3() -> Presence {
    body_of(presence3(), |frame| match frame {
        Frame::Presence(body) => Some(Presence {
            extensions: vec![full_extension()],
            ..body
        }),
        _ => None,
    })
}

fn full_peer_hello3() -> PeerHello {
    body_of(peer_hello3(), |frame| match frame {
        Frame::PeerHello(body) => Some(PeerHello {
            extensions: vec![full_extension()],
            ..*body
        }),
        _ => None,
    })
}

fn full_relay3() -> reference::Relay3 {
    reference::Relay3 {
        correlation: 1,
        request: full_request(),
        extras: full_request_extras(),
        routing: NodeRouting::Any,
        reply_timeout_ms: 1,
    }
}

fn full_event() -> Event {
    body_of(event(), |frame| match frame {
        Frame::Event(body) => Some(*body),
        _ => None,
    })
}

fn full_resumed() -> Resumed {
    Resumed {
        handled_up_to: 1,
        running: vec![1],
        unknown: vec![2],
        last: false,
    }
}

fn full_cluster_status() -> ClusterStatusReport {
    ClusterStatusReport {
        correlation: 1,
        status: node_status(),
        peers: vec![peer_status()],
        peer_lost: 0,
    }
}

/// The version-2 body of the example peer hello.
fn peer_hello2() -> body::PeerHello {
    body_of(peer_hello(), |frame| match frame {
        Frame::PeerHello(body) => Some(body::PeerHello {
            node_id: body.node_id,
            incarnation: body.incarnation,
            advertise: body.advertise,
            peers: body.peers,
        }),
        _ => None,
    })
}

/// The version-2 body of the example presence.
fn presence2() -> body::Presence {
    body::Presence {
        reset: true,
        synced: true,
        draining: false,
        pools: vec![body::PoolPresence {
            channel: "aion.dispatch.remote.gpu".to_owned(),
            workers: 2,
            groups: vec![presence_group()],
        }],
    }
}

/// The body of kind `Welcome3` of the example.
fn welcome3_body() -> body::Welcome3 {
    body_of(welcome3(), |frame| match frame {
        Frame::Welcome(body) => Some(body::Welcome3 {
            version: body.version,
            node_id: body.node_id,
            pid: body.pid,
            limits: body.limits,
            header_limits: body.header_limits.unwrap_or_default(),
            features: body.features,
        }),
        _ => None,
    })
}

/// The body of a frame sample, for the struct tables of frame bodies.
fn body_of<T>(frame: Frame, take: impl FnOnce(Frame) -> Option<T>) -> T {
    let name = frame.name();
    take(frame).unwrap_or_else(|| panic!("the sample is a {name}"))
}

/// A body as the frame of `kind`: the kind's variant of the wire's one enum, for its shape.
struct Kinded<'a, T>(FrameKind, &'a T);

impl<T: serde::Serialize> serde::Serialize for Kinded<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Kinded(kind, body) = self;
        serializer.serialize_newtype_variant("Frame", kind.discriminant(), kind.name(), body)
    }
}

/// The shape of `body` as the frame of `kind`.
fn kinded<T: serde::Serialize>(kind: FrameKind, body: &T) -> (FrameKind, Shape) {
    (kind, shape_of(&Kinded(kind, body)))
}

/// The body of one frame of every kind, in wire order, as its shape.
fn frame_samples() -> Vec<(FrameKind, Shape)> {
    use FrameKind as K;
    let take = |frame: Frame| frame;
    let hello = body_of(take(hello()), |f| match f {
        Frame::Hello(b) => Some(b),
        _ => None,
    });
    let welcome = body_of(take(welcome()), |f| match f {
        Frame::Welcome(b) => Some(body::Welcome {
            version: b.version,
            node_id: b.node_id,
            pid: b.pid,
            limits: b.limits,
        }),
        _ => None,
    });
    let register = body_of(take(register()), |f| match f {
        Frame::Register(b) => Some(body::Register {
            namespaces: b.namespaces,
            task_queue: b.task_queue,
            node: b.node,
            activity_types: b.activity_types,
            identity: b.identity,
            max_concurrency: b.max_concurrency,
        }),
        _ => None,
    });
    let completed = || reference::DispatchResult::Completed(response());
    vec![
        kinded(K::Hello, &hello),
        kinded(K::Welcome, &welcome),
        kinded(K::HelloRefused, &refusal()),
        kinded(K::Register, &register),
        kinded(K::Registered, &Registered { worker_id: 42 }),
        kinded(K::RegisterRefused, &refusal()),
        kinded(K::CapacityUpdate, &CapacityUpdate { max_concurrency: 1 }),
        kinded(
            K::Push,
            &reference::Push {
                correlation: 1,
                request: full_request(),
            },
        ),
        kinded(
            K::Reply,
            &Reply {
                correlation: 1000,
                response: response(),
            },
        ),
        kinded(
            K::Submit,
            &reference::Submit {
                correlation: 1,
                request: full_request(),
                wait_for_worker_ms: Some(0),
                reply_timeout_ms: Some(0),
                routing: NodeRouting::Any,
            },
        ),
        kinded(
            K::Outcome,
            &reference::OutcomeFrame {
                correlation: 5,
                result: completed(),
            },
        ),
        kinded(K::Cancel, &Cancel { correlation: 1 }),
        kinded(K::Ping, &Ping { nonce: 1 }),
        kinded(K::Pong, &Pong { nonce: 1 }),
        kinded(K::Drain, &Drain { grace_ms: 1 }),
        kinded(K::Drained, &Drained { completed: 1 }),
        kinded(
            K::Goodbye,
            &Goodbye {
                reason: String::new(),
            },
        ),
        kinded(
            K::Error,
            &ErrorFrame {
                code: ErrorCode::UnexpectedFrame,
                reason: "Submit".to_owned(),
            },
        ),
        kinded(K::StatusQuery, &StatusQuery { correlation: 1 }),
        kinded(
            K::Status,
            &StatusReport {
                correlation: 1,
                status: node_status(),
            },
        ),
        kinded(K::PeerHello, &peer_hello2()),
        kinded(K::Presence, &presence2()),
        kinded(K::Relay, &full_relay()),
        kinded(
            K::RelayOutcome,
            &reference::RelayOutcome {
                correlation: 17,
                result: completed(),
            },
        ),
        kinded(
            K::ServedOutcome,
            &reference::ServedOutcome {
                correlation: 5,
                served_by: "node-a".to_owned(),
                result: completed(),
            },
        ),
        kinded(K::ClusterStatus, &full_cluster_status()),
        kinded(
            K::Submit3,
            &reference::Submit3 {
                correlation: 1,
                request: full_request(),
                extras: full_request_extras(),
                wait_for_worker_ms: Some(0),
                reply_timeout_ms: Some(0),
                routing: NodeRouting::Any,
            },
        ),
        kinded(
            K::Push3,
            &reference::Push3 {
                correlation: 1,
                request: full_request(),
                extras: full_request_extras(),
            },
        ),
        kinded(K::Relay3, &full_relay3()),
        kinded(K::Register3, &full_register3()),
        kinded(K::Welcome3, &welcome3_body()),
        kinded(K::Presence3, &full_presence3()),
        kinded(K::PeerHello3, &full_peer_hello3()),
        kinded(
            K::Subscribe,
            &body_of(subscribe(), |f| match f {
                Frame::Subscribe(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(K::Event, &full_event()),
        kinded(
            K::SubscriptionEnded,
            &body_of(subscription_ended(), |f| match f {
                Frame::SubscriptionEnded(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::StatusDocument,
            &body_of(status_document(), |f| match f {
                Frame::StatusDocument(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::Farewell,
            &body_of(farewell(), |f| match f {
                Frame::Farewell(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::RelayAck,
            &body_of(relay_ack(), |f| match f {
                Frame::RelayAck(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::Resume,
            &body_of(resume(), |f| match f {
                Frame::Resume(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(K::Resumed, &full_resumed()),
        kinded(
            K::PoolSettings,
            &body_of(pool_settings(), |f| match f {
                Frame::PoolSettings(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(K::Features, &full_features()),
        kinded(
            K::Session,
            &body_of(session(), |f| match f {
                Frame::Session(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::ResumeSession,
            &body_of(resume_session(), |f| match f {
                Frame::ResumeSession(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::SessionResumed,
            &body_of(session_resumed(), |f| match f {
                Frame::SessionResumed(b) => Some(b),
                _ => None,
            }),
        ),
        kinded(
            K::Progress,
            &body_of(progress(), |f| match f {
                Frame::Progress(b) => Some(b),
                _ => None,
            }),
        ),
    ]
}

/// The example `Features` with an extension, for its table.
fn full_features() -> Features {
    body_of(features(), |frame| match frame {
        Frame::Features(body) => Some(Features {
            extensions: vec![full_extension()],
            ..body
        }),
        _ => None,
    })
}

// ---------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------

/// Cells of every table row between `<!-- table:NAME -->` markers whose first cell is a
/// number; backticks are dropped and cells trimmed.
fn table_rows(doc: &str, table: &str) -> Vec<(u32, Vec<String>)> {
    let marker = format!("table:{table}");
    let Some(range) = block_range(doc, &marker) else {
        panic!("PROTOCOL.md has no `{}` table", open_marker(&marker));
    };
    doc.get(range)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let line = line.trim().strip_prefix('|')?.strip_suffix('|')?;
            let mut cells = line
                .split('|')
                .map(|cell| cell.replace('`', "").trim().to_owned());
            let index = cells.next()?.parse().ok()?;
            Some((index, cells.collect()))
        })
        .collect()
}

/// The first `columns` cells of each row, with its index.
fn leading_cells(doc: &str, table: &str, columns: usize) -> Vec<(u32, Vec<String>)> {
    table_rows(doc, table)
        .into_iter()
        .map(|(index, cells)| (index, cells.into_iter().take(columns).collect()))
        .collect()
}

/// Every `<!-- table:NAME -->` the tests below check.
const CHECKED_TABLES: [&str; 60] = [
    "frames",
    "Role",
    "RefusalCode",
    "ErrorCode",
    "NodeRouting",
    "ActivityOutcome",
    "DispatchResult",
    "NoWorkerReason",
    "RefusedReason",
    "Limits",
    "DispatchRequest",
    "DispatchResponse",
    "Census",
    "RefusedDispatch",
    "NodeStatus",
    "PoolStatus",
    "WorkerStatus",
    "WaitingStatus",
    "Counters",
    "PeerAddress",
    "PeerHello",
    "Presence",
    "PoolPresence",
    "PresenceGroup",
    "Relay",
    "RelayOutcome",
    "ServedOutcome",
    "ClusterStatusReport",
    "PeerStatus",
    "PeerLinkState",
    "Header",
    "Extension",
    "RequestExtras",
    "HeaderLimits",
    "Welcome3",
    "Register3",
    "Census3",
    "PeerHello3",
    "Presence3",
    "PoolPresence3",
    "PresenceGroup3",
    "Relay3",
    "Subscribe",
    "EventTopic",
    "Event",
    "NodeEvent",
    "WorkerEvent",
    "ExclusionReason",
    "DepartureReason",
    "SubscriptionEnded",
    "StatusDocument",
    "RelayAck",
    "Resume",
    "Resumed",
    "PoolSetting",
    "Features",
    "Session",
    "ResumeSession",
    "SessionResumed",
    "Progress",
];

#[test]
fn every_table_in_the_doc_is_checked() {
    let doc = read_doc();
    let open = "<!-- table:";
    let mut found: Vec<&str> = doc
        .match_indices(open)
        .filter_map(|(at, _)| doc.get(at + open.len()..)?.split(" -->").next())
        .collect();
    found.sort_unstable();
    let mut checked = CHECKED_TABLES.to_vec();
    checked.sort_unstable();
    assert_eq!(
        found, checked,
        "tables in PROTOCOL.md vs tables this test checks"
    );
}

#[test]
fn the_frame_table_matches_frame_kinds_and_bodies() {
    let doc = read_doc();
    let samples = frame_samples();
    let sample_kinds: Vec<FrameKind> = samples.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(
        sample_kinds,
        FrameKind::ALL,
        "frame_samples() is out of order"
    );
    let expected: Vec<(u32, Vec<String>)> = samples
        .into_iter()
        .map(|(kind, shape)| {
            let Shape::Variant { variant, .. } = &shape else {
                panic!("{kind} is not an enum variant");
            };
            assert_eq!(*variant, kind.name(), "FrameKind name of {variant}");
            let body = field_list(&shape.fields());
            (kind.discriminant(), vec![kind.name().to_owned(), body])
        })
        .collect();
    // Columns: kind, frame, direction (prose, not checked), body fields.
    let found: Vec<(u32, Vec<String>)> = leading_cells(&doc, "frames", 3)
        .into_iter()
        .map(|(index, cells)| {
            let cells = cells
                .into_iter()
                .enumerate()
                .filter_map(|(column, cell)| (column != 1).then_some(cell))
                .collect();
            (index, cells)
        })
        .collect();
    assert_eq!(found, expected, "table `frames`");
}

/// `(wire index, [variant, payload?])` of each value: the index from its postcard
/// encoding, the names from its serde shape.
fn variant_rows<T: serde::Serialize + std::fmt::Debug>(
    values: &[T],
    with_payload: bool,
) -> Vec<(u32, Vec<String>)> {
    values
        .iter()
        .map(|value| {
            let encoded = postcard::to_stdvec(value).unwrap_or_default();
            let (index, _) = postcard::take_from_bytes::<u32>(&encoded)
                .unwrap_or_else(|error| panic!("{value:?} has no variant index: {error}"));
            let shape = shape_of(value);
            let Shape::Variant { variant, .. } = &shape else {
                panic!("{value:?} is not an enum variant");
            };
            let mut cells = vec![(*variant).to_owned()];
            if with_payload {
                cells.push(shape.payload());
            }
            (index, cells)
        })
        .collect()
}

/// Checks a doc table (index, variant[, payload], ...) against values covering every
/// variant in wire order.
fn check_enum_table<T: serde::Serialize + std::fmt::Debug>(
    doc: &str,
    table: &str,
    values: &[T],
    with_payload: bool,
) {
    let expected = variant_rows(values, with_payload);
    let indices: Vec<u32> = expected.iter().map(|(index, _)| *index).collect();
    let contiguous: Vec<u32> = (0..).take(values.len()).collect();
    assert_eq!(
        indices, contiguous,
        "{table}: the test's value list has gaps"
    );
    let columns = if with_payload { 2 } else { 1 };
    assert_eq!(
        leading_cells(doc, table, columns),
        expected,
        "table `{table}`"
    );
}

/// Checks a doc table (#, field, type, ...) against a sample's serde shape.
fn check_struct_table<T: serde::Serialize>(doc: &str, value: &T) {
    let shape = shape_of(value);
    let Shape::Struct { name, fields } = &shape else {
        panic!("{shape:?} is not a struct");
    };
    let expected: Vec<(u32, Vec<String>)> = (1..)
        .zip(fields)
        .map(|(index, (field, shape))| (index, vec![(*field).to_owned(), shape.type_name()]))
        .collect();
    assert_eq!(leading_cells(doc, name, 2), expected, "table `{name}`");
}

#[test]
fn struct_tables_match_the_types() {
    let doc = read_doc();
    check_struct_table(&doc, &full_limits());
    check_struct_table(&doc, &full_request());
    check_struct_table(&doc, &response());
    check_struct_table(&doc, &full_census());
    check_struct_table(
        &doc,
        &RefusedDispatch {
            reason: RefusedReason::InvalidRequest,
            detail: String::new(),
        },
    );
    check_struct_table(&doc, &node_status());
    check_struct_table(&doc, &pool_status());
    check_struct_table(&doc, &worker_status());
    check_struct_table(&doc, &waiting_status());
    check_struct_table(&doc, &Counters::default());
    let peer_hello = peer_hello2();
    check_struct_table(&doc, &peer_hello);
    check_struct_table(&doc, &peer_hello.peers[0]);
    let presence = presence2();
    check_struct_table(&doc, &presence);
    check_struct_table(&doc, &presence.pools[0]);
    check_struct_table(&doc, &presence_group());
    check_struct_table(&doc, &full_relay());
    check_struct_table(
        &doc,
        &reference::RelayOutcome {
            correlation: 17,
            result: reference::DispatchResult::Completed(response()),
        },
    );
    check_struct_table(
        &doc,
        &reference::ServedOutcome {
            correlation: 5,
            served_by: "node-a".to_owned(),
            result: reference::DispatchResult::Completed(response()),
        },
    );
    check_struct_table(&doc, &full_cluster_status());
    check_struct_table(&doc, &peer_status());
    check_struct_table(&doc, &traceparent());
    check_struct_table(&doc, &full_extension());
    check_struct_table(&doc, &full_request_extras());
    check_struct_table(&doc, &HeaderLimits::default());
    check_struct_table(&doc, &welcome3_body());
    check_struct_table(&doc, &full_register3());
    check_struct_table(&doc, &full_census3());
    check_struct_table(&doc, &full_peer_hello3());
    let presence3 = full_presence3();
    check_struct_table(&doc, &presence3);
    check_struct_table(&doc, &presence3.pools[0]);
    check_struct_table(&doc, &presence_group3());
    check_struct_table(&doc, &full_relay3());
    check_struct_table(
        &doc,
        &body_of(subscribe(), |frame| match frame {
            Frame::Subscribe(body) => Some(body),
            _ => None,
        }),
    );
    check_struct_table(&doc, &full_event());
    check_struct_table(&doc, &worker_event());
    check_struct_table(
        &doc,
        &body_of(subscription_ended(), |frame| match frame {
            Frame::SubscriptionEnded(body) => Some(body),
            _ => None,
        }),
    );
    check_struct_table(
        &doc,
        &body_of(status_document(), |frame| match frame {
            Frame::StatusDocument(body) => Some(body),
            _ => None,
        }),
    );
    check_struct_table(
        &doc,
        &body_of(relay_ack(), |frame| match frame {
            Frame::RelayAck(body) => Some(body),
            _ => None,
        }),
    );
    check_struct_table(
        &doc,
        &body_of(resume(), |frame| match frame {
            Frame::Resume(body) => Some(body),
            _ => None,
        }),
    );
    check_struct_table(&doc, &full_resumed());
    check_struct_table(&doc, &pool_setting());
    check_struct_table(&doc, &full_features());
    for frame in [session(), resume_session(), session_resumed(), progress()] {
        match frame {
            Frame::Session(body) => check_struct_table(&doc, &body),
            Frame::ResumeSession(body) => check_struct_table(&doc, &body),
            Frame::SessionResumed(body) => check_struct_table(&doc, &body),
            Frame::Progress(body) => check_struct_table(&doc, &body),
            other => panic!("no table for {}", other.name()),
        }
    }
}

// Each `*_values` function lists every variant once, in wire order. The `match` makes a
// new variant a compile error here until it is added to the list and to PROTOCOL.md.

fn role_values() -> Vec<Role> {
    let all = vec![Role::Worker, Role::Producer, Role::Peer];
    for value in &all {
        match value {
            Role::Worker | Role::Producer | Role::Peer => {}
        }
    }
    all
}

fn refusal_code_values() -> Vec<RefusalCode> {
    use RefusalCode::*;
    let all = vec![
        VersionMismatch,
        Unauthorized,
        RoleNotSupported,
        TooManyConnections,
        Draining,
        EmptyNamespaces,
        EmptyActivityTypes,
        ZeroCapacity,
        InvalidField,
        LimitExceeded,
        Rejected,
        Unsupported,
        Superseded,
        Cancelled,
        SessionUnknown,
    ];
    for value in &all {
        match value {
            VersionMismatch | Unauthorized | RoleNotSupported | TooManyConnections | Draining
            | EmptyNamespaces | EmptyActivityTypes | ZeroCapacity | InvalidField
            | LimitExceeded | Rejected | Unsupported | Superseded | Cancelled | SessionUnknown => {}
        }
    }
    all
}

fn error_code_values() -> Vec<ErrorCode> {
    use ErrorCode::*;
    let all = vec![
        Malformed,
        Oversize,
        UnknownFrameKind,
        UnexpectedFrame,
        HandshakeTimeout,
        LivenessTimeout,
        ZeroCapacity,
        ShuttingDown,
        LimitExceeded,
        FrameTimeout,
        SlowConsumer,
        Unsupported,
    ];
    for value in &all {
        match value {
            Malformed | Oversize | UnknownFrameKind | UnexpectedFrame | HandshakeTimeout
            | LivenessTimeout | ZeroCapacity | ShuttingDown | LimitExceeded | FrameTimeout
            | SlowConsumer | Unsupported => {}
        }
    }
    all
}

fn node_routing_values() -> Vec<NodeRouting> {
    let nodes = vec!["box-7".to_owned()];
    let all = vec![
        NodeRouting::Any,
        NodeRouting::Pin("box-7".to_owned()),
        NodeRouting::Prefer(nodes.clone()),
        NodeRouting::Require(nodes),
    ];
    for value in &all {
        match value {
            NodeRouting::Any
            | NodeRouting::Pin(_)
            | NodeRouting::Prefer(_)
            | NodeRouting::Require(_) => {}
        }
    }
    all
}

fn activity_outcome_values() -> Vec<ActivityOutcome> {
    let all = vec![
        ActivityOutcome::Success(Bytes::new()),
        ActivityOutcome::Failure {
            message: String::new(),
            retryable: false,
        },
    ];
    for value in &all {
        match value {
            ActivityOutcome::Success(_) | ActivityOutcome::Failure { .. } => {}
        }
    }
    all
}

/// Every variant of a result as it lies on the wire, of every version.
fn dispatch_result_values() -> Vec<reference::DispatchResult> {
    use reference::DispatchResult as Wire;
    let all = vec![
        Wire::Completed(response()),
        Wire::NoWorker(full_census()),
        Wire::WorkerLost { worker_id: 0 },
        Wire::Timeout {
            worker_id: 0,
            after_ms: 0,
        },
        Wire::Refused(RefusedDispatch {
            reason: RefusedReason::InvalidRequest,
            detail: String::new(),
        }),
        Wire::Cancelled,
        Wire::Draining,
        Wire::PeerLost {
            peer: String::new(),
            after_ms: 0,
        },
        Wire::ShutDown { after_ms: 0 },
        Wire::NoWorker3(full_census3()),
        Wire::HeartbeatTimeout {
            worker_id: 0,
            after_ms: 0,
        },
    ];
    for value in &all {
        match value {
            Wire::Completed(_)
            | Wire::NoWorker(_)
            | Wire::WorkerLost { .. }
            | Wire::Timeout { .. }
            | Wire::Refused(_)
            | Wire::Cancelled
            | Wire::Draining
            | Wire::PeerLost { .. }
            | Wire::ShutDown { .. }
            | Wire::NoWorker3(_)
            | Wire::HeartbeatTimeout { .. } => {}
        }
    }
    // The one result of every version reaches each of them.
    let _: fn(&DispatchResult) = |one| match one {
        DispatchResult::Completed(_)
        | DispatchResult::NoWorker(_)
        | DispatchResult::WorkerLost { .. }
        | DispatchResult::Timeout { .. }
        | DispatchResult::Refused(_)
        | DispatchResult::Cancelled
        | DispatchResult::Draining
        | DispatchResult::PeerLost { .. }
        | DispatchResult::ShutDown { .. }
        | DispatchResult::HeartbeatTimeout { .. } => {}
    };
    all
}

fn no_worker_reason_values() -> Vec<NoWorkerReason> {
    use NoWorkerReason::*;
    let all = vec![
        PoolEmpty,
        NoActivityMatch,
        NodeFilterMatchedNobody,
        AllAtCapacity,
        AllExcluded,
        AllUnreachable,
        AllInProbation,
        DeploymentMatchedNobody,
        CapabilityMatchedNobody,
    ];
    for value in &all {
        match value {
            PoolEmpty
            | NoActivityMatch
            | NodeFilterMatchedNobody
            | AllAtCapacity
            | AllExcluded
            | AllUnreachable
            | AllInProbation
            | DeploymentMatchedNobody
            | CapabilityMatchedNobody => {}
        }
    }
    all
}

fn refused_reason_values() -> Vec<RefusedReason> {
    use RefusedReason::*;
    let all = vec![
        InvalidRequest,
        WorkerBackpressure,
        TooManyInFlight,
        DuplicateCorrelation,
        NamespaceNotGranted,
        Unsupported,
        FairnessCapReached,
        RoleNotGranted,
    ];
    for value in &all {
        match value {
            InvalidRequest | WorkerBackpressure | TooManyInFlight | DuplicateCorrelation
            | NamespaceNotGranted | Unsupported | FairnessCapReached | RoleNotGranted => {}
        }
    }
    all
}

fn peer_link_state_values() -> Vec<PeerLinkState> {
    let all = vec![PeerLinkState::Connecting, PeerLinkState::Up];
    for value in &all {
        match value {
            PeerLinkState::Connecting | PeerLinkState::Up => {}
        }
    }
    all
}

fn event_topic_values() -> Vec<EventTopic> {
    let all = vec![EventTopic::Workers, EventTopic::Peers];
    for value in &all {
        match value {
            EventTopic::Workers | EventTopic::Peers => {}
        }
    }
    all
}

fn exclusion_reason_values() -> Vec<ExclusionReason> {
    use ExclusionReason::*;
    let all = vec![Unreachable, Draining, Probation];
    for value in &all {
        match value {
            Unreachable | Draining | Probation => {}
        }
    }
    all
}

fn departure_reason_values() -> Vec<DepartureReason> {
    use DepartureReason::*;
    let all = vec![
        Disconnected,
        MissedPings,
        Drained,
        NodeShutdown,
        RefusedAtRegistration,
        Superseded,
        ProtocolError,
    ];
    for value in &all {
        match value {
            Disconnected
            | MissedPings
            | Drained
            | NodeShutdown
            | RefusedAtRegistration
            | Superseded
            | ProtocolError => {}
        }
    }
    all
}

/// The smallest worker an event can name.
fn least_worker_event() -> WorkerEvent {
    WorkerEvent {
        worker_id: 42,
        identity: "w1".to_owned(),
        deployment: None,
        instance_id: None,
        channels: Vec::new(),
    }
}

/// Every event, naming the worker `worker` builds.
fn node_event_values(worker: fn() -> WorkerEvent) -> Vec<NodeEvent> {
    let all = vec![
        NodeEvent::WorkerRegistered(worker()),
        NodeEvent::WorkerExcluded {
            worker: worker(),
            reason: ExclusionReason::Probation,
        },
        NodeEvent::WorkerRestored(worker()),
        NodeEvent::WorkerDeparted {
            worker: worker(),
            reason: DepartureReason::MissedPings,
        },
        NodeEvent::PeerUp {
            node_id: "node-b".to_owned(),
            incarnation: 9,
            address: "10.0.0.2:7400".to_owned(),
        },
        NodeEvent::PeerDown {
            node_id: "node-b".to_owned(),
            incarnation: 9,
            reason: "missed pings".to_owned(),
        },
        NodeEvent::Missed { count: 3 },
    ];
    for value in &all {
        match value {
            NodeEvent::WorkerRegistered(_)
            | NodeEvent::WorkerExcluded { .. }
            | NodeEvent::WorkerRestored(_)
            | NodeEvent::WorkerDeparted { .. }
            | NodeEvent::PeerUp { .. }
            | NodeEvent::PeerDown { .. }
            | NodeEvent::Missed { .. } => {}
        }
    }
    all
}

#[test]
fn enum_tables_match_variant_indices() {
    let doc = read_doc();
    check_enum_table(&doc, "Role", &role_values(), false);
    check_enum_table(&doc, "RefusalCode", &refusal_code_values(), false);
    check_enum_table(&doc, "ErrorCode", &error_code_values(), false);
    check_enum_table(&doc, "NodeRouting", &node_routing_values(), true);
    check_enum_table(&doc, "ActivityOutcome", &activity_outcome_values(), true);
    check_enum_table(&doc, "DispatchResult", &dispatch_result_values(), true);
    check_enum_table(&doc, "NoWorkerReason", &no_worker_reason_values(), false);
    check_enum_table(&doc, "RefusedReason", &refused_reason_values(), false);
    check_enum_table(&doc, "PeerLinkState", &peer_link_state_values(), false);
    check_enum_table(&doc, "EventTopic", &event_topic_values(), false);
    check_enum_table(&doc, "ExclusionReason", &exclusion_reason_values(), false);
    check_enum_table(&doc, "DepartureReason", &departure_reason_values(), false);
    check_enum_table(&doc, "NodeEvent", &node_event_values(worker_event), true);
}

#[test]
fn the_doc_names_every_error_and_refusal_code() {
    let doc = read_doc();
    let names = error_code_values()
        .into_iter()
        .map(|code| format!("{code:?}"))
        .chain(
            refusal_code_values()
                .into_iter()
                .map(|code| format!("{code:?}")),
        );
    for name in names {
        assert!(
            doc.contains(&format!("`{name}`")),
            "PROTOCOL.md never names `{name}`"
        );
    }
}

#[test]
fn the_doc_states_the_current_constants() {
    let doc = read_doc();
    for fact in [
        format!("`PROTOCOL_VERSION` = {PROTOCOL_VERSION}"),
        format!("`DEFAULT_MAX_FRAME_LEN` = {DEFAULT_MAX_FRAME_LEN}"),
        // The first unknown kind, in the bad-input table of section 1.
        format!(
            "({} or more in version {PROTOCOL_VERSION})",
            FrameKind::ALL.len()
        ),
    ] {
        assert!(doc.contains(&fact), "PROTOCOL.md does not state `{fact}`");
    }
}

// ---------------------------------------------------------------------------------------
// Claims of sections 1 and 2
// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// Test vectors for other codecs: `vectors.json`
// ---------------------------------------------------------------------------------------

/// The examples above as data for codecs in other languages, beside this crate.
fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors.json")
}

/// A kind's body read by serde as the kind lays it out, as JSON: the fields by their
/// PROTOCOL.md names, enums externally tagged, `bytes` as arrays of numbers.
fn body_json(kind: FrameKind, fields: &[u8]) -> serde_json::Value {
    fn read<T: serde::de::DeserializeOwned + serde::Serialize>(fields: &[u8]) -> serde_json::Value {
        let body: T = match postcard::from_bytes(fields) {
            Ok(body) => body,
            Err(error) => panic!("serde cannot read the body: {error}"),
        };
        match serde_json::to_value(&body) {
            Ok(value) => value,
            Err(error) => panic!("serde_json cannot write the body: {error}"),
        }
    }
    match kind {
        FrameKind::Hello => read::<Hello>(fields),
        FrameKind::Welcome => read::<body::Welcome>(fields),
        FrameKind::HelloRefused | FrameKind::RegisterRefused => read::<Refusal>(fields),
        FrameKind::Register => read::<body::Register>(fields),
        FrameKind::Registered => read::<Registered>(fields),
        FrameKind::CapacityUpdate => read::<CapacityUpdate>(fields),
        FrameKind::Push => read::<reference::Push>(fields),
        FrameKind::Reply => read::<Reply>(fields),
        FrameKind::Submit => read::<reference::Submit>(fields),
        FrameKind::Outcome => read::<reference::OutcomeFrame>(fields),
        FrameKind::Cancel => read::<Cancel>(fields),
        FrameKind::Ping => read::<Ping>(fields),
        FrameKind::Pong => read::<Pong>(fields),
        FrameKind::Drain => read::<Drain>(fields),
        FrameKind::Drained => read::<Drained>(fields),
        FrameKind::Goodbye => read::<Goodbye>(fields),
        FrameKind::Error => read::<ErrorFrame>(fields),
        FrameKind::StatusQuery => read::<StatusQuery>(fields),
        FrameKind::Status => read::<StatusReport>(fields),
        FrameKind::PeerHello => read::<body::PeerHello>(fields),
        FrameKind::Presence => read::<body::Presence>(fields),
        FrameKind::Relay => read::<reference::Relay>(fields),
        FrameKind::RelayOutcome => read::<reference::RelayOutcome>(fields),
        FrameKind::ServedOutcome => read::<reference::ServedOutcome>(fields),
        FrameKind::ClusterStatus => read::<ClusterStatusReport>(fields),
        FrameKind::Submit3 => read::<reference::Submit3>(fields),
        FrameKind::Push3 => read::<reference::Push3>(fields),
        FrameKind::Relay3 => read::<reference::Relay3>(fields),
        FrameKind::Register3 => read::<Register>(fields),
        FrameKind::Welcome3 => read::<body::Welcome3>(fields),
        FrameKind::Presence3 => read::<Presence>(fields),
        FrameKind::PeerHello3 => read::<PeerHello>(fields),
        FrameKind::Subscribe => read::<Subscribe>(fields),
        FrameKind::Event => read::<Event>(fields),
        FrameKind::SubscriptionEnded => read::<SubscriptionEnded>(fields),
        FrameKind::StatusDocument => read::<StatusDocument>(fields),
        FrameKind::Farewell => read::<Farewell>(fields),
        FrameKind::RelayAck => read::<RelayAck>(fields),
        FrameKind::Resume => read::<Resume>(fields),
        FrameKind::Resumed => read::<Resumed>(fields),
        FrameKind::PoolSettings => read::<PoolSettings>(fields),
        FrameKind::Features => read::<Features>(fields),
        FrameKind::Session => read::<Session>(fields),
        FrameKind::ResumeSession => read::<ResumeSession>(fields),
        FrameKind::SessionResumed => read::<SessionResumed>(fields),
        FrameKind::Progress => read::<Progress>(fields),
    }
}

/// Every example as a vector: its name, the dialect its bytes are written for, the kind,
/// the fields the bytes read as, and the whole frame in hex.
fn vectors() -> String {
    let mut vectors = Vec::new();
    for (name, dialect, frame, _) in examples() {
        let bytes = encode(&frame, dialect);
        let body = bytes.get(4..).unwrap_or_default();
        let (discriminant, fields) = match postcard::take_from_bytes::<u32>(body) {
            Ok(read) => read,
            Err(error) => panic!("example `{name}` has no kind: {error}"),
        };
        let Some(kind) = FrameKind::from_discriminant(discriminant) else {
            panic!("example `{name}` has an unknown kind {discriminant}");
        };
        vectors.push(serde_json::json!({
            "name": name,
            "version": dialect.version(),
            "listed": dialect.listed().names(),
            "kind": discriminant,
            "frame": format!("{kind:?}"),
            "fields": body_json(kind, fields),
            "hex": bytes.iter().map(|byte| format!("{byte:02x}")).collect::<String>(),
        }));
    }
    let document = serde_json::json!({
        "protocol_version": PROTOCOL_VERSION,
        "vectors": vectors,
    });
    match serde_json::to_string_pretty(&document) {
        Ok(text) => text + "\n",
        Err(error) => panic!("cannot write the vectors: {error}"),
    }
}

#[test]
fn the_vectors_file_holds_every_example() {
    let expected = vectors();
    let path = vectors_path();
    if std::env::var_os(UPDATE_ENV).is_some_and(|value| value == "1") {
        let staged = path.with_extension("json.update");
        if let Err(error) =
            std::fs::write(&staged, &expected).and_then(|()| std::fs::rename(&staged, &path))
        {
            panic!("cannot write {}: {error}", path.display());
        }
        return;
    }
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        found == expected,
        "{} is stale or missing; run `{UPDATE_ENV}=1 cargo test -p lintel-wire --test protocol_doc`",
        path.display()
    );
}

#[test]
fn every_vector_decodes_and_encodes_again_to_its_bytes() {
    let text = std::fs::read_to_string(vectors_path()).unwrap_or_default();
    let document: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let vectors = document["vectors"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        vectors.len(),
        examples().len(),
        "vectors.json holds every example"
    );
    for vector in vectors {
        let name = vector["name"].as_str().unwrap_or_default();
        let hex = vector["hex"].as_str().unwrap_or_default();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .filter_map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
            .collect();
        let version = vector["version"]
            .as_u64()
            .and_then(|v| u16::try_from(v).ok());
        let listed = vector["listed"].as_array().cloned().unwrap_or_default();
        let listed = FeatureSet::named(listed.iter().filter_map(|name| name.as_str()));
        let dialect = Dialect::new(version.unwrap_or_default(), listed);
        let mut buf = BytesMut::from(&bytes[..]);
        let Ok(Some(frame)) = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN) else {
            panic!("vector `{name}` does not decode");
        };
        assert_eq!(
            frame
                .kind_at(dialect.version())
                .ok()
                .map(|kind| kind as u64),
            vector["kind"].as_u64(),
            "vector `{name}`: the kind"
        );
        assert_eq!(encode(&frame, dialect), bytes, "vector `{name}`");
    }
}

#[test]
fn every_example_decodes_back() {
    for (name, dialect, frame, read) in examples() {
        let mut buf = BytesMut::from(&encode(&frame, dialect)[..]);
        let decoded = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN);
        assert_eq!(decoded.ok().flatten(), Some(read), "example `{name}`");
        assert!(buf.is_empty(), "example `{name}` left bytes behind");
    }
}

#[test]
fn the_decoding_rules_of_sections_1_and_2_hold() {
    use DecodeError::*;
    // Hello with every field minimal: versions 1..=1, Worker, empty name, no token.
    let hello = |tail: &[u8]| [&[0x00, 0x01, 0x01, 0x00, 0x00][..], tail].concat();
    type Check = fn(&Result<Frame, DecodeError>) -> bool;
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("minimal Hello", hello(&[0x00]), |r| r.is_ok()),
        ("empty body", vec![], |r| matches!(r, Err(MissingKind))),
        ("overlong kind", vec![0x8c, 0x00, 0x00], |r| {
            matches!(r, Err(MissingKind))
        }),
        ("truncated kind", vec![0x80], |r| {
            matches!(r, Err(MissingKind))
        }),
        ("unknown kind", vec![0x2f], |r| {
            matches!(r, Err(UnknownKind { discriminant: 47 }))
        }),
        ("last known kind, empty body", vec![0x2e], |r| {
            matches!(
                r,
                Err(Malformed {
                    kind: FrameKind::Progress,
                    ..
                })
            )
        }),
        ("overlong body varint", vec![0x0c, 0x80, 0x00], |r| {
            matches!(r, Ok(Frame::Ping(Ping { nonce: 0 })))
        }),
        (
            "u16 at its limit",
            vec![0x00, 0xff, 0xff, 0x03, 0x01, 0x00, 0x00, 0x00],
            |r| {
                matches!(
                    r,
                    Ok(Frame::Hello(Hello {
                        min_version: u16::MAX,
                        ..
                    }))
                )
            },
        ),
        (
            "u16 last byte too big",
            vec![0x00, 0xff, 0xff, 0x04, 0x01, 0x00, 0x00, 0x00],
            |r| matches!(r, Err(Malformed { .. })),
        ),
        (
            "u16 too long",
            vec![0x00, 0x80, 0x80, 0x80, 0x00, 0x01, 0x00, 0x00, 0x00],
            |r| matches!(r, Err(Malformed { .. })),
        ),
        ("option tag 2", hello(&[0x02]), |r| {
            matches!(r, Err(Malformed { .. }))
        }),
        (
            "unknown nested variant",
            vec![0x00, 0x01, 0x01, 0x03, 0x00, 0x00],
            |r| matches!(r, Err(Malformed { .. })),
        ),
        (
            "invalid UTF-8",
            vec![0x00, 0x01, 0x01, 0x00, 0x01, 0xff, 0x00],
            |r| matches!(r, Err(Malformed { .. })),
        ),
        // Reply whose outcome is Failure { message: "", retryable: 2 }.
        (
            "bool byte 2",
            vec![0x08, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02],
            |r| matches!(r, Err(Malformed { .. })),
        ),
        ("truncated body", vec![0x0c], |r| {
            matches!(r, Err(Malformed { .. }))
        }),
        ("trailing bytes", vec![0x0c, 0x01, 0x00], |r| {
            matches!(r, Err(TrailingBytes { extra: 1, .. }))
        }),
    ];
    for (what, body, expected) in cases {
        let result = decode_body(&body);
        assert!(expected(&result), "{what}: {result:?}");
    }
}

#[test]
fn an_oversize_prefix_is_refused_and_a_partial_frame_waits() {
    let mut oversize = BytesMut::from(&[0x00, 0x40, 0x00, 0x01][..]);
    assert!(matches!(
        decode_frame(&mut oversize, DEFAULT_MAX_FRAME_LEN),
        Err(DecodeError::Oversize { len: 4_194_305, .. })
    ));
    let whole = encode(&registered(), 1);
    for cut in 0..whole.len() {
        let mut part = BytesMut::from(&whole[..cut]);
        assert!(matches!(
            decode_frame(&mut part, DEFAULT_MAX_FRAME_LEN),
            Ok(None)
        ));
    }
}
