//! What a connection of an earlier version carries of a message, decided here once.
//!
//! A field a connection's version has no room for is refused at encode
//! ([`EncodeError::Unsupported`], naming the kind, the field and the version) and nothing is
//! written, except for the two drops PROTOCOL.md documents, both made here:
//! - a push or a relay to a version-2 peer leaves the request's priority, fairness key and
//!   fairness weight behind (section 8: they are not critical; the serving node does not queue
//!   relays), [`RequestKinds::at`];
//! - a worker registering at a version-2 node leaves its deployment and instance id behind and
//!   is told so, to warn ([`Register::carried_at`]).
//!
//! The translations that lose nothing a version can say (a census or an outcome's variant for
//! an earlier version, presence groups merged) sit with each kind's codec.

use crate::cursor::{Read, Reader, Writer};
use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::in_version;
use crate::message::{ExtrasRef, Register};

/// The two kinds of a request message (`Push`, `Submit`, `Relay`): one with no room for
/// extras, and its version-3 kind with them.
pub(crate) struct RequestKinds {
    pub(crate) plain: FrameKind,
    pub(crate) with_extras: FrameKind,
    /// Whether the kind with extras goes every time its version allows (a push, a relay),
    /// rather than only when there are extras (a submission).
    pub(crate) every_time: bool,
    /// Whether the plain kind may leave the request's priority and fairness behind (a push,
    /// a relay; PROTOCOL.md section 8).
    pub(crate) leaves_scheduling: bool,
}

impl RequestKinds {
    /// The kind a request with `extras` is written as on a connection of `version`.
    ///
    /// # Errors
    /// [`EncodeError::Unsupported`] naming the first field the plain kind cannot carry,
    /// [`EncodeError::KindTooNew`] when the connection knows neither kind.
    #[inline]
    pub(crate) fn at(
        &self,
        version: u16,
        extras: &ExtrasRef<'_>,
    ) -> Result<FrameKind, EncodeError> {
        if self.with_extras.version() <= version && (self.every_time || !extras.is_none()) {
            return Ok(self.with_extras);
        }
        if !extras.is_none() {
            self.carried(version, extras)?;
        }
        in_version(self.plain, version)
    }

    /// Bytes of `extras` in a body of `kind`: none in the plain kind.
    #[inline]
    pub(crate) fn extras_len(&self, kind: FrameKind, extras: &ExtrasRef<'_>) -> usize {
        match kind == self.with_extras {
            true => extras.encoded_len(),
            false => 0,
        }
    }

    /// Writes `extras` into a body of `kind`, which has room for them or none.
    #[inline]
    pub(crate) fn write_extras(
        &self,
        kind: FrameKind,
        extras: &ExtrasRef<'_>,
        out: &mut Writer<'_>,
    ) {
        if kind == self.with_extras {
            extras.encode(out);
        }
    }

    /// Reads the extras of a body of `kind`: none in the plain kind.
    #[inline(always)]
    pub(crate) fn read_extras<'a>(
        &self,
        kind: FrameKind,
        input: &mut Reader<'a>,
    ) -> Read<ExtrasRef<'a>> {
        match kind == self.with_extras {
            true => ExtrasRef::decode(input),
            false => Ok(ExtrasRef::NONE),
        }
    }

    /// Checks that the plain kind can go without `extras`.
    fn carried(&self, version: u16, extras: &ExtrasRef<'_>) -> Result<(), EncodeError> {
        let extras = extras.read();
        let scheduling = !self.leaves_scheduling;
        let held = [
            ("headers", !extras.headers.is_empty()),
            ("priority", scheduling && extras.priority.is_some()),
            ("fairness_key", scheduling && extras.fairness_key.is_some()),
            (
                "fairness_weight",
                scheduling && extras.fairness_weight.is_some(),
            ),
            ("deployment", extras.deployment.is_some()),
            ("extensions", !extras.extensions.is_empty()),
        ];
        match held.into_iter().find(|(_, held)| *held) {
            None => Ok(()),
            Some((field, _)) => Err(EncodeError::Unsupported {
                kind: self.plain,
                field,
                version,
            }),
        }
    }
}

impl Register {
    /// The registration as a node of `version` takes it: from version 3 as it is; before,
    /// without its deployment and instance id (PROTOCOL.md section 7), with `true` when they
    /// were left behind, for the caller to warn of.
    pub fn carried_at(self, version: u16) -> (Register, bool) {
        if version >= 3 || (self.deployment.is_none() && self.instance_id.is_none()) {
            return (self, false);
        }
        let register = Register {
            deployment: None,
            instance_id: None,
            ..self
        };
        (register, true)
    }
}
