//! [`FrameRef`]: a frame whose body is borrowed. The encoder's arguments (a push written from
//! a lent request, an outcome from a lent result) and what a frame decoded where it lies reads
//! as (hot bodies as views of the read buffer).

use crate::cursor::{PayloadRef, Read, Reader, Writer};
use crate::error::DecodeError;
use crate::frame::Frame;
use crate::hot::{
    Body, OutcomeRef, PushRef, RelayOutcomeRef, RelayRef, ReplyRef, ServedOutcomeRef, SubmitRef,
};
use crate::kind::FrameKind;
use crate::message::{Push3Ref, Relay3Ref, Submit3Ref};
use crate::table::frame_table;

macro_rules! frame_refs {
    ($(
        $(#[$doc:meta])*
        $message:ident($body:ty) [$($flag:tt)*] {
            $($number:literal $kind:ident: $version:literal $lane:ident $feature:tt;)+
        }
    )+) => {
        frame_refs!(@hot [] $([$message [$($flag)*] [$($kind)+]])+);
    };
    // Keeps the messages with a hand codec (`hot View`), then generates from them.
    (@hot [$($kept:tt)*] [$message:ident [] $kinds:tt] $($rest:tt)*) => {
        frame_refs!(@hot [$($kept)*] $($rest)*);
    };
    (@hot [$($kept:tt)*] [$message:ident [hot $view:ident $($flag:tt)*] $kinds:tt] $($rest:tt)*) => {
        frame_refs!(@hot [$($kept)* [$message $view $kinds]] $($rest)*);
    };
    (@hot [$($kept:tt)*] [$message:ident [$first:tt $($flag:tt)*] $kinds:tt] $($rest:tt)*) => {
        frame_refs!(@hot [$($kept)*] [$message [$($flag)*] $kinds] $($rest)*);
    };
    (@hot [$([$message:ident $view:ident [$($kind:ident)+]])*]) => {
        /// A frame whose body is borrowed. Encodes byte for byte as the owned [`Frame`] of the
        /// same kind and fields; the hot kinds have variants of their own.
        #[derive(Debug, Clone)]
        pub enum FrameRef<'a> {
            /// A frame already built, of any kind.
            Frame(&'a Frame),
            $($message($view<'a>),)*
        }

        $(
            impl Body for $view<'_> {
                #[inline]
                fn encoded_len(&self) -> usize {
                    $view::encoded_len(self)
                }

                #[inline]
                fn encode(&self, out: &mut Writer<'_>) {
                    $view::encode(self, out)
                }
            }

            impl<'a> From<$view<'a>> for FrameRef<'a> {
                fn from(body: $view<'a>) -> Self {
                    FrameRef::$message(body)
                }
            }
        )*

        impl<'a> FrameRef<'a> {
            /// Reads the rest of a body of `kind`, whose kind `input` has read, requiring every
            /// byte be used; a kind that is not hot is `cold`'s to read. Each arm builds the
            /// frame where it is returned: a frame is a few hundred bytes, and every move of
            /// it is a copy.
            #[inline(always)]
            pub(crate) fn decode_hot<E>(
                kind: FrameKind,
                input: &mut Reader<'a>,
                fail: impl FnOnce(DecodeError) -> E,
                cold: impl FnOnce() -> Result<Self, DecodeError>,
            ) -> Result<Self, E> {
                match kind {
                    $($(FrameKind::$kind)|+ => {
                        whole($view::decode(input), input, kind, FrameRef::$message, fail)
                    })*
                    _ => cold().map_err(fail),
                }
            }

            /// The kind of the frame it stands for.
            pub fn kind(&self) -> FrameKind {
                match self {
                    FrameRef::Frame(frame) => frame.kind(),
                    $(FrameRef::$message(_) => frame_refs!(@first $($kind)+),)*
                }
            }

            /// Runs `f` on the hot body, a built frame's seen through its view; `None` for the
            /// kinds serde encodes.
            #[inline]
            pub(crate) fn with_hot<R>(&self, f: impl FnOnce(&dyn Body) -> R) -> Option<R> {
                Some(match self {
                    FrameRef::Frame(frame) => match frame {
                        $(Frame::$message(body) => f(&body.view()),)*
                        _ => return None,
                    },
                    $(FrameRef::$message(body) => f(body),)*
                })
            }

            /// The opaque payload the frame carries, if any: a request's input or a success's
            /// result.
            pub fn payload(&self) -> Option<PayloadRef<'_>> {
                match self {
                    FrameRef::Frame(frame) => frame.payload(),
                    $(FrameRef::$message(body) => body.payload(),)*
                }
            }

            /// The owned frame it stands for.
            pub fn into_owned(self) -> Frame {
                match self {
                    FrameRef::Frame(frame) => frame.clone(),
                    $(FrameRef::$message(body) => Frame::from(body.into_owned()),)*
                }
            }
        }

        impl Frame {
            /// The opaque payload the frame carries, if any: a request's input or a success's
            /// result.
            pub fn payload(&self) -> Option<PayloadRef<'_>> {
                match self {
                    $(Frame::$message(body) => body.view().payload(),)*
                    _ => None,
                }
            }

            /// Bytes of opaque payload the frame carries.
            pub fn payload_len(&self) -> usize {
                self.payload().map_or(0, |payload| payload.len())
            }
        }
    };
    (@first $kind:ident $($rest:ident)*) => { FrameKind::$kind };
}

frame_table!(frame_refs);

impl<'a> From<&'a Frame> for FrameRef<'a> {
    fn from(frame: &'a Frame) -> Self {
        FrameRef::Frame(frame)
    }
}

impl FrameRef<'_> {
    /// Bytes of opaque payload the frame carries, as [`Frame::payload_len`].
    pub fn payload_len(&self) -> usize {
        self.payload().map_or(0, |payload| payload.len())
    }

    /// Bytes of the body of a hot kind (its kind included), reckoned without encoding it;
    /// `None` for the kinds serde encodes.
    pub fn encoded_len(&self) -> Option<usize> {
        self.with_hot(|body| body.encoded_len())
    }
}

/// A hot body read as the frame `wrap` makes of it, or why it is not one: malformed, or
/// followed by bytes of no field.
#[inline(always)]
fn whole<'a, T, E>(
    read: Read<T>,
    input: &Reader<'a>,
    kind: FrameKind,
    wrap: fn(T) -> FrameRef<'a>,
    fail: impl FnOnce(DecodeError) -> E,
) -> Result<FrameRef<'a>, E> {
    match read {
        Ok(_) if input.left() > 0 => Err(fail(DecodeError::TrailingBytes {
            kind,
            extra: input.left(),
        })),
        Ok(body) => Ok(wrap(body)),
        Err(source) => Err(fail(DecodeError::Malformed { kind, source })),
    }
}
