//! The frames version 3 added (kinds 26 to 41): what decodes re-encodes canonically, and
//! structured values of every one of them round-trip.
//!
//! The input is read three ways: as a frame body exactly as given; as a body whose first byte
//! is mapped onto a version-3 kind (`26 + (byte - 26) % 16`, wrapping, so a version-3 body
//! keeps its kind), so that every input exercises a version-3 body; and through `arbitrary`
//! as a structured frame of any version-3 kind, with every variant of the enums they carry.
//!
//! Asserted: as in `peer_frames`, a body decodes the same alone and inside a length-prefixed
//! frame; a body that decodes to a version-3 frame re-encodes to exactly the input, or to
//! strictly fewer bytes when the input held an overlong varint (or, kind 26 or 29, nothing of
//! version 3 to carry: it goes as `Submit` or `Register`), and the re-encoding decodes back to
//! an equal frame; every structured value, written as a version-3 connection writes it,
//! encodes within the default limit, decodes with nothing left over, and its body is
//! canonical.
use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use lintel_wire::{
    DepartureReason, Event, EventTopic, ExclusionReason, Extension, Farewell, Frame, FrameKind,
    Header, HeaderLimits, Limits, NodeEvent, PeerHello, PoolPresence, PoolSetting, PoolSettings,
    Presence, PresenceGroup, Push, RefusalCode, Register, Relay, RelayAck, RequestExtras, Resume,
    Resumed, StatusDocument, Submit, Subscribe, SubscriptionEnded, Welcome, WorkerEvent,
};

use crate::round_trip::{check_body, check_value};
use crate::values::{peers, pick, Request, Routing};

/// The first and the last kind of version 3.
const FIRST_KIND: u8 = 26;
const LAST_KIND: u8 = 41;

/// Checks every invariant above on the input `data`; a violated one panics.
pub fn run(data: &[u8]) {
    check_body(data, is_version_3_kind);
    if let Some((&first, rest)) = data.split_first() {
        let kind = version_3_kind(first);
        if kind != first {
            check_body(&[&[kind][..], rest].concat(), is_version_3_kind);
        }
    }
    if let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) {
        check_value(case.into_frame(), 3);
    }
}

fn version_3_kind(byte: u8) -> u8 {
    FIRST_KIND + byte.wrapping_sub(FIRST_KIND) % (LAST_KIND - FIRST_KIND + 1)
}

fn is_version_3_kind(kind: FrameKind) -> bool {
    (u32::from(FIRST_KIND)..=u32::from(LAST_KIND)).contains(&kind.discriminant())
}

#[derive(Debug, Arbitrary)]
enum Case {
    Submit {
        correlation: u64,
        request: Request,
        extras: Extras,
        wait_for_worker_ms: Option<u64>,
        reply_timeout_ms: Option<u64>,
        routing: Routing,
    },
    Push {
        correlation: u64,
        request: Request,
        extras: Extras,
    },
    Relay {
        correlation: u64,
        request: Request,
        extras: Extras,
        routing: Routing,
        reply_timeout_ms: u64,
    },
    Register {
        namespaces: Vec<String>,
        task_queue: String,
        node: Option<String>,
        activity_types: Vec<String>,
        identity: String,
        max_concurrency: u32,
        deployment: Option<String>,
        instance_id: Option<String>,
        extensions: Vec<Ext>,
    },
    Welcome {
        version: u16,
        node_id: String,
        pid: u64,
        limits: (u32, u32, u64, u32, u32, u32),
        header_limits: (u32, u32),
        features: Vec<String>,
    },
    Presence {
        reset: bool,
        synced: bool,
        draining: bool,
        pools: Vec<Pool3>,
        extensions: Vec<Ext>,
    },
    PeerHello {
        node_id: String,
        incarnation: u64,
        advertise: String,
        peers: Vec<(String, String)>,
        features: Vec<String>,
        extensions: Vec<Ext>,
    },
    Subscribe {
        correlation: u64,
        topics: Vec<bool>,
    },
    Event {
        correlation: u64,
        seq: u64,
        at_unix_ms: u64,
        event: EventCase,
    },
    SubscriptionEnded {
        correlation: u64,
        code: u8,
        reason: String,
    },
    StatusDocument {
        correlation: u64,
        json: Vec<u8>,
    },
    Farewell {
        reason: String,
    },
    RelayAck {
        below: u64,
        also: Vec<u64>,
    },
    Resume {
        unanswered: Vec<u64>,
        last: bool,
    },
    Resumed {
        handled_up_to: u64,
        running: Vec<u64>,
        unknown: Vec<u64>,
        last: bool,
    },
    PoolSettings {
        settings: Vec<(String, Option<String>, u64, String)>,
    },
}

