//! Hash maps for the node's hot paths, by who chooses their keys.
//!
//! Ids this node assigns itself (worker ids, push and relay correlations) cannot be chosen to
//! collide, so [`IdMap`] hashes them with a fixed-seed fast hasher (foldhash). Keys a client
//! chooses (names, a producer's correlation ids) go in a [`KeyedMap`], seeded at random.

use std::collections::HashMap;

/// A map keyed by an id this node assigned; create it with `IdMap::default()`.
pub type IdMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A map keyed by client-chosen data: foldhash seeded at random per process and per map, so
/// colliding keys cannot be computed ahead (flooding), at a fraction of SipHash's cost.
pub type KeyedMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
