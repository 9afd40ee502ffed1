//! `ServedOutcome` (kind 24): node to a version-2 producer, how a submission ended and which node served it.

use crate::cursor::{bytes_len, head_len, PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::in_version;
use crate::message::{ResultRef, ServedOutcome};
use crate::ownership::Borrowed;

/// A served outcome read in place or lent.
pub type ServedOutcomeRef<'a> = ServedOutcome<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::ServedOutcome;

impl ServedOutcomeRef<'_> {
    /// Its one kind, when a connection of `version` knows it.
    ///
    /// # Errors
    /// [`EncodeError::KindTooNew`] when it does not.
    #[inline]
    pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        in_version(KIND, version)
    }

    /// Bytes of the body, its kind included, on a connection of `dialect`.
    pub fn encoded_len(&self, _kind: FrameKind, dialect: Dialect) -> usize {
        head_len(KIND.discriminant(), self.correlation)
            + bytes_len(self.served_by.len())
            + self.result.encoded_len(dialect)
    }

    pub(crate) fn encode(&self, _kind: FrameKind, dialect: Dialect, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        out.str(self.served_by);
        self.result.encode(out, dialect);
    }
}

impl<'a> ServedOutcomeRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>, _kind: FrameKind) -> Read<Self> {
        Ok(ServedOutcome {
            correlation: input.u64()?,
            served_by: input.str()?,
            result: ResultRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        self.result.payload()
    }

    /// An owned copy.
    pub fn into_owned(self) -> ServedOutcome {
        ServedOutcome {
            correlation: self.correlation,
            served_by: self.served_by.to_owned(),
            result: self.result.into_owned(),
        }
    }
}

impl ServedOutcome {
    /// The served outcome lent.
    pub fn view(&self) -> ServedOutcomeRef<'_> {
        ServedOutcome {
            correlation: self.correlation,
            served_by: &self.served_by,
            result: self.result.view(),
        }
    }
}
