//! The primitives every hot body is made of, read and written as postcard lays them out: the
//! crate's one varint reader, its writer, and the lengths they take.
//!
//! An unsigned integer is LEB128; a string or byte string its length then its bytes; an
//! `Option` `0` or `1` then the value; a `bool` one byte; an enum its variant index then its
//! fields; a struct its fields in order. Reading accepts exactly what postcard's decoder
//! accepts, overlong varints within the type's byte limit included, and fails where it fails,
//! with the same error.

use bytes::{BufMut, Bytes, BytesMut};
use postcard::Error;

use crate::ownership::PayloadRef;

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
