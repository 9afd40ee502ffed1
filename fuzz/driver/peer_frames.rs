//! The version-2 peer frames (kinds 20 to 25): what decodes re-encodes canonically, and
//! structured values round-trip.
//!
//! The input is read three ways: as a frame body exactly as given; as a body whose first byte
//! is mapped onto a peer kind (`20 + (byte - 20) % 6`, wrapping, so a peer body keeps its
//! kind), so that every input exercises a peer body; and through `arbitrary` as a structured
//! `PeerHello`, `Presence`, `Relay`, `RelayOutcome` or `ServedOutcome`, whose result may be
//! any variant of any version (version 3's `NoWorker3` and reasons too), written as a
//! version-2 link writes it.
//!
//! Asserted: a body decodes the same alone and inside a length-prefixed frame; a body that
//! decodes to a peer frame re-encodes to exactly the input, or to strictly fewer bytes when
//! the input held an overlong varint (the decoder's only leniency, `PROTOCOL.md` section 2),
//! and the re-encoding decodes back to an equal frame (what version 2 says in fewer bytes, it
//! says so from then on); every structured value encodes within the default limit, decodes
//! with nothing left over, and its body is canonical.
use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use lintel_wire::{
    ActivityOutcome, Census, DispatchResponse, DispatchResult, Frame, FrameKind, NoWorkerReason,
    PeerHello, PoolPresence, Presence, PresenceGroup, RefusedDispatch, RefusedReason, Relay,
    RelayOutcome, ServedOutcome,
};

use crate::round_trip::{check_body, check_value};
use crate::values::{peers, pick, Request, Routing};

/// The first and the last peer kind.
const FIRST_PEER_KIND: u8 = 20;
const LAST_PEER_KIND: u8 = 25;

/// Checks every invariant above on the input `data`; a violated one panics.
pub fn run(data: &[u8]) {
    check_body(data, is_peer_kind);
    if let Some((&first, rest)) = data.split_first() {
        let kind = peer_kind(first);
        if kind != first {
            check_body(&[&[kind][..], rest].concat(), is_peer_kind);
        }
    }
    if let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) {
        check_value(case.into_frame(), 2);
    }
}

fn peer_kind(byte: u8) -> u8 {
    FIRST_PEER_KIND + byte.wrapping_sub(FIRST_PEER_KIND) % (LAST_PEER_KIND - FIRST_PEER_KIND + 1)
}

fn is_peer_kind(kind: FrameKind) -> bool {
    (u32::from(FIRST_PEER_KIND)..=u32::from(LAST_PEER_KIND)).contains(&kind.discriminant())
}

#[derive(Debug, Arbitrary)]
enum Case {
    PeerHello {
        node_id: String,
        incarnation: u64,
        advertise: String,
        peers: Vec<(String, String)>,
    },
    Presence {
        reset: bool,
        synced: bool,
        draining: bool,
        pools: Vec<Pool>,
    },
    Relay {
        correlation: u64,
        request: Request,
        routing: Routing,
        reply_timeout_ms: u64,
    },
    RelayOutcome {
        correlation: u64,
        result: ResultCase,
    },
    ServedOutcome {
        correlation: u64,
        served_by: String,
        result: ResultCase,
    },
}

