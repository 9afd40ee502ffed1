//! What each [`Ownership`] holds a hot body's names, payload, lists and extras in.

use bytes::Bytes;
use compact_str::CompactString;

use crate::cursor::{List, Names, PayloadRef};
use crate::message::items::{Extension, Header};
use crate::message::{DispatchRequest, ExtrasRef, RequestExtras, RequestRef};
use crate::ownership::{sealed, Borrowed, Compact, Owned, Ownership};

impl sealed::Sealed for Owned {}
impl sealed::Sealed for Borrowed<'_> {}
impl sealed::Sealed for Compact {}

impl Ownership for Owned {
    type Str = String;
    type Payload = Bytes;
    type Names = Vec<String>;
    type Headers = Vec<Header>;
    type Extensions = Vec<Extension>;
    type Extras = RequestExtras;
    type Request = DispatchRequest;
}

impl<'a> Ownership for Borrowed<'a> {
    type Str = &'a str;
    type Payload = PayloadRef<'a>;
    type Names = Names<'a>;
    type Headers = List<'a, Header>;
    type Extensions = List<'a, Extension>;
    type Extras = ExtrasRef<'a>;
    type Request = RequestRef<'a>;
}

impl Ownership for Compact {
    type Str = CompactString;
    type Payload = Bytes;
    type Names = Vec<CompactString>;
    type Headers = Vec<Header<CompactString>>;
    type Extensions = Vec<Extension>;
    type Extras = RequestExtras<Compact>;
    type Request = DispatchRequest<Compact>;
}
