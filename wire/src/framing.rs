//! Pure framing over byte buffers: a 4-byte big-endian body length, then a postcard body.
//!
//! No I/O here; [`crate::codec`] adapts these functions to `tokio_util`.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::cursor::{Reader, Writer};
use crate::dialect::{Dialect, FeatureSet};
use crate::error::{DecodeError, EncodeError};
use crate::frame::Frame;
use crate::frame_ref::FrameRef;
use crate::hot::Body;
use crate::kind::FrameKind;
use crate::message::PROTOCOL_VERSION;

/// Bytes in the length prefix.
pub const LENGTH_PREFIX_LEN: usize = 4;

/// Default largest frame body: 4 MiB.
pub const DEFAULT_MAX_FRAME_LEN: usize = 4 * 1024 * 1024;

pub use crate::cursor::SHARE_MIN;

/// Room reserved for a hot frame beside its payload before it is written: its names and
/// numbers, as commonly sized; a larger frame grows the buffer as it is written.
const ROOM_BESIDE_PAYLOAD: usize = 256;

/// Appends `frame` to `dst` as one length-prefixed frame, as a connection of `dialect` (a
/// version, or a version and what its reader listed) carries it: of the kind the version
/// carries it as ([`Frame::kind_at`]), a result's variant as the dialect reads it.
///
/// # Errors
/// [`EncodeError::Oversize`] when the body exceeds `max_frame_len`;
/// [`EncodeError::Unsupported`] or [`EncodeError::KindTooNew`] when the version cannot carry
/// the frame, [`EncodeError::NotListed`] when its kind needs a feature the reader did not
/// list. `dst` is then unchanged.
pub fn encode_frame(
    frame: &Frame,
    dialect: impl Into<Dialect>,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<(), EncodeError> {
    encode_frame_ref(&FrameRef::Frame(frame), dialect, dst, max_frame_len)
}

/// As [`encode_frame`] for a frame whose body is borrowed: the same bytes as the owned frame.
///
/// # Errors
/// As [`encode_frame`].
pub fn encode_frame_ref(
    frame: &FrameRef<'_>,
    dialect: impl Into<Dialect>,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<(), EncodeError> {
    encode_leaving_out(
        frame,
        dialect.into(),
        dst,
        max_frame_len,
        frame.payload_len(),
        None,
    )
    .map(|_| ())
}

/// Where the payload left out of a frame by [`encode_frame_spliced`] goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spliced {
    /// Bytes of the appended frame, from its length prefix on, that come before the payload.
    pub at: usize,
    /// The payload, still the frame's own bytes: a slice, never a copy.
    pub payload: Bytes,
}

/// As [`encode_frame`] (or [`encode_frame_ref`]), but a payload of [`SHARE_MIN`] bytes or more
/// that lies in a shared buffer is left out of `dst`: the frame on the wire is the first
/// [`Spliced::at`] bytes appended, the payload, then the rest appended. For a vectored write
/// that sends a large payload without copying it. `None` when the frame went into `dst` whole.
///
/// # Errors
/// As [`encode_frame`]; the length checked includes the payload.
pub fn encode_frame_spliced(
    frame: &FrameRef<'_>,
    dialect: impl Into<Dialect>,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<Option<Spliced>, EncodeError> {
    let payload = frame.payload();
    let payload_len = payload.map_or(0, |payload| payload.len());
    let payload = payload
        .filter(|_| payload_len >= SHARE_MIN)
        .and_then(|payload| payload.shared());
    let start = dst.len();
    let at = encode_leaving_out(
        frame,
        dialect.into(),
        dst,
        max_frame_len,
        payload_len,
        payload.as_deref(),
    )?;
    Ok(at.zip(payload).map(|(at, payload)| Spliced {
        at: at - start,
        payload,
    }))
}

/// Encodes `frame`, whose payload is `payload_len` bytes, at the end of `dst` as a connection
/// of `dialect` carries it, leaving out `leave_out`'s bytes when the frame's payload is those
/// bytes; returns where in `dst` they were left out.
#[inline]
fn encode_leaving_out(
    frame: &FrameRef<'_>,
    dialect: Dialect,
    dst: &mut BytesMut,
    max_frame_len: usize,
    payload_len: usize,
    leave_out: Option<&[u8]>,
) -> Result<Option<usize>, EncodeError> {
    match frame.hot_or_built() {
        Ok(body) => encode_hot(body, dialect, dst, max_frame_len, payload_len, leave_out),
        Err(built) => match built.lent_hot() {
            Some(lent) => {
                encode_leaving_out(&lent, dialect, dst, max_frame_len, payload_len, leave_out)
            }
            None => encode_by_serde(built, dialect, dst, max_frame_len),
        },
    }
}

/// A hot body written by its hand codec, as [`encode_leaving_out`].
#[inline]
fn encode_hot(
    body: &dyn Body,
    dialect: Dialect,
    dst: &mut BytesMut,
    max_frame_len: usize,
    payload_len: usize,
    leave_out: Option<&[u8]>,
) -> Result<Option<usize>, EncodeError> {
    let kind = body.kind_at(dialect.version())?;
    carries(dialect, kind)?;
    let left_out = leave_out.map_or(0, <[u8]>::len);
    if payload_len > max_frame_len {
        // Refused before a byte is copied; reckoning the exact length is for this case only.
        return Err(EncodeError::Oversize {
            kind,
            len: body.encoded_len(kind, dialect),
            max: max_frame_len,
        });
    }
    // Written first and measured after: the length prefix is patched in, so a body's length
    // is never reckoned apart from writing it.
    let start = dst.len();
    dst.reserve(LENGTH_PREFIX_LEN + ROOM_BESIDE_PAYLOAD + payload_len.saturating_sub(left_out));
    dst.put_u32(0);
    let mut out = Writer::new(dst, leave_out);
    body.encode(kind, dialect, &mut out);
    let at = out.left_out_at();
    let len = dst.len() - start - LENGTH_PREFIX_LEN + at.map_or(0, |_| left_out);
    match u32::try_from(len) {
        Ok(prefix) if len <= max_frame_len => {
            patch_prefix(dst, start, prefix);
            Ok(at)
        }
        _ => {
            dst.truncate(start);
            Err(EncodeError::Oversize {
                kind,
                len,
                max: max_frame_len,
            })
        }
    }
}

/// Whether the reader of `dialect` may be sent `kind`: one introduced after version 3 only when
/// the reader listed its feature.
///
/// # Errors
/// [`EncodeError::NotListed`] naming the feature.
fn carries(dialect: Dialect, kind: FrameKind) -> Result<(), EncodeError> {
    match kind.feature() {
        Some(feature) if kind.version() > 3 && !dialect.lists(FeatureSet::named([feature])) => {
            Err(EncodeError::NotListed { kind, feature })
        }
        _ => Ok(()),
    }
}

/// Serde's encoding of a cold kind, its length checked after the fact.
fn encode_by_serde(
    frame: &Frame,
    dialect: Dialect,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<Option<usize>, EncodeError> {
    let kind = frame.kind_at(dialect.version())?;
    carries(dialect, kind)?;
    let start = dst.len();
    dst.put_u32(0);
    match frame.encode_cold(kind, dst) {
        Some(Ok(())) => {}
        Some(Err(source)) => {
            dst.truncate(start);
            return Err(EncodeError::Serialize { kind, source });
        }
        None => {
            dst.truncate(start);
            return Ok(None);
        }
    }
    let len = dst.len() - start - LENGTH_PREFIX_LEN;
    let prefix = match u32::try_from(len) {
        Ok(prefix) if len <= max_frame_len => prefix,
        _ => {
            dst.truncate(start);
            return Err(EncodeError::Oversize {
                kind,
                len,
                max: max_frame_len,
            });
        }
    };
    patch_prefix(dst, start, prefix);
    Ok(None)
}

/// Writes `prefix` into the length prefix reserved at `start`.
#[inline]
fn patch_prefix(dst: &mut BytesMut, start: usize, prefix: u32) {
    if let Some(slot) = dst.get_mut(start..start + LENGTH_PREFIX_LEN) {
        slot.copy_from_slice(&prefix.to_be_bytes());
    }
}

/// The length of the frame at the front of `src`, prefix included, once all of it is there;
/// `Ok(None)` while bytes are missing.
///
/// # Errors
/// [`DecodeError::Oversize`] for a length over `max_frame_len`, before anything is reserved.
#[inline]
pub fn frame_len(src: &[u8], max_frame_len: usize) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = src.get(..LENGTH_PREFIX_LEN) else {
        return Ok(None);
    };
    let mut len_bytes = [0u8; LENGTH_PREFIX_LEN];
    len_bytes.copy_from_slice(prefix);
    let len = u32::from_be_bytes(len_bytes) as usize;
    if len > max_frame_len {
        return Err(DecodeError::Oversize {
            len,
            max: max_frame_len,
        });
    }
    let total = LENGTH_PREFIX_LEN + len;
    Ok((src.len() >= total).then_some(total))
}

/// Takes one frame off the front of `src`, or `Ok(None)` when more bytes are needed.
///
/// A length over `max_frame_len` is refused before anything is reserved for it; for a
/// partial frame only its missing bytes are requested (`BytesMut` may round the allocation up).
///
/// # Errors
/// A [`DecodeError`] naming why the bytes are not a frame. The frame's bytes are consumed.
pub fn decode_frame(
    src: &mut BytesMut,
    max_frame_len: usize,
) -> Result<Option<Frame>, DecodeError> {
    let Some(total) = frame_len(src, max_frame_len)? else {
        if let Some(prefix) = src.get(..LENGTH_PREFIX_LEN) {
            let mut len_bytes = [0u8; LENGTH_PREFIX_LEN];
            len_bytes.copy_from_slice(prefix);
            let total = LENGTH_PREFIX_LEN + u32::from_be_bytes(len_bytes) as usize;
            src.reserve(total - src.len());
        }
        return Ok(None);
    };
    if total - LENGTH_PREFIX_LEN < SHARE_MIN {
        let decoded = decode_body(src.get(LENGTH_PREFIX_LEN..total).unwrap_or_default());
        src.advance(total);
        return decoded.map(Some);
    }
    // Large payloads become slices of the body, which keeps only its own bytes alive.
    src.advance(LENGTH_PREFIX_LEN);
    let body = src.split_to(total - LENGTH_PREFIX_LEN).freeze();
    decode_owned(&body, Some(&body)).map(Some)
}

/// Decodes one frame body (without its length prefix), requiring every byte be used; every
/// kind of every version is read.
///
/// # Errors
/// [`DecodeError::MissingKind`], [`DecodeError::UnknownKind`], [`DecodeError::Malformed`]
/// or [`DecodeError::TrailingBytes`].
pub fn decode_body(body: &[u8]) -> Result<Frame, DecodeError> {
    decode_owned(body, None)
}

/// What a frame decoded in place keeps beside the bytes it is read from: a cold frame decoded
/// into owned fields, and a large payload's share of its buffer. Emptied by the next decode.
#[derive(Debug, Default)]
pub struct FrameSlots {
    cold: Option<Box<Frame>>,
    payload: Option<Bytes>,
}

impl FrameSlots {
    /// Lets go of what the last frame kept.
    #[inline]
    pub fn clear(&mut self) {
        self.cold = None;
        self.payload = None;
    }
}

/// As [`decode_body`], reading a hot kind in place: its names and payload borrow `body`. A
/// cold kind is decoded into `slots` and lent from there. `owner`, when given, holds exactly
/// `body`'s bytes, and large payloads are handed on as slices of it (kept in `slots`). A kind
/// of a version later than `version` is refused. `fail` makes the caller's error of why a body
/// is not a frame, so the frame is built once, where the caller receives it.
///
/// # Errors
/// As [`decode_body`], and [`DecodeError::KindTooNew`], made by `fail`.
#[inline(always)]
pub fn decode_body_ref<'a, E>(
    body: &'a [u8],
    version: u16,
    owner: Option<&'a Bytes>,
    slots: &'a mut FrameSlots,
    fail: impl FnOnce(DecodeError) -> E,
) -> Result<FrameRef<'a>, E> {
    let FrameSlots { cold, payload } = slots;
    let mut input = Reader::new(body, owner.map(|owner| (owner, payload)));
    let discriminant = match input.canonical_u32() {
        Ok((discriminant, true)) => discriminant,
        _ => return Err(fail(DecodeError::MissingKind)),
    };
    let Some(kind) = FrameKind::from_discriminant(discriminant) else {
        return Err(fail(DecodeError::UnknownKind { discriminant }));
    };
    if kind.version() > version {
        return Err(fail(DecodeError::KindTooNew { kind, version }));
    }
    let rest = body.get(input.position()..).unwrap_or_default();
    FrameRef::decode_hot(kind, &mut input, fail, || {
        let frame = decode_by_serde(kind, rest)?;
        Ok(FrameRef::Frame(cold.insert(Box::new(frame))))
    })
}