impl Case {
    fn into_frame(self) -> Frame {
        match self {
            Case::PeerHello {
                node_id,
                incarnation,
                advertise,
                peers: members,
            } => Frame::from(PeerHello {
                node_id,
                incarnation,
                advertise,
                peers: peers(members),
                ..PeerHello::default()
            }),
            Case::Presence {
                reset,
                synced,
                draining,
                pools,
            } => Frame::Presence(Presence {
                reset,
                synced,
                draining,
                pools: pools.into_iter().map(Pool::into_wire).collect(),
                ..Presence::default()
            }),
            Case::Relay {
                correlation,
                request,
                routing,
                reply_timeout_ms,
            } => Frame::from(Relay {
                correlation,
                request: request.into_wire(),
                extras: Default::default(),
                routing: routing.into_wire(),
                reply_timeout_ms,
            }),
            Case::RelayOutcome {
                correlation,
                result,
            } => Frame::RelayOutcome(RelayOutcome {
                correlation,
                result: result.into_wire(),
            }),
            Case::ServedOutcome {
                correlation,
                served_by,
                result,
            } => Frame::from(ServedOutcome {
                correlation,
                served_by,
                result: result.into_wire(),
            }),
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Pool {
    channel: String,
    workers: u32,
    groups: Vec<Group>,
}

#[derive(Debug, Arbitrary)]
struct Group {
    activity_type: String,
    node: Option<String>,
    workers: u32,
    slots: u32,
    free: u32,
    full: u32,
    draining: u32,
}

impl Pool {
    fn into_wire(self) -> PoolPresence {
        PoolPresence {
            channel: self.channel,
            workers: self.workers,
            groups: self
                .groups
                .into_iter()
                .map(|group| PresenceGroup {
                    activity_type: group.activity_type,
                    node: group.node,
                    workers: group.workers,
                    slots: group.slots,
                    free: group.free,
                    full: group.full,
                    draining: group.draining,
                    ..PresenceGroup::default()
                })
                .collect(),
        }
    }
}

/// `DispatchResult`, every variant of every version.
#[derive(Debug, Arbitrary)]
enum ResultCase {
    Completed {
        workflow_id: String,
        ordinal: u64,
        run_id: Option<String>,
        outcome: Result<Vec<u8>, (String, bool)>,
    },
    NoWorker {
        reason: u8,
        counts: [u32; 5],
        last_departure_ms_ago: Option<u64>,
    },
    WorkerLost {
        worker_id: u64,
    },
    Timeout {
        worker_id: u64,
        after_ms: u64,
    },
    Refused {
        reason: u8,
        detail: String,
    },
    Cancelled,
    Draining,
    PeerLost {
        peer: String,
        after_ms: u64,
    },
    ShutDown {
        after_ms: u64,
    },
    NoWorker3 {
        reason: u8,
        counts: [u32; 8],
        last_departure_ms_ago: Option<u64>,
    },
}

/// Every `NoWorkerReason`, in index order.
const NO_WORKER_REASONS: [NoWorkerReason; 9] = [
    NoWorkerReason::PoolEmpty,
    NoWorkerReason::NoActivityMatch,
    NoWorkerReason::NodeFilterMatchedNobody,
    NoWorkerReason::AllAtCapacity,
    NoWorkerReason::AllExcluded,
    NoWorkerReason::AllUnreachable,
    NoWorkerReason::AllInProbation,
    NoWorkerReason::DeploymentMatchedNobody,
    NoWorkerReason::CapabilityMatchedNobody,
];

/// Every `RefusedReason`, in index order.
const REFUSED_REASONS: [RefusedReason; 7] = [
    RefusedReason::InvalidRequest,
    RefusedReason::WorkerBackpressure,
    RefusedReason::TooManyInFlight,
    RefusedReason::DuplicateCorrelation,
    RefusedReason::NamespaceNotGranted,
    RefusedReason::Unsupported,
    RefusedReason::FairnessCapReached,
];

impl ResultCase {
    fn into_wire(self) -> DispatchResult {
        match self {
            ResultCase::Completed {
                workflow_id,
                ordinal,
                run_id,
                outcome,
            } => DispatchResult::Completed(DispatchResponse {
                workflow_id,
                ordinal,
                run_id,
                outcome: match outcome {
                    Ok(bytes) => ActivityOutcome::Success(Bytes::from(bytes)),
                    Err((message, retryable)) => ActivityOutcome::Failure { message, retryable },
                },
            }),
            ResultCase::NoWorker {
                reason,
                counts: [pool_workers, serving_activity, compatible_workers, at_capacity, excluded],
                last_departure_ms_ago,
            } => DispatchResult::NoWorker(Census {
                reason: pick(&NO_WORKER_REASONS, reason),
                pool_workers,
                serving_activity,
                compatible_workers,
                deployment_workers: compatible_workers,
                at_capacity,
                draining: excluded,
                probation: None,
                unreachable: None,
                last_departure_ms_ago,
            }),
            ResultCase::WorkerLost { worker_id } => DispatchResult::WorkerLost { worker_id },
            ResultCase::Timeout {
                worker_id,
                after_ms,
            } => DispatchResult::Timeout {
                worker_id,
                after_ms,
            },
            ResultCase::Refused { reason, detail } => DispatchResult::Refused(RefusedDispatch {
                reason: pick(&REFUSED_REASONS, reason),
                detail,
            }),
            ResultCase::Cancelled => DispatchResult::Cancelled,
            ResultCase::Draining => DispatchResult::Draining,
            ResultCase::PeerLost { peer, after_ms } => DispatchResult::PeerLost { peer, after_ms },
            ResultCase::ShutDown { after_ms } => DispatchResult::ShutDown { after_ms },
            ResultCase::NoWorker3 {
                reason,
                counts:
                    [pool_workers, serving_activity, compatible_workers, deployment_workers, at_capacity, draining, probation, unreachable],
                last_departure_ms_ago,
            } => DispatchResult::NoWorker(Census {
                reason: pick(&NO_WORKER_REASONS, reason),
                pool_workers,
                serving_activity,
                compatible_workers,
                deployment_workers,
                at_capacity,
                draining,
                probation: Some(probation),
                unreachable: Some(unreachable),
                last_departure_ms_ago,
            }),
        }
    }
}
