//! `Outcome` (kind 10): node to a version-1 producer, how a submission ended.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{OutcomeFrame, ResultRef};
use crate::ownership::Borrowed;

/// An outcome read in place or lent.
pub type OutcomeRef<'a> = OutcomeFrame<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::Outcome;

impl OutcomeRef<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation) + self.result.encoded_len()
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.result.encode(out);
    }
}

impl<'a> OutcomeRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
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