#[derive(Debug, Arbitrary)]
struct Extras {
    headers: Vec<(String, String)>,
    priority: Option<u8>,
    fairness_key: Option<String>,
    fairness_weight: Option<u32>,
    deployment: Option<String>,
    extensions: Vec<Ext>,
}

#[derive(Debug, Arbitrary)]
struct Ext {
    tag: u32,
    critical: bool,
    value: Vec<u8>,
}

#[derive(Debug, Arbitrary)]
struct Pool3 {
    channel: String,
    workers: u32,
    groups: Vec<Group3>,
}

#[derive(Debug, Arbitrary)]
struct Group3 {
    activity_type: String,
    node: Option<String>,
    deployment: Option<String>,
    counts: [u32; 7],
}

#[derive(Debug, Arbitrary)]
struct Worker {
    worker_id: u64,
    identity: String,
    deployment: Option<String>,
    instance_id: Option<String>,
    channels: Vec<String>,
}

#[derive(Debug, Arbitrary)]
enum EventCase {
    WorkerRegistered(Worker),
    WorkerExcluded {
        worker: Worker,
        reason: u8,
    },
    WorkerRestored(Worker),
    WorkerDeparted {
        worker: Worker,
        reason: u8,
    },
    PeerUp {
        node_id: String,
        incarnation: u64,
        address: String,
    },
    PeerDown {
        node_id: String,
        incarnation: u64,
        reason: String,
    },
    Missed {
        count: u64,
    },
}

/// Every `RefusalCode`, in index order.
const REFUSAL_CODES: [RefusalCode; 14] = [
    RefusalCode::VersionMismatch,
    RefusalCode::Unauthorized,
    RefusalCode::RoleNotSupported,
    RefusalCode::TooManyConnections,
    RefusalCode::Draining,
    RefusalCode::EmptyNamespaces,
    RefusalCode::EmptyActivityTypes,
    RefusalCode::ZeroCapacity,
    RefusalCode::InvalidField,
    RefusalCode::LimitExceeded,
    RefusalCode::Rejected,
    RefusalCode::Unsupported,
    RefusalCode::Superseded,
    RefusalCode::Cancelled,
];

const EXCLUSIONS: [ExclusionReason; 3] = [
    ExclusionReason::Unreachable,
    ExclusionReason::Draining,
    ExclusionReason::Probation,
];

const DEPARTURES: [DepartureReason; 7] = [
    DepartureReason::Disconnected,
    DepartureReason::MissedPings,
    DepartureReason::Drained,
    DepartureReason::NodeShutdown,
    DepartureReason::RefusedAtRegistration,
    DepartureReason::Superseded,
    DepartureReason::ProtocolError,
];

fn extensions(extensions: Vec<Ext>) -> Vec<Extension> {
    extensions
        .into_iter()
        .map(|ext| Extension {
            tag: ext.tag,
            critical: ext.critical,
            value: Bytes::from(ext.value),
        })
        .collect()
}

impl Extras {
    fn into_wire(self) -> RequestExtras {
        RequestExtras {
            headers: self
                .headers
                .into_iter()
                .map(|(name, value)| Header { name, value })
                .collect(),
            priority: self.priority,
            fairness_key: self.fairness_key,
            fairness_weight: self.fairness_weight,
            deployment: self.deployment,
            extensions: extensions(self.extensions),
        }
    }
}

impl Pool3 {
    fn into_wire(self) -> PoolPresence {
        PoolPresence {
            channel: self.channel,
            workers: self.workers,
            groups: self
                .groups
                .into_iter()
                .map(|group| {
                    let [workers, slots, free, full, draining, probation, unreachable] =
                        group.counts;
                    PresenceGroup {
                        activity_type: group.activity_type,
                        node: group.node,
                        deployment: group.deployment,
                        workers,
                        slots,
                        free,
                        full,
                        draining,
                        probation,
                        unreachable,
                    }
                })
                .collect(),
        }
    }
}

impl Worker {
    fn into_wire(self) -> WorkerEvent {
        WorkerEvent {
            worker_id: self.worker_id,
            identity: self.identity,
            deployment: self.deployment,
            instance_id: self.instance_id,
            channels: self.channels,
        }
    }
}

impl EventCase {
    fn into_wire(self) -> NodeEvent {
        match self {
            EventCase::WorkerRegistered(worker) => NodeEvent::WorkerRegistered(worker.into_wire()),
            EventCase::WorkerExcluded { worker, reason } => NodeEvent::WorkerExcluded {
                worker: worker.into_wire(),
                reason: pick(&EXCLUSIONS, reason),
            },
            EventCase::WorkerRestored(worker) => NodeEvent::WorkerRestored(worker.into_wire()),
            EventCase::WorkerDeparted { worker, reason } => NodeEvent::WorkerDeparted {
                worker: worker.into_wire(),
                reason: pick(&DEPARTURES, reason),
            },
            EventCase::PeerUp {
                node_id,
                incarnation,
                address,
            } => NodeEvent::PeerUp {
                node_id,
                incarnation,
                address,
            },
            EventCase::PeerDown {
                node_id,
                incarnation,
                reason,
            } => NodeEvent::PeerDown {
                node_id,
                incarnation,
                reason,
            },
            EventCase::Missed { count } => NodeEvent::Missed { count },
        }
    }
}

