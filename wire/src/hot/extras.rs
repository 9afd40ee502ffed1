//! [`RequestExtras`], the part every version-3 request kind (submit, push, relay) carries
//! after its request, and the items of its lists: headers and extensions.

use bytes::Bytes;
use compact_str::CompactString;

use crate::cursor::{
    bytes_len, list_len, next_item, opt_str_len, opt_u32_len, read_list, varint_len, write_list,
    ItemCodec, List, Listed, Read, Reader, Writer,
};
use crate::message::{Extension, ExtensionRef, ExtrasRef, Header, HeaderRef, RequestExtras};
use crate::ownership::{Compact, Ownership};

impl Listed for Header {
    type Ref<'a> = HeaderRef<'a>;

    fn lend(&self) -> HeaderRef<'_> {
        Header {
            name: &self.name,
            value: &self.value,
        }
    }

    fn own(item: HeaderRef<'_>) -> Self {
        Header {
            name: item.name.to_owned(),
            value: item.value.to_owned(),
        }
    }

    fn next_in(bytes: &[u8]) -> Option<(HeaderRef<'_>, &[u8])> {
        next_item::<Header>(bytes)
    }
}

impl ItemCodec for Header {
    fn read<'a>(input: &mut Reader<'a>) -> Read<HeaderRef<'a>> {
        Ok(Header {
            name: input.str()?,
            value: input.str()?,
        })
    }

    fn write(item: &HeaderRef<'_>, out: &mut Writer<'_>) {
        out.str(item.name);
        out.str(item.value);
    }

    fn encoded_len(item: &HeaderRef<'_>) -> usize {
        bytes_len(item.name.len()) + bytes_len(item.value.len())
    }
}

impl Listed for Extension {
    type Ref<'a> = ExtensionRef<'a>;

    fn lend(&self) -> ExtensionRef<'_> {
        Extension {
            tag: self.tag,
            critical: self.critical,
            value: &self.value,
        }
    }

    fn own(item: ExtensionRef<'_>) -> Self {
        Extension {
            tag: item.tag,
            critical: item.critical,
            value: Bytes::copy_from_slice(item.value),
        }
    }

    fn next_in(bytes: &[u8]) -> Option<(ExtensionRef<'_>, &[u8])> {
        next_item::<Extension>(bytes)
    }
}

impl ItemCodec for Extension {
    fn read<'a>(input: &mut Reader<'a>) -> Read<ExtensionRef<'a>> {
        Ok(Extension {
            tag: input.u32()?,
            critical: input.bool()?,
            value: input.bytes()?,
        })
    }

    fn write(item: &ExtensionRef<'_>, out: &mut Writer<'_>) {
        out.u64(u64::from(item.tag));
        out.bool(item.critical);
        out.bytes(item.value);
    }

    fn encoded_len(item: &ExtensionRef<'_>) -> usize {
        varint_len(u64::from(item.tag)) + 1 + bytes_len(item.value.len())
    }
}

/// [`ExtrasRef::NONE`] encoded: two empty lists and four absent fields, the extras of
/// nearly every request, written and read whole.
const NONE_ENCODED: [u8; 6] = [0; 6];

impl ExtrasRef<'_> {
    /// No extras: what a version-2 request means. `&ExtrasRef::NONE` lives for `'static`.
    pub const NONE: Self = RequestExtras {
        headers: List::EMPTY,
        priority: None,
        fairness_key: None,
        fairness_weight: None,
        deployment: None,
        extensions: List::EMPTY,
    };

    /// True when every field is absent, as in a version-2 request.
    pub fn is_none(&self) -> bool {
        self.headers.is_empty()
            && self.priority.is_none()
            && self.fairness_key.is_none()
            && self.fairness_weight.is_none()
            && self.deployment.is_none()
            && self.extensions.is_empty()
    }

    /// Bytes of the header names and values.
    pub fn header_bytes(&self) -> usize {
        self.headers
            .iter()
            .map(|header| header.name.len() + header.value.len())
            .sum()
    }

    /// Bytes of the extension values.
    pub fn extension_bytes(&self) -> usize {
        self.extensions
            .iter()
            .map(|extension| extension.value.len())
            .sum()
    }

    pub fn encoded_len(&self) -> usize {
        list_len(&self.headers)
            + 1
            + usize::from(self.priority.is_some())
            + opt_str_len(self.fairness_key)
            + opt_u32_len(self.fairness_weight)
            + opt_str_len(self.deployment)
            + list_len(&self.extensions)
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        if self.is_none() {
            out.raw(&NONE_ENCODED);
            return;
        }
        write_list(&self.headers, out);
        out.opt_u8(self.priority);
        out.opt_str(self.fairness_key);
        out.opt_u32(self.fairness_weight);
        out.opt_str(self.deployment);
        write_list(&self.extensions, out);
    }
}

