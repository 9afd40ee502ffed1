//! The frame decoder on an arbitrary byte stream, fed through `FrameCodec` in arbitrary chunks.
//!
//! Input layout: two bytes of maximum body length (big-endian), one byte `c` giving
//! `c % 16 + 1` chunk sizes, then that many bytes each giving a chunk size of `byte + 1`
//! (cycled), then the stream itself.
//!
//! Asserted: no panic; a refused length reserves nothing and a partial frame consumes
//! nothing; the buffer's capacity stays within `4 * max(4 + max_len, bytes fed) + 8` (the
//! decoder reserves at most one admissible frame, and `BytesMut` at most doubles an
//! allocation, see `wire/tests/properties.rs`); every decoded frame re-encodes (as its kind's
//! version writes it) within the same limit, in no more bytes, and from then on decodes and
//! re-encodes unchanged; the end of the stream is clean exactly when nothing is buffered; a
//! decoded body is the frame serde's own decoding of the same bytes gives (the wire's reference
//! bodies, `wire/tests/reference`), and a body refused as malformed serde refuses too (the hot
//! frames are read by hand, not by serde); read in place (`decode_body_ref`), a body gives the
//! same frame, or the same refusal, as read into owned fields.
#[path = "../../wire/tests/reference/mod.rs"]
mod reference;

use bytes::BytesMut;
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::{
    decode_body, decode_body_ref, decode_frame, encode_frame, CodecError, DecodeError, Dialect,
    FeatureSet, Frame, FrameCodec, FrameKind, FrameRef, FrameSlots, PROTOCOL_VERSION,
};
use tokio_util::codec::Decoder;

/// Checks every invariant above on the input `data`; a violated one panics.
pub fn run(data: &[u8]) {
    let Some((max, chunk_sizes, stream)) = split_input(data) else {
        return;
    };
    feed(max, &chunk_sizes, stream);
}

fn split_input(data: &[u8]) -> Option<(usize, Vec<usize>, &[u8])> {
    let (&[hi, lo, count], rest) = data.split_first_chunk::<3>()?;
    let count = usize::from(count % 16) + 1;
    let sizes = rest.get(..count)?;
    let stream = rest.get(count..)?;
    let sizes = sizes.iter().map(|&b| usize::from(b) + 1).collect();
    Some((usize::from(u16::from_be_bytes([hi, lo])), sizes, stream))
}

fn capacity_bound(max: usize, fed: usize) -> usize {
    4 * (LENGTH_PREFIX_LEN + max).max(fed) + 8
}

