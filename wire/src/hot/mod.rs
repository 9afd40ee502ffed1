//! The hot bodies, sent for every dispatch: one file per kind, each with its `encoded_len`,
//! `encode` and `decode` side by side, over the borrowed form of its body (`FooRef<'a>`, a
//! `Foo<Borrowed<'a>>`): decoding reads names and payloads where they lie, encoding writes
//! them from wherever they are lent from. An owned body is encoded through its `view()`.
//!
//! A kind is a list of parts in wire order: the primitives of `cursor` (the crate's one
//! varint reader and its writer) and the shared parts `request`, `extras` (version 3),
//! `routing` and `result`.
//! A sibling kind, or a kind with a trailing list, is a new file listing its parts: the
//! parts are written once and reused, so three short functions say all there is to say.
//! `framing` routes every other kind through serde.

mod extras;
mod outcome;
mod push;
mod push3;
mod relay;
mod relay3;
mod relay_outcome;
mod reply;
mod request;
mod result;
mod routing;
mod served_outcome;
mod submit;
mod submit3;

pub use outcome::OutcomeRef;
pub use push::PushRef;
pub use relay::RelayRef;
pub use relay_outcome::RelayOutcomeRef;
pub use reply::ReplyRef;
pub use served_outcome::ServedOutcomeRef;
pub use submit::SubmitRef;

use crate::cursor::Writer;

/// A hot body, to encode: what every kind's view offers the framing.
pub(crate) trait Body {
    /// Bytes of the body, its kind included.
    fn encoded_len(&self) -> usize;
    fn encode(&self, out: &mut Writer<'_>);
}
