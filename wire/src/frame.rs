//! The message set: [`Frame`], one variant per message, generated from the frame table
//! (`table`).

use bytes::{BufMut, BytesMut};

use crate::body;
use crate::error::EncodeError;
use crate::flavor::BytesMutFlavor;
use crate::kind::{FrameKind, Lane};
use crate::lower::{in_version, Chooses, Lower};
// Every message the table names, by the name it gives.
use crate::message::*;
use crate::table::frame_table;

macro_rules! frames {
    ($(
        $(#[$doc:meta])*
        $variant:ident($message:ty) [$($flag:tt)*] {
            $($number:literal $kind:ident $(($wire:ty))?: $version:literal $lane:ident $feature:tt;)+
        }
    )+) => {
        /// One message above the wire; a connection's version picks the kind it goes as
        /// ([`Frame::kind_at`]), and the decoder reads every kind of it as this one message.
        ///
        /// Bodies larger than a [`Reply`] (a request, a registration, a report) are boxed, so a
        /// frame stays small to move between the decoder, the reader and its handlers; boxing
        /// changes no byte on the wire. Build one with `body.into()`.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Frame {
            $($(#[$doc])* $variant(frames!(@held [$($flag)*] $message)),)+
        }

        $(frames!(@from $variant [$($flag)*] $message);)+

        // Every kind of one message goes in one lane, so a frame's lane needs no version.
        const _: () = {
            $(frames!(@one_lane $variant [$($lane)+]);)+
        };

        impl Frame {
            /// The lane every kind of the message goes in, as the table gives it.
            #[inline]
            pub fn lane(&self) -> Lane {
                match self {
                    $(Frame::$variant(_) => frames!(@first_lane $($lane)+),)+
                }
            }

            /// The message's name: its first kind's, without a version.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Frame::$variant(_) => stringify!($variant),)+
                }
            }

            /// The kind this frame goes as on a connection of `version`.
            ///
            /// # Errors
            /// [`EncodeError::KindTooNew`] when no kind of the message is known at `version`,
            /// [`EncodeError::Unsupported`] when a field it holds has no room there.
            pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
                match self {
                    $(Frame::$variant(body) => {
                        frames!(@kind_at [$($flag)*] $message, body, version, [$($kind)+])
                    })+
                }
            }
        }

        frames!(@cold [] $([$variant($message) [$($flag)*] [$($kind $(($wire))?)+]])+);
    };
    // Keeps the messages serde encodes, then generates their codec dispatch.
    (@cold [$($kept:tt)*] [$variant:ident($message:ty) [] $kinds:tt] $($rest:tt)*) => {
        frames!(@cold [$($kept)* [$variant($message) $kinds]] $($rest)*);
    };
    (@cold [$($kept:tt)*] [$variant:ident($message:ty) [hot $($flag:tt)*] $kinds:tt] $($rest:tt)*) => {
        frames!(@cold [$($kept)*] $($rest)*);
    };
    (@cold [$($kept:tt)*] [$variant:ident($message:ty) [$first:tt $($flag:tt)*] $kinds:tt] $($rest:tt)*) => {
        frames!(@cold [$($kept)*] [$variant($message) [$($flag)*] $kinds] $($rest)*);
    };
    (@cold [$([$variant:ident($message:ty) [$($kind:ident $(($wire:ty))?)+]])*]) => {
        impl Frame {
            /// Appends the serde body of `kind` (its kind varint included) for a message serde
            /// encodes; `None` for a hot one, or a kind that is not the message's.
            pub(crate) fn encode_cold(
                &self,
                kind: FrameKind,
                out: &mut BytesMut,
            ) -> Option<Result<(), postcard::Error>> {
                match (self, kind) {
                    $($((Frame::$variant(body), FrameKind::$kind) => {
                        let wire = <frames!(@wire $message $(, $wire)?) as Lower<$message>>::lower(body);
                        Some(serialize(kind, &*wire, out))
                    })+)*
                    _ => None,
                }
            }

            /// Reads the serde body of a `kind` serde encodes (after its kind varint); `None`
            /// for a hot kind.
            pub(crate) fn decode_cold(
                kind: FrameKind,
                bytes: &[u8],
            ) -> Option<Result<(Frame, &[u8]), postcard::Error>> {
                Some(match kind {
                    $($(FrameKind::$kind => {
                        postcard::take_from_bytes::<frames!(@wire $message $(, $wire)?)>(bytes)
                            .map(|(wire, rest)| {
                                (Frame::$variant(From::from(<$message>::from(wire))), rest)
                            })
                    })+)*
                    _ => return None,
                })
            }
        }
    };
    (@wire $message:ty) => { $message };
    (@wire $message:ty, $wire:ty) => { $wire };
    (@first_lane $first:ident $($rest:ident)*) => { Lane::$first };
    (@one_lane $variant:ident [$first:ident $($rest:ident)*]) => {
        $(assert!(
            Lane::$rest as u8 == Lane::$first as u8,
            concat!("the kinds of ", stringify!($variant), " go in one lane")
        );)*
    };
    (@held [] $message:ty) => { $message };
    (@held [boxed $($rest:tt)*] $message:ty) => { Box<$message> };
    (@held [$first:tt $($rest:tt)*] $message:ty) => { frames!(@held [$($rest)*] $message) };
    (@kind_at [hot $view:ident $($rest:tt)*] $message:ty, $body:ident, $version:ident, $kinds:tt) => {
        $body.view().kind_at($version)
    };
    (@kind_at [chooses $($rest:tt)*] $message:ty, $body:ident, $version:ident, $kinds:tt) => {
        <$message as Chooses>::kind_at($body, $version)
    };
    (@kind_at [$first:tt $($rest:tt)*] $message:ty, $body:ident, $version:ident, $kinds:tt) => {
        frames!(@kind_at [$($rest)*] $message, $body, $version, $kinds)
    };
    (@kind_at [] $message:ty, $body:ident, $version:ident, [$kind:ident]) => {{
        let _ = $body;
        in_version(FrameKind::$kind, $version)
    }};
    (@from $variant:ident [from boxed $($rest:tt)*] $message:ty) => {
        impl From<$message> for Frame {
            fn from(body: $message) -> Self {
                Frame::$variant(Box::new(body))
            }
        }

        impl From<Box<$message>> for Frame {
            fn from(body: Box<$message>) -> Self {
                Frame::$variant(body)
            }
        }
    };
    (@from $variant:ident [from $($rest:tt)*] $message:ty) => {
        impl From<$message> for Frame {
            fn from(body: $message) -> Self {
                Frame::$variant(body)
            }
        }
    };
    (@from $variant:ident [$($rest:tt)*] $message:ty) => {};
}

