//! The version-2 peer frames (kinds 20 to 25): what decodes re-encodes canonically, and
//! structured values round-trip.
//!
//! The input is read three ways: as a frame body exactly as given; as a body whose first byte
//! is mapped onto a peer kind (`20 + (byte - 20) % 6`, wrapping, so a peer body keeps its
//! kind), so that every input exercises a peer body; and through `arbitrary` as a structured
//! `PeerHello`, `Presence`, `Relay`, `RelayOutcome` or `ServedOutcome`.
//!
//! Asserted: a body decodes the same alone and inside a length-prefixed frame; a body that
//! decodes to a peer frame re-encodes to exactly the input, or to strictly fewer bytes when
//! the input held an overlong varint (the decoder's only leniency, `PROTOCOL.md` section 2),
//! and the re-encoding decodes back to an equal frame; every structured value encodes within
//! the default limit, decodes back equal with nothing left over, and its body is canonical.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bytes::{BufMut, Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::{
    decode_body, decode_frame, encode_frame, ActivityOutcome, Census, DispatchRequest,
    DispatchResponse, DispatchResult, Frame, FrameKind, NoWorkerReason, NodeRouting, PeerAddress,
    PeerHello, PoolPresence, Presence, PresenceGroup, RefusedDispatch, RefusedReason, Relay,
    RelayOutcome, ServedOutcome, DEFAULT_MAX_FRAME_LEN,
};

/// The first and the last peer kind.
const FIRST_PEER_KIND: u8 = 20;
const LAST_PEER_KIND: u8 = 25;

fuzz_target!(|data: &[u8]| {
    check_body(data);
    if let Some((&first, rest)) = data.split_first() {
        let kind = peer_kind(first);
        if kind != first {
            check_body(&[&[kind][..], rest].concat());
        }
    }
    if let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) {
        check_value(case.into_frame());
    }
});

fn peer_kind(byte: u8) -> u8 {
    FIRST_PEER_KIND + byte.wrapping_sub(FIRST_PEER_KIND) % (LAST_PEER_KIND - FIRST_PEER_KIND + 1)
}

fn is_peer_kind(kind: FrameKind) -> bool {
    (u32::from(FIRST_PEER_KIND)..=u32::from(LAST_PEER_KIND)).contains(&kind.discriminant())
}

/// Encodes within the default limit, which no frame built from a fuzz input reaches.
fn encode(frame: &Frame) -> BytesMut {
    let mut buf = BytesMut::new();
    if let Err(error) = encode_frame(frame, &mut buf, DEFAULT_MAX_FRAME_LEN) {
        panic!("{} does not encode: {error}", frame.kind());
    }
    buf
}

/// Decodes `body` alone and framed; a peer frame must re-encode canonically.
fn check_body(body: &[u8]) {
    let alone = decode_body(body);

    let mut framed = BytesMut::with_capacity(LENGTH_PREFIX_LEN + body.len());
    framed.put_u32(u32::try_from(body.len()).expect("fuzz inputs are small"));
    framed.extend_from_slice(body);
    let in_frame = decode_frame(&mut framed, body.len());
    assert!(
        framed.is_empty(),
        "decode_frame left {} bytes",
        framed.len()
    );
    match (&alone, &in_frame) {
        (Ok(a), Ok(Some(b))) => assert_eq!(a, b),
        (Err(a), Err(b)) => assert_eq!(format!("{a:?}"), format!("{b:?}")),
        _ => panic!("alone {alone:?}, framed {in_frame:?}"),
    }

    let Ok(frame) = alone else {
        return;
    };
    if !is_peer_kind(frame.kind()) {
        return;
    }
    assert_eq!(body.first(), Some(&(frame.kind().discriminant() as u8)));
    let again = encode(&frame);
    let again_body = &again[LENGTH_PREFIX_LEN..];
    if again_body.len() == body.len() {
        assert_eq!(
            again_body,
            body,
            "a canonical {} body re-encodes differently",
            frame.kind()
        );
    } else {
        assert!(
            again_body.len() < body.len(),
            "{} re-encodes in {} bytes from {}",
            frame.kind(),
            again_body.len(),
            body.len()
        );
    }
    assert_eq!(decode_body(again_body).ok(), Some(frame));
}