impl Case {
    fn into_frame(self) -> Frame {
        match self {
            Case::Submit {
                correlation,
                request,
                extras,
                wait_for_worker_ms,
                reply_timeout_ms,
                routing,
            } => Frame::from(Submit {
                correlation,
                request: request.into_wire(),
                extras: extras.into_wire(),
                wait_for_worker_ms,
                reply_timeout_ms,
                routing: routing.into_wire(),
            }),
            Case::Push {
                correlation,
                request,
                extras,
            } => Frame::from(Push {
                correlation,
                request: request.into_wire(),
                extras: extras.into_wire(),
            }),
            Case::Relay {
                correlation,
                request,
                extras,
                routing,
                reply_timeout_ms,
            } => Frame::from(Relay {
                correlation,
                request: request.into_wire(),
                extras: extras.into_wire(),
                routing: routing.into_wire(),
                reply_timeout_ms,
            }),
            Case::Register {
                namespaces,
                task_queue,
                node,
                activity_types,
                identity,
                max_concurrency,
                deployment,
                instance_id,
                extensions: exts,
            } => Frame::from(Register {
                namespaces,
                task_queue,
                node,
                activity_types,
                identity,
                max_concurrency,
                deployment,
                instance_id,
                extensions: extensions(exts),
            }),
            Case::Welcome {
                version,
                node_id,
                pid,
                limits:
                    (
                        max_frame_len,
                        max_in_flight,
                        ping_interval_ms,
                        max_missed_pings,
                        max_name_len,
                        max_set_len,
                    ),
                header_limits: (max_headers, max_header_bytes),
                features,
            } => Frame::from(Welcome {
                version,
                node_id,
                pid,
                limits: Limits {
                    max_frame_len,
                    max_in_flight,
                    ping_interval_ms,
                    max_missed_pings,
                    max_name_len,
                    max_set_len,
                },
                header_limits: Some(HeaderLimits {
                    max_headers,
                    max_header_bytes,
                }),
                features,
            }),
            Case::Presence {
                reset,
                synced,
                draining,
                pools,
                extensions: exts,
            } => Frame::from(Presence {
                reset,
                synced,
                draining,
                pools: pools.into_iter().map(Pool3::into_wire).collect(),
                extensions: extensions(exts),
            }),
            Case::PeerHello {
                node_id,
                incarnation,
                advertise,
                peers: members,
                features,
                extensions: exts,
            } => Frame::from(PeerHello {
                node_id,
                incarnation,
                advertise,
                peers: peers(members),
                features,
                extensions: extensions(exts),
            }),
            Case::Subscribe {
                correlation,
                topics,
            } => Frame::from(Subscribe {
                correlation,
                topics: topics
                    .into_iter()
                    .map(|peers| {
                        if peers {
                            EventTopic::Peers
                        } else {
                            EventTopic::Workers
                        }
                    })
                    .collect(),
            }),
            Case::Event {
                correlation,
                seq,
                at_unix_ms,
                event,
            } => Frame::from(Event {
                correlation,
                seq,
                at_unix_ms,
                event: event.into_wire(),
            }),
            Case::SubscriptionEnded {
                correlation,
                code,
                reason,
            } => Frame::from(SubscriptionEnded {
                correlation,
                code: pick(&REFUSAL_CODES, code),
                reason,
            }),
            Case::StatusDocument { correlation, json } => Frame::from(StatusDocument {
                correlation,
                json: Bytes::from(json),
            }),
            Case::Farewell { reason } => Frame::from(Farewell { reason }),
            Case::RelayAck { below, also } => Frame::from(RelayAck { below, also }),
            Case::Resume { unanswered, last } => Frame::from(Resume { unanswered, last }),
            Case::Resumed {
                handled_up_to,
                running,
                unknown,
                last,
            } => Frame::from(Resumed {
                handled_up_to,
                running,
                unknown,
                last,
            }),
            Case::PoolSettings { settings } => Frame::from(PoolSettings {
                settings: settings
                    .into_iter()
                    .map(
                        |(channel, current_deployment, set_at_unix_ms, set_by)| PoolSetting {
                            channel,
                            current_deployment,
                            set_at_unix_ms,
                            set_by,
                        },
                    )
                    .collect(),
            }),
        }
    }
}
