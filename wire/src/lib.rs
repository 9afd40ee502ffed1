//! `lintel-wire`: the wire protocol of the lintel push-dispatch bus.
//!
//! # Layout
//! - [`frame`]: the top-level [`Frame`] enum and its frozen kind order.
//! - [`frame_ref`]: [`FrameRef`], frames encoded from borrowed bodies.
//! - [`message`]: frame bodies (handshake, registration, dispatch, control, status).
//! - [`framing`]: pure encode/decode of length-prefixed frames over `BytesMut`, no I/O.
//! - `direct`: the hot bodies (pushes, relays, replies, outcomes) written field by field, to
//!   postcard's bytes; `flavor`: the `BytesMut` sink both writers share.
//! - [`payload`]: large payloads decoded as slices of their frame's body, not copies.
//! - [`codec`]: the `tokio_util::codec` adapter over [`framing`].
//! - [`channel`]: injective, invertible channel names for pools.
//! - [`foreign`]: another protocol's first bytes (TLS, HTTP) where a frame should start.
//! - [`error`]: typed errors of each layer.
//!
//! `PROTOCOL.md` beside this crate documents every byte.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod channel;
pub mod codec;
mod direct;
pub mod error;
mod flavor;
pub mod foreign;
pub mod frame;
pub mod frame_ref;
pub mod framing;
pub mod message;
pub mod payload;

pub use codec::FrameCodec;
pub use error::{CodecError, DecodeError, EncodeError};
pub use foreign::Foreign;
pub use frame::{Frame, FrameKind};
pub use frame_ref::FrameRef;
pub use framing::{
    decode_body, decode_frame, encode_frame, encode_frame_ref, encode_frame_spliced, Spliced,
    DEFAULT_MAX_FRAME_LEN,
};
pub use message::*;
