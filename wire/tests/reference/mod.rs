//! A reference for the hand codecs: the bodies of the hot kinds (and of the results they carry)
//! as PROTOCOL.md lays them out, kind by kind, read and written by serde's postcard; and the
//! translations between them and the one message of each idea, written from PROTOCOL.md.
//! The codec must agree with it to the byte, and decode what postcard decodes.

#![allow(dead_code)]

use lintel_wire::{
    decode_body, Census, Dialect, DispatchRequest, DispatchResponse, FeatureSet, Frame, FrameKind,
    NoWorkerReason, NodeRouting, RefusedDispatch, RefusedReason, Reply, RequestExtras,
};
use serde::{Deserialize, Serialize};

/// Kind `Push`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Push {
    pub correlation: u64,
    pub request: DispatchRequest,
}

/// Kind `Push3`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Push3 {
    pub correlation: u64,
    pub request: DispatchRequest,
    pub extras: RequestExtras,
}

/// Kind `Submit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submit {
    pub correlation: u64,
    pub request: DispatchRequest,
    pub wait_for_worker_ms: Option<u64>,
    pub reply_timeout_ms: Option<u64>,
    pub routing: NodeRouting,
}

/// Kind `Submit3`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submit3 {
    pub correlation: u64,
    pub request: DispatchRequest,
    pub extras: RequestExtras,
    pub wait_for_worker_ms: Option<u64>,
    pub reply_timeout_ms: Option<u64>,
    pub routing: NodeRouting,
}

/// Kind `Relay`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relay {
    pub correlation: u64,
    pub request: DispatchRequest,
    pub routing: NodeRouting,
    pub reply_timeout_ms: u64,
}

/// Kind `Relay3`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relay3 {
    pub correlation: u64,
    pub request: DispatchRequest,
    pub extras: RequestExtras,
    pub routing: NodeRouting,
    pub reply_timeout_ms: u64,
}

/// The census of `NoWorker3`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Census3 {
    pub reason: NoWorkerReason,
    pub pool_workers: u32,
    pub serving_activity: u32,
    pub compatible_workers: u32,
    pub deployment_workers: u32,
    pub at_capacity: u32,
    pub draining: u32,
    pub probation: u32,
    pub unreachable: u32,
    pub last_departure_ms_ago: Option<u64>,
}

/// `DispatchResult` as it lies on the wire: every variant of every version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DispatchResult {
    Completed(DispatchResponse),
    NoWorker(lintel_wire::body::Census),
    WorkerLost { worker_id: u64 },
    Timeout { worker_id: u64, after_ms: u64 },
    Refused(RefusedDispatch),
    Cancelled,
    Draining,
    PeerLost { peer: String, after_ms: u64 },
    ShutDown { after_ms: u64 },
    NoWorker3(Census3),
    HeartbeatTimeout { worker_id: u64, after_ms: u64 },
}

/// Kind `Outcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeFrame {
    pub correlation: u64,
    pub result: DispatchResult,
}

/// Kind `RelayOutcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayOutcome {
    pub correlation: u64,
    pub result: DispatchResult,
}

/// Kind `ServedOutcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedOutcome {
    pub correlation: u64,
    pub served_by: String,
    pub result: DispatchResult,
}

// ---------------------------------------------------------------------------------------------
// Results across versions (PROTOCOL.md section 4, `Census3` and `RefusedReason`)
// ---------------------------------------------------------------------------------------------

/// A reason of version 3 as versions 1 and 2 read it.
fn reason_for_version_2(reason: NoWorkerReason) -> NoWorkerReason {
    match reason {
        NoWorkerReason::AllUnreachable | NoWorkerReason::AllInProbation => {
            NoWorkerReason::AllExcluded
        }
        NoWorkerReason::DeploymentMatchedNobody | NoWorkerReason::CapabilityMatchedNobody => {
            NoWorkerReason::NodeFilterMatchedNobody
        }
        other => other,
    }
}

