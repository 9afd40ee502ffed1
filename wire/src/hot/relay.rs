//! `Relay` (kind 22) and `Relay3` (kind 28): origin to serving node, a dispatch to run on its
//! own workers; on version 3 with its extras.

use crate::carry::RequestKinds;
use crate::cursor::{head_len, varint_len, PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::message::{Relay, RequestRef, RoutingRef};
use crate::ownership::Borrowed;

/// A relay read in place or lent.
pub type RelayRef<'a> = Relay<Borrowed<'a>>;

/// The kind without extras, and the kind with them.
const KINDS: RequestKinds = RequestKinds {
    plain: FrameKind::Relay,
    with_extras: FrameKind::Relay3,
    every_time: true,
    leaves_scheduling: true,
};

impl<'a> RelayRef<'a> {
    /// `Relay3` on a version-3 link, every time; `Relay` on a version-2 one, which has no
    /// room for extras (its priority and fairness are left behind, as PROTOCOL.md allows).
    ///
    /// # Errors
    /// [`EncodeError::Unsupported`] for extras a version-2 relay cannot carry,
    /// [`EncodeError::KindTooNew`] on a version-1 connection.
    #[inline]
    pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        KINDS.at(version, &self.extras)
    }

    /// Bytes of the body as `kind`, its kind included.
    pub fn encoded_len(&self, kind: FrameKind, _dialect: Dialect) -> usize {
        head_len(kind.discriminant(), self.correlation)
            + self.request.encoded_len()
            + KINDS.extras_len(kind, &self.extras)
            + self.routing.encoded_len()
            + varint_len(self.reply_timeout_ms)
    }

    pub(crate) fn encode(&self, kind: FrameKind, _dialect: Dialect, out: &mut Writer<'_>) {
        out.head(kind.discriminant(), self.correlation);
        self.request.encode(out);
        KINDS.write_extras(kind, &self.extras, out);
        self.routing.encode(out);
        out.u64(self.reply_timeout_ms);
    }

    /// Reads the fields of `kind` after the kind.
    /// Inlined into the reader, so the frame is built where it is lent, not moved there.
    #[inline(always)]
    pub(crate) fn decode(input: &mut Reader<'a>, kind: FrameKind) -> Read<Self> {
        Ok(Relay {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            extras: KINDS.read_extras(kind, input)?,
            routing: RoutingRef::decode(input)?,
            reply_timeout_ms: input.u64()?,
        })
    }

    /// The opaque payload it carries.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Relay {
        Relay {
            correlation: self.correlation,
            request: self.request.into_owned(),
            extras: self.extras.into_owned(),
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
            extras: self.extras.lend(),
            routing: self.routing.view(),
            reply_timeout_ms: self.reply_timeout_ms,
        }
    }
}
