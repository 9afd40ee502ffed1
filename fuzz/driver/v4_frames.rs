//! What version 4 allocated: its kinds (42 to 46), its variants (`HeartbeatTimeout`,
//! `RoleNotGranted`, `SessionUnknown`) and its extension tags (heartbeat timeout, progress
//! wanted, lost link).
//!
//! The input is read three ways: as a frame body exactly as given; as a body whose first byte
//! is mapped onto a version-4 kind (`42 + (byte - 42) % 5`, wrapping); and through `arbitrary`
//! as a structured frame of a version-4 kind or one carrying a version-4 variant or tag.
//!
//! Asserted: as in `v3_frames`, a body decodes the same alone and framed, and one that decodes
//! to a version-4 frame re-encodes canonically; every structured value within its bounds
//! round-trips to a reader that listed every feature, its variants and tags reading back as
//! set; to a reader that listed nothing a new variant goes as its earlier one and round-trips
//! from then on; a value over a bound (token, details) is refused by the encoder.

use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use bytes::{Bytes, BytesMut};
use lintel_wire::{
    encode_frame, tag, DispatchResult, Extension, Features, Frame, FrameKind, OutcomeFrame,
    PeerHello, Progress, Push, Refusal, RefusalCode, RefusedDispatch, RefusedReason, RequestExtras,
    ResumeSession, Session, SessionResumed, DEFAULT_MAX_FRAME_LEN, MAX_HEARTBEAT_TIMEOUT_MS,
};

use crate::round_trip::{check_body, check_value, listing};
use crate::values::{peers, pick, Request};

/// The first and the last kind of version 4.
const FIRST_KIND: u8 = 42;
const LAST_KIND: u8 = 46;

/// Checks every invariant above on the input `data`; a violated one panics.
pub fn run(data: &[u8]) {
    check_body(data, is_version_4_kind);
    if let Some((&first, rest)) = data.split_first() {
        let kind = version_4_kind(first);
        if kind != first {
            check_body(&[&[kind][..], rest].concat(), is_version_4_kind);
        }
    }
    if let Ok(case) = Case::arbitrary_take_rest(Unstructured::new(data)) {
        case.check();
    }
}

fn version_4_kind(byte: u8) -> u8 {
    FIRST_KIND + byte.wrapping_sub(FIRST_KIND) % (LAST_KIND - FIRST_KIND + 1)
}

fn is_version_4_kind(kind: FrameKind) -> bool {
    (u32::from(FIRST_KIND)..=u32::from(LAST_KIND)).contains(&kind.discriminant())
}

#[derive(Debug, Arbitrary)]
enum Case {
    Features {
        features: Vec<String>,
        extensions: Vec<Ext>,
    },
    Session {
        token: Vec<u8>,
        resume_grace_ms: u64,
    },
    ResumeSession {
        token: Vec<u8>,
        holding: Vec<u64>,
    },
    SessionResumed {
        worker_id: u64,
        attached: Vec<u64>,
        unknown: Vec<u64>,
    },
    Progress {
        correlation: u64,
        details: Vec<u8>,
    },
    Outcome {
        correlation: u64,
        result: NewResult,
    },
    Refused {
        code: u8,
        reason: String,
    },
    Push {
        correlation: u64,
        request: Request,
        heartbeat_timeout_ms: Option<u64>,
        progress: bool,
        extensions: Vec<Ext>,
    },
    PeerHello {
        node_id: String,
        incarnation: u64,
        advertise: String,
        peers: Vec<(String, String)>,
        features: Vec<String>,
        lost_link_to: Option<u64>,
        extensions: Vec<Ext>,
    },
}

/// The results version 4 added, and what a reader that listed nothing reads instead.
#[derive(Debug, Arbitrary)]
enum NewResult {
    HeartbeatTimeout { worker_id: u64, after_ms: u64 },
    RoleNotGranted { detail: String },
}

#[derive(Debug, Arbitrary)]
struct Ext {
    tag: u32,
    critical: bool,
    value: Vec<u8>,
}

/// Every `RefusalCode`, in index order.
const REFUSAL_CODES: [RefusalCode; 15] = [
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
    RefusalCode::SessionUnknown,
];

/// Extensions of tags not allocated: an allocated tag is set through its accessor only.
fn unallocated(extensions: Vec<Ext>) -> Vec<Extension> {
    extensions
        .into_iter()
        .filter(|ext| !tag::is_allocated(ext.tag))
        .map(|ext| Extension {
            tag: ext.tag,
            critical: ext.critical,
            value: Bytes::from(ext.value),
        })
        .collect()
}

/// Checks `frame` to a reader that listed everything; `None` when it is over a bound, which
/// the encoder must then refuse.
fn round_trip(frame: Frame, within_bounds: bool) -> Option<Frame> {
    if within_bounds {
        let read = check_value(frame, listing(4));
        assert!(
            read.is_some(),
            "a version-4 frame is carried to a reader listing all"
        );
        read
    } else {
        let mut buf = BytesMut::new();
        let written = encode_frame(&frame, listing(4), &mut buf, DEFAULT_MAX_FRAME_LEN);
        assert!(
            written.is_err(),
            "{} over its bound was written",
            frame.name()
        );
        assert!(buf.is_empty());
        None
    }
}