/// A body decoded and owned; a large payload in `owner` stays a slice of it.
fn decode_owned(body: &[u8], owner: Option<&Bytes>) -> Result<Frame, DecodeError> {
    let mut slots = FrameSlots::default();
    let hot = match decode_body_ref(body, PROTOCOL_VERSION, owner, &mut slots, |err| err)? {
        FrameRef::Frame(_) => None,
        hot => Some(hot.into_owned()),
    };
    // A cold kind was decoded into the slots, so one of the two holds the frame.
    hot.or(slots.cold.map(|frame| *frame))
        .ok_or(DecodeError::MissingKind)
}

/// Serde's decoding of the body of a cold `kind` after its kind, requiring every byte be used.
fn decode_by_serde(kind: FrameKind, rest: &[u8]) -> Result<Frame, DecodeError> {
    match Frame::decode_cold(kind, rest) {
        Some(Ok((frame, []))) => Ok(frame),
        Some(Ok((_, extra))) => Err(DecodeError::TrailingBytes {
            kind,
            extra: extra.len(),
        }),
        Some(Err(source)) => Err(DecodeError::Malformed { kind, source }),
        None => Err(DecodeError::Malformed {
            kind,
            source: postcard::Error::SerdeDeCustom,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::PayloadRef;
    use crate::message::PROTOCOL_VERSION;
    use crate::message::{Ping, Pong};

    fn encoded(frame: &Frame) -> BytesMut {
        let mut buf = BytesMut::new();
        assert!(encode_frame(frame, PROTOCOL_VERSION, &mut buf, DEFAULT_MAX_FRAME_LEN).is_ok());
        buf
    }

    #[test]
    fn a_ping_is_prefix_kind_and_nonce() {
        let buf = encoded(&Frame::Ping(Ping { nonce: 300 }));
        assert_eq!(&buf[..], &[0, 0, 0, 3, 12, 0xac, 0x02]);
    }

    #[test]
    fn a_partial_frame_waits_for_more_bytes() {
        let whole = encoded(&Frame::Pong(Pong { nonce: 7 }));
        for cut in 0..whole.len() {
            let mut part = BytesMut::from(&whole[..cut]);
            assert!(
                matches!(decode_frame(&mut part, 64), Ok(None)),
                "cut at {cut}"
            );
            assert_eq!(part.len(), cut, "a partial frame consumes nothing");
        }
        let mut all = whole.clone();
        assert_eq!(
            decode_frame(&mut all, 64).ok().flatten(),
            Some(Frame::Pong(Pong { nonce: 7 }))
        );
        assert!(all.is_empty());
    }

    #[test]
    fn an_oversize_prefix_is_refused_before_allocating() {
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 1][..]);
        let before = buf.capacity();
        let result = decode_frame(&mut buf, 1024);
        assert!(matches!(
            result,
            Err(DecodeError::Oversize {
                len: 0xffff_ffff,
                max: 1024
            })
        ));
        assert_eq!(buf.capacity(), before);
    }

    #[test]
    fn an_unknown_kind_is_named() {
        let mut buf = BytesMut::from(&[0, 0, 0, 1, 100][..]);
        assert!(matches!(
            decode_frame(&mut buf, 64),
            Err(DecodeError::UnknownKind { discriminant: 100 })
        ));
    }

    #[test]
    fn an_empty_body_has_no_kind() {
        let mut buf = BytesMut::from(&[0, 0, 0, 0][..]);
        assert!(matches!(
            decode_frame(&mut buf, 64),
            Err(DecodeError::MissingKind)
        ));
    }

    #[test]
    fn a_truncated_body_is_malformed() {
        // Ping with a varint nonce that never ends.
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 12, 0x80][..]);
        assert!(matches!(
            decode_frame(&mut buf, 64),
            Err(DecodeError::Malformed {
                kind: FrameKind::Ping,
                ..
            })
        ));
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut buf = BytesMut::from(&[0, 0, 0, 3, 12, 1, 9][..]);
        assert!(matches!(
            decode_frame(&mut buf, 64),
            Err(DecodeError::TrailingBytes {
                kind: FrameKind::Ping,
                extra: 1
            })
        ));
    }

    #[test]
    fn an_oversize_frame_is_not_encoded() {
        let mut buf = BytesMut::from(&b"keep"[..]);
        let result = encode_frame(
            &Frame::Ping(Ping { nonce: u64::MAX }),
            PROTOCOL_VERSION,
            &mut buf,
            4,
        );
        assert!(matches!(result, Err(EncodeError::Oversize { .. })));
        assert_eq!(&buf[..], b"keep");
    }

    #[test]
    fn an_oversize_hot_frame_is_refused_with_its_length_and_the_buffer_left_as_it_was() {
        // The payload alone over the bound, then a payload under it that the names push over.
        for (version, expected, payload, max) in [
            (2, FrameKind::Push, 100, 64),
            (2, FrameKind::Push, 64, 80),
            (3, FrameKind::Push3, 64, 80),
        ] {
            let frame = push(payload);
            let whole = FrameRef::Frame(&frame).encoded_len(version);
            let mut buf = BytesMut::from(&b"keep"[..]);
            let result = encode_frame(&frame, version, &mut buf, max);
            let Err(EncodeError::Oversize {
                kind,
                len,
                max: bound,
            }) = result
            else {
                panic!("{payload}-byte payload under {max}: {result:?}");
            };
            assert_eq!((kind, Some(len), bound), (expected, whole, max));
            assert_eq!(&buf[..], b"keep");
        }
    }

    #[test]
    fn what_a_version_cannot_carry_is_refused_by_name_and_nothing_is_written() {
        let mut headed = push(8);
        let mut registered = crate::message::Register {
            namespaces: vec!["ns".into()],
            task_queue: String::new(),
            node: None,
            activity_types: vec!["echo".into()],
            identity: "w".into(),
            max_concurrency: 1,
            deployment: Some("v2".into()),
            instance_id: None,
            extensions: Vec::new(),
        };
        let extension = crate::message::Extension {
            tag: 9,
            critical: false,
            value: Bytes::new(),
        };
        let mut extended = push(8);
        if let (Frame::Push(headed), Frame::Push(extended)) = (&mut headed, &mut extended) {
            headed.extras.headers = vec![crate::message::Header::new("traceparent", "00-1")];
            extended.extras.extensions = vec![extension.clone()];
        }
        let presence = Frame::from(crate::message::Presence {
            reset: true,
            synced: true,
            draining: false,
            pools: Vec::new(),
            extensions: vec![extension],
        });
        let cases = [
            (headed, FrameKind::Push, "headers"),
            (extended, FrameKind::Push, "extensions"),
            (
                Frame::from(registered.clone()),
                FrameKind::Register,
                "deployment",
            ),
            (presence, FrameKind::Presence, "extensions"),
        ];
        for (frame, kind, field) in cases {
            let mut buf = BytesMut::from(&b"keep"[..]);
            let refused = encode_frame(&frame, 2, &mut buf, DEFAULT_MAX_FRAME_LEN);
            let Err(EncodeError::Unsupported {
                kind: named,
                field: named_field,
                version: 2,
            }) = refused
            else {
                panic!("{} at version 2: {refused:?}", frame.name());
            };
            assert_eq!((named, named_field), (kind, field));
            assert_eq!(&buf[..], b"keep", "nothing written");
            assert!(encode_frame(&frame, 3, &mut buf, DEFAULT_MAX_FRAME_LEN).is_ok());
        }
        // The documented way a worker goes to a version-2 node: its identity left behind.
        registered.instance_id = Some("pod-1".into());
        let (carried, left_behind) = registered.carried_at(2);
        assert!(left_behind);
        let mut buf = BytesMut::new();
        encode_frame(&Frame::from(carried), 2, &mut buf, DEFAULT_MAX_FRAME_LEN)
            .expect("a version-2 node takes the registration without its identity");
        assert_eq!(buf.get(LENGTH_PREFIX_LEN), Some(&3), "kind Register");
    }

    #[test]
    fn a_push_or_relay_leaves_its_priority_and_fairness_behind_at_version_2_and_a_submission_does_not(
    ) {
        let Frame::Push(mut push) = push(8) else {
            unreachable!()
        };
        push.extras.priority = Some(1);
        push.extras.fairness_key = Some("tenant".into());
        push.extras.fairness_weight = Some(500);
        let plain = Frame::from(crate::message::Push {
            extras: Default::default(),
            ..(*push).clone()
        });
        let mut buf = BytesMut::new();
        encode_frame(
            &Frame::Push(push.clone()),
            2,
            &mut buf,
            DEFAULT_MAX_FRAME_LEN,
        )
        .expect("priority and fairness are not critical");
        let mut without = BytesMut::new();
        encode_frame(&plain, 2, &mut without, DEFAULT_MAX_FRAME_LEN).expect("encodes");
        assert_eq!(buf, without, "the same bytes as a push without them");
        let submit = Frame::from(crate::message::Submit {
            correlation: 1,
            request: push.request.clone(),
            extras: push.extras.clone(),
            wait_for_worker_ms: None,
            reply_timeout_ms: None,
            routing: crate::message::NodeRouting::Any,
        });
        let refused = encode_frame(&submit, 2, &mut buf, DEFAULT_MAX_FRAME_LEN);
        assert!(matches!(
            refused,
            Err(EncodeError::Unsupported {
                kind: FrameKind::Submit,
                field: "priority",
                version: 2
            })
        ));
    }

    fn push(len: usize) -> Frame {
        Frame::from(crate::message::Push {
            correlation: 9,
            request: crate::message::DispatchRequest {
                namespace: "ns".into(),
                task_queue: String::new(),
                activity_type: "echo".into(),
                node: None,
                workflow_id: "wf".into(),
                ordinal: 1,
                run_id: None,
                attempt: 1,
                input: Bytes::from(vec![5u8; len]),
                deadline_unix_ms: Some(77),
            },
            extras: Default::default(),
        })
    }

    #[test]
    fn a_spliced_frame_is_the_whole_frame_with_its_payload_left_out() {
        let frame = push(SHARE_MIN + 3);
        let mut buf = BytesMut::from(&b"keep"[..]);
        let spliced = encode_frame_spliced(
            &FrameRef::Frame(&frame),
            PROTOCOL_VERSION,
            &mut buf,
            DEFAULT_MAX_FRAME_LEN,
        )
        .ok()
        .flatten()
        .expect("a large payload is left out");
        assert_eq!(&buf[..4], b"keep");
        let appended = &buf[4..];
        let mut wire = BytesMut::from(&appended[..spliced.at]);
        wire.extend_from_slice(&spliced.payload);
        wire.extend_from_slice(&appended[spliced.at..]);
        assert_eq!(wire, encoded(&frame), "the same bytes as a whole encode");
        let Frame::Push(push) = &frame else {
            unreachable!()
        };
        assert_eq!(
            spliced.payload.as_ptr(),
            push.request.input.as_ptr(),
            "not a copy"
        );
    }

    #[test]
    fn a_small_payload_is_not_left_out_and_the_bound_counts_a_left_out_one() {
        let small = push(64);
        let mut buf = BytesMut::new();
        assert_eq!(
            encode_frame_spliced(
                &FrameRef::Frame(&small),
                PROTOCOL_VERSION,
                &mut buf,
                DEFAULT_MAX_FRAME_LEN
            )
            .ok(),
            Some(None)
        );
        assert_eq!(buf, encoded(&small));
        let large = push(SHARE_MIN);
        let mut buf = BytesMut::new();
        let refused = encode_frame_spliced(
            &FrameRef::Frame(&large),
            PROTOCOL_VERSION,
            &mut buf,
            SHARE_MIN,
        );
        assert!(matches!(refused, Err(EncodeError::Oversize { .. })));
        assert!(buf.is_empty());
    }

    /// Whether `inner` lies within the `len` bytes from address `start`.
    fn inside(start: usize, len: usize, inner: PayloadRef<'_>) -> bool {
        let at = inner.as_slice().as_ptr() as usize;
        at >= start && at + inner.len() <= start + len
    }

    #[test]
    fn a_large_payload_decodes_as_a_slice_of_its_frame_whatever_its_routing() {
        let Frame::Push(push) = push(SHARE_MIN) else {
            unreachable!()
        };
        let pinned = Frame::from(crate::message::Submit {
            correlation: 3,
            request: push.request.clone(),
            wait_for_worker_ms: None,
            reply_timeout_ms: None,
            routing: crate::message::NodeRouting::Pin("b".into()),
            extras: Default::default(),
        });
        for frame in [Frame::Push(push), pinned] {
            let mut buf = encoded(&frame);
            let (start, len) = (buf.as_ptr() as usize, buf.len());
            let decoded = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN).ok().flatten();
            assert_eq!(decoded.as_ref(), Some(&frame));
            let payload = decoded
                .as_ref()
                .and_then(Frame::payload)
                .expect("a payload");
            assert!(
                inside(start, len, payload),
                "{} copied its payload",
                frame.name()
            );
        }
    }

    #[test]
    fn a_hot_frame_spelled_with_a_longer_varint_decodes_as_serde_reads_it() {
        let frame = Frame::from(crate::message::Reply {
            correlation: 5,
            response: crate::message::DispatchResponse {
                workflow_id: "wf".into(),
                ordinal: 1,
                run_id: None,
                outcome: crate::message::ActivityOutcome::Success(Bytes::from_static(b"ok")),
            },
        });
        let body = &encoded(&frame)[LENGTH_PREFIX_LEN..];
        // The correlation 5 spelled in two bytes, which postcard also reads.
        let mut longer = vec![body[0], 0x85, 0x00];
        longer.extend_from_slice(&body[2..]);
        assert_eq!(decode_body(&longer).ok(), Some(frame));
    }

    #[test]
    fn non_canonical_kind_varints_are_refused() {
        // Ping, its kind spelled in two bytes: postcard would read it, the framing does not.
        assert!(matches!(
            decode_body(&[0x8c, 0x00, 0x01]),
            Err(DecodeError::MissingKind)
        ));
        assert!(matches!(decode_body(&[0x0c, 0x01]), Ok(Frame::Ping(_))));
        assert!(matches!(
            decode_body(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(DecodeError::UnknownKind {
                discriminant: u32::MAX
            })
        ));
        assert!(matches!(
            decode_body(&[0xff, 0xff, 0xff, 0xff, 0x1f]),
            Err(DecodeError::MissingKind)
        ));
    }

    #[test]
    fn a_kind_after_version_3_goes_only_to_a_reader_that_listed_its_feature() {
        let unlisted = Dialect::from(4);
        assert!(matches!(
            carries(unlisted, FrameKind::Progress),
            Err(EncodeError::NotListed {
                kind: FrameKind::Progress,
                feature: "progress"
            })
        ));
        assert!(carries(unlisted, FrameKind::Features).is_ok());
        assert!(carries(unlisted, FrameKind::Farewell).is_ok());
        let listing = Dialect::new(4, FeatureSet::PROGRESS);
        assert!(carries(listing, FrameKind::Progress).is_ok());
        assert!(carries(listing, FrameKind::Session).is_err());
    }
}
