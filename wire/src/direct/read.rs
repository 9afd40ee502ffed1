//! The hot frame bodies read field by field: per-dispatch frames call no deserializer.
//!
//! A reader accepts a subset of what serde accepts (canonical varints only, a result or a
//! routing of the common variant only) and declines anything else, so the caller decodes that
//! through serde: a declined body still gets serde's value or serde's error, never a new one.

use bytes::Bytes;

use crate::frame::{Frame, FrameKind};
use crate::message::{
    ActivityOutcome, DispatchRequest, DispatchResponse, DispatchResult, NodeRouting, OutcomeFrame,
    Push, Relay, RelayOutcome, Reply, ServedOutcome, Submit,
};
use crate::payload;

/// Reads `body` (its kind, then its fields) as a frame of `kind`, or `None` when `kind` has no
/// reader here or the bytes are anything but the plain encoding a writer here produces.
/// `whole`, when given, holds exactly `body`'s bytes: large payloads become slices of it.
pub(crate) fn read_body(kind: FrameKind, body: &[u8], whole: Option<&Bytes>) -> Option<Frame> {
    let mut at = Reader {
        bytes: body,
        pos: 0,
        whole,
    };
    if at.varint_u32()? != kind.discriminant() {
        return None;
    }
    let frame = match kind {
        FrameKind::Submit => Frame::Submit(Box::new(Submit {
            correlation: at.varint()?,
            request: at.request()?,
            wait_for_worker_ms: at.opt_varint()?,
            reply_timeout_ms: at.opt_varint()?,
            routing: at.routing()?,
        })),
        FrameKind::Push => Frame::Push(Box::new(Push {
            correlation: at.varint()?,
            request: at.request()?,
        })),
        FrameKind::Relay => Frame::Relay(Box::new(Relay {
            correlation: at.varint()?,
            request: at.request()?,
            routing: at.routing()?,
            reply_timeout_ms: at.varint()?,
        })),
        FrameKind::Reply => Frame::Reply(Reply {
            correlation: at.varint()?,
            response: at.response()?,
        }),
        FrameKind::Outcome => Frame::Outcome(OutcomeFrame {
            correlation: at.varint()?,
            result: at.completed()?,
        }),
        FrameKind::RelayOutcome => Frame::RelayOutcome(RelayOutcome {
            correlation: at.varint()?,
            result: at.completed()?,
        }),
        FrameKind::ServedOutcome => Frame::ServedOutcome(Box::new(ServedOutcome {
            correlation: at.varint()?,
            served_by: at.string()?,
            result: at.completed()?,
        })),
        _ => return None,
    };
    (at.pos == body.len()).then_some(frame)
}

