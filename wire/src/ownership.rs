//! Who owns the names and payload of a hot body: [`Owned`] (`String`, `Bytes`, `Vec`) or
//! [`Borrowed`] (read in place from the frame they arrived in, or lent by the caller).
//!
//! The hot body types take the ownership as their one type parameter, `Owned` by default, so
//! a borrowed body is the same struct with the same fields: `Push<Borrowed<'a>>` is a push
//! decoded where it lies in a read buffer, or one the encoder writes from borrowed parts.

use std::fmt;
use std::marker::PhantomData;

use bytes::Bytes;

use crate::framing::SHARE_MIN;

mod sealed {
    pub trait Sealed {}
}

/// How a hot body holds its names (`Str`), its payload and its lists of names.
pub trait Ownership: sealed::Sealed {
    /// A name: a namespace, an id, a node.
    type Str: AsRef<str> + fmt::Debug + Clone + PartialEq + Eq + Default;
    /// Opaque payload bytes.
    type Payload: fmt::Debug + Clone + PartialEq + Eq;
    /// A list of names (the nodes of a routing).
    type Names: fmt::Debug + Clone + PartialEq + Eq;
}

/// Bodies that own their fields; what users build and what outlives a frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Owned;

/// Bodies whose fields borrow for `'a`: a frame decoded where it lies, or lent parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Borrowed<'a>(PhantomData<&'a ()>);

impl sealed::Sealed for Owned {}
impl sealed::Sealed for Borrowed<'_> {}

impl Ownership for Owned {
    type Str = String;
    type Payload = Bytes;
    type Names = Vec<String>;
}

impl<'a> Ownership for Borrowed<'a> {
    type Str = &'a str;
    type Payload = PayloadRef<'a>;
    type Names = Names<'a>;
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
                reader: crate::hot::Reader::new(bytes, None),
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
    Wire {
        left: usize,
        reader: crate::hot::Reader<'a>,
    },
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