frame_table!(frames);

/// Appends `kind`'s varint then `body` as postcard lays it out.
fn serialize<T: serde::Serialize + ?Sized>(
    kind: FrameKind,
    body: &T,
    out: &mut BytesMut,
) -> Result<(), postcard::Error> {
    let mut discriminant = kind.discriminant();
    while discriminant >= 0x80 {
        out.put_u8((discriminant as u8) | 0x80);
        discriminant >>= 7;
    }
    out.put_u8(discriminant as u8);
    postcard::serialize_with_flavor(body, BytesMutFlavor { buf: out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::DispatchRequest;
    use bytes::Bytes;

    /// The largest body kept inline is a reply or an outcome; everything larger is boxed.
    #[test]
    fn a_frame_stays_small_to_move() {
        let largest_inline = std::mem::size_of::<Reply>()
            .max(std::mem::size_of::<OutcomeFrame>())
            .max(std::mem::size_of::<RelayOutcome>());
        assert!(
            largest_inline <= 104,
            "inline bodies grew to {largest_inline} bytes"
        );
        assert!(
            std::mem::size_of::<Frame>() <= 112,
            "a frame is {} bytes",
            std::mem::size_of::<Frame>()
        );
    }

    #[test]
    fn from_a_body_builds_its_kind() {
        let push = Push {
            correlation: 7,
            request: DispatchRequest {
                namespace: "ns".into(),
                task_queue: String::new(),
                activity_type: "echo".into(),
                node: None,
                workflow_id: "wf".into(),
                ordinal: 1,
                run_id: None,
                attempt: 1,
                input: Bytes::from_static(b"in"),
                deadline_unix_ms: None,
            },
            extras: Default::default(),
        };
        let frame: Frame = push.clone().into();
        assert_eq!(frame, Frame::Push(Box::new(push)));
        let frame: Frame = Ping { nonce: 3 }.into();
        assert_eq!(frame.kind_at(1).ok(), Some(FrameKind::Ping));
    }
}