/// Feeds `stream` to a codec of limit `max` in chunks of `chunk_sizes` (cycled), checking
/// each step.
fn feed(max: usize, chunk_sizes: &[usize], stream: &[u8]) {
    let mut codec = FrameCodec::new(max);
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut rest = stream;
    for &size in chunk_sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        buf.extend_from_slice(chunk);
        fed += chunk.len();
        loop {
            let stated = stated_len(&buf);
            // Serde's reading of the next body, when it is whole and within the limit.
            let by_serde = stated
                .filter(|&len| len <= max)
                .and_then(|len| buf.get(LENGTH_PREFIX_LEN..LENGTH_PREFIX_LEN + len))
                .map(|body| {
                    in_place_agrees(body);
                    serde_reads(body)
                });
            let (len_before, capacity_before) = (buf.len(), buf.capacity());
            let result = codec.decode(&mut buf);
            if let Some(by_serde) = &by_serde {
                agrees_with_serde(&result, by_serde.as_ref());
            }
            assert!(
                buf.capacity() <= capacity_bound(max, fed),
                "capacity {} after feeding {fed} with max {max}",
                buf.capacity()
            );
            match result {
                Ok(Some(frame)) => {
                    let body_len = stated.expect("a frame has a prefix");
                    assert!(body_len <= max);
                    assert_eq!(buf.len(), len_before - LENGTH_PREFIX_LEN - body_len);
                    // The kind's own version, to a reader that listed every feature: what
                    // any reader may be sent of this frame.
                    let version = Dialect::new(
                        codec
                            .last_kind()
                            .map_or(PROTOCOL_VERSION, FrameKind::version),
                        FeatureSet::ALL,
                    );
                    let mut again = BytesMut::new();
                    encode_frame(&frame, version, &mut again, max)
                        .expect("a decoded frame re-encodes");
                    assert!(again.len() <= LENGTH_PREFIX_LEN + body_len);
                    let once = again.clone();
                    let back = decode_frame(&mut again, max)
                        .expect("re-encoding decodes")
                        .expect("re-encoding is whole");
                    assert!(again.is_empty());
                    let mut twice = BytesMut::new();
                    encode_frame(&back, version, &mut twice, max).expect("it re-encodes again");
                    assert_eq!(twice, once, "written again, it changes");
                }
                Ok(None) => {
                    assert_eq!(buf.len(), len_before, "a partial frame consumes nothing");
                    if let Some(body_len) = stated {
                        assert!(body_len <= max && len_before < LENGTH_PREFIX_LEN + body_len);
                    }
                    break;
                }
                Err(CodecError::Decode(DecodeError::Oversize { len, max: limit })) => {
                    assert_eq!((Some(len), limit), (stated, max));
                    assert!(len > max);
                    assert_eq!(
                        buf.capacity(),
                        capacity_before,
                        "a refusal reserves nothing"
                    );
                    return;
                }
                Err(CodecError::Decode(_)) => {
                    let body_len = stated.expect("a body error has a prefix");
                    assert!(body_len <= max);
                    assert_eq!(buf.len(), len_before - LENGTH_PREFIX_LEN - body_len);
                    return;
                }
                Err(other) => panic!("decode produced a non-decode error: {other:?}"),
            }
        }
    }
    // Every whole frame was taken above, so the end is clean exactly when nothing is left.
    let buffered = buf.len();
    match codec.decode_eof(&mut buf) {
        Ok(None) => assert_eq!(buffered, 0),
        Err(CodecError::Truncated { buffered: n }) => assert!(n == buffered && n > 0),
        other => panic!("end of stream after {buffered} leftover bytes gave {other:?}"),
    }
}

/// A decoded frame is the one serde reads from the same body, and a body refused as
/// malformed serde refuses too. A kind spelled in more bytes than it needs is refused before
/// either reads it, so a refusal of the kind is not compared.
fn agrees_with_serde(result: &Result<Option<Frame>, CodecError>, by_serde: Option<&Frame>) {
    match result {
        Ok(Some(frame)) => assert_eq!(Some(frame), by_serde, "serde reads another frame"),
        Err(CodecError::Decode(
            DecodeError::Malformed { .. } | DecodeError::TrailingBytes { .. },
        )) => assert_eq!(by_serde, None, "serde reads a refused body"),
        _ => {}
    }
}

/// A body read in place is the frame read into owned fields, or refused for the same reason.
fn in_place_agrees(body: &[u8]) {
    let mut slots = FrameSlots::default();
    let in_place = decode_body_ref(body, PROTOCOL_VERSION, None, &mut slots, |err| err)
        .map(FrameRef::into_owned);
    match (in_place, decode_body(body)) {
        (Ok(lent), Ok(owned)) => assert_eq!(lent, owned, "read in place as another frame"),
        (Err(lent), Err(owned)) => assert_eq!(lent.to_string(), owned.to_string()),
        (lent, owned) => panic!("in place {lent:?}, owned {owned:?}"),
    }
}

/// Serde's reading of a frame body: the frame when it uses every byte.
fn serde_reads(body: &[u8]) -> Option<Frame> {
    reference::decode(body)
}

fn stated_len(buf: &[u8]) -> Option<usize> {
    let prefix: [u8; LENGTH_PREFIX_LEN] = buf.get(..LENGTH_PREFIX_LEN)?.try_into().ok()?;
    Some(u32::from_be_bytes(prefix) as usize)
}
