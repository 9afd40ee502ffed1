//! Who owns the names and payload of a hot body (what each holds is in `owners`): [`Owned`] (`String`, `Bytes`, `Vec`),
//! [`Borrowed`] (read in place from the frame they arrived in, or lent by the caller) or
//! [`Compact`] (owned, names of up to 24 bytes held inline instead of allocated).
//!
//! The hot body types take the ownership as their one type parameter, `Owned` by default, so
//! a borrowed body is the same struct with the same fields: `Push<Borrowed<'a>>` is a push
//! decoded where it lies in a read buffer, or one the encoder writes from borrowed parts.

use std::fmt;
use std::marker::PhantomData;

pub(crate) mod sealed {
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
    /// A request's headers.
    type Headers: fmt::Debug + Clone + PartialEq + Eq + Default;
    /// A frame's extensions.
    type Extensions: fmt::Debug + Clone + PartialEq + Eq + Default;
    /// A request's extras (its headers, scheduling fields, deployment, extensions).
    type Extras: fmt::Debug + Clone + PartialEq + Eq + Default;
    /// A request in a push, a submission or a relay.
    type Request: fmt::Debug + Clone + PartialEq + Eq;
}

/// Bodies that own their fields; what users build and what outlives a frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Owned;

/// Bodies whose fields borrow for `'a`: a frame decoded where it lies, or lent parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Borrowed<'a>(PhantomData<&'a ()>);

/// Bodies that own their fields, each name a [`CompactString`](crate::CompactString) (read as `str`) held inline up
/// to 24 bytes: a borrowed body kept this way ([`RequestRef::to_compact`](crate::RequestRef::to_compact))
/// allocates for its payload and long names only, not for every name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Compact;
