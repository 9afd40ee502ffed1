//! What a connection's writer may say: its negotiated version and, from version 4, the
//! features its reader listed ([`FeatureSet`]).
//!
//! From version 4 a kind or variant introduced after version 3 goes to a connection only if its
//! reader listed that kind's or variant's feature (a client in `Features`, a peer in
//! `PeerHello3`); the writer says the nearest thing the connection knows otherwise.

use crate::feature;

/// The features of version 4 and later that a connection's reader listed: what its writer may
/// send it beyond its version's own kinds and variants. Names this crate does not know are
/// left out (a reader may list those of a later release).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FeatureSet(u32);

impl FeatureSet {
    /// Nothing listed: what every connection of version 3 or earlier reads.
    pub const NONE: Self = Self(0);
    /// `DispatchResult::HeartbeatTimeout`, and requests carrying a heartbeat timeout.
    pub const HEARTBEAT_TIMEOUT: Self = Self(1);
    /// `RefusedReason::RoleNotGranted`.
    pub const ROLE_NOT_GRANTED: Self = Self(1 << 1);
    /// `Progress` frames.
    pub const PROGRESS: Self = Self(1 << 2);
    /// `Session` after `Registered`, and `SessionResumed`.
    pub const WORKER_RESUME: Self = Self(1 << 3);
    /// Every feature this crate knows.
    pub const ALL: Self = Self(0b1111);

    /// Each feature with its name, in the order PROTOCOL.md lists them.
    const NAMED: [(Self, &'static str); 4] = [
        (Self::HEARTBEAT_TIMEOUT, feature::HEARTBEAT_TIMEOUT),
        (Self::ROLE_NOT_GRANTED, feature::ROLE_NOT_GRANTED),
        (Self::PROGRESS, feature::PROGRESS),
        (Self::WORKER_RESUME, feature::WORKER_RESUME),
    ];

    /// The features among `names` this crate knows; the rest are ignored.
    pub fn named<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Self {
        names.into_iter().fold(Self::NONE, |set, name| {
            let known = Self::NAMED
                .iter()
                .find(|(_, known)| *known == name.as_ref())
                .map_or(Self::NONE, |(feature, _)| *feature);
            set.with(known)
        })
    }

    /// The names of the features in the set, in the order PROTOCOL.md lists them.
    pub fn names(self) -> Vec<String> {
        Self::NAMED
            .iter()
            .filter(|(feature, _)| self.contains(*feature))
            .map(|(_, name)| (*name).to_owned())
            .collect()
    }

    /// True when every feature of `features` is in the set.
    pub const fn contains(self, features: Self) -> bool {
        self.0 & features.0 == features.0
    }

    /// The set with `features` added.
    #[must_use]
    pub const fn with(self, features: Self) -> Self {
        Self(self.0 | features.0)
    }

    /// The set as bits, to keep in an atomic.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The set of `bits`, keeping those of known features only.
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits & Self::ALL.0)
    }
}

/// What a connection's writer may say: the negotiated version and what the reader listed.
/// Below version 4 nothing can be listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Dialect {
    version: u16,
    listed: FeatureSet,
}

impl Dialect {
    /// A connection of `version` whose reader listed `listed` (ignored below version 4).
    pub const fn new(version: u16, listed: FeatureSet) -> Self {
        let listed = if version >= 4 {
            listed
        } else {
            FeatureSet::NONE
        };
        Self { version, listed }
    }

    /// The negotiated version.
    pub const fn version(self) -> u16 {
        self.version
    }

    /// What the reader listed.
    pub const fn listed(self) -> FeatureSet {
        self.listed
    }

    /// True when the reader listed every feature of `features`.
    pub const fn lists(self, features: FeatureSet) -> bool {
        self.listed.contains(features)
    }
}

impl From<u16> for Dialect {
    /// A connection of `version` whose reader listed nothing.
    fn from(version: u16) -> Self {
        Self::new(version, FeatureSet::NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_as_the_set_and_unknown_ones_are_left_out() {
        let set = FeatureSet::named(["progress", "later-feature", "heartbeat-timeout"]);
        assert_eq!(
            set,
            FeatureSet::PROGRESS.with(FeatureSet::HEARTBEAT_TIMEOUT)
        );
        assert_eq!(set.names(), ["heartbeat-timeout", "progress"]);
        assert_eq!(FeatureSet::named(FeatureSet::ALL.names()), FeatureSet::ALL);
        assert_eq!(FeatureSet::from_bits(u32::MAX), FeatureSet::ALL);
    }

    #[test]
    fn nothing_is_listed_below_version_4() {
        assert!(!Dialect::new(3, FeatureSet::ALL).lists(FeatureSet::PROGRESS));
        assert!(Dialect::new(4, FeatureSet::ALL).lists(FeatureSet::PROGRESS));
        assert_eq!(Dialect::from(4).listed(), FeatureSet::NONE);
    }
}
