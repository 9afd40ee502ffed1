//! The checks every frame-body target makes: a body decodes the same alone and framed, a
//! decoded body of the target's kinds re-encodes canonically, and a structured frame
//! round-trips.

use bytes::{BufMut, BytesMut};
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::{
    decode_body, decode_frame, encode_frame, Frame, FrameKind, DEFAULT_MAX_FRAME_LEN,
};

/// Encodes within the default limit, which no frame built from a fuzz input reaches.
pub(crate) fn encode(frame: &Frame) -> BytesMut {
    let mut buf = BytesMut::new();
    if let Err(error) = encode_frame(frame, &mut buf, DEFAULT_MAX_FRAME_LEN) {
        panic!("{} does not encode: {error}", frame.kind());
    }
    buf
}

/// Decodes `body` alone and framed; a frame of a kind `checked` accepts must re-encode to
/// exactly `body`, or to strictly fewer bytes when `body` held an overlong varint (the
/// decoder's only leniency, `PROTOCOL.md` section 2), and decode back to itself.
pub(crate) fn check_body(body: &[u8], checked: impl Fn(FrameKind) -> bool) {
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
    if !checked(frame.kind()) {
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

/// Encodes a structured frame and checks the round trip: it decodes back equal with nothing
/// left over, and what the encoder writes is canonical.
pub(crate) fn check_value(frame: Frame) {
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
    let again = encode(&decoded);
    assert_eq!(&again[LENGTH_PREFIX_LEN..], &body[..]);
}