/// A reason as a connection of `dialect` reads it: `RoleNotGranted` only where it was listed,
/// else `NamespaceNotGranted`, which version 1 reads as `InvalidRequest`.
fn refused_for(reason: RefusedReason, dialect: Dialect) -> RefusedReason {
    let version = dialect.version();
    match reason {
        RefusedReason::RoleNotGranted if dialect.lists(FeatureSet::ROLE_NOT_GRANTED) => reason,
        RefusedReason::RoleNotGranted => refused_for(RefusedReason::NamespaceNotGranted, dialect),
        RefusedReason::NamespaceNotGranted if version < 2 => RefusedReason::InvalidRequest,
        RefusedReason::Unsupported if version < 3 => RefusedReason::InvalidRequest,
        RefusedReason::FairnessCapReached if version < 3 => RefusedReason::TooManyInFlight,
        other => other,
    }
}

/// The one census as a connection of `version` is sent it.
pub fn census_on_wire(census: &Census, version: u16) -> DispatchResult {
    if version >= 3 {
        return DispatchResult::NoWorker3(Census3 {
            reason: census.reason,
            pool_workers: census.pool_workers,
            serving_activity: census.serving_activity,
            compatible_workers: census.compatible_workers,
            deployment_workers: census.deployment_workers,
            at_capacity: census.at_capacity,
            draining: census.draining,
            probation: census.probation.unwrap_or(0),
            unreachable: census.unreachable.unwrap_or(0),
            last_departure_ms_ago: census.last_departure_ms_ago,
        });
    }
    DispatchResult::NoWorker(lintel_wire::body::Census {
        reason: reason_for_version_2(census.reason),
        pool_workers: census.pool_workers,
        serving_activity: census.serving_activity,
        compatible_workers: census.deployment_workers,
        at_capacity: census.at_capacity,
        excluded: census.draining + census.probation.unwrap_or(0) + census.unreachable.unwrap_or(0),
        last_departure_ms_ago: census.last_departure_ms_ago,
    })
}

/// The one result as a connection of `dialect` is sent it.
pub fn result_on_wire(
    result: &lintel_wire::DispatchResult,
    dialect: impl Into<Dialect>,
) -> DispatchResult {
    use lintel_wire::DispatchResult as One;
    let dialect = dialect.into();
    let version = dialect.version();
    match result.clone() {
        One::Completed(response) => DispatchResult::Completed(response),
        One::NoWorker(census) => census_on_wire(&census, version),
        One::WorkerLost { worker_id } => DispatchResult::WorkerLost { worker_id },
        One::Timeout {
            worker_id,
            after_ms,
        } => DispatchResult::Timeout {
            worker_id,
            after_ms,
        },
        One::HeartbeatTimeout {
            worker_id,
            after_ms,
        } if dialect.lists(FeatureSet::HEARTBEAT_TIMEOUT) => DispatchResult::HeartbeatTimeout {
            worker_id,
            after_ms,
        },
        One::HeartbeatTimeout {
            worker_id,
            after_ms,
        } => DispatchResult::Timeout {
            worker_id,
            after_ms,
        },
        One::Refused(refused) => DispatchResult::Refused(RefusedDispatch {
            reason: refused_for(refused.reason, dialect),
            detail: refused.detail,
        }),
        One::Cancelled => DispatchResult::Cancelled,
        One::Draining => DispatchResult::Draining,
        One::PeerLost { .. } | One::ShutDown { .. } if version < 2 => {
            DispatchResult::WorkerLost { worker_id: 0 }
        }
        One::PeerLost { peer, after_ms } => DispatchResult::PeerLost { peer, after_ms },
        One::ShutDown { after_ms } => DispatchResult::ShutDown { after_ms },
    }
}

