//! `Reply` (kind 8): worker to node, the response to a push.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{Reply, ResponseRef};
use crate::ownership::Borrowed;

/// A reply read in place or lent.
pub type ReplyRef<'a> = Reply<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Reply;

impl ReplyRef<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation) + self.response.encoded_len()
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.response.encode(out);
    }
}

impl<'a> ReplyRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(Reply {
            correlation: input.u64()?,
            response: ResponseRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        self.response.payload()
    }

    /// An owned copy.
    pub fn into_owned(self) -> Reply {
        Reply {
            correlation: self.correlation,
            response: self.response.into_owned(),
        }
    }
}

impl Reply {
    /// The reply lent.
    pub fn view(&self) -> ReplyRef<'_> {
        Reply {
            correlation: self.correlation,
            response: self.response.view(),
        }
    }
}