/// Encodes a structured frame and checks the round trip.
fn check_value(frame: Frame) {
    let mut buf = encode(&frame);
    let stated = u32::from_be_bytes(buf[..LENGTH_PREFIX_LEN].try_into().expect("4 bytes"));
    assert_eq!(stated as usize, buf.len() - LENGTH_PREFIX_LEN);
    assert_eq!(
        buf.get(LENGTH_PREFIX_LEN),
        Some(&(frame.kind().discriminant() as u8))
    );
    let body = buf[LENGTH_PREFIX_LEN..].to_vec();
    let decoded = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN)
        .expect("an encoded frame decodes")
        .expect("an encoded frame is whole");
    assert_eq!(decoded, frame);
    assert!(buf.is_empty());
    // What the encoder writes is canonical: decoding and encoding again gives the same bytes.
    let again = encode(&decoded);
    assert_eq!(&again[LENGTH_PREFIX_LEN..], &body[..]);
}

// -----------------------------------------------------------------------------------------
// Structured values. The wire types do not implement `Arbitrary`; these mirror them.
// -----------------------------------------------------------------------------------------

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

#[derive(Debug, Arbitrary)]
struct Request {
    namespace: String,
    task_queue: String,
    activity_type: String,
    node: Option<String>,
    workflow_id: String,
    ordinal: u64,
    run_id: Option<String>,
    attempt: u32,
    input: Vec<u8>,
    deadline_unix_ms: Option<u64>,
}

#[derive(Debug, Arbitrary)]
enum Routing {
    Any,
    Pin(String),
    Prefer(Vec<String>),
    Require(Vec<String>),
}

/// `DispatchResult`, every variant.
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
}

impl Case {
    fn into_frame(self) -> Frame {
        match self {
            Case::PeerHello {
                node_id,
                incarnation,
                advertise,
                peers,
            } => Frame::PeerHello(PeerHello {
                node_id,
                incarnation,
                advertise,
                peers: peers
                    .into_iter()
                    .map(|(node_id, address)| PeerAddress { node_id, address })
                    .collect(),
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
            }),
            Case::Relay {
                correlation,
                request,
                routing,
                reply_timeout_ms,
            } => Frame::from(Relay {
                correlation,
                request: request.into_wire(),
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
                })
                .collect(),
        }
    }
}

impl Request {
    fn into_wire(self) -> DispatchRequest {
        DispatchRequest {
            namespace: self.namespace,
            task_queue: self.task_queue,
            activity_type: self.activity_type,
            node: self.node,
            workflow_id: self.workflow_id,
            ordinal: self.ordinal,
            run_id: self.run_id,
            attempt: self.attempt,
            input: Bytes::from(self.input),
            deadline_unix_ms: self.deadline_unix_ms,
        }
    }
}

impl Routing {
    fn into_wire(self) -> NodeRouting {
        match self {
            Routing::Any => NodeRouting::Any,
            Routing::Pin(node) => NodeRouting::Pin(node),
            Routing::Prefer(nodes) => NodeRouting::Prefer(nodes),
            Routing::Require(nodes) => NodeRouting::Require(nodes),
        }
    }
}

/// Picks one of `values` by `index`, wrapping.
fn pick<T: Copy>(values: &[T], index: u8) -> T {
    values[usize::from(index) % values.len()]
}

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
            } => {
                use NoWorkerReason::*;
                let reason = pick(
                    &[
                        PoolEmpty,
                        NoActivityMatch,
                        NodeFilterMatchedNobody,
                        AllAtCapacity,
                        AllExcluded,
                    ],
                    reason,
                );
                DispatchResult::NoWorker(Census {
                    reason,
                    pool_workers,
                    serving_activity,
                    compatible_workers,
                    at_capacity,
                    excluded,
                    last_departure_ms_ago,
                })
            }
            ResultCase::WorkerLost { worker_id } => DispatchResult::WorkerLost { worker_id },
            ResultCase::Timeout {
                worker_id,
                after_ms,
            } => DispatchResult::Timeout {
                worker_id,
                after_ms,
            },
            ResultCase::Refused { reason, detail } => {
                use RefusedReason::*;
                let reason = pick(
                    &[
                        InvalidRequest,
                        WorkerBackpressure,
                        TooManyInFlight,
                        DuplicateCorrelation,
                    ],
                    reason,
                );
                DispatchResult::Refused(RefusedDispatch { reason, detail })
            }
            ResultCase::Cancelled => DispatchResult::Cancelled,
            ResultCase::Draining => DispatchResult::Draining,
            ResultCase::PeerLost { peer, after_ms } => DispatchResult::PeerLost { peer, after_ms },
        }
    }
}
