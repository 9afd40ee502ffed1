//! `Submit` (kind 9): producer to node, a request to dispatch.

use crate::cursor::{head_len, opt_u64_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{RequestRef, RoutingRef, Submit};
use crate::ownership::Borrowed;

/// A submission read in place or lent.
pub type SubmitRef<'a> = Submit<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Submit;

impl SubmitRef<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation)
            + self.request.encoded_len()
            + opt_u64_len(self.wait_for_worker_ms)
            + opt_u64_len(self.reply_timeout_ms)
            + self.routing.encoded_len()
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.request.encode(out);
        out.opt_u64(self.wait_for_worker_ms);
        out.opt_u64(self.reply_timeout_ms);
        self.routing.encode(out);
    }
}

impl<'a> SubmitRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(Submit {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            wait_for_worker_ms: input.opt_u64()?,
            reply_timeout_ms: input.opt_u64()?,
            routing: RoutingRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Submit {
        Submit {
            correlation: self.correlation,
            request: self.request.into_owned(),
            wait_for_worker_ms: self.wait_for_worker_ms,
            reply_timeout_ms: self.reply_timeout_ms,
            routing: self.routing.into_owned(),
        }
    }
}

impl Submit {
    /// The submission lent.
    pub fn view(&self) -> SubmitRef<'_> {
        Submit {
            correlation: self.correlation,
            request: self.request.view(),
            wait_for_worker_ms: self.wait_for_worker_ms,
            reply_timeout_ms: self.reply_timeout_ms,
            routing: self.routing.view(),
        }
    }
}
