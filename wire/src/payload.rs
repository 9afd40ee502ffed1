//! Payload bytes (a request's input, a success's result): large ones decoded as slices of the
//! frame body they arrived in instead of copies.
//!
//! Serde cannot hand a `Bytes` to a field, so [`decode_sharing`] names the body being decoded
//! in a thread-local for the length of one decode, and [`deserialize`] (the payload fields'
//! `deserialize_with`) slices a borrowed payload of [`SHARE_MIN`] bytes or more out of it. The
//! thread-local is private to this file: outside a [`decode_sharing`] call, or for bytes that
//! are not inside the named body, or from any other deserializer, payloads are copied as
//! before. A slice keeps only the frame's body alive, never more than its allocation.

use std::cell::RefCell;

use bytes::Bytes;
use serde::de::{Deserializer, Error, SeqAccess, Visitor};

/// Payloads this large or larger are sliced, not copied; smaller ones are cheaper to copy
/// than to keep their frame's buffer alive for.
pub const SHARE_MIN: usize = 16 * 1024;

thread_local! {
    /// The frame body being decoded by [`decode_sharing`] on this thread, if any.
    static BODY: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Runs `decode` over `body` with large payloads sliced out of `body`. Re-entrant: an inner
/// call names its own body and restores the outer one, also when `decode` unwinds.
pub(crate) fn decode_sharing<T>(body: &Bytes, decode: impl FnOnce(&[u8]) -> T) -> T {
    struct Restore(Option<Bytes>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            let _ = BODY.try_with(|cell| cell.replace(outer));
        }
    }
    let outer = BODY
        .try_with(|cell| cell.replace(Some(body.clone())))
        .ok()
        .flatten();
    let _restore = Restore(outer);
    decode(body)
}

/// A slice of the body being decoded holding exactly `bytes`, if they lie inside it.
fn shared_slice(bytes: &[u8]) -> Option<Bytes> {
    if bytes.len() < SHARE_MIN {
        return None;
    }
    BODY.try_with(|cell| {
        let body = cell.try_borrow().ok()?;
        let body = body.as_ref()?;
        let start = (bytes.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
        let end = start.checked_add(bytes.len())?;
        (end <= body.len()).then(|| body.slice(start..end))
    })
    .ok()
    .flatten()
}

/// Deserializes payload bytes: a slice of the frame body when [`decode_sharing`] runs and
/// the payload is large, a copy otherwise.
///
/// # Errors
/// The deserializer's, when the input is not bytes.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
    deserializer.deserialize_bytes(PayloadVisitor)
}

struct PayloadVisitor;

impl<'de> Visitor<'de> for PayloadVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("payload bytes")
    }

    fn visit_borrowed_bytes<E: Error>(self, v: &'de [u8]) -> Result<Bytes, E> {
        Ok(shared_slice(v).unwrap_or_else(|| Bytes::copy_from_slice(v)))
    }

    fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Bytes, E> {
        Ok(Bytes::copy_from_slice(v))
    }

    fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
        Ok(Bytes::from(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
        // Bounded by what the deserializer holds, never by a length it was told.
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(byte) = seq.next_element::<u8>()? {
            bytes.push(byte);
        }
        Ok(Bytes::from(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, serde::Serialize)]
    struct Carrier {
        #[serde(deserialize_with = "deserialize")]
        payload: Bytes,
    }

    fn encoded(len: usize) -> Bytes {
        let carrier = Carrier {
            payload: Bytes::from(vec![7u8; len]),
        };
        Bytes::from(postcard::to_stdvec(&carrier).unwrap())
    }

    fn inside(outer: &Bytes, inner: &Bytes) -> bool {
        let start = outer.as_ptr() as usize;
        let at = inner.as_ptr() as usize;
        at >= start && at + inner.len() <= start + outer.len()
    }

    #[test]
    fn a_large_payload_is_a_slice_of_the_body_and_equal_to_a_copy() {
        let body = encoded(SHARE_MIN);
        let carrier: Carrier = decode_sharing(&body, |b| postcard::from_bytes(b).unwrap());
        assert_eq!(carrier.payload, vec![7u8; SHARE_MIN]);
        assert!(inside(&body, &carrier.payload));
    }

    #[test]
    fn a_small_payload_is_copied() {
        let body = encoded(SHARE_MIN - 1);
        let carrier: Carrier = decode_sharing(&body, |b| postcard::from_bytes(b).unwrap());
        assert_eq!(carrier.payload.len(), SHARE_MIN - 1);
        assert!(!inside(&body, &carrier.payload));
    }

    #[test]
    fn outside_a_sharing_decode_or_from_other_bytes_payloads_are_copied() {
        let body = encoded(SHARE_MIN);
        let carrier: Carrier = postcard::from_bytes(&body).unwrap();
        assert!(!inside(&body, &carrier.payload));
        // Another body is named, but the bytes decoded are not inside it.
        let other = encoded(SHARE_MIN);
        let carrier: Carrier = decode_sharing(&other, |_| postcard::from_bytes(&body).unwrap());
        assert!(!inside(&other, &carrier.payload) && !inside(&body, &carrier.payload));
    }

    #[test]
    fn nested_and_unwound_decodes_restore_the_outer_body() {
        let outer = encoded(SHARE_MIN);
        let inner = encoded(SHARE_MIN);
        let carrier: Carrier = decode_sharing(&outer, |b| {
            let nested: Carrier = decode_sharing(&inner, |i| postcard::from_bytes(i).unwrap());
            assert!(inside(&inner, &nested.payload));
            postcard::from_bytes(b).unwrap()
        });
        assert!(inside(&outer, &carrier.payload));
        let unwound = std::panic::catch_unwind(|| {
            decode_sharing(&inner, |_| panic!("decoder failed"));
        });
        assert!(unwound.is_err());
        assert!(
            BODY.with(|cell| cell.borrow().is_none()),
            "no body is left named"
        );
    }

    #[test]
    fn payloads_arriving_as_a_sequence_are_read() {
        use serde::de::value::{Error as ValueError, SeqDeserializer};
        let seq = SeqDeserializer::<_, ValueError>::new(b"abc".iter().copied());
        assert_eq!(deserialize(seq).unwrap(), Bytes::from_static(b"abc"));
    }
}
