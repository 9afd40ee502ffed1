//! `Relay` (kind 22): origin to serving node, a dispatch to run on its own workers.

use crate::cursor::{head_len, varint_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{Relay, RequestRef, RoutingRef};
use crate::ownership::Borrowed;

/// A relay read in place or lent.
pub type RelayRef<'a> = Relay<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Relay;

impl RelayRef<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation)
            + self.request.encoded_len()
            + self.routing.encoded_len()
            + varint_len(self.reply_timeout_ms)
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.request.encode(out);
        self.routing.encode(out);
        out.u64(self.reply_timeout_ms);
    }
}

impl<'a> RelayRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(Relay {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            routing: RoutingRef::decode(input)?,
            reply_timeout_ms: input.u64()?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Relay {
        Relay {
            correlation: self.correlation,
            request: self.request.into_owned(),
            routing: self.routing.into_owned(),
            reply_timeout_ms: self.reply_timeout_ms,
        }
    }
}

impl Relay {
    /// The relay lent.
    pub fn view(&self) -> RelayRef<'_> {
        Relay {
            correlation: self.correlation,
            request: self.request.view(),
            routing: self.routing.view(),
            reply_timeout_ms: self.reply_timeout_ms,
        }
    }
}