impl NewResult {
    /// The result, and what a reader that did not list its feature reads.
    fn into_wire(self) -> (DispatchResult, DispatchResult) {
        match self {
            NewResult::HeartbeatTimeout {
                worker_id,
                after_ms,
            } => (
                DispatchResult::HeartbeatTimeout {
                    worker_id,
                    after_ms,
                },
                DispatchResult::Timeout {
                    worker_id,
                    after_ms,
                },
            ),
            NewResult::RoleNotGranted { detail } => (
                DispatchResult::Refused(RefusedDispatch {
                    reason: RefusedReason::RoleNotGranted,
                    detail: detail.clone(),
                }),
                DispatchResult::Refused(RefusedDispatch {
                    reason: RefusedReason::NamespaceNotGranted,
                    detail,
                }),
            ),
        }
    }
}

impl Case {
    fn check(self) {
        match self {
            Case::Features {
                features,
                extensions,
            } => {
                let frame = Frame::from(Features {
                    features,
                    extensions: unallocated(extensions),
                });
                let read = check_value(frame.clone(), 4);
                assert_eq!(read, Some(frame), "Features needs no feature listed");
            }
            Case::Session {
                token,
                resume_grace_ms,
            } => {
                let within = Session::TOKEN_LEN.contains(&token.len());
                let frame = Frame::from(Session {
                    token: Bytes::from(token),
                    resume_grace_ms,
                });
                assert_eq!(round_trip(frame.clone(), within), within.then_some(frame));
            }
            Case::ResumeSession { token, holding } => {
                let within = Session::TOKEN_LEN.contains(&token.len())
                    && holding.len() <= ResumeSession::MAX_HOLDING;
                let frame = Frame::from(ResumeSession {
                    token: Bytes::from(token),
                    holding,
                });
                assert_eq!(round_trip(frame.clone(), within), within.then_some(frame));
            }
            Case::SessionResumed {
                worker_id,
                attached,
                unknown,
            } => {
                let within = attached.len() <= ResumeSession::MAX_HOLDING
                    && unknown.len() <= ResumeSession::MAX_HOLDING;
                let frame = Frame::from(SessionResumed {
                    worker_id,
                    attached,
                    unknown,
                });
                assert_eq!(round_trip(frame.clone(), within), within.then_some(frame));
            }
            Case::Progress {
                correlation,
                details,
            } => {
                let within = details.len() <= Progress::MAX_DETAILS;
                let frame = Frame::from(Progress {
                    correlation,
                    details: Bytes::from(details),
                });
                assert_eq!(round_trip(frame.clone(), within), within.then_some(frame));
            }
            Case::Outcome {
                correlation,
                result,
            } => {
                let (result, earlier) = result.into_wire();
                let frame = Frame::from(OutcomeFrame {
                    correlation,
                    result,
                });
                let downgraded = Frame::from(OutcomeFrame {
                    correlation,
                    result: earlier,
                });
                assert_eq!(round_trip(frame.clone(), true), Some(frame.clone()));
                for unlisted in [4, 3] {
                    let read = check_value(frame.clone(), unlisted);
                    assert_eq!(read.as_ref(), Some(&downgraded), "to version {unlisted}");
                }
            }
            Case::Refused { code, reason } => {
                let frame = Frame::RegisterRefused(Refusal {
                    code: pick(&REFUSAL_CODES, code),
                    reason,
                });
                assert_eq!(check_value(frame.clone(), 4), Some(frame));
            }
            Case::Push {
                correlation,
                request,
                heartbeat_timeout_ms,
                progress,
                extensions,
            } => {
                let mut extras = RequestExtras {
                    extensions: unallocated(extensions),
                    ..RequestExtras::default()
                };
                extras.set_heartbeat_timeout(heartbeat_timeout_ms.map(Duration::from_millis));
                extras.set_progress(progress);
                let frame = Frame::from(Push {
                    correlation,
                    request: request.into_wire(),
                    extras,
                });
                let read = round_trip(frame.clone(), true);
                let Some(Frame::Push(push)) = &read else {
                    panic!("a push reads back as {read:?}");
                };
                let stated = heartbeat_timeout_ms
                    .map(|ms| Duration::from_millis(ms.clamp(1, MAX_HEARTBEAT_TIMEOUT_MS)));
                assert_eq!(push.extras.heartbeat_timeout().ok(), Some(stated));
                assert_eq!(push.extras.progress(), progress);
                assert_eq!(read, Some(frame));
            }
            Case::PeerHello {
                node_id,
                incarnation,
                advertise,
                peers: members,
                features,
                lost_link_to,
                extensions,
            } => {
                let mut hello = PeerHello {
                    node_id,
                    incarnation,
                    advertise,
                    peers: peers(members),
                    features,
                    extensions: unallocated(extensions),
                };
                hello.set_lost_link_to(lost_link_to);
                let frame = Frame::from(hello);
                let read = round_trip(frame.clone(), true);
                let Some(Frame::PeerHello(hello)) = &read else {
                    panic!("a peer hello reads back as {read:?}");
                };
                assert_eq!(hello.lost_link_to(), lost_link_to);
                assert_eq!(read, Some(frame));
            }
        }
    }
}
