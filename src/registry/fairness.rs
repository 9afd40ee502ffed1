//! How dispatches share a full pool: a dispatch's priority, fairness key and weight; the
//! operator's per-key caps and weights; what this node's workers were given, by priority and
//! key.
//!
//! State is kept per key only for the keys the operator listed and for the first
//! [`MAX_SEEN_KEYS`] others served (their own counts in `/metrics`); every other key is counted
//! under `other`. Caps are enforced by the node whose workers run the dispatches.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::idmap::KeyedMap;

/// Priorities run from 1 (highest) to this (lowest).
pub const LOWEST_PRIORITY: u8 = 5;
/// A dispatch's priority when it states none.
pub const DEFAULT_PRIORITY: u8 = 3;
/// A key's weight when nobody states one, in thousandths: 1.0.
pub const DEFAULT_WEIGHT: u32 = 1_000;
/// The largest weight, in thousandths: 1000.0.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// The shared key: the key of every dispatch that names none.
pub const SHARED_KEY: &str = "";
/// Keys beyond the listed ones that get counts of their own; later keys count as `other`.
pub const MAX_SEEN_KEYS: usize = 16;
/// What a fairness key with waiters costs the registry at most, beyond its waiters and
/// twice its length: its key queue, its turn and its share of their maps. A key holds nothing once
/// its waiters have gone, so keys cost at most this times `max_active_dispatches` in all.
pub const BYTES_PER_KEY: usize = 512;
/// Keys shown by name among the waiting, most waiting first; the rest are summed as `other`.
pub const TOP_KEYS: usize = 10;
/// How long a waiter waits for each priority level it is raised by, unless configured.
pub const DEFAULT_AGING: Duration = Duration::from_secs(10);

/// How a dispatch shares a full pool: its priority (1 highest to 5 lowest), its fairness key
/// ([`SHARED_KEY`] for none) and that key's weight in thousandths. `K` holds the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fairness<K = Box<str>> {
    pub priority: u8,
    pub key: K,
    pub weight: u32,
}

/// A dispatch's fairness, its key lent.
pub type FairnessRef<'a> = Fairness<&'a str>;

impl Default for FairnessRef<'_> {
    fn default() -> Self {
        Self {
            priority: DEFAULT_PRIORITY,
            key: SHARED_KEY,
            weight: DEFAULT_WEIGHT,
        }
    }
}

impl<K: AsRef<str>> Fairness<K> {
    /// The same, its key lent.
    pub fn view(&self) -> FairnessRef<'_> {
        Fairness {
            priority: self.priority,
            key: self.key.as_ref(),
            weight: self.weight,
        }
    }
}

impl FairnessRef<'_> {
    /// An owned copy, for a dispatch that outlives the frame it arrived in.
    pub fn into_owned(self) -> Fairness {
        Fairness {
            priority: self.priority,
            key: self.key.into(),
            weight: self.weight,
        }
    }
}

/// One `[[fairness]]` entry of the node's config: a key's cap and weight on this node.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyPolicy {
    pub key: String,
    /// Most of the key's dispatches this node's workers run at once; past it they wait, or
    /// are refused when they may not wait. None: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// The key's weight, whatever its requests say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<Weight>,
}

/// A weight as people write it (`2`, `0.5`), held in thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weight(pub u32);

impl Serialize for Weight {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(f64::from(self.0) / 1000.0)
    }
}

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Weight::from_decimal(f64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

/// A weight outside 0.001 to 1000, or not a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a weight is a number between 0.001 and {}", MAX_WEIGHT / 1000)]
pub struct WeightOutOfRange;

impl Weight {
    /// The weight `weight` (1.0 is the default), rounded to thousandths.
    ///
    /// # Errors
    /// [`WeightOutOfRange`] when it rounds outside 1 to [`MAX_WEIGHT`] thousandths.
    pub fn from_decimal(weight: f64) -> Result<Self, WeightOutOfRange> {
        let thousandths = (weight * 1000.0).round();
        if !(1.0..=f64::from(MAX_WEIGHT)).contains(&thousandths) {
            return Err(WeightOutOfRange);
        }
        // In range, so the cast is exact.
        Ok(Weight(thousandths as u32))
    }
}

impl std::str::FromStr for Weight {
    type Err = WeightOutOfRange;

    /// A weight as people write it: `2`, `0.5`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let weight = text.trim().parse::<f64>().map_err(|_| WeightOutOfRange)?;
        Weight::from_decimal(weight)
    }
}

/// The operator's fairness settings, as the registry takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairnessPolicy {
    /// How long a waiter waits for each priority level it is raised by; zero: never raised.
    pub aging: Duration,
    pub keys: Vec<KeyPolicy>,
}

