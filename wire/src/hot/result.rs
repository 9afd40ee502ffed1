//! A [`DispatchResult`] and the [`DispatchResponse`] inside it: what a reply and every
//! outcome kind carries.

use crate::body;
use crate::cursor::PayloadRef;
use crate::cursor::{bytes_len, opt_str_len, opt_u64_len, varint_len, Read, Reader, Writer};
use crate::dialect::{Dialect, FeatureSet};
use crate::message::{
    ActivityOutcome, Census, DispatchResponse, DispatchResult, NoWorkerReason, RefusedDispatch,
    RefusedReason, ResponseRef, ResultRef,
};
use crate::ownership::{Borrowed, Ownership};

/// An enum index postcard's decoder would not take for the enum being read.
const BAD_VARIANT: postcard::Error = postcard::Error::SerdeDeCustom;

impl ResponseRef<'_> {
    pub fn encoded_len(&self) -> usize {
        bytes_len(self.workflow_id.len())
            + varint_len(self.ordinal)
            + opt_str_len(self.run_id)
            + 1
            + match &self.outcome {
                ActivityOutcome::Success(bytes) => bytes_len(bytes.len()),
                ActivityOutcome::Failure { message, .. } => bytes_len(message.len()) + 1,
            }
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.str(self.workflow_id);
        out.u64(self.ordinal);
        out.opt_str(self.run_id);
        match &self.outcome {
            ActivityOutcome::Success(bytes) => {
                out.u8(0);
                out.payload(bytes.as_slice());
            }
            ActivityOutcome::Failure { message, retryable } => {
                out.u8(1);
                out.str(message);
                out.bool(*retryable);
            }
        }
    }
}

impl<'a> ResponseRef<'a> {
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(DispatchResponse {
            workflow_id: input.str()?,
            ordinal: input.u64()?,
            run_id: input.opt_str()?,
            outcome: match input.variant()? {
                0 => ActivityOutcome::Success(input.payload()?),
                1 => ActivityOutcome::Failure {
                    message: input.str()?,
                    retryable: input.bool()?,
                },
                _ => return Err(BAD_VARIANT),
            },
        })
    }

    /// The result bytes of a success.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        match &self.outcome {
            ActivityOutcome::Success(bytes) => Some(*bytes),
            ActivityOutcome::Failure { .. } => None,
        }
    }

    /// The same view for a shorter lifetime.
    pub fn reborrow<'b>(&self) -> ResponseRef<'b>
    where
        'a: 'b,
    {
        self.map(|text| *text, |bytes| *bytes)
    }

    /// An owned copy, for a response kept beyond the frame it arrived in.
    pub fn into_owned(self) -> DispatchResponse {
        self.map(|text| (*text).to_owned(), PayloadRef::to_bytes)
    }
}

impl<O: Ownership> DispatchResponse<O> {
    /// The same response with its names converted by `text` and its result bytes by `bytes`:
    /// what lending, reborrowing and copying a response have in common.
    fn map<'s, T: Ownership>(
        &'s self,
        text: impl Fn(&'s O::Str) -> T::Str,
        bytes: impl FnOnce(&'s O::Payload) -> T::Payload,
    ) -> DispatchResponse<T> {
        DispatchResponse {
            workflow_id: text(&self.workflow_id),
            ordinal: self.ordinal,
            run_id: self.run_id.as_ref().map(&text),
            outcome: match &self.outcome {
                ActivityOutcome::Success(payload) => ActivityOutcome::Success(bytes(payload)),
                ActivityOutcome::Failure { message, retryable } => ActivityOutcome::Failure {
                    message: text(message),
                    retryable: *retryable,
                },
            },
        }
    }
}

impl DispatchResponse {
    /// The response lent, to encode or hand on without copying it.
    pub fn view(&self) -> ResponseRef<'_> {
        self.map(String::as_str, PayloadRef::of)
    }
}

impl ActivityOutcome {
    /// The outcome lent.
    pub fn view(&self) -> ActivityOutcome<Borrowed<'_>> {
        match self {
            ActivityOutcome::Success(bytes) => ActivityOutcome::Success(PayloadRef::of(bytes)),
            ActivityOutcome::Failure { message, retryable } => ActivityOutcome::Failure {
                message,
                retryable: *retryable,
            },
        }
    }
}

