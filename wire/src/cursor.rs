//! The primitives every hot body is made of, read and written as postcard lays them out: the
//! crate's one varint reader, its writer, the lengths they take, and the borrowed payloads
//! and name lists they read.
//!
//! An unsigned integer is LEB128; a string or byte string its length then its bytes; an
//! `Option` `0` or `1` then the value; a `bool` one byte; an enum its variant index then its
//! fields; a struct its fields in order. Reading accepts exactly what postcard's decoder
//! accepts, overlong varints within the type's byte limit included, and fails where it fails,
//! with the same error.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use postcard::Error;

/// Payloads this large or larger are sliced out of the frame they arrived in, and left out of
/// a spliced encoding, instead of copied; smaller ones are cheaper to copy than to keep their
/// frame's buffer alive for. Frames this large are read into a buffer of their own.
pub const SHARE_MIN: usize = 16 * 1024;

/// A read's result: postcard's error where postcard would fail.
pub(crate) type Read<T> = Result<T, Error>;

/// A cursor over a body, reading fields in place.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The shared buffer holding `bytes`, if any: payloads can be handed on as slices of it.
    owner: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], owner: Option<&'a Bytes>) -> Self {
        Self {
            bytes,
            pos: 0,
            owner,
        }
    }

    /// Bytes not read yet.
    pub(crate) fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    #[inline(always)]
    fn byte(&mut self) -> Read<u8> {
        let byte = *self
            .bytes
            .get(self.pos)
            .ok_or(Error::DeserializeUnexpectedEnd)?;
        self.pos += 1;
        Ok(byte)
    }

    #[inline(always)]
    fn take(&mut self, len: usize) -> Read<&'a [u8]> {
        let end = self
            .pos
            .checked_add(len)
            .ok_or(Error::DeserializeUnexpectedEnd)?;
        let taken = self
            .bytes
            .get(self.pos..end)
            .ok_or(Error::DeserializeUnexpectedEnd)?;
        self.pos = end;
        Ok(taken)
    }

    /// A LEB128 integer of at most `max_bytes` bytes, the last of them at most `last_max`:
    /// postcard's rule for a type of that width.
    #[inline(always)]
    fn leb128(&mut self, max_bytes: u32, last_max: u8) -> Read<u64> {
        let first = self.byte()?;
        if first < 0x80 {
            return Ok(u64::from(first));
        }
        let mut value = u64::from(first & 0x7f);
        for index in 1..max_bytes {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte < 0x80 {
                if index + 1 == max_bytes && byte > last_max {
                    return Err(Error::DeserializeBadVarint);
                }
                return Ok(value);
            }
        }
        Err(Error::DeserializeBadVarint)
    }

    #[inline(always)]
    pub(crate) fn u64(&mut self) -> Read<u64> {
        self.leb128(10, 0x01)
    }

    #[inline(always)]
    pub(crate) fn u32(&mut self) -> Read<u32> {
        // Five bytes whose last holds at most four bits: the value fits.
        self.leb128(5, 0x0f).map(|value| value as u32)
    }

    /// A length or count: a `usize`, as wide as a `u64` here.
    #[inline(always)]
    pub(crate) fn len(&mut self) -> Read<usize> {
        self.u64()
            .and_then(|len| usize::try_from(len).map_err(|_| Error::DeserializeUnexpectedEnd))
    }

    /// A varint kind: a frame's, or an enum's variant index.
    #[inline(always)]
    pub(crate) fn variant(&mut self) -> Read<u32> {
        self.u32()
    }

    /// As [`Reader::u32`], and whether it was written in the fewest bytes.
    pub(crate) fn canonical_u32(&mut self) -> Read<(u32, bool)> {
        let start = self.pos;
        let value = self.u32()?;
        Ok((value, self.pos - start == varint_len(u64::from(value))))
    }

    #[inline(always)]
    pub(crate) fn bool(&mut self) -> Read<bool> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Error::DeserializeBadBool),
        }
    }

    /// An `Option`'s tag.
    #[inline(always)]
    pub(crate) fn some(&mut self) -> Read<bool> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Error::DeserializeBadOption),
        }
    }

    #[inline(always)]
    pub(crate) fn opt_u64(&mut self) -> Read<Option<u64>> {
        if self.some()? {
            self.u64().map(Some)
        } else {
            Ok(None)
        }
    }

    #[inline(always)]
    pub(crate) fn str(&mut self) -> Read<&'a str> {
        let len = self.len()?;
        std::str::from_utf8(self.take(len)?).map_err(|_| Error::DeserializeBadUtf8)
    }

    #[inline(always)]
    pub(crate) fn opt_str(&mut self) -> Read<Option<&'a str>> {
        if self.some()? {
            self.str().map(Some)
        } else {
            Ok(None)
        }
    }

    #[inline(always)]
    pub(crate) fn payload(&mut self) -> Read<PayloadRef<'a>> {
        let len = self.len()?;
        let bytes = self.take(len)?;
        Ok(PayloadRef::within(bytes, self.owner))
    }

    /// A list of strings, each checked once; returns the count and the bytes they take.
    pub(crate) fn strs(&mut self) -> Read<(usize, &'a [u8])> {
        let count = self.len()?;
        let start = self.pos;
        for _ in 0..count {
            self.str()?;
        }
        Ok((count, self.bytes.get(start..self.pos).unwrap_or_default()))
    }
}

