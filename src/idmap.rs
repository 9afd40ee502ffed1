//! Maps keyed by ids this node assigns itself (worker ids, push and relay correlations).
//!
//! No client chooses these keys, so a flood of colliding ones is impossible and a fast
//! fixed-seed hasher (foldhash) replaces the default SipHash. Maps keyed by anything a
//! client chooses (names, a producer's correlation ids) keep the default, seeded hasher.

use std::collections::HashMap;

/// A map keyed by an id this node assigned; create it with `IdMap::default()`.
pub type IdMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;