impl ResultRef<'_> {
    /// Bytes of the result as a connection of `dialect` reads it (as its encoder writes it).
    pub fn encoded_len(&self, dialect: Dialect) -> usize {
        let version = dialect.version();
        1 + match self {
            DispatchResult::Completed(response) => response.encoded_len(),
            DispatchResult::NoWorker(census) if version >= 3 => {
                census_len(&census3_counts(census), census)
            }
            DispatchResult::NoWorker(census) => census_len(&census2_counts(census), census),
            DispatchResult::WorkerLost { worker_id } => varint_len(*worker_id),
            DispatchResult::Timeout {
                worker_id,
                after_ms,
            }
            | DispatchResult::HeartbeatTimeout {
                worker_id,
                after_ms,
            } => varint_len(*worker_id) + varint_len(*after_ms),
            DispatchResult::Refused(refused) => 1 + bytes_len(refused.detail.len()),
            DispatchResult::Cancelled | DispatchResult::Draining => 0,
            DispatchResult::PeerLost { .. } | DispatchResult::ShutDown { .. } if version < 2 => 1,
            DispatchResult::PeerLost { peer, after_ms } => {
                bytes_len(peer.len()) + varint_len(*after_ms)
            }
            DispatchResult::ShutDown { after_ms } => varint_len(*after_ms),
        }
    }

    /// Writes the result as a connection of `dialect` reads it: where the result holds a
    /// variant or a reason the connection does not know (its version, or from version 4 what
    /// its reader listed), the nearest one it does (PROTOCOL.md section 4): a no-worker census
    /// as version 1 and 2 count it (`NoWorker`) or as version 3 does (`NoWorker3`), a version-2
    /// outcome to a version-1 producer as `WorkerLost`, a missed heartbeat as `Timeout` unless
    /// `heartbeat-timeout` was listed, a refusal's reason as the connection knows it.
    pub(crate) fn encode(&self, out: &mut Writer<'_>, dialect: Dialect) {
        let version = dialect.version();
        match self {
            DispatchResult::Completed(response) => {
                out.u8(0);
                response.encode(out);
            }
            DispatchResult::NoWorker(census) if version >= 3 => {
                out.u8(9);
                write_census(out, census.reason, &census3_counts(census), census);
            }
            DispatchResult::NoWorker(census) => {
                out.u8(1);
                let reason = census.reason.for_version_2();
                write_census(out, reason, &census2_counts(census), census);
            }
            DispatchResult::WorkerLost { worker_id } => {
                out.u8(2);
                out.u64(*worker_id);
            }
            DispatchResult::Timeout {
                worker_id,
                after_ms,
            } => {
                out.u8(3);
                out.u64(*worker_id);
                out.u64(*after_ms);
            }
            DispatchResult::HeartbeatTimeout {
                worker_id,
                after_ms,
            } => {
                // Without the feature, the nearest: the worker was alive and did not reply.
                let heard = dialect.lists(FeatureSet::HEARTBEAT_TIMEOUT);
                out.u8(if heard { 10 } else { 3 });
                out.u64(*worker_id);
                out.u64(*after_ms);
            }
            DispatchResult::Refused(refused) => {
                out.u8(4);
                out.u8(refused.reason.for_dialect(dialect) as u8);
                out.str(refused.detail);
            }
            DispatchResult::Cancelled => out.u8(5),
            DispatchResult::Draining => out.u8(6),
            DispatchResult::PeerLost { .. } | DispatchResult::ShutDown { .. } if version < 2 => {
                // Version 1 knows no lost peer or shutdown: the worker it never saw is lost.
                out.u8(2);
                out.u64(0);
            }
            DispatchResult::PeerLost { peer, after_ms } => {
                out.u8(7);
                out.str(peer);
                out.u64(*after_ms);
            }
            DispatchResult::ShutDown { after_ms } => {
                out.u8(8);
                out.u64(*after_ms);
            }
        }
    }
}

impl<'a> ResultRef<'a> {
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(match input.variant()? {
            0 => DispatchResult::Completed(ResponseRef::decode(input)?),
            1 => DispatchResult::NoWorker(Census::from(body::Census {
                reason: no_worker_reason(input.variant()?)?,
                pool_workers: input.u32()?,
                serving_activity: input.u32()?,
                compatible_workers: input.u32()?,
                at_capacity: input.u32()?,
                excluded: input.u32()?,
                last_departure_ms_ago: input.opt_u64()?,
            })),
            2 => DispatchResult::WorkerLost {
                worker_id: input.u64()?,
            },
            3 => DispatchResult::Timeout {
                worker_id: input.u64()?,
                after_ms: input.u64()?,
            },
            4 => DispatchResult::Refused(RefusedDispatch {
                reason: refused_reason(input.variant()?)?,
                detail: input.str()?,
            }),
            5 => DispatchResult::Cancelled,
            6 => DispatchResult::Draining,
            7 => DispatchResult::PeerLost {
                peer: input.str()?,
                after_ms: input.u64()?,
            },
            8 => DispatchResult::ShutDown {
                after_ms: input.u64()?,
            },
            9 => DispatchResult::NoWorker(Census {
                reason: no_worker_reason(input.variant()?)?,
                pool_workers: input.u32()?,
                serving_activity: input.u32()?,
                compatible_workers: input.u32()?,
                deployment_workers: input.u32()?,
                at_capacity: input.u32()?,
                draining: input.u32()?,
                probation: Some(input.u32()?),
                unreachable: Some(input.u32()?),
                last_departure_ms_ago: input.opt_u64()?,
            }),
            10 => DispatchResult::HeartbeatTimeout {
                worker_id: input.u64()?,
                after_ms: input.u64()?,
            },
            _ => return Err(BAD_VARIANT),
        })
    }

    /// The result bytes of a completed dispatch's success.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        match self {
            DispatchResult::Completed(response) => response.payload(),
            _ => None,
        }
    }

    /// The same view for a shorter lifetime.
    pub fn reborrow<'b>(&self) -> ResultRef<'b>
    where
        'a: 'b,
    {
        self.map(|text| *text, ResponseRef::reborrow)
    }

    /// An owned copy, for an outcome kept beyond the frame it arrived in.
    pub fn into_owned(self) -> DispatchResult {
        self.map(
            |text| (*text).to_owned(),
            |response| response.reborrow().into_owned(),
        )
    }
}

