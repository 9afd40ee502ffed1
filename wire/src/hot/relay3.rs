//! `Relay3` (kind 28): origin to a version-3 serving node, a dispatch and its extras to run on
//! its own workers.

use crate::cursor::{head_len, varint_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{ExtrasRef, Relay3, Relay3Ref, RequestRef, RoutingRef};

const KIND: FrameKind = FrameKind::Relay3;

impl Relay3Ref<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation)
            + self.request.encoded_len()
            + self.extras.encoded_len()
            + self.routing.encoded_len()
            + varint_len(self.reply_timeout_ms)
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.request.encode(out);
        self.extras.encode(out);
        self.routing.encode(out);
        out.u64(self.reply_timeout_ms);
    }
}

impl<'a> Relay3Ref<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(Relay3 {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            extras: ExtrasRef::decode(input)?,
            routing: RoutingRef::decode(input)?,
            reply_timeout_ms: input.u64()?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Relay3 {
        Relay3 {
            correlation: self.correlation,
            request: self.request.into_owned(),
            extras: self.extras.into_owned(),
            routing: self.routing.into_owned(),
            reply_timeout_ms: self.reply_timeout_ms,
        }
    }
}

impl Relay3 {
    /// The relay lent.
    pub fn view(&self) -> Relay3Ref<'_> {
        Relay3 {
            correlation: self.correlation,
            request: self.request.view(),
            extras: self.extras.view(),
            routing: self.routing.view(),
            reply_timeout_ms: self.reply_timeout_ms,
        }
    }
}
