//! `Reply` (kind 8): worker to node, the response to a push.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::in_version;
use crate::message::{Reply, ResponseRef};
use crate::ownership::Borrowed;

/// A reply read in place or lent.
pub type ReplyRef<'a> = Reply<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Reply;

impl ReplyRef<'_> {
    /// Its one kind, when a connection of `version` knows it.
    ///
    /// # Errors
    /// [`EncodeError::KindTooNew`] when it does not.
    #[inline]
    pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        in_version(KIND, version)
    }

    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self, _kind: FrameKind, _dialect: Dialect) -> usize {
        head_len(KIND.discriminant(), self.correlation) + self.response.encoded_len()
    }

    pub(crate) fn encode(&self, _kind: FrameKind, _dialect: Dialect, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.response.encode(out);
    }
}

impl<'a> ReplyRef<'a> {
    /// Reads the fields after the kind.
    /// Inlined into the reader, so the frame is built where it is lent, not moved there.
    #[inline(always)]
    pub(crate) fn decode(input: &mut Reader<'a>, _kind: FrameKind) -> Read<Self> {
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
