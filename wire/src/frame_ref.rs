//! Frames encoded from borrowed bodies: the exact bytes of the [`Frame`] each one stands for,
//! without building, boxing or moving that frame first.

use bytes::Bytes;
use serde::{Serialize, Serializer};

use crate::frame::{result_payload, Frame, FrameKind};
use crate::message::{DispatchRequest, DispatchResult, NodeRouting};

/// A frame to encode whose body is borrowed. Encodes byte for byte as the owned [`Frame`] of
/// the same kind and fields; the hot bodies have variants of their own.
#[derive(Debug, Clone, Copy)]
pub enum FrameRef<'a> {
    /// A frame already built.
    Frame(&'a Frame),
    /// [`Frame::Push`] of these fields.
    Push {
        correlation: u64,
        request: &'a DispatchRequest,
    },
    /// [`Frame::Relay`] of these fields.
    Relay {
        correlation: u64,
        request: &'a DispatchRequest,
        routing: &'a NodeRouting,
        reply_timeout_ms: u64,
    },
    /// [`Frame::ServedOutcome`] of these fields.
    ServedOutcome {
        correlation: u64,
        served_by: &'a str,
        result: &'a DispatchResult,
    },
    /// [`Frame::RelayOutcome`] of these fields.
    RelayOutcome {
        correlation: u64,
        result: &'a DispatchResult,
    },
}

impl<'a> From<&'a Frame> for FrameRef<'a> {
    fn from(frame: &'a Frame) -> Self {
        FrameRef::Frame(frame)
    }
}

impl FrameRef<'_> {
    /// The kind of the frame it stands for.
    pub fn kind(&self) -> FrameKind {
        match self {
            FrameRef::Frame(frame) => frame.kind(),
            FrameRef::Push { .. } => FrameKind::Push,
            FrameRef::Relay { .. } => FrameKind::Relay,
            FrameRef::ServedOutcome { .. } => FrameKind::ServedOutcome,
            FrameRef::RelayOutcome { .. } => FrameKind::RelayOutcome,
        }
    }

    /// The opaque payload the frame carries, as [`Frame::payload`].
    pub fn payload(&self) -> Option<&Bytes> {
        match self {
            FrameRef::Frame(frame) => frame.payload(),
            FrameRef::Push { request, .. } | FrameRef::Relay { request, .. } => {
                Some(&request.input)
            }
            FrameRef::ServedOutcome { result, .. } | FrameRef::RelayOutcome { result, .. } => {
                result_payload(result)
            }
        }
    }

    /// The borrowed-body variant of a built frame that has one, else `self` unchanged.
    pub(crate) fn unfolded(self) -> Self {
        match self {
            FrameRef::Frame(Frame::Push(push)) => FrameRef::Push {
                correlation: push.correlation,
                request: &push.request,
            },
            FrameRef::Frame(Frame::Relay(relay)) => FrameRef::Relay {
                correlation: relay.correlation,
                request: &relay.request,
                routing: &relay.routing,
                reply_timeout_ms: relay.reply_timeout_ms,
            },
            FrameRef::Frame(Frame::ServedOutcome(outcome)) => FrameRef::ServedOutcome {
                correlation: outcome.correlation,
                served_by: &outcome.served_by,
                result: &outcome.result,
            },
            FrameRef::Frame(Frame::RelayOutcome(outcome)) => FrameRef::RelayOutcome {
                correlation: outcome.correlation,
                result: &outcome.result,
            },
            other => other,
        }
    }

    /// Bytes of opaque payload the frame carries, as [`Frame::payload_len`].
    pub fn payload_len(&self) -> usize {
        self.payload().map_or(0, Bytes::len)
    }
}

/// The fields of [`crate::Push`], in its order.
#[derive(Serialize)]
struct PushBody<'a> {
    correlation: u64,
    request: &'a DispatchRequest,
}

/// The fields of [`crate::Relay`], in its order.
#[derive(Serialize)]
struct RelayBody<'a> {
    correlation: u64,
    request: &'a DispatchRequest,
    routing: &'a NodeRouting,
    reply_timeout_ms: u64,
}

/// The fields of [`crate::ServedOutcome`], in its order.
#[derive(Serialize)]
struct ServedOutcomeBody<'a> {
    correlation: u64,
    served_by: &'a str,
    result: &'a DispatchResult,
}

/// The fields of [`crate::RelayOutcome`], in its order.
#[derive(Serialize)]
struct RelayOutcomeBody<'a> {
    correlation: u64,
    result: &'a DispatchResult,
}

