//! [`FrameKind`]: a frame's wire discriminant and what the table says of it.

use crate::feature;
use crate::table::frame_table;

/// Where a frame waits in a connection's outbound queue: control frames (pings, cancels,
/// outcomes, presence, handshakes, closes) overtake queued bulk ones (requests to run work)
/// at a frame boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    Control,
    Bulk,
}

macro_rules! kinds {
    ($(
        $(#[$doc:meta])*
        $variant:ident($message:ty) [$($flag:tt)*] {
            $($number:literal $kind:ident $(($wire:ty))?: $version:literal $lane:ident $feature:tt;)+
        }
    )+) => {
        /// The kind of a frame: its wire discriminant, without the body.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum FrameKind {
            $($($kind = $number,)+)+
        }

        impl FrameKind {
            /// How many kinds there are; their numbers run from 0 without a gap.
            pub const COUNT: usize = [$($(FrameKind::$kind,)+)+].len();

            /// The kind with this wire discriminant, if this version knows it.
            pub const fn from_discriminant(value: u32) -> Option<FrameKind> {
                match value {
                    $($($number => Some(FrameKind::$kind),)+)+
                    _ => None,
                }
            }

            /// The name used in `PROTOCOL.md` and in error reasons.
            pub const fn name(self) -> &'static str {
                match self {
                    $($(FrameKind::$kind => stringify!($kind),)+)+
                }
            }

            /// The protocol version that introduced the kind: a connection of an earlier
            /// version never carries it.
            pub const fn version(self) -> u16 {
                match self {
                    $($(FrameKind::$kind => $version,)+)+
                }
            }

            /// The lane the kind waits in.
            pub const fn lane(self) -> Lane {
                match self {
                    $($(FrameKind::$kind => Lane::$lane,)+)+
                }
            }

            /// The feature a peer must list at the handshake before this kind is sent to it,
            /// if any (`feature::*`).
            pub const fn feature(self) -> Option<&'static str> {
                match self {
                    $($(FrameKind::$kind => kinds!(@feature $feature),)+)+
                }
            }

            /// True when the kind's codec is written by hand (`hot/`) rather than serde's.
            pub const fn is_hot(self) -> bool {
                match self {
                    $($(FrameKind::$kind)|+ => kinds!(@hot [$($flag)*]),)+
                }
            }
        }
    };
    (@feature -) => { None };
    (@feature $feature:ident) => { Some(feature::$feature) };
    (@hot []) => { false };
    (@hot [hot $($rest:tt)*]) => { true };
    (@hot [$first:tt $($rest:tt)*]) => { kinds!(@hot [$($rest)*]) };
}

frame_table!(kinds);

impl FrameKind {
    /// Every kind, in wire order.
    pub const ALL: [FrameKind; FrameKind::COUNT] = {
        let mut all = [FrameKind::Hello; FrameKind::COUNT];
        let mut at = 0;
        while at < FrameKind::COUNT {
            // A gap in the numbers stops the build here.
            all[at] = match FrameKind::from_discriminant(at as u32) {
                Some(kind) => kind,
                None => panic!("the frame table skips a number"),
            };
            at += 1;
        }
        all
    };

    /// The wire discriminant.
    pub const fn discriminant(self) -> u32 {
        self as u32
    }

    /// A request to run work (a push or a relay, of any version): it waits behind control
    /// frames in a connection's outbound queue.
    pub const fn is_bulk(self) -> bool {
        matches!(self.lane(), Lane::Bulk)
    }
}

impl std::fmt::Display for FrameKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_at_its_number_and_named_as_itself() {
        for (number, kind) in FrameKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.discriminant() as usize, number);
            assert_eq!(
                FrameKind::from_discriminant(kind.discriminant()),
                Some(kind)
            );
            assert_eq!(format!("{kind:?}"), kind.name());
        }
        assert_eq!(FrameKind::from_discriminant(FrameKind::COUNT as u32), None);
    }

    #[test]
    fn the_kinds_that_need_a_feature_are_those_of_section_5() {
        let gated: Vec<(FrameKind, &str)> = FrameKind::ALL
            .into_iter()
            .filter_map(|kind| Some((kind, kind.feature()?)))
            .collect();
        assert_eq!(
            gated,
            [
                (FrameKind::Farewell, feature::FAREWELL),
                (FrameKind::RelayAck, feature::RELAY_RESUME),
                (FrameKind::Resume, feature::RELAY_RESUME),
                (FrameKind::Resumed, feature::RELAY_RESUME),
                (FrameKind::PoolSettings, feature::POOL_SETTINGS),
                (FrameKind::Session, feature::WORKER_RESUME),
                (FrameKind::ResumeSession, feature::WORKER_RESUME),
                (FrameKind::SessionResumed, feature::WORKER_RESUME),
                (FrameKind::Progress, feature::PROGRESS),
            ]
        );
    }
}
