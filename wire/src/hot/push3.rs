//! `Push3` (kind 27): node to a version-3 worker, a request to run and its extras.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{ExtrasRef, Push3, Push3Ref, RequestRef};

const KIND: FrameKind = FrameKind::Push3;

impl Push3Ref<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation)
            + self.request.encoded_len()
            + self.extras.encoded_len()
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.request.encode(out);
        self.extras.encode(out);
    }
}

impl<'a> Push3Ref<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(Push3 {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            extras: ExtrasRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Push3 {
        Push3 {
            correlation: self.correlation,
            request: self.request.into_owned(),
            extras: self.extras.into_owned(),
        }
    }
}

impl Push3 {
    /// The push lent.
    pub fn view(&self) -> Push3Ref<'_> {
        Push3 {
            correlation: self.correlation,
            request: self.request.view(),
            extras: self.extras.view(),
        }
    }
}