impl<'a> ExtrasRef<'a> {
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        if input.skip_if(&NONE_ENCODED) {
            return Ok(Self::NONE);
        }
        Ok(RequestExtras {
            headers: read_list(input)?,
            priority: input.opt_u8()?,
            fairness_key: input.opt_str()?,
            fairness_weight: input.opt_u32()?,
            deployment: input.opt_str()?,
            extensions: read_list(input)?,
        })
    }

    /// The same view for a shorter lifetime.
    pub fn reborrow<'b>(&self) -> ExtrasRef<'b>
    where
        'a: 'b,
    {
        self.map(|text| *text, |headers| *headers, |extensions| *extensions)
    }

    /// An owned copy, for extras kept beyond the frame they arrived in.
    pub fn into_owned(self) -> RequestExtras {
        self.map(|text| (*text).to_owned(), List::to_vec, List::to_vec)
    }

    /// An owned copy whose names and header texts of up to 24 bytes are held inline.
    pub fn to_compact(&self) -> RequestExtras<Compact> {
        if self.is_none() {
            return RequestExtras::default();
        }
        self.map(
            |text| CompactString::new(text),
            |headers| {
                headers
                    .iter()
                    .map(|header| Header {
                        name: CompactString::new(header.name),
                        value: CompactString::new(header.value),
                    })
                    .collect()
            },
            List::to_vec,
        )
    }
}

impl RequestExtras {
    /// The extras lent, to encode or hand on without copying them.
    pub fn view(&self) -> ExtrasRef<'_> {
        self.map(
            String::as_str,
            |headers| List::of(headers),
            |extensions| List::of(extensions),
        )
    }
}

impl<O: Ownership> RequestExtras<O> {
    /// The same extras with their names converted by `text` and their lists by `headers` and
    /// `extensions`: what lending, reborrowing and copying extras have in common.
    fn map<'s, T: Ownership>(
        &'s self,
        text: impl Fn(&'s O::Str) -> T::Str,
        headers: impl FnOnce(&'s O::Headers) -> T::Headers,
        extensions: impl FnOnce(&'s O::Extensions) -> T::Extensions,
    ) -> RequestExtras<T> {
        RequestExtras {
            headers: headers(&self.headers),
            priority: self.priority,
            fairness_key: self.fairness_key.as_ref().map(&text),
            fairness_weight: self.fairness_weight,
            deployment: self.deployment.as_ref().map(&text),
            extensions: extensions(&self.extensions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::Writer;

    #[test]
    fn no_extras_are_the_bytes_postcard_writes_for_them_and_read_back_as_none() {
        let none: RequestExtras = RequestExtras::default();
        let serde = postcard::to_allocvec(&none).unwrap_or_default();
        assert_eq!(serde, NONE_ENCODED);
        let mut buf = bytes::BytesMut::new();
        ExtrasRef::NONE.encode(&mut Writer::new(&mut buf, None));
        assert_eq!(&buf[..], &NONE_ENCODED[..]);
        let mut input = Reader::new(&NONE_ENCODED, None);
        let read = ExtrasRef::decode(&mut input).map(|extras| extras.is_none());
        assert_eq!((read, input.left()), (Ok(true), 0));
    }

    #[test]
    fn extras_that_begin_with_zero_bytes_are_read_whole() {
        // No headers, no priority..., then one extension: the first bytes are zeros.
        let extras = RequestExtras {
            extensions: vec![Extension {
                tag: 0,
                critical: false,
                value: Bytes::new(),
            }],
            ..RequestExtras::default()
        };
        let wire = postcard::to_allocvec(&extras).unwrap_or_default();
        let mut input = Reader::new(&wire, None);
        let read = ExtrasRef::decode(&mut input).map(ExtrasRef::into_owned);
        assert_eq!((read, input.left()), (Ok(extras), 0));
    }
}
