//! `Submit` (kind 9) and `Submit3` (kind 26): producer to node, a request to dispatch; with
//! extras, on version 3 only.

use crate::carry::RequestKinds;
use crate::cursor::{head_len, opt_u64_len, PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::message::{RequestRef, RoutingRef, Submit};
use crate::ownership::Borrowed;

/// A submission read in place or lent.
pub type SubmitRef<'a> = Submit<Borrowed<'a>>;

/// The kind without extras, and the kind with them.
const KINDS: RequestKinds = RequestKinds {
    plain: FrameKind::Submit,
    with_extras: FrameKind::Submit3,
    every_time: false,
    leaves_scheduling: false,
};

impl<'a> SubmitRef<'a> {
    /// `Submit` when it has no extras, whatever the version; `Submit3` with them, from
    /// version 3.
    ///
    /// # Errors
    /// [`EncodeError::Unsupported`] for extras before version 3.
    #[inline]
    pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        KINDS.at(version, &self.extras)
    }

    /// Bytes of the body as `kind`, its kind included.
    pub fn encoded_len(&self, kind: FrameKind, _dialect: Dialect) -> usize {
        head_len(kind.discriminant(), self.correlation)
            + self.request.encoded_len()
            + KINDS.extras_len(kind, &self.extras)
            + opt_u64_len(self.wait_for_worker_ms)
            + opt_u64_len(self.reply_timeout_ms)
            + self.routing.encoded_len()
    }

    pub(crate) fn encode(&self, kind: FrameKind, _dialect: Dialect, out: &mut Writer<'_>) {
        out.head(kind.discriminant(), self.correlation);
        self.request.encode(out);
        KINDS.write_extras(kind, &self.extras, out);
        out.opt_u64(self.wait_for_worker_ms);
        out.opt_u64(self.reply_timeout_ms);
        self.routing.encode(out);
    }

    /// Reads the fields of `kind` after the kind.
    /// Inlined into the reader, so the frame is built where it is lent, not moved there.
    #[inline(always)]
    pub(crate) fn decode(input: &mut Reader<'a>, kind: FrameKind) -> Read<Self> {
        Ok(Submit {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            extras: KINDS.read_extras(kind, input)?,
            wait_for_worker_ms: input.opt_u64()?,
            reply_timeout_ms: input.opt_u64()?,
            routing: RoutingRef::decode(input)?,
        })
    }

    /// The opaque payload it carries.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Submit {
        Submit {
            correlation: self.correlation,
            request: self.request.into_owned(),
            extras: self.extras.into_owned(),
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
            extras: self.extras.lend(),
            wait_for_worker_ms: self.wait_for_worker_ms,
            reply_timeout_ms: self.reply_timeout_ms,
            routing: self.routing.view(),
        }
    }
}
