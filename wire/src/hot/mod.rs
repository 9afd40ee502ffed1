//! The hot bodies, sent for every dispatch: one file per kind, each with its `encoded_len`,
//! `encode` and `decode` side by side, over the borrowed form of its body (`FooRef<'a>`, a
//! `Foo<Borrowed<'a>>`): decoding reads names and payloads where they lie, encoding writes
//! them from wherever they are lent from. An owned body is encoded through its `view()`.
//!
//! One file per message, handling each of its kinds (`push` writes and reads `Push` and
//! `Push3`): `kind_at` picks the kind for a connection's version, `encode` and `decode` take
//! that kind. A kind is a list of parts in wire order: the primitives of `cursor` (the crate's
//! one varint reader and its writer) and the shared parts `request`, `extras` (version 3),
//! `routing` and `result` (which writes a result as the connection's dialect reads it: its
//! version and what its reader listed).
//! `framing` routes every other kind through serde.

mod extras;
mod outcome;
mod push;
mod relay;
mod relay_outcome;
mod reply;
mod request;
mod result;
mod routing;
mod served_outcome;
mod submit;

pub use outcome::OutcomeRef;
pub use push::PushRef;
pub use relay::RelayRef;
pub use relay_outcome::RelayOutcomeRef;
pub use reply::ReplyRef;
pub use served_outcome::ServedOutcomeRef;
pub use submit::SubmitRef;

use crate::cursor::Writer;
use crate::dialect::Dialect;
use crate::error::EncodeError;
use crate::kind::FrameKind;

/// A hot body, to encode: what every message's view offers the framing.
pub(crate) trait Body {
    /// The kind it goes as on a connection of `version`, or why it cannot go there.
    fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError>;
    /// Bytes of the body as `kind` (its kind varint included) on a connection of `dialect`.
    fn encoded_len(&self, kind: FrameKind, dialect: Dialect) -> usize;
    /// Writes the body as `kind`, which `kind_at` chose for the dialect's version.
    fn encode(&self, kind: FrameKind, dialect: Dialect, out: &mut Writer<'_>);
}
