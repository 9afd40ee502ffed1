//! How a message goes on a connection of a version: the kind it picks, and the serde body of
//! that kind it becomes.

use std::borrow::Cow;

use crate::error::EncodeError;
use crate::kind::FrameKind;

/// A message whose table row lists more than one kind: the kind it goes as on a connection of
/// a version, or why that version cannot carry it.
pub(crate) trait Chooses {
    fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError>;
}

/// `kind`, when a connection of `version` knows it.
pub(crate) fn in_version(kind: FrameKind, version: u16) -> Result<FrameKind, EncodeError> {
    if kind.version() <= version {
        Ok(kind)
    } else {
        Err(EncodeError::KindTooNew { kind, version })
    }
}

/// A message as the serde body of one of its kinds: itself, or a translation of it.
pub(crate) trait Lower<M>: Clone + serde::Serialize {
    /// `message` as this body; every check that it fits was made when its kind was chosen.
    fn lower(message: &M) -> Cow<'_, Self>;
}

impl<T: Clone + serde::Serialize> Lower<T> for T {
    fn lower(message: &T) -> Cow<'_, T> {
        Cow::Borrowed(message)
    }
}
