//! [`FrameRef`]: a frame whose body is borrowed. The encoder's arguments (a push written from
//! a lent request, an outcome from a lent result) and what a frame decoded where it lies reads
//! as (hot bodies as views of the read buffer).

use crate::cursor::{PayloadRef, Read, Reader, Writer};
use crate::dialect::Dialect;
use crate::error::{DecodeError, EncodeError};
use crate::frame::Frame;
// `Body` and every hot message's view the table names.
use crate::hot::*;
use crate::kind::{FrameKind, Lane};
use crate::table::frame_table;

macro_rules! frame_refs {
    ($(
        $(#[$doc:meta])*
        $variant:ident($message:ty) [$($flag:tt)*] {
            $($number:literal $kind:ident $(($wire:ty))?: $version:literal $lane:ident $feature:tt;)+
        }
    )+) => {
        frame_refs!(@hot [] $([$variant [$($flag)*] [$($kind)+]])+);
    };
    (@first_lane $first:ident $($rest:ident)*) => { FrameKind::$first.lane() };
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
        /// A frame whose body is borrowed: one message, as [`Frame`], whose kind a connection's
        /// version picks. Encodes byte for byte as the owned [`Frame`] of the same fields; the
        /// hot messages have variants of their own, read where they lie or lent by the caller.
        #[derive(Debug, Clone)]
        pub enum FrameRef<'a> {
            /// A frame already built, of any kind.
            Frame(&'a Frame),
            $($message($view<'a>),)*
        }

        $(
            impl Body for $view<'_> {
                #[inline]
                fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
                    $view::kind_at(self, version)
                }

                #[inline]
                fn encoded_len(&self, kind: FrameKind, dialect: Dialect) -> usize {
                    $view::encoded_len(self, kind, dialect)
                }

                #[inline]
                fn encode(&self, kind: FrameKind, dialect: Dialect, out: &mut Writer<'_>) {
                    $view::encode(self, kind, dialect, out)
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
                        whole($view::decode(input, kind), input, kind, FrameRef::$message, fail)
                    })*
                    _ => cold().map_err(fail),
                }
            }

            /// The kind this frame goes as on a connection of `version`.
            ///
            /// # Errors
            /// As [`Frame::kind_at`].
            #[inline]
            pub fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
                match self {
                    FrameRef::Frame(frame) => frame.kind_at(version),
                    $(FrameRef::$message(body) => body.kind_at(version),)*
                }
            }

            /// The lane the frame goes in, as [`Frame::lane`].
            #[inline]
            pub fn lane(&self) -> Lane {
                match self {
                    FrameRef::Frame(frame) => frame.lane(),
                    $(FrameRef::$message(_) => frame_refs!(@first_lane $($kind)+),)*
                }
            }

            /// The message's name, as [`Frame::name`].
            pub fn name(&self) -> &'static str {
                match self {
                    FrameRef::Frame(frame) => frame.name(),
                    $(FrameRef::$message(_) => stringify!($message),)*
                }
            }

            /// The hot body lent, or the frame built (see [`Frame::lent_hot`]).
            #[inline]
            pub(crate) fn hot_or_built(&self) -> Result<&dyn Body, &'a Frame> {
                match self {
                    FrameRef::Frame(frame) => Err(frame),
                    $(FrameRef::$message(body) => Ok(body),)*
                }
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
            /// A built frame of a hot message lent as its own variant, for the hand codec to
            /// write; `None` for the messages serde encodes.
            pub(crate) fn lent_hot(&self) -> Option<FrameRef<'_>> {
                match self {
                    $(Frame::$message(body) => Some(FrameRef::$message(body.view())),)*
                    _ => None,
                }
            }

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

    /// Bytes of the body of a hot message (its kind included) on a connection of `dialect`,
    /// reckoned without encoding it; `None` for the messages serde encodes, or a version that
    /// cannot carry it.
    pub fn encoded_len(&self, dialect: impl Into<Dialect>) -> Option<usize> {
        let dialect = dialect.into();
        match self.hot_or_built() {
            Ok(body) => {
                let kind = body.kind_at(dialect.version()).ok()?;
                Some(body.encoded_len(kind, dialect))
            }
            Err(built) => built.lent_hot()?.encoded_len(dialect),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The reader lends a frame per turn and every move of it is a copy: it is kept as small
    /// as the frame of version 2 was, extras and all (they are lent as two words, read on
    /// access), but for the two words of the request's encoded head, which spare encoding it.
    #[test]
    fn a_lent_frame_is_no_larger_than_before_version_3_and_the_head() {
        let size = std::mem::size_of::<FrameRef<'_>>();
        assert!(size <= 240, "a lent frame is {size} bytes");
    }
}