impl Serialize for FrameRef<'_> {
    /// As the derived serializer of [`Frame`]: the kind's variant, then its body's fields.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kind = self.kind();
        match *self {
            FrameRef::Frame(frame) => frame.serialize(serializer),
            FrameRef::Push {
                correlation,
                request,
            } => serializer.serialize_newtype_variant(
                "Frame",
                kind.discriminant(),
                kind.name(),
                &PushBody {
                    correlation,
                    request,
                },
            ),
            FrameRef::Relay {
                correlation,
                request,
                routing,
                reply_timeout_ms,
            } => serializer.serialize_newtype_variant(
                "Frame",
                kind.discriminant(),
                kind.name(),
                &RelayBody {
                    correlation,
                    request,
                    routing,
                    reply_timeout_ms,
                },
            ),
            FrameRef::ServedOutcome {
                correlation,
                served_by,
                result,
            } => serializer.serialize_newtype_variant(
                "Frame",
                kind.discriminant(),
                kind.name(),
                &ServedOutcomeBody {
                    correlation,
                    served_by,
                    result,
                },
            ),
            FrameRef::RelayOutcome {
                correlation,
                result,
            } => serializer.serialize_newtype_variant(
                "Frame",
                kind.discriminant(),
                kind.name(),
                &RelayOutcomeBody {
                    correlation,
                    result,
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::framing::{encode_frame, encode_frame_ref, encode_frame_spliced};
    use crate::message::{
        ActivityOutcome, DispatchResponse, NodeRouting, Push, Relay, ServedOutcome,
    };
    use crate::payload::SHARE_MIN;

    fn request(input: Bytes) -> DispatchRequest {
        DispatchRequest {
            namespace: "ns".into(),
            task_queue: String::new(),
            activity_type: "echo".into(),
            node: Some("n1".into()),
            workflow_id: "wf".into(),
            ordinal: 300,
            run_id: None,
            attempt: 2,
            input,
            deadline_unix_ms: Some(1 << 40),
        }
    }

    /// Whole and spliced, `borrowed` encodes to the bytes of `owned`, which are serde's.
    fn assert_alike(owned: &Frame, borrowed: FrameRef<'_>) {
        let (mut want, mut got) = (BytesMut::new(), BytesMut::new());
        encode_frame(owned, &mut want, 1 << 20).unwrap();
        encode_frame_ref(borrowed, &mut got, 1 << 20).unwrap();
        assert_eq!(got, want);
        assert_eq!(
            &got[4..],
            &postcard::to_stdvec(owned).unwrap()[..],
            "serde's bytes"
        );
        let (mut want, mut got) = (BytesMut::new(), BytesMut::new());
        let want_splice = encode_frame_spliced(owned, &mut want, 1 << 20).unwrap();
        let got_splice = encode_frame_spliced(borrowed, &mut got, 1 << 20).unwrap();
        assert_eq!(got_splice, want_splice);
        assert_eq!(got, want);
    }

    #[test]
    fn a_borrowed_push_or_outcome_or_a_relay_encodes_as_serde_does_with_large_payloads_spliced() {
        for len in [0, 64, SHARE_MIN, 70_000] {
            let input = Bytes::from(vec![5; len]);
            let push = Push {
                correlation: 1 << 35,
                request: request(input.clone()),
            };
            let borrowed = FrameRef::Push {
                correlation: push.correlation,
                request: &push.request,
            };
            assert_eq!(borrowed.payload_len(), len);
            assert_alike(&Frame::from(push.clone()), borrowed);
            for routing in [NodeRouting::Any, NodeRouting::Prefer(vec!["n1".into()])] {
                let borrowed = FrameRef::Relay {
                    correlation: 3,
                    request: &push.request,
                    routing: &routing,
                    reply_timeout_ms: 1 << 20,
                };
                assert_eq!(borrowed.payload_len(), len);
                let relay = Frame::from(Relay {
                    correlation: 3,
                    request: push.request.clone(),
                    routing: routing.clone(),
                    reply_timeout_ms: 1 << 20,
                });
                assert_alike(&relay, FrameRef::Frame(&relay));
                assert_alike(&relay, borrowed);
            }

            let result = DispatchResult::Completed(DispatchResponse {
                workflow_id: "wf".into(),
                ordinal: 9,
                run_id: Some("r".into()),
                outcome: ActivityOutcome::Success(input),
            });
            let served = Frame::from(ServedOutcome {
                correlation: 7,
                served_by: "node-a".into(),
                result: result.clone(),
            });
            let borrowed = FrameRef::ServedOutcome {
                correlation: 7,
                served_by: "node-a",
                result: &result,
            };
            assert_eq!(borrowed.payload_len(), len);
            assert_alike(&served, borrowed);
            let relayed = Frame::RelayOutcome(crate::message::RelayOutcome {
                correlation: 7,
                result: result.clone(),
            });
            let borrowed = FrameRef::RelayOutcome {
                correlation: 7,
                result: &result,
            };
            assert_alike(&relayed, borrowed);
        }
    }
}