/// A result as it lay on the wire, read as the one result: a version-2 census with no
/// probation or unreachable count.
pub fn result_read(result: DispatchResult) -> lintel_wire::DispatchResult {
    use lintel_wire::DispatchResult as One;
    match result {
        DispatchResult::Completed(response) => One::Completed(response),
        DispatchResult::NoWorker(census) => One::NoWorker(Census {
            reason: census.reason,
            pool_workers: census.pool_workers,
            serving_activity: census.serving_activity,
            compatible_workers: census.compatible_workers,
            deployment_workers: census.compatible_workers,
            at_capacity: census.at_capacity,
            draining: census.excluded,
            probation: None,
            unreachable: None,
            last_departure_ms_ago: census.last_departure_ms_ago,
        }),
        DispatchResult::NoWorker3(census) => One::NoWorker(Census {
            reason: census.reason,
            pool_workers: census.pool_workers,
            serving_activity: census.serving_activity,
            compatible_workers: census.compatible_workers,
            deployment_workers: census.deployment_workers,
            at_capacity: census.at_capacity,
            draining: census.draining,
            probation: Some(census.probation),
            unreachable: Some(census.unreachable),
            last_departure_ms_ago: census.last_departure_ms_ago,
        }),
        DispatchResult::WorkerLost { worker_id } => One::WorkerLost { worker_id },
        DispatchResult::Timeout {
            worker_id,
            after_ms,
        } => One::Timeout {
            worker_id,
            after_ms,
        },
        DispatchResult::Refused(refused) => One::Refused(refused),
        DispatchResult::Cancelled => One::Cancelled,
        DispatchResult::Draining => One::Draining,
        DispatchResult::PeerLost { peer, after_ms } => One::PeerLost { peer, after_ms },
        DispatchResult::ShutDown { after_ms } => One::ShutDown { after_ms },
        DispatchResult::HeartbeatTimeout {
            worker_id,
            after_ms,
        } => One::HeartbeatTimeout {
            worker_id,
            after_ms,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Whole bodies
// ---------------------------------------------------------------------------------------------

fn with_kind<T: Serialize>(kind: FrameKind, body: &T) -> Vec<u8> {
    let mut bytes = postcard::to_stdvec(&kind.discriminant()).expect("a varint");
    bytes.extend(postcard::to_stdvec(body).expect("serde encodes"));
    bytes
}

/// Serde's body (kind included) of a hot `frame` on a connection of `dialect`: the kind the
/// message goes as there, and its fields as that kind lays them out. `None` for the frames
/// serde itself encodes, or a version that cannot carry the frame.
pub fn encode(frame: &Frame, dialect: impl Into<Dialect>) -> Option<Vec<u8>> {
    let dialect = dialect.into();
    let kind = frame.kind_at(dialect.version()).ok()?;
    Some(match frame {
        Frame::Push(push) if kind == FrameKind::Push3 => with_kind(
            kind,
            &Push3 {
                correlation: push.correlation,
                request: push.request.clone(),
                extras: push.extras.clone(),
            },
        ),
        Frame::Push(push) => with_kind(
            kind,
            &Push {
                correlation: push.correlation,
                request: push.request.clone(),
            },
        ),
        Frame::Submit(submit) if kind == FrameKind::Submit3 => with_kind(
            kind,
            &Submit3 {
                correlation: submit.correlation,
                request: submit.request.clone(),
                extras: submit.extras.clone(),
                wait_for_worker_ms: submit.wait_for_worker_ms,
                reply_timeout_ms: submit.reply_timeout_ms,
                routing: submit.routing.clone(),
            },
        ),
        Frame::Submit(submit) => with_kind(
            kind,
            &Submit {
                correlation: submit.correlation,
                request: submit.request.clone(),
                wait_for_worker_ms: submit.wait_for_worker_ms,
                reply_timeout_ms: submit.reply_timeout_ms,
                routing: submit.routing.clone(),
            },
        ),
        Frame::Relay(relay) if kind == FrameKind::Relay3 => with_kind(
            kind,
            &Relay3 {
                correlation: relay.correlation,
                request: relay.request.clone(),
                extras: relay.extras.clone(),
                routing: relay.routing.clone(),
                reply_timeout_ms: relay.reply_timeout_ms,
            },
        ),
        Frame::Relay(relay) => with_kind(
            kind,
            &Relay {
                correlation: relay.correlation,
                request: relay.request.clone(),
                routing: relay.routing.clone(),
                reply_timeout_ms: relay.reply_timeout_ms,
            },
        ),
        Frame::Reply(reply) => with_kind(kind, reply),
        Frame::Outcome(outcome) => with_kind(
            kind,
            &OutcomeFrame {
                correlation: outcome.correlation,
                result: result_on_wire(&outcome.result, dialect),
            },
        ),
        Frame::RelayOutcome(outcome) => with_kind(
            kind,
            &RelayOutcome {
                correlation: outcome.correlation,
                result: result_on_wire(&outcome.result, dialect),
            },
        ),
        Frame::ServedOutcome(outcome) => with_kind(
            kind,
            &ServedOutcome {
                correlation: outcome.correlation,
                served_by: outcome.served_by.clone(),
                result: result_on_wire(&outcome.result, dialect),
            },
        ),
        _ => return None,
    })
}

/// The body read by serde, when it reads all of it: a hot kind from its serde body, as the
/// one message; any other kind as the crate reads it (serde is its codec already).
pub fn decode(body: &[u8]) -> Option<Frame> {
    let (discriminant, rest) = postcard::take_from_bytes::<u32>(body).ok()?;
    let kind = FrameKind::from_discriminant(discriminant)?;
    fn whole<'a, T: Deserialize<'a>>(rest: &'a [u8]) -> Option<T> {
        match postcard::take_from_bytes::<T>(rest) {
            Ok((body, [])) => Some(body),
            _ => None,
        }
    }
    Some(match kind {
        FrameKind::Push => {
            let push: Push = whole(rest)?;
            Frame::from(lintel_wire::Push {
                correlation: push.correlation,
                request: push.request,
                extras: RequestExtras::default(),
            })
        }
        FrameKind::Push3 => {
            let push: Push3 = whole(rest)?;
            Frame::from(lintel_wire::Push {
                correlation: push.correlation,
                request: push.request,
                extras: push.extras,
            })
        }
        FrameKind::Submit => {
            let submit: Submit = whole(rest)?;
            Frame::from(lintel_wire::Submit {
                correlation: submit.correlation,
                request: submit.request,
                extras: RequestExtras::default(),
                wait_for_worker_ms: submit.wait_for_worker_ms,
                reply_timeout_ms: submit.reply_timeout_ms,
                routing: submit.routing,
            })
        }
        FrameKind::Submit3 => {
            let submit: Submit3 = whole(rest)?;
            Frame::from(lintel_wire::Submit {
                correlation: submit.correlation,
                request: submit.request,
                extras: submit.extras,
                wait_for_worker_ms: submit.wait_for_worker_ms,
                reply_timeout_ms: submit.reply_timeout_ms,
                routing: submit.routing,
            })
        }
        FrameKind::Relay => {
            let relay: Relay = whole(rest)?;
            Frame::from(lintel_wire::Relay {
                correlation: relay.correlation,
                request: relay.request,
                extras: RequestExtras::default(),
                routing: relay.routing,
                reply_timeout_ms: relay.reply_timeout_ms,
            })
        }
        FrameKind::Relay3 => {
            let relay: Relay3 = whole(rest)?;
            Frame::from(lintel_wire::Relay {
                correlation: relay.correlation,
                request: relay.request,
                extras: relay.extras,
                routing: relay.routing,
                reply_timeout_ms: relay.reply_timeout_ms,
            })
        }
        FrameKind::Reply => Frame::Reply(whole::<Reply>(rest)?),
        FrameKind::Outcome => {
            let outcome: OutcomeFrame = whole(rest)?;
            Frame::Outcome(lintel_wire::OutcomeFrame {
                correlation: outcome.correlation,
                result: result_read(outcome.result),
            })
        }
        FrameKind::RelayOutcome => {
            let outcome: RelayOutcome = whole(rest)?;
            Frame::RelayOutcome(lintel_wire::RelayOutcome {
                correlation: outcome.correlation,
                result: result_read(outcome.result),
            })
        }
        FrameKind::ServedOutcome => {
            let outcome: ServedOutcome = whole(rest)?;
            Frame::from(lintel_wire::ServedOutcome {
                correlation: outcome.correlation,
                served_by: outcome.served_by,
                result: result_read(outcome.result),
            })
        }
        _ => decode_body(body).ok()?,
    })
}
