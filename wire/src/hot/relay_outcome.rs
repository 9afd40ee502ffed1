//! `RelayOutcome` (kind 23): serving node to origin, how a relay ended.

use crate::cursor::{head_len, PayloadRef, Read, Reader, Writer};
use crate::kind::FrameKind;
use crate::message::{RelayOutcome, ResultRef};
use crate::ownership::Borrowed;

/// A relay outcome read in place or lent.
pub type RelayOutcomeRef<'a> = RelayOutcome<Borrowed<'a>>;

const KIND: FrameKind = FrameKind::RelayOutcome;

impl RelayOutcomeRef<'_> {
    /// Bytes of the body, its kind included.
    pub fn encoded_len(&self) -> usize {
        head_len(KIND.discriminant(), self.correlation) + self.result.encoded_len()
    }

    pub(crate) fn encode(&self, out: &mut Writer<'_>) {
        out.head(KIND.discriminant(), self.correlation);
        self.result.encode(out);
    }
}

impl<'a> RelayOutcomeRef<'a> {
    /// Reads the fields after the kind.
    #[inline]
    pub(crate) fn decode(input: &mut Reader<'a>) -> Read<Self> {
        Ok(RelayOutcome {
            correlation: input.u64()?,
            result: ResultRef::decode(input)?,
        })
    }

    /// The opaque payload it carries, if any.
    pub fn payload(&self) -> Option<PayloadRef<'a>> {
        self.result.payload()
    }

    /// An owned copy.
    pub fn into_owned(self) -> RelayOutcome {
        RelayOutcome {
            correlation: self.correlation,
            result: self.result.into_owned(),
        }
    }
}

impl RelayOutcome {
    /// The relay outcome lent.
    pub fn view(&self) -> RelayOutcomeRef<'_> {
        RelayOutcome {
            correlation: self.correlation,
            result: self.result.view(),
        }
    }
}