impl Default for FairnessPolicy {
    fn default() -> Self {
        Self {
            aging: DEFAULT_AGING,
            keys: Vec::new(),
        }
    }
}

/// Why the `[[fairness]]` entries are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("fairness entry {index}: the key is empty")]
    EmptyKey { index: usize },
    #[error("fairness entry {index}: the key is longer than {max} bytes")]
    LongKey { index: usize, max: usize },
    #[error("fairness entry {index}: max_in_flight must be at least 1")]
    ZeroCap { index: usize },
    #[error("fairness entry {index}: key {key:?} is also the key of entry {other}")]
    SharedKey {
        index: usize,
        other: usize,
        key: String,
    },
}

impl FairnessPolicy {
    /// Checks every entry against keys of at most `max_len` bytes.
    ///
    /// # Errors
    /// The first [`PolicyError`] found.
    pub fn validate(&self, max_len: usize) -> Result<(), PolicyError> {
        for (index, entry) in self.keys.iter().enumerate() {
            if entry.key.is_empty() {
                return Err(PolicyError::EmptyKey { index });
            }
            if entry.key.len() > max_len {
                return Err(PolicyError::LongKey {
                    index,
                    max: max_len,
                });
            }
            if entry.max_in_flight == Some(0) {
                return Err(PolicyError::ZeroCap { index });
            }
            if let Some(other) = self
                .keys
                .iter()
                .take(index)
                .position(|e| e.key == entry.key)
            {
                return Err(PolicyError::SharedKey {
                    index,
                    other,
                    key: entry.key.clone(),
                });
            }
        }
        Ok(())
    }
}

/// A key's cap is reached: its dispatches wait, or are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapReached {
    pub max_in_flight: u32,
}

/// Dispatches given a slot on this node's workers, by priority and by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// Index 0 is priority 1.
    pub by_priority: [u64; LOWEST_PRIORITY as usize],
    /// The shared key, each listed key and each of the first keys seen, with its count.
    pub by_key: Vec<(String, u64)>,
    /// Every other key.
    pub other: u64,
}

/// The waiting and the served, by priority and key, and the capped keys' dispatches in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FairnessStatus {
    /// Index 0 is priority 1.
    pub waiting_by_priority: [u64; LOWEST_PRIORITY as usize],
    /// The [`TOP_KEYS`] keys with the most waiting dispatches, most first.
    pub waiting_by_key: Vec<(String, u64)>,
    /// Waiting dispatches of every other key.
    pub waiting_other: u64,
    pub served: Served,
    /// Each key with a cap: its dispatches in flight on this node's workers, and the cap.
    pub capped: Vec<(String, u32, u32)>,
}

impl FairnessStatus {
    /// The status of waiters counted by `(priority, key, waiting)` and of `keys`.
    pub(super) fn new<'a>(
        key_queues: impl Iterator<Item = (u8, &'a str, usize)>,
        keys: &Keys,
    ) -> Self {
        let mut status = Self::default();
        let mut by_key: KeyedMap<&str, u64> = KeyedMap::default();
        for (priority, key, waiting) in key_queues {
            let waiting = waiting as u64;
            if let Some(count) = status
                .waiting_by_priority
                .get_mut(usize::from(priority.saturating_sub(1)))
            {
                *count += waiting;
            }
            *by_key.entry(key).or_default() += waiting;
        }
        let mut ranked: Vec<(&str, u64)> = by_key.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        status.waiting_other = ranked.iter().skip(TOP_KEYS).map(|(_, n)| n).sum();
        ranked.truncate(TOP_KEYS);
        status.waiting_by_key = ranked
            .into_iter()
            .map(|(key, n)| (key.to_owned(), n))
            .collect();
        status.served = keys.served();
        status.capped = keys
            .in_flight()
            .map(|(key, in_flight, cap)| (key.to_owned(), in_flight, cap))
            .collect();
        status
    }
}

/// One key the registry keeps counts for.
#[derive(Debug)]
struct Kept {
    key: Box<str>,
    cap: Option<u32>,
    weight: Option<u32>,
    in_flight: u32,
    served: u64,
}

/// The per-key state: listed keys with their caps and weights, the first keys seen, and the
/// counts of what was served. Lives under the registry's lock.
#[derive(Debug)]
pub(super) struct Keys {
    kept: Vec<Kept>,
    index: KeyedMap<Box<str>, usize>,
    /// Listed keys with a cap; zero skips every look-up on the way to a slot.
    capped: usize,
    /// Listed keys with a weight.
    weighted: usize,
    seen: usize,
    by_priority: [u64; LOWEST_PRIORITY as usize],
    shared: u64,
    other: u64,
}