/// A cursor over a body; every read is `None` past its end or on a non-canonical encoding.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    whole: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let byte = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(byte)
    }

    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let taken = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(taken)
    }

    /// A canonical LEB128 integer of at most `max_bytes` bytes whose value fits `bits`.
    fn leb128(&mut self, max_bytes: u32, bits: u32) -> Option<u64> {
        let mut value: u64 = 0;
        for index in 0..max_bytes {
            let byte = self.byte()?;
            let shift = 7 * index;
            let low = u64::from(byte & 0x7f);
            if index + 1 == max_bytes && low >> (bits - shift) != 0 {
                return None;
            }
            value |= low << shift;
            if byte & 0x80 == 0 {
                // A last byte of zero after others is a longer spelling serde also takes.
                return (index == 0 || low != 0).then_some(value);
            }
        }
        None
    }

    fn varint(&mut self) -> Option<u64> {
        self.leb128(10, 64)
    }

    fn varint_u32(&mut self) -> Option<u32> {
        self.leb128(5, 32)
            .and_then(|value| u32::try_from(value).ok())
    }

    /// An `Option`'s tag: serde takes only `0` and `1`.
    fn some(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    fn opt_varint(&mut self) -> Option<Option<u64>> {
        if self.some()? {
            self.varint().map(Some)
        } else {
            Some(None)
        }
    }

    fn str(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.varint()?).ok()?;
        std::str::from_utf8(self.take(len)?).ok()
    }

    fn string(&mut self) -> Option<String> {
        self.str().map(str::to_owned)
    }

    fn opt_string(&mut self) -> Option<Option<String>> {
        if self.some()? {
            self.string().map(Some)
        } else {
            Some(None)
        }
    }

    /// Payload bytes: a slice of `whole` when it is given and the payload is large, a copy
    /// otherwise, as serde's payload field does.
    fn payload(&mut self) -> Option<Bytes> {
        let len = usize::try_from(self.varint()?).ok()?;
        let start = self.pos;
        let taken = self.take(len)?;
        Some(match self.whole {
            Some(whole) if len >= payload::SHARE_MIN => whole.slice(start..self.pos),
            _ => Bytes::copy_from_slice(taken),
        })
    }

    fn request(&mut self) -> Option<DispatchRequest> {
        Some(DispatchRequest {
            namespace: self.string()?,
            task_queue: self.string()?,
            activity_type: self.string()?,
            node: self.opt_string()?,
            workflow_id: self.string()?,
            ordinal: self.varint()?,
            run_id: self.opt_string()?,
            attempt: self.varint_u32()?,
            input: self.payload()?,
            deadline_unix_ms: self.opt_varint()?,
        })
    }

    fn response(&mut self) -> Option<DispatchResponse> {
        Some(DispatchResponse {
            workflow_id: self.string()?,
            ordinal: self.varint()?,
            run_id: self.opt_string()?,
            outcome: match self.varint_u32()? {
                0 => ActivityOutcome::Success(self.payload()?),
                1 => ActivityOutcome::Failure {
                    message: self.string()?,
                    retryable: self.some()?,
                },
                _ => return None,
            },
        })
    }

    /// A `Completed` result; any other is declined.
    fn completed(&mut self) -> Option<DispatchResult> {
        match self.varint_u32()? {
            0 => self.response().map(DispatchResult::Completed),
            _ => None,
        }
    }

    /// Routing to any node; any other is declined.
    fn routing(&mut self) -> Option<NodeRouting> {
        match self.varint_u32()? {
            0 => Some(NodeRouting::Any),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leb(bytes: &[u8], max_bytes: u32, bits: u32) -> Option<u64> {
        Reader {
            bytes,
            pos: 0,
            whole: None,
        }
        .leb128(max_bytes, bits)
    }

    #[test]
    fn canonical_varints_are_read_and_longer_spellings_declined() {
        assert_eq!(leb(&[0], 10, 64), Some(0));
        assert_eq!(leb(&[0xac, 0x02], 10, 64), Some(300));
        assert_eq!(leb(&[0x80, 0x00], 10, 64), None);
        assert_eq!(leb(&[0x81], 10, 64), None, "unterminated");
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(leb(&max, 10, 64), Some(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(leb(&over, 10, 64), None);
        assert_eq!(
            leb(&[0xff, 0xff, 0xff, 0xff, 0x0f], 5, 32),
            Some(0xffff_ffff)
        );
        assert_eq!(leb(&[0xff, 0xff, 0xff, 0xff, 0x10], 5, 32), None);
    }

    fn body_of(frame: &Frame) -> Vec<u8> {
        let mut buf = bytes::BytesMut::new();
        let encoded = crate::framing::encode_frame(frame, &mut buf, usize::MAX);
        assert!(encoded.is_ok());
        buf.split_off(crate::framing::LENGTH_PREFIX_LEN).to_vec()
    }

    fn submit(routing: NodeRouting) -> Frame {
        Frame::from(Submit {
            correlation: 5,
            request: DispatchRequest {
                namespace: "ns".into(),
                task_queue: String::new(),
                activity_type: "echo".into(),
                node: None,
                workflow_id: "wf".into(),
                ordinal: 1,
                run_id: Some("r".into()),
                attempt: 1,
                input: Bytes::from_static(b"in"),
                deadline_unix_ms: None,
            },
            wait_for_worker_ms: Some(10),
            reply_timeout_ms: None,
            routing,
        })
    }

    #[test]
    fn a_plain_submission_is_read_and_anything_else_left_to_serde() {
        let plain = submit(NodeRouting::Any);
        let body = body_of(&plain);
        assert_eq!(read_body(FrameKind::Submit, &body, None), Some(plain));
        // The correlation spelled in two bytes, as postcard also reads it.
        let mut longer = vec![body[0], 0x85, 0x00];
        longer.extend_from_slice(&body[2..]);
        assert_eq!(read_body(FrameKind::Submit, &longer, None), None);
        let pinned = body_of(&submit(NodeRouting::Pin("b".into())));
        assert_eq!(read_body(FrameKind::Submit, &pinned, None), None);
        let mut trailing = body.clone();
        trailing.push(0);
        assert_eq!(read_body(FrameKind::Submit, &trailing, None), None);
        assert_eq!(read_body(FrameKind::Ping, &[12, 1], None), None);
    }
}
