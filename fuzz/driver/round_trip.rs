//! The checks every frame-body target makes: a body decodes the same alone and framed, a
//! decoded body of the target's kinds re-encodes canonically, and a structured frame
//! round-trips. The crate including a frame-body driver declares this module at its root.

use bytes::{BufMut, BytesMut};
use lintel_wire::framing::LENGTH_PREFIX_LEN;
use lintel_wire::{
    decode_body, decode_frame, encode_frame, Dialect, EncodeError, FeatureSet, Frame, FrameKind,
    DEFAULT_MAX_FRAME_LEN,
};

/// A connection of `version` whose reader listed every feature (from version 4).
pub(crate) fn listing(version: u16) -> Dialect {
    Dialect::new(version, FeatureSet::ALL)
}

/// Encodes as a connection of `dialect` writes it, within the default limit, which no frame
/// built from a fuzz input reaches.
pub(crate) fn encode(frame: &Frame, dialect: impl Into<Dialect>) -> BytesMut {
    let dialect = dialect.into();
    let mut buf = BytesMut::new();
    if let Err(error) = encode_frame(frame, dialect, &mut buf, DEFAULT_MAX_FRAME_LEN) {
        panic!("{} does not encode as {dialect:?}: {error}", frame.name());
    }
    buf
}

/// Decodes `body` alone and framed; a frame of a kind `checked` accepts, written again as a
/// connection of that kind's version writes it, takes no more bytes than `body` (fewer when
/// `body` held an overlong varint, the decoder's only leniency, `PROTOCOL.md` section 2, or
/// what that version says in fewer: a version-2 presence merges a pair's groups, an earlier
/// version's result its later variants), is `body` itself when it took as many and nothing
/// was translated, and from then on reads and writes back unchanged.
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
    // Every kind is one byte, below 128.
    let kind = body
        .first()
        .and_then(|&kind| FrameKind::from_discriminant(u32::from(kind)))
        .expect("a decoded body starts with its kind");
    if !checked(kind) {
        return;
    }
    let version = listing(kind.version());
    let again = encode(&frame, version);
    let again_body = &again[LENGTH_PREFIX_LEN..];
    assert!(
        again_body.len() <= body.len(),
        "{kind} re-encodes in {} bytes from {}",
        again_body.len(),
        body.len()
    );
    let read = decode_body(again_body).expect("a re-encoded body decodes");
    if again_body == body {
        assert_eq!(read, frame);
    }
    let twice = encode(&read, version);
    assert_eq!(
        &twice[LENGTH_PREFIX_LEN..],
        again_body,
        "a {kind} body written again changes"
    );
}

/// Encodes a structured frame as a connection of `dialect` writes it and checks the round
/// trip: it decodes with nothing left over, in the kind the version carries it as, and what
/// it reads back as writes the same bytes again (the encoder is canonical, and what a version
/// or an unlisted feature translates stays translated). Returns what was read back.
pub(crate) fn check_value(frame: Frame, dialect: impl Into<Dialect>) -> Option<Frame> {
    let version = dialect.into();
    let Ok(kind) = frame.kind_at(version.version()) else {
        return None;
    };
    let mut buf = BytesMut::new();
    match encode_frame(&frame, version, &mut buf, DEFAULT_MAX_FRAME_LEN) {
        Ok(_) => {}
        // A kind of a feature this reader did not list is not sent to it at all.
        Err(EncodeError::NotListed { .. }) => return None,
        Err(error) => panic!("{} does not encode as {version:?}: {error}", frame.name()),
    }
    let stated = u32::from_be_bytes(buf[..LENGTH_PREFIX_LEN].try_into().expect("4 bytes"));
    assert_eq!(stated as usize, buf.len() - LENGTH_PREFIX_LEN);
    assert_eq!(
        buf.get(LENGTH_PREFIX_LEN),
        Some(&(kind.discriminant() as u8))
    );
    let body = buf[LENGTH_PREFIX_LEN..].to_vec();
    let decoded = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN)
        .expect("an encoded frame decodes")
        .expect("an encoded frame is whole");
    assert!(buf.is_empty());
    let again = encode(&decoded, version);
    assert_eq!(&again[LENGTH_PREFIX_LEN..], &body[..]);
    Some(decoded)
}
