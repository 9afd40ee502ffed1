//! Bounded serde fields of the version-4 bodies: a length or count from the wire is checked
//! against its bound before anything is allocated for it, on reading and on writing alike.
//!
//! A field out of bounds fails as serde's `invalid_length`, which the framing reports as
//! `Malformed` (reading) or `Serialize` (writing). Used through `#[serde(with = "...")]`.

use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeInclusive;

use bytes::Bytes;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{self, Serializer};
use serde::Serialize;

/// A bound on a field's length, in bytes or entries.
pub(crate) trait Bound {
    /// The lengths allowed.
    const LEN: RangeInclusive<usize>;
    /// What the field holds, for the error: "16 to 64 bytes".
    const EXPECTED: &'static str;
}

/// A session token's length in bytes.
pub(crate) const TOKEN_LEN: RangeInclusive<usize> = 16..=64;
/// The most bytes of a progress's details.
pub(crate) const MAX_DETAILS: usize = 4096;
/// The most correlations one resume, or one answer to it, lists.
pub(crate) const MAX_HOLDING: usize = 65_536;

/// A session token: 16 to 64 bytes.
pub(crate) struct Token;

impl Bound for Token {
    const LEN: RangeInclusive<usize> = TOKEN_LEN;
    const EXPECTED: &'static str = "a session token of 16 to 64 bytes";
}

/// A progress's details: at most 4096 bytes.
pub(crate) struct Details;

impl Bound for Details {
    const LEN: RangeInclusive<usize> = 0..=MAX_DETAILS;
    const EXPECTED: &'static str = "progress details of at most 4096 bytes";
}

/// The correlations of one resume or of one answer to it: at most 65536.
pub(crate) struct Holding;

impl Bound for Holding {
    const LEN: RangeInclusive<usize> = 0..=MAX_HOLDING;
    const EXPECTED: &'static str = "at most 65536 correlations";
}

/// Bytes within `B`'s bound.
pub(crate) struct BoundedBytes<B>(PhantomData<B>);

impl<B: Bound> BoundedBytes<B> {
    /// Writes `bytes`, refusing them out of bounds.
    ///
    /// # Errors
    /// The serializer's custom error for a length out of bounds, or its own.
    pub(crate) fn serialize<S: Serializer>(
        bytes: &Bytes,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        if !B::LEN.contains(&bytes.len()) {
            return Err(ser::Error::custom(format_args!(
                "{} bytes where {} are allowed",
                bytes.len(),
                B::EXPECTED
            )));
        }
        serializer.serialize_bytes(bytes)
    }

    /// Reads bytes, refusing a length out of bounds before copying them.
    ///
    /// # Errors
    /// `invalid_length` for a length out of bounds, or the deserializer's own.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Bytes, D::Error> {
        deserializer.deserialize_byte_buf(BoundedBytes::<B>(PhantomData))
    }
}

impl<B: Bound> Visitor<'_> for BoundedBytes<B> {
    type Value = Bytes;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(B::EXPECTED)
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Bytes, E> {
        if !B::LEN.contains(&bytes.len()) {
            return Err(E::invalid_length(bytes.len(), &self));
        }
        Ok(Bytes::copy_from_slice(bytes))
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Bytes, E> {
        if !B::LEN.contains(&bytes.len()) {
            return Err(E::invalid_length(bytes.len(), &self));
        }
        Ok(Bytes::from(bytes))
    }
}

/// Most entries reserved for on a stated count alone.
const RESERVE_AHEAD: usize = 1024;

/// A list within `B`'s bound.
pub(crate) struct BoundedVec<B, T>(PhantomData<(B, T)>);

impl<B: Bound, T: Serialize> BoundedVec<B, T> {
    /// Writes `items`, refusing a count out of bounds.
    ///
    /// # Errors
    /// The serializer's custom error for a count out of bounds, or its own.
    pub(crate) fn serialize<S: Serializer>(items: &[T], serializer: S) -> Result<S::Ok, S::Error> {
        if !B::LEN.contains(&items.len()) {
            return Err(ser::Error::custom(format_args!(
                "{} entries where {} are allowed",
                items.len(),
                B::EXPECTED
            )));
        }
        items.serialize(serializer)
    }
}

impl<'de, B: Bound, T: de::Deserialize<'de>> BoundedVec<B, T> {
    /// Reads a list, refusing a stated count out of bounds before reserving for it, and a
    /// list that runs past the bound where no count is stated.
    ///
    /// # Errors
    /// `invalid_length` for a count out of bounds, or the deserializer's own.
    pub(crate) fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Vec<T>, D::Error> {
        deserializer.deserialize_seq(BoundedVec::<B, T>(PhantomData))
    }
}

impl<'de, B: Bound, T: de::Deserialize<'de>> Visitor<'de> for BoundedVec<B, T> {
    type Value = Vec<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(B::EXPECTED)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let stated = seq.size_hint().unwrap_or(0);
        if stated > *B::LEN.end() {
            return Err(de::Error::invalid_length(stated, &self));
        }
        // Reserved for at most a few pages: a count is stated before its entries arrive.
        let mut items = Vec::with_capacity(stated.min(RESERVE_AHEAD));
        while let Some(item) = seq.next_element()? {
            if items.len() == *B::LEN.end() {
                return Err(de::Error::invalid_length(items.len() + 1, &self));
            }
            items.push(item);
        }
        if !B::LEN.contains(&items.len()) {
            return Err(de::Error::invalid_length(items.len(), &self));
        }
        Ok(items)
    }
}
