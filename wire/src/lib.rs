//! `lintel-wire`: the wire protocol of the lintel push-dispatch bus.
//!
//! One message per idea above the wire: a push, a submission, a relay, a registration, a
//! welcome, a presence, a peer hello and one [`DispatchResult`], each holding what later
//! versions added as optional fields. A protocol version is a property of a connection: the
//! writer picks each message's kind from the connection's version ([`Frame::kind_at`]),
//! translating for an earlier version what it can say and refusing what it cannot carry
//! ([`EncodeError::Unsupported`]); the reader reads every kind of a message as that message.
//!
//! # Layout
//! - `table`: every frame kind, declared once: its number, name, message, codec, lane,
//!   version and the feature it needs; [`kind`] ([`FrameKind`], [`Lane`]), [`frame`]
//!   ([`Frame`], the serde kinds' codec dispatch) and [`frame_ref`] ([`FrameRef`], a frame
//!   whose body is borrowed: what the encoder writes from and what a frame decoded in place
//!   reads as, and the hot kinds' dispatch) are generated from it.
//! - [`message`]: the messages (handshake, registration, dispatch, control, status, peers,
//!   events); the hot ones take an [`ownership`] parameter: [`Owned`] by default,
//!   [`Borrowed`] in place (their extras lent as two words, [`ExtrasRef`], read on access),
//!   [`Compact`] with short names inline; `owners`: what each ownership holds them in.
//! - `hot`: the messages sent for every dispatch (submissions, pushes, relays, replies,
//!   outcomes), one file per message with its `kind_at`, `encoded_len`, `encode` and
//!   `decode` for each of its kinds; a result is written as the connection's version reads it.
//! - [`body`]: the serde bodies of an earlier version's kind of a later message (`Welcome`,
//!   `Register`, `PeerHello`, `Presence`, a status report's `Census`), with their
//!   translations and the message's choice of kind.
//! - `carry`: the kind of a push, submission or relay, and what an earlier version's kind has
//!   no room for, decided once: refused, but for the drops PROTOCOL.md documents (a version-2
//!   push's or relay's priority and fairness, [`Register::carried_at`]).
//! - [`framing`]: pure encode/decode of length-prefixed frames over `BytesMut`, no I/O; the
//!   other kinds through serde (`flavor`: its `BytesMut` sink); `cursor`: the one varint
//!   reader and writer, the borrowed payloads ([`PayloadRef`]) and lists ([`List`]).
//! - [`dialect`]: what a connection's writer may say: its version and, from version 4, the
//!   features its reader listed ([`FeatureSet`]), which decide a result's variant.
//! - [`codec`]: the `tokio_util::codec` adapter over [`framing`], writing as one dialect.
//! - [`channel`]: injective, invertible channel names for pools.
//! - [`foreign`]: another protocol's first bytes (TLS, HTTP) where a frame should start.
//! - [`error`]: typed errors of each layer.
//!
//! `PROTOCOL.md` beside this crate documents every byte.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]

pub mod body;
mod carry;
pub mod channel;
pub mod codec;
mod cursor;
pub mod dialect;
pub mod error;
pub mod feature;
mod flavor;
pub mod foreign;
pub mod frame;
pub mod frame_ref;
pub mod framing;
mod hot;
pub mod kind;
mod lower;
pub mod message;
mod owners;
pub mod ownership;
mod table;

pub use codec::FrameCodec;
pub use compact_str::CompactString;
pub use cursor::{List, ListIter, Listed, Names, PayloadRef};
pub use dialect::{Dialect, FeatureSet};
pub use error::{CodecError, DecodeError, EncodeError};
pub use foreign::Foreign;
pub use frame::Frame;
pub use frame_ref::FrameRef;
pub use framing::{
    decode_body, decode_body_ref, decode_frame, encode_frame, encode_frame_ref,
    encode_frame_spliced, frame_len, FrameSlots, Spliced, DEFAULT_MAX_FRAME_LEN, SHARE_MIN,
};
pub use hot::{
    OutcomeRef, PushRef, RelayOutcomeRef, RelayRef, ReplyRef, ServedOutcomeRef, SubmitRef,
};
pub use kind::{FrameKind, Lane};
pub use message::*;
pub use ownership::{Borrowed, Compact, Owned, Ownership};
