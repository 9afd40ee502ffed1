//! `lintel-wire`: the wire protocol of the lintel push-dispatch bus.
//!
//! # Layout
//! - `table`: every frame kind, declared once: its number, name, message, codec, lane,
//!   version and the feature it needs; [`kind`] ([`FrameKind`]), [`frame`] ([`Frame`]) and
//!   [`frame_ref`] are generated from it.
//! - [`frame_ref`]: [`FrameRef`], a frame whose body is borrowed: what the encoder writes
//!   from and what a frame decoded in place reads as.
//! - [`message`]: frame bodies (handshake, registration, dispatch, control, status); the hot
//!   ones take an [`ownership`] parameter: [`Owned`] by default, [`Borrowed`] in place,
//!   [`Compact`] with short names inline.
//! - `hot`: the bodies sent for every dispatch (submissions, pushes, relays, replies,
//!   outcomes), one file per kind with its `encoded_len`, `encode` and `decode`.
//! - [`framing`]: pure encode/decode of length-prefixed frames over `BytesMut`, no I/O; the
//!   other kinds through serde (`flavor`: its `BytesMut` sink).
//! - [`codec`]: the `tokio_util::codec` adapter over [`framing`].
//! - [`channel`]: injective, invertible channel names for pools.
//! - [`foreign`]: another protocol's first bytes (TLS, HTTP) where a frame should start.
//! - [`error`]: typed errors of each layer.
//!
//! `PROTOCOL.md` beside this crate documents every byte.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod channel;
pub mod codec;
mod cursor;
pub mod error;
mod flavor;
pub mod foreign;
pub mod frame;
pub mod frame_ref;
pub mod framing;
mod hot;
pub mod kind;
pub mod message;
pub mod ownership;
mod table;

pub use codec::FrameCodec;
pub use compact_str::CompactString;
pub use cursor::{List, ListIter, Listed, Names, PayloadRef};
pub use error::{CodecError, DecodeError, EncodeError};
pub use foreign::Foreign;
pub use frame::Frame;
pub use frame_ref::FrameRef;
pub use framing::{
    decode_body, decode_body_ref, decode_frame, encode_frame, encode_frame_ref,
    encode_frame_spliced, frame_len, Spliced, DEFAULT_MAX_FRAME_LEN, SHARE_MIN,
};
pub use hot::{
    OutcomeRef, PushRef, RelayOutcomeRef, RelayRef, ReplyRef, ServedOutcomeRef, SubmitRef,
};
pub use kind::{FrameKind, Lane};
pub use message::*;
pub use ownership::{Borrowed, Compact, Owned, Ownership};