/// Bytes the LEB128 varint of `value` takes.
#[inline]
pub(crate) fn varint_len(value: u64) -> usize {
    // One byte per started group of seven significant bits, and one for zero.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes of a hot body's head: its kind, then the correlation id every hot body starts with.
#[inline]
pub(crate) fn head_len(kind: u32, correlation: u64) -> usize {
    varint_len(u64::from(kind)) + varint_len(correlation)
}

/// Bytes a string or byte string of `len` bytes takes.
#[inline]
pub(crate) fn bytes_len(len: usize) -> usize {
    varint_len(len as u64) + len
}

/// Bytes an `Option` of a varint takes.
#[inline]
pub(crate) fn opt_u64_len(value: Option<u64>) -> usize {
    1 + value.map_or(0, varint_len)
}

/// Bytes an `Option` of a string takes.
#[inline]
pub(crate) fn opt_str_len(text: Option<&str>) -> usize {
    1 + text.map_or(0, |text| bytes_len(text.len()))
}

/// Appends a body's fields to a `BytesMut`; a payload given as the one to leave out is
/// skipped, and where it would have gone is noted (see `framing::encode_frame_spliced`).
pub(crate) struct Writer<'a> {
    buf: &'a mut BytesMut,
    /// Recognised by address, not content.
    leave_out: Option<&'a [u8]>,
    left_out_at: Option<usize>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut BytesMut, leave_out: Option<&'a [u8]>) -> Self {
        Self {
            buf,
            leave_out,
            left_out_at: None,
        }
    }

    /// Where in the buffer the payload to leave out was left out, if it was.
    pub(crate) fn left_out_at(&self) -> Option<usize> {
        self.left_out_at
    }

    #[inline(always)]
    pub(crate) fn u8(&mut self, byte: u8) {
        self.buf.put_u8(byte);
    }

    #[inline(always)]
    pub(crate) fn u64(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.put_u8((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.put_u8(value as u8);
    }

    /// A hot body's head: its kind, then its correlation id.
    #[inline(always)]
    pub(crate) fn head(&mut self, kind: u32, correlation: u64) {
        self.u64(u64::from(kind));
        self.u64(correlation);
    }

    #[inline(always)]
    pub(crate) fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }

    #[inline(always)]
    pub(crate) fn opt_u64(&mut self, value: Option<u64>) {
        match value {
            Some(value) => {
                self.u8(1);
                self.u64(value);
            }
            None => self.u8(0),
        }
    }

    #[inline(always)]
    pub(crate) fn str(&mut self, text: &str) {
        self.u64(text.len() as u64);
        self.buf.extend_from_slice(text.as_bytes());
    }

    #[inline(always)]
    pub(crate) fn opt_str(&mut self, text: Option<&str>) {
        match text {
            Some(text) => {
                self.u8(1);
                self.str(text);
            }
            None => self.u8(0),
        }
    }

    /// A payload's length, then its bytes, unless they are the ones to leave out.
    #[inline(always)]
    pub(crate) fn payload(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        let skip = self.leave_out.is_some_and(|payload| {
            self.left_out_at.is_none()
                && payload.len() == bytes.len()
                && std::ptr::eq(payload.as_ptr(), bytes.as_ptr())
        });
        if skip {
            self.left_out_at = Some(self.buf.len());
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// A list of strings: its count, then each.
    pub(crate) fn strs<'s>(&mut self, count: usize, texts: impl Iterator<Item = &'s str>) {
        self.u64(count as u64);
        for text in texts {
            self.str(text);
        }
    }
}

/// Payload bytes borrowed, with the buffer they lie in when that is a shared `Bytes`, so a
/// large payload can be handed on as a slice of it instead of a copy.
#[derive(Clone, Copy, Default)]
pub struct PayloadRef<'a> {
    bytes: &'a [u8],
    /// Holds `bytes`.
    owner: Option<&'a Bytes>,
}

impl<'a> PayloadRef<'a> {
    /// Bytes lent with no shared buffer behind them: handing them on copies them.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, owner: None }
    }

    /// All of `bytes`, which can be handed on without copying.
    pub fn of(bytes: &'a Bytes) -> Self {
        Self {
            bytes,
            owner: Some(bytes),
        }
    }

    /// `bytes`, lying inside `owner`; without `owner` when they do not.
    pub(crate) fn within(bytes: &'a [u8], owner: Option<&'a Bytes>) -> Self {
        let owner = owner.filter(|owner| range_in(owner, bytes).is_some());
        Self { bytes, owner }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The same bytes as a `Bytes` sharing the buffer they lie in, when they lie in one.
    pub fn shared(&self) -> Option<Bytes> {
        let owner = self.owner?;
        range_in(owner, self.bytes).map(|range| owner.slice(range))
    }

    /// An owned copy: a slice of the buffer they lie in when they are [`SHARE_MIN`] bytes or
    /// more (it keeps only that buffer alive), a copy of them otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self.shared() {
            Some(shared) if self.bytes.len() >= SHARE_MIN || self.owner_is_exact() => shared,
            _ => Bytes::copy_from_slice(self.bytes),
        }
    }

    /// The payload is its owner whole: sharing it costs nothing and keeps nothing more alive.
    fn owner_is_exact(&self) -> bool {
        self.owner.is_some_and(|owner| {
            std::ptr::eq(owner.as_ptr(), self.bytes.as_ptr()) && owner.len() == self.bytes.len()
        })
    }
}

