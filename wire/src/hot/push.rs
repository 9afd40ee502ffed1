//! `Push` (kind 7) and `Push3` (kind 27): node to worker, a request to run; on version 3 with
//! its extras.

use crate::carry::RequestKinds;
use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::message::{Push, RequestRef};
use crate::ownership::Borrowed;

/// A push read in place or lent.
pub type PushRef<'a> = Push<Borrowed<'a>>;

/// The kind without extras, and the kind with them.
const KINDS: RequestKinds = RequestKinds {
    plain: FrameKind::Push,
    with_extras: FrameKind::Push3,
    every_time: true,
    leaves_scheduling: true,
};

impl<'a> PushRef<'a> {
    /// `Push3` on a version-3 connection, every time; `Push` before, which has no room for
    /// extras (its priority and fairness are left behind, as PROTOCOL.md allows).
    ///
    /// # Errors
    /// [`EncodeError::Unsupported`] for extras a version-2 push cannot carry.
    #[inline]
    pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        KINDS.at(version, &self.extras)
    }

    /// Bytes of the body as `kind`, its kind included.
    pub fn encoded_len(&self, kind: FrameKind, _dialect: Dialect) -> usize {
        head_len(kind.discriminant(), self.correlation)
            + self.request.encoded_len()
            + KINDS.extras_len(kind, &self.extras)
    }

    pub(crate) fn encode(&self, kind: FrameKind, _dialect: Dialect, out: &mut Writer<'_>) {
        out.head(kind.discriminant(), self.correlation);
        self.request.encode(out);
        KINDS.write_extras(kind, &self.extras, out);
    }

    /// Reads the fields of `kind` after the kind.
    /// Inlined into the reader, so the frame is built where it is lent, not moved there.
    #[inline(always)]
    pub(crate) fn decode(input: &mut Reader<'a>, kind: FrameKind) -> Read<Self> {
        Ok(Push {
            correlation: input.u64()?,
            request: RequestRef::decode(input)?,
            extras: KINDS.read_extras(kind, input)?,
        })
    }

    /// The opaque payload it carries.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        Some(self.request.input)
    }

    /// An owned copy.
    pub fn into_owned(self) -> Push {
        Push {
            correlation: self.correlation,
            request: self.request.into_owned(),
            extras: self.extras.into_owned(),
        }
    }
}

impl Push {
    /// The push lent.
    pub fn view(&self) -> PushRef<'_> {
        Push {
            correlation: self.correlation,
            request: self.request.view(),
            extras: self.extras.lend(),
        }
    }
}