impl DispatchResult {
    /// The outcome lent, to encode or hand on without copying it.
    pub fn view(&self) -> ResultRef<'_> {
        self.map(String::as_str, DispatchResponse::view)
    }
}

impl<O: Ownership> DispatchResult<O> {
    /// The same outcome with its names converted by `text` and a completion's response by
    /// `response`: what lending, reborrowing and copying an outcome have in common.
    fn map<'s, T: Ownership>(
        &'s self,
        text: impl Fn(&'s O::Str) -> T::Str,
        response: impl FnOnce(&'s DispatchResponse<O>) -> DispatchResponse<T>,
    ) -> DispatchResult<T> {
        match self {
            DispatchResult::Completed(completed) => DispatchResult::Completed(response(completed)),
            DispatchResult::NoWorker(census) => DispatchResult::NoWorker(census.clone()),
            DispatchResult::WorkerLost { worker_id } => DispatchResult::WorkerLost {
                worker_id: *worker_id,
            },
            DispatchResult::Timeout {
                worker_id,
                after_ms,
            } => DispatchResult::Timeout {
                worker_id: *worker_id,
                after_ms: *after_ms,
            },
            DispatchResult::Refused(refused) => DispatchResult::Refused(RefusedDispatch {
                reason: refused.reason,
                detail: text(&refused.detail),
            }),
            DispatchResult::Cancelled => DispatchResult::Cancelled,
            DispatchResult::Draining => DispatchResult::Draining,
            DispatchResult::PeerLost { peer, after_ms } => DispatchResult::PeerLost {
                peer: text(peer),
                after_ms: *after_ms,
            },
            DispatchResult::ShutDown { after_ms } => DispatchResult::ShutDown {
                after_ms: *after_ms,
            },
            DispatchResult::HeartbeatTimeout {
                worker_id,
                after_ms,
            } => DispatchResult::HeartbeatTimeout {
                worker_id: *worker_id,
                after_ms: *after_ms,
            },
        }
    }
}

/// A census's counts as version 1 and 2 write them, in wire order.
fn census2_counts(census: &Census) -> [u32; 5] {
    let census = body::Census::from(census);
    [
        census.pool_workers,
        census.serving_activity,
        census.compatible_workers,
        census.at_capacity,
        census.excluded,
    ]
}

/// A census's counts as version 3 writes them, in wire order; a count a version-2 node did
/// not make is written as none.
fn census3_counts(census: &Census) -> [u32; 8] {
    [
        census.pool_workers,
        census.serving_activity,
        census.compatible_workers,
        census.deployment_workers,
        census.at_capacity,
        census.draining,
        census.probation.unwrap_or(0),
        census.unreachable.unwrap_or(0),
    ]
}

/// Bytes of a census of `counts`: its reason, the counts, the last departure.
fn census_len(counts: &[u32], census: &Census) -> usize {
    1 + counts
        .iter()
        .map(|count| varint_len(u64::from(*count)))
        .sum::<usize>()
        + opt_u64_len(census.last_departure_ms_ago)
}

fn write_census(out: &mut Writer<'_>, reason: NoWorkerReason, counts: &[u32], census: &Census) {
    out.u8(reason as u8);
    for count in counts {
        out.u64(u64::from(*count));
    }
    out.opt_u64(census.last_departure_ms_ago);
}

fn no_worker_reason(index: u32) -> Read<NoWorkerReason> {
    Ok(match index {
        0 => NoWorkerReason::PoolEmpty,
        1 => NoWorkerReason::NoActivityMatch,
        2 => NoWorkerReason::NodeFilterMatchedNobody,
        3 => NoWorkerReason::AllAtCapacity,
        4 => NoWorkerReason::AllExcluded,
        5 => NoWorkerReason::AllUnreachable,
        6 => NoWorkerReason::AllInProbation,
        7 => NoWorkerReason::DeploymentMatchedNobody,
        8 => NoWorkerReason::CapabilityMatchedNobody,
        _ => return Err(BAD_VARIANT),
    })
}

fn refused_reason(index: u32) -> Read<RefusedReason> {
    Ok(match index {
        0 => RefusedReason::InvalidRequest,
        1 => RefusedReason::WorkerBackpressure,
        2 => RefusedReason::TooManyInFlight,
        3 => RefusedReason::DuplicateCorrelation,
        4 => RefusedReason::NamespaceNotGranted,
        5 => RefusedReason::Unsupported,
        6 => RefusedReason::FairnessCapReached,
        7 => RefusedReason::RoleNotGranted,
        _ => return Err(BAD_VARIANT),
    })
}