/// Where `inner` lies inside `outer`, by address.
fn range_in(outer: &[u8], inner: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (end <= outer.len()).then_some(start..end)
}

impl AsRef<[u8]> for PayloadRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self.bytes
    }
}

impl fmt::Debug for PayloadRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PayloadRef").field(&self.bytes).finish()
    }
}

impl PartialEq for PayloadRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for PayloadRef<'_> {}

/// A list of names borrowed: as it lies in a frame (already checked to be UTF-8), or lent by
/// the caller.
#[derive(Clone, Copy)]
pub struct Names<'a>(NamesInner<'a>);

#[derive(Clone, Copy)]
enum NamesInner<'a> {
    /// `count` names as postcard lays them out: each a varint length then UTF-8 bytes.
    Wire {
        count: usize,
        bytes: &'a [u8],
    },
    Slice(&'a [String]),
}

impl<'a> Names<'a> {
    /// Names lent by the caller.
    pub fn of(names: &'a [String]) -> Self {
        Self(NamesInner::Slice(names))
    }

    /// `count` names laid out in `bytes`, each already read once and found well formed.
    pub(crate) fn wire(count: usize, bytes: &'a [u8]) -> Self {
        Self(NamesInner::Wire { count, bytes })
    }

    pub fn len(&self) -> usize {
        match self.0 {
            NamesInner::Wire { count, .. } => count,
            NamesInner::Slice(names) => names.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The names in order.
    pub fn iter(&self) -> NamesIter<'a> {
        NamesIter(match self.0 {
            NamesInner::Wire { count, bytes } => IterInner::Wire {
                left: count,
                reader: Reader::new(bytes, None),
            },
            NamesInner::Slice(names) => IterInner::Slice(names.iter()),
        })
    }

    /// Owned copies of the names.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }
}

/// The names of a [`Names`], in order.
pub struct NamesIter<'a>(IterInner<'a>);

enum IterInner<'a> {
    Wire { left: usize, reader: Reader<'a> },
    Slice(std::slice::Iter<'a, String>),
}

impl<'a> Iterator for NamesIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        match &mut self.0 {
            IterInner::Wire { left, reader } => {
                *left = left.checked_sub(1)?;
                // Read once already when the frame was decoded, so this cannot fail.
                reader.str().ok()
            }
            IterInner::Slice(names) => names.next().map(String::as_str),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = match &self.0 {
            IterInner::Wire { left, .. } => *left,
            IterInner::Slice(names) => names.len(),
        };
        (left, Some(left))
    }
}

impl Default for Names<'_> {
    fn default() -> Self {
        Self::of(&[])
    }
}

impl fmt::Debug for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Names<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Names<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], width: u32) -> Read<u64> {
        let mut reader = Reader::new(bytes, None);
        match width {
            32 => reader.u32().map(u64::from),
            _ => reader.u64(),
        }
    }

    #[test]
    fn varints_read_as_postcard_reads_them() {
        for (bytes, width) in [
            (&[0x00][..], 64),
            (&[0xac, 0x02], 64),
            (&[0x80, 0x00], 64),
            (&[0x81], 64),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                64,
            ),
            (
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
                64,
            ),
            (
                &[
                    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
                ],
                64,
            ),
            (&[0xff, 0xff, 0xff, 0xff, 0x0f], 32),
            (&[0xff, 0xff, 0xff, 0xff, 0x10], 32),
            (&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 32),
            (&[0x85, 0x00], 32),
        ] {
            let expected = match width {
                32 => postcard::from_bytes::<u32>(bytes).map(u64::from),
                _ => postcard::from_bytes::<u64>(bytes),
            };
            let got = read(bytes, width);
            assert_eq!(got, expected, "{bytes:02x?}");
        }
    }

    #[test]
    fn varint_lengths_are_what_the_writer_writes() {
        for value in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut buf = BytesMut::new();
            Writer::new(&mut buf, None).u64(value);
            assert_eq!(buf.len(), varint_len(value), "{value}");
            assert_eq!(&buf[..], &postcard::to_stdvec(&value).unwrap()[..]);
        }
    }

    #[test]
    fn a_kind_spelled_in_more_bytes_than_it_needs_is_told_apart() {
        let mut reader = Reader::new(&[0x8c, 0x00, 0x0c], None);
        assert_eq!(reader.canonical_u32(), Ok((12, false)));
        assert_eq!(reader.canonical_u32(), Ok((12, true)));
    }
}