impl Keys {
    pub(super) fn new(policy: &FairnessPolicy) -> Self {
        let mut keys = Self {
            kept: Vec::with_capacity(policy.keys.len()),
            index: KeyedMap::default(),
            capped: 0,
            weighted: 0,
            seen: 0,
            by_priority: [0; LOWEST_PRIORITY as usize],
            shared: 0,
            other: 0,
        };
        for entry in &policy.keys {
            if keys.index.contains_key(entry.key.as_str()) {
                continue;
            }
            keys.capped += usize::from(entry.max_in_flight.is_some());
            keys.weighted += usize::from(entry.weight.is_some());
            keys.keep(&entry.key, entry.max_in_flight, entry.weight.map(|w| w.0));
        }
        keys
    }

    fn keep(&mut self, key: &str, cap: Option<u32>, weight: Option<u32>) -> usize {
        let at = self.kept.len();
        self.kept.push(Kept {
            key: key.into(),
            cap,
            weight,
            in_flight: 0,
            served: 0,
        });
        self.index.insert(key.into(), at);
        at
    }

    /// `fairness` with the key's listed weight in place of the one it asked for.
    pub(super) fn weighed<'a>(&self, fairness: FairnessRef<'a>) -> FairnessRef<'a> {
        if self.weighted == 0 || fairness.key.is_empty() {
            return fairness;
        }
        let weight = self
            .index
            .get(fairness.key)
            .and_then(|at| self.kept.get(*at))
            .and_then(|kept| kept.weight);
        Fairness {
            weight: weight.unwrap_or(fairness.weight),
            ..fairness
        }
    }

    /// Whether `key` may take another slot: `Ok` with its capped entry (counted when the slot
    /// is taken), `Ok(None)` when it has no cap.
    ///
    /// # Errors
    /// [`CapReached`] when its dispatches in flight here are at its cap.
    #[inline]
    pub(super) fn room(&self, key: &str) -> Result<Option<u32>, CapReached> {
        // Every dispatch passes here: a node with no cap looks nothing up.
        if self.capped == 0 || key.is_empty() {
            return Ok(None);
        }
        self.room_listed(key)
    }

    fn room_listed(&self, key: &str) -> Result<Option<u32>, CapReached> {
        let Some(&at) = self.index.get(key) else {
            return Ok(None);
        };
        match self.kept.get(at) {
            Some(Kept {
                cap: Some(cap),
                in_flight,
                ..
            }) if in_flight >= cap => Err(CapReached {
                max_in_flight: *cap,
            }),
            // Entries are the config's and a few more: their index fits.
            Some(Kept { cap: Some(_), .. }) => Ok(u32::try_from(at).ok()),
            _ => Ok(None),
        }
    }

    /// Counts a slot given to a dispatch of `fairness`, and against the cap `capped` names.
    #[inline]
    pub(super) fn took(&mut self, fairness: &FairnessRef<'_>, capped: Option<u32>) {
        if let Some(count) = self
            .by_priority
            .get_mut(usize::from(fairness.priority.saturating_sub(1)))
        {
            *count += 1;
        }
        // Every dispatch passes here: the shared key's count is a field.
        if capped.is_none() && fairness.key.is_empty() {
            self.shared += 1;
            return;
        }
        self.took_keyed(fairness.key, capped);
    }

    fn took_keyed(&mut self, key: &str, capped: Option<u32>) {
        if let Some(kept) = capped.and_then(|at| self.kept.get_mut(at as usize)) {
            kept.in_flight += 1;
            kept.served += 1;
            return;
        }
        if key.is_empty() {
            self.shared += 1;
            return;
        }
        let at = match self.index.get(key) {
            Some(&at) => Some(at),
            None if self.seen < MAX_SEEN_KEYS => {
                self.seen += 1;
                Some(self.keep(key, None, None))
            }
            None => None,
        };
        match at.and_then(|at| self.kept.get_mut(at)) {
            Some(kept) => kept.served += 1,
            None => self.other += 1,
        }
    }

    /// Gives back a slot counted against the cap `capped`; returns the key when it was at its
    /// cap, so its waiters may now be served.
    pub(super) fn gave_back(&mut self, capped: u32) -> Option<Box<str>> {
        let kept = self.kept.get_mut(capped as usize)?;
        let was_full = kept.cap.is_some_and(|cap| kept.in_flight >= cap);
        kept.in_flight = kept.in_flight.saturating_sub(1);
        was_full.then(|| kept.key.clone())
    }

    /// Keys with a cap and their dispatches in flight here.
    pub(super) fn in_flight(&self) -> impl Iterator<Item = (&str, u32, u32)> {
        self.kept
            .iter()
            .filter_map(|kept| kept.cap.map(|cap| (kept.key.as_ref(), kept.in_flight, cap)))
    }

    /// What was served, by priority and key.
    pub(super) fn served(&self) -> Served {
        let mut by_key = vec![(SHARED_KEY.to_owned(), self.shared)];
        by_key.extend(
            self.kept
                .iter()
                .map(|kept| (kept.key.to_string(), kept.served)),
        );
        Served {
            by_priority: self.by_priority,
            by_key,
            other: self.other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(toml_entries: &[KeyPolicy]) -> FairnessPolicy {
        FairnessPolicy {
            aging: DEFAULT_AGING,
            keys: toml_entries.to_vec(),
        }
    }

    fn entry(key: &str, cap: Option<u32>, weight: Option<u32>) -> KeyPolicy {
        KeyPolicy {
            key: key.into(),
            max_in_flight: cap,
            weight: weight.map(Weight),
        }
    }

    fn of(key: &str) -> FairnessRef<'_> {
        Fairness {
            key,
            ..FairnessRef::default()
        }
    }

    #[test]
    fn a_capped_key_has_room_until_its_cap_and_again_after_a_slot_comes_back() {
        let mut keys = Keys::new(&policy(&[entry("a", Some(2), None)]));
        for _ in 0..2 {
            let capped = keys.room("a").expect("room");
            assert!(capped.is_some());
            keys.took(&of("a"), capped);
        }
        assert_eq!(keys.room("a"), Err(CapReached { max_in_flight: 2 }));
        assert_eq!(keys.room("b"), Ok(None));
        assert_eq!(keys.room(SHARED_KEY), Ok(None));
        assert_eq!(keys.gave_back(0).as_deref(), Some("a"));
        assert!(keys.room("a").is_ok());
        assert_eq!(keys.gave_back(0), None);
    }

    #[test]
    fn a_listed_weight_replaces_the_one_asked_for() {
        let keys = Keys::new(&policy(&[entry("a", None, Some(3_000))]));
        let asked = Fairness {
            weight: 50,
            ..of("a")
        };
        assert_eq!(keys.weighed(asked).weight, 3_000);
        assert_eq!(keys.weighed(of("b")).weight, DEFAULT_WEIGHT);
    }

    #[test]
    fn counts_by_key_are_kept_for_listed_keys_and_the_first_seen_then_other() {
        let mut keys = Keys::new(&policy(&[entry("listed", None, None)]));
        keys.took(&of(SHARED_KEY), None);
        keys.took(&of("listed"), None);
        let names: Vec<String> = (0..MAX_SEEN_KEYS + 5).map(|n| format!("k{n}")).collect();
        for name in &names {
            keys.took(&of(name), None);
        }
        let served = keys.served();
        assert_eq!(served.by_key.len(), 2 + MAX_SEEN_KEYS);
        assert_eq!(served.other, 5);
        assert_eq!(
            served.by_priority[usize::from(DEFAULT_PRIORITY - 1)],
            2 + names.len() as u64
        );
        assert_eq!(served.by_key.first(), Some(&(String::new(), 1)));
    }

    #[test]
    fn entries_need_a_short_unique_key_and_a_cap_of_at_least_one() {
        let bad = [
            (
                vec![entry("", None, None)],
                PolicyError::EmptyKey { index: 0 },
            ),
            (
                vec![entry("abcdef", None, None)],
                PolicyError::LongKey { index: 0, max: 4 },
            ),
            (
                vec![entry("a", Some(0), None)],
                PolicyError::ZeroCap { index: 0 },
            ),
            (
                vec![entry("a", None, None), entry("a", Some(1), None)],
                PolicyError::SharedKey {
                    index: 1,
                    other: 0,
                    key: "a".into(),
                },
            ),
        ];
        for (entries, error) in bad {
            assert_eq!(policy(&entries).validate(4), Err(error));
        }
        assert_eq!(policy(&[entry("a", Some(1), Some(1))]).validate(4), Ok(()));
    }

    #[test]
    fn weights_are_read_as_numbers_and_kept_in_thousandths() {
        let read = |text: &str| toml::from_str::<KeyPolicy>(text).map(|entry| entry.weight);
        assert_eq!(read("key = \"a\"\nweight = 2"), Ok(Some(Weight(2_000))));
        assert_eq!(read("key = \"a\"\nweight = 0.25"), Ok(Some(Weight(250))));
        assert!(read("key = \"a\"\nweight = 0").is_err());
        assert!(read("key = \"a\"\nweight = 1001").is_err());
    }
}
