//! [`RequestExtras`], the part every version-3 request kind (submit, push, relay) carries
//! after its request, and the items of its lists: headers and extensions. Lent as an
//! [`ExtrasRef`] (their bytes as they lie, or owned extras) and read as an [`ExtrasView`].

use bytes::{Bytes, BytesMut};
use compact_str::CompactString;

use crate::cursor::{
    bytes_len, list_len, next_item, opt_str_len, opt_u32_len, read_list, varint_len, write_list,
    ItemCodec, List, Listed, Read, Reader, Writer,
};
use crate::message::{
    Extension, ExtensionRef, ExtrasRef, ExtrasView, Header, HeaderRef, LentExtras, RequestExtras,
};
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

/// No extras encoded: two empty lists and four absent fields, the extras of nearly every
/// request, written and read whole.
const NONE_ENCODED: [u8; 6] = [0; 6];

impl<'a> ExtrasRef<'a> {
    /// No extras: what a version-2 request means.
    pub const NONE: Self = ExtrasRef(LentExtras::Wire(&[]));

    /// Owned extras lent.
    pub fn of(extras: &'a RequestExtras) -> Self {
        if extras.view().is_none() {
            return Self::NONE;
        }
        ExtrasRef(LentExtras::Lent(extras))
    }

    /// Their fields, read where they lie.
    #[inline]
    pub fn read(&self) -> ExtrasView<'a> {
        match self.0 {
            LentExtras::Wire([]) => ExtrasView::NONE,
            _ => self.read_some(),
        }
    }

    /// The fields of extras with at least one.
    fn read_some(&self) -> ExtrasView<'a> {
        match self.0 {
            // Read once already when the frame was decoded, so this cannot fail.
            LentExtras::Wire(bytes) => {
                ExtrasView::decode(&mut Reader::of(bytes)).unwrap_or(ExtrasView::NONE)
            }
            LentExtras::Lent(extras) => extras.view(),
        }
    }

    /// True when every field is absent, as in a version-2 request.
    #[inline]
    pub fn is_none(&self) -> bool {
        matches!(self.0, LentExtras::Wire([]))
    }

    /// The deployment the request requires, if any.
    #[inline]
    pub fn deployment(&self) -> Option<&'a str> {
        match self.is_none() {
            true => None,
            false => self.read_some().deployment,
        }
    }

    /// The same extras for a shorter lifetime.
    pub fn reborrow<'b>(&self) -> ExtrasRef<'b>
    where
        'a: 'b,
    {
        ExtrasRef(match self.0 {
            LentExtras::Wire(bytes) => LentExtras::Wire(bytes),
            LentExtras::Lent(extras) => LentExtras::Lent(extras),
        })
    }

    /// An owned copy, for extras kept beyond the frame they arrived in.
    pub fn into_owned(self) -> RequestExtras {
        match self.0 {
            LentExtras::Wire(_) => self.read().into_owned(),
            LentExtras::Lent(extras) => extras.clone(),
        }
    }

    /// An owned copy whose names and header texts of up to 24 bytes are held inline.
    pub fn to_compact(&self) -> RequestExtras<Compact> {
        self.read().to_compact()
    }

    #[inline]
    pub(crate) fn encoded_len(&self) -> usize {
        match self.0 {
            LentExtras::Wire([]) => NONE_ENCODED.len(),
            LentExtras::Wire(bytes) => bytes.len(),
            LentExtras::Lent(extras) => extras.view().encoded_len(),
        }
    }

    #[inline]
    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        match self.0 {
            LentExtras::Wire([]) => out.raw(&NONE_ENCODED),
            LentExtras::Wire(bytes) => out.raw(bytes),
            LentExtras::Lent(extras) => extras.view().encode(out),
        }
    }

    /// Reads extras, checking every field once, and lends them as they lie.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        if input.skip_if(&NONE_ENCODED) {
            return Ok(Self::NONE);
        }
        let start = input.position();
        ExtrasView::decode(input)?;
        Ok(ExtrasRef(LentExtras::Wire(input.since(start))))
    }
}

impl Default for ExtrasRef<'_> {
    fn default() -> Self {
        Self::NONE
    }
}

impl std::fmt::Debug for ExtrasRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.read().fmt(f)
    }
}

impl PartialEq for ExtrasRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.read() == other.read()
    }
}

impl Eq for ExtrasRef<'_> {}

impl ExtrasView<'_> {
    /// These extras encoded into `buf` (cleared first) and lent from there: extras made of
    /// others with a field replaced, to push or relay. No extras are lent without a byte.
    pub fn lend_in<'b>(&self, buf: &'b mut BytesMut) -> ExtrasRef<'b> {
        if self.is_none() {
            return ExtrasRef::NONE;
        }
        buf.clear();
        self.encode(&mut Writer::new(buf, None));
        ExtrasRef(LentExtras::Wire(buf))
    }

    /// No extras: what a version-2 request means.
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

impl<'a> ExtrasView<'a> {
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
    pub fn reborrow<'b>(&self) -> ExtrasView<'b>
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
    pub fn lend(&self) -> ExtrasRef<'_> {
        ExtrasRef::of(self)
    }

    /// The extras' fields lent.
    pub fn view(&self) -> ExtrasView<'_> {
        self.map(String::as_str, List::of, List::of)
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
        ExtrasView::NONE.encode(&mut Writer::new(&mut buf, None));
        assert_eq!(&buf[..], &NONE_ENCODED[..]);
        let mut input = Reader::of(&NONE_ENCODED);
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
        let mut input = Reader::of(&wire);
        let read = ExtrasRef::decode(&mut input).map(ExtrasRef::into_owned);
        assert_eq!((read, input.left()), (Ok(extras), 0));
    }
}
