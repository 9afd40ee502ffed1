//! `Outcome` (kind 10): node to a version-1 producer, how a submission ended.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::in_version;
use crate::message::{OutcomeFrame, ResultRef};
use crate::ownership::Borrowed;

/// An outcome read in place or lent.
pub type OutcomeRef<'a> = OutcomeFrame<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Outcome;

impl OutcomeRef<'_> {
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
        head_len(KIND.discriminant(), self.correlation) + self.result.encoded_len(dialect)
    }

    pub(crate) fn encode(&self, _kind: FrameKind, dialect: Dialect, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.result.encode(out, dialect);
    }
}

impl<'a> OutcomeRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>, _kind: FrameKind) -> Read<Self> {
        Ok(OutcomeFrame {
            correlation: input.u64()?,
            result: ResultRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        self.result.payload()
    }

    /// An owned copy.
    pub fn into_owned(self) -> OutcomeFrame {
        OutcomeFrame {
            correlation: self.correlation,
            result: self.result.into_owned(),
        }
    }
}

impl OutcomeFrame {
    /// The outcome lent.
    pub fn view(&self) -> OutcomeRef<'_> {
        OutcomeFrame {
            correlation: self.correlation,
            result: self.result.view(),
        }
    }
}
