//! The primitives every hot body is made of, read and written as postcard lays them out: the
//! crate's one varint reader, its writer, the lengths they take, and the borrowed payloads
//! and lists (of names, headers, extensions) they read.
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
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The shared buffer holding `bytes`, if any, and where a payload of [`SHARE_MIN`] bytes or
    /// more read from it is kept as a slice of it, lent on as a [`PayloadRef::Shared`].
    share: Option<(&'a Bytes, &'a mut Option<Bytes>)>,
    /// A varint written in more bytes than it needs was read.
    overlong: bool,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`, which hands large payloads on as slices of `share`'s buffer when
    /// `bytes` lie in it.
    pub(crate) fn new(bytes: &'a [u8], share: Option<(&'a Bytes, &'a mut Option<Bytes>)>) -> Self {
        Self {
            bytes,
            pos: 0,
            share,
            overlong: false,
        }
    }

    /// True once a varint written in more bytes than it needs was read: what was read is then
    /// not in canonical form, and is not to be passed on as it lies.
    pub(crate) fn read_overlong(&self) -> bool {
        self.overlong
    }

    /// A reader of `bytes` alone.
    pub(crate) fn of(bytes: &'a [u8]) -> Self {
        Self::new(bytes, None)
    }

    /// How far it has read.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The bytes read since `start`, a [`Reader::position`].
    pub(crate) fn since(&self, start: usize) -> &'a [u8] {
        self.bytes.get(start..self.pos).unwrap_or_default()
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

    /// Reads `expected` when the next bytes are exactly it; otherwise reads nothing.
    #[inline(always)]
    pub(crate) fn skip_if(&mut self, expected: &[u8]) -> bool {
        let end = self.pos + expected.len();
        if self.bytes.get(self.pos..end) == Some(expected) {
            self.pos = end;
            return true;
        }
        false
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
                // A last group of zero adds nothing: the bytes before it would have done.
                self.overlong |= byte == 0;
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
        utf8(self.take(len)?)
    }

    #[inline(always)]
    pub(crate) fn opt_str(&mut self) -> Read<Option<&'a str>> {
        if self.some()? {
            self.str().map(Some)
        } else {
            Ok(None)
        }
    }

    /// A payload: a slice of the shared buffer when it is [`SHARE_MIN`] bytes or more and
    /// lies in one (once per body), the bytes lent in place otherwise.
    #[inline(always)]
    pub(crate) fn payload(&mut self) -> Read<PayloadRef<'a>> {
        let len = self.len()?;
        let bytes = self.take(len)?;
        if len < SHARE_MIN {
            return Ok(PayloadRef::Slice(bytes));
        }
        let shared = self.share.take().and_then(|(owner, slot)| {
            let range = range_in(owner, bytes)?;
            Some(&*slot.insert(owner.slice(range)))
        });
        Ok(shared.map_or(PayloadRef::Slice(bytes), PayloadRef::Shared))
    }

    #[inline(always)]
    pub(crate) fn opt_u8(&mut self) -> Read<Option<u8>> {
        if self.some()? {
            self.byte().map(Some)
        } else {
            Ok(None)
        }
    }

    #[inline(always)]
    pub(crate) fn opt_u32(&mut self) -> Read<Option<u32>> {
        if self.some()? {
            self.u32().map(Some)
        } else {
            Ok(None)
        }
    }

    /// A byte string read in place.
    #[inline(always)]
    pub(crate) fn bytes(&mut self) -> Read<&'a [u8]> {
        let len = self.len()?;
        self.take(len)
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

/// Bytes an `Option` of a `u32` takes.
#[inline]
pub(crate) fn opt_u32_len(value: Option<u32>) -> usize {
    opt_u64_len(value.map(u64::from))
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
        self.bytes(text.as_bytes());
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

    #[inline(always)]
    pub(crate) fn opt_u8(&mut self, value: Option<u8>) {
        match value {
            Some(value) => {
                self.u8(1);
                self.u8(value);
            }
            None => self.u8(0),
        }
    }

    #[inline(always)]
    pub(crate) fn opt_u32(&mut self, value: Option<u32>) {
        self.opt_u64(value.map(u64::from));
    }

    /// A byte string: its length, then its bytes (never left out, unlike a payload).
    #[inline(always)]
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes already encoded, written as they are.
    #[inline(always)]
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

/// Payload bytes lent: in place ([`PayloadRef::Slice`]), or as a shared buffer of exactly
/// those bytes ([`PayloadRef::Shared`]) that can be handed on without a copy.
#[derive(Clone, Copy)]
pub enum PayloadRef<'a> {
    /// Bytes lent with no shared buffer behind them: handing them on copies them.
    Slice(&'a [u8]),
    /// A buffer of exactly the payload's bytes: handing it on shares it.
    Shared(&'a Bytes),
}

impl Default for PayloadRef<'_> {
    fn default() -> Self {
        PayloadRef::Slice(&[])
    }
}

impl<'a> PayloadRef<'a> {
    /// Bytes lent with no shared buffer behind them: handing them on copies them.
    pub fn new(bytes: &'a [u8]) -> Self {
        PayloadRef::Slice(bytes)
    }

    /// All of `bytes`, which can be handed on without copying.
    pub fn of(bytes: &'a Bytes) -> Self {
        PayloadRef::Shared(bytes)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &'a [u8] {
        match *self {
            PayloadRef::Slice(bytes) => bytes,
            PayloadRef::Shared(bytes) => bytes,
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The same bytes as a `Bytes` sharing the buffer they lie in, when they lie in one.
    pub fn shared(&self) -> Option<Bytes> {
        match self {
            PayloadRef::Slice(_) => None,
            PayloadRef::Shared(bytes) => Some(Bytes::clone(bytes)),
        }
    }

    /// An owned copy: the shared buffer itself when there is one (it holds only these
    /// bytes, or a large frame's, whose payload is most of it), a copy otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            PayloadRef::Slice(bytes) => Bytes::copy_from_slice(bytes),
            PayloadRef::Shared(bytes) => Bytes::clone(bytes),
        }
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
        self.as_slice()
    }
}

impl fmt::Debug for PayloadRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PayloadRef").field(&self.as_slice()).finish()
    }
}

impl PartialEq for PayloadRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for PayloadRef<'_> {}

/// An item of a borrowed [`List`]: what it reads as in place, and how an owned one is lent.
pub trait Listed: Sized {
    /// The item borrowed: read in place from a frame, or lent.
    type Ref<'a>: Copy + fmt::Debug + PartialEq + Eq
    where
        Self: 'a;

    /// The item lent.
    fn lend(&self) -> Self::Ref<'_>;

    /// An owned copy of a borrowed item.
    fn own(item: Self::Ref<'_>) -> Self;

    /// The item at the start of `bytes`, already read once and found well formed, and the
    /// bytes after it.
    #[doc(hidden)]
    fn next_in(bytes: &[u8]) -> Option<(Self::Ref<'_>, &[u8])>;
}

/// How the crate reads, writes and sizes one item of a list, as postcard lays it out.
pub(crate) trait ItemCodec: Listed {
    fn read<'a>(input: &mut Reader<'a>) -> Read<Self::Ref<'a>>;
    fn write(item: &Self::Ref<'_>, out: &mut Writer<'_>);
    fn encoded_len(item: &Self::Ref<'_>) -> usize;
}

/// Reads one item of `T` where `bytes` starts, for [`Listed::next_in`].
pub(crate) fn next_item<T: ItemCodec>(bytes: &[u8]) -> Option<(T::Ref<'_>, &[u8])> {
    let mut reader = Reader::of(bytes);
    let item = T::read(&mut reader).ok()?;
    Some((item, bytes.get(reader.pos..)?))
}

impl Listed for String {
    type Ref<'a> = &'a str;

    fn lend(&self) -> &str {
        self
    }

    fn own(item: &str) -> Self {
        item.to_owned()
    }

    fn next_in(bytes: &[u8]) -> Option<(&str, &[u8])> {
        next_item::<String>(bytes)
    }
}

impl ItemCodec for String {
    fn read<'a>(input: &mut Reader<'a>) -> Read<&'a str> {
        input.str()
    }

    fn write(item: &&str, out: &mut Writer<'_>) {
        out.str(item);
    }

    fn encoded_len(item: &&str) -> usize {
        bytes_len(item.len())
    }
}

/// A list borrowed: as it lies in a frame (its count, then each item already read once and
/// found well formed), or lent by the caller. Two words, so the bodies that hold lists stay
/// small to move.
pub struct List<'a, T>(ListInner<'a, T>);

enum ListInner<'a, T> {
    /// The list as postcard lays it out: its count, then its items.
    Wire(&'a [u8]),
    Lent(&'a Vec<T>),
}

/// A list of names borrowed: the nodes of a routing.
pub type Names<'a> = List<'a, String>;

impl<T> Clone for List<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for List<'_, T> {}

impl<T> Clone for ListInner<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ListInner<'_, T> {}

impl<T> List<'_, T> {
    /// No items.
    pub const EMPTY: Self = Self(ListInner::Wire(&[0]));
}

impl<'a, T: Listed> List<'a, T> {
    /// Items lent by the caller.
    pub fn of(items: &'a Vec<T>) -> Self {
        Self(ListInner::Lent(items))
    }

    /// A list laid out in `bytes` (its count, then its items), each item already read once and
    /// found well formed.
    pub(crate) fn wire(bytes: &'a [u8]) -> Self {
        Self(ListInner::Wire(bytes))
    }

    /// The count and the items' bytes of a list laid out in `bytes`.
    #[inline]
    fn laid_out(bytes: &'a [u8]) -> (usize, &'a [u8]) {
        if let [0, rest @ ..] = bytes {
            return (0, rest);
        }
        let mut reader = Reader::of(bytes);
        let count = reader.len().unwrap_or(0);
        (count, bytes.get(reader.pos..).unwrap_or_default())
    }

    pub fn len(&self) -> usize {
        match self.0 {
            ListInner::Wire(bytes) => Self::laid_out(bytes).0,
            ListInner::Lent(items) => items.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self.0 {
            // A count of nought is the one byte 0.
            ListInner::Wire(bytes) => bytes.first().is_none_or(|count| *count == 0),
            ListInner::Lent(items) => items.is_empty(),
        }
    }

    /// The items in order.
    pub fn iter(&self) -> ListIter<'a, T> {
        ListIter(match self.0 {
            ListInner::Wire(bytes) => {
                let (left, bytes) = Self::laid_out(bytes);
                IterInner::Wire { left, bytes }
            }
            ListInner::Lent(items) => IterInner::Slice(items.iter()),
        })
    }

    /// Owned copies of the items.
    pub fn to_vec(&self) -> Vec<T> {
        self.iter().map(T::own).collect()
    }
}

/// Reads a list: its count, then each item, checked once.
pub(crate) fn read_list<'a, T: ItemCodec>(input: &mut Reader<'a>) -> Read<List<'a, T>> {
    let start = input.pos;
    let count = input.len()?;
    for _ in 0..count {
        T::read(input)?;
    }
    let bytes = input.bytes.get(start..input.pos).unwrap_or_default();
    Ok(List::wire(bytes))
}

/// Writes a list: its count, then each item.
pub(crate) fn write_list<T: ItemCodec>(list: &List<'_, T>, out: &mut Writer<'_>) {
    match list.0 {
        // Read as laid out and checked item by item then: its bytes are its encoding.
        ListInner::Wire(bytes) => out.raw(bytes),
        ListInner::Lent(items) => {
            out.u64(items.len() as u64);
            for item in items {
                T::write(&item.lend(), out);
            }
        }
    }
}

/// Bytes a list takes.
pub(crate) fn list_len<T: ItemCodec>(list: &List<'_, T>) -> usize {
    match list.0 {
        // Laid out as the encoding writes it, so its bytes are its length.
        ListInner::Wire(bytes) => bytes.len(),
        ListInner::Lent(items) => {
            varint_len(items.len() as u64)
                + items
                    .iter()
                    .map(|item| T::encoded_len(&item.lend()))
                    .sum::<usize>()
        }
    }
}

/// The items of a [`List`], in order.
pub struct ListIter<'a, T>(IterInner<'a, T>);

enum IterInner<'a, T> {
    Wire { left: usize, bytes: &'a [u8] },
    Slice(std::slice::Iter<'a, T>),
}

impl<'a, T: Listed> Iterator for ListIter<'a, T> {
    type Item = T::Ref<'a>;

    fn next(&mut self) -> Option<T::Ref<'a>> {
        match &mut self.0 {
            IterInner::Wire { left, bytes } => {
                *left = left.checked_sub(1)?;
                // Read once already when the frame was decoded, so this cannot fail.
                let (item, rest) = T::next_in(bytes)?;
                *bytes = rest;
                Some(item)
            }
            IterInner::Slice(items) => items.next().map(T::lend),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = match &self.0 {
            IterInner::Wire { left, .. } => *left,
            IterInner::Slice(items) => items.len(),
        };
        (left, Some(left))
    }
}

impl<T: Listed> Default for List<'_, T> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<T: Listed> fmt::Debug for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Listed> PartialEq for List<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: Listed> Eq for List<'_, T> {}

/// `bytes` as text, or why not. Names are nearly always ASCII, which a word-at-a-time check
/// proves faster than the general validation does for short strings.
#[inline(always)]
fn utf8(bytes: &[u8]) -> Read<&str> {
    if bytes.is_ascii() {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes).map_err(|_| Error::DeserializeBadUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_read_whether_ascii_or_not_and_invalid_utf8_is_refused() {
        for text in [
            "",
            "bench",
            "namespace-\u{e9}t\u{e9}",
            "\u{1f980} crab",
            "a\u{0}b",
        ] {
            let mut bytes = vec![u8::try_from(text.len()).unwrap()];
            bytes.extend_from_slice(text.as_bytes());
            assert_eq!(Reader::of(&bytes).str().unwrap(), text);
        }
        for invalid in [
            &[0xff][..],
            &[b'a', 0xc3],
            &[0xed, 0xa0, 0x80],
            &[b'x', 0x80, b'y'],
        ] {
            let mut bytes = vec![u8::try_from(invalid.len()).unwrap()];
            bytes.extend_from_slice(invalid);
            assert!(matches!(
                Reader::of(&bytes).str(),
                Err(Error::DeserializeBadUtf8)
            ));
        }
    }

    fn read(bytes: &[u8], width: u32) -> Read<u64> {
        let mut reader = Reader::of(bytes);
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
        let mut reader = Reader::of(&[0x8c, 0x00, 0x0c]);
        assert_eq!(reader.canonical_u32(), Ok((12, false)));
        assert_eq!(reader.canonical_u32(), Ok((12, true)));
    }
}
