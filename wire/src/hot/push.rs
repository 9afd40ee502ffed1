//! `Push` (kind 7): node to worker, a request to run.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{Push, RequestRef};
use crate::ownership::Borrowed;

/// A push read in place or lent.
pub type PushRef<'a> = Push<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Push;

impl PushRef<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation) + self.request.encoded_len()
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.request.encode(out);
    }
}

impl<'a> PushRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(Push {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Push {
        Push {
            correlation: self.correlation,
            request: self.request.into_owned(),
        }
    }
}

impl Push {
    /// The push lent.
    pub fn view(&self) -> PushRef<'_> {
        Push {
            correlation: self.correlation,
            request: self.request.view(),
        }
    }
}
