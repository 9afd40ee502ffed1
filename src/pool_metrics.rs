//! Per-pool counts for `/metrics` and the console: outcomes by class and seconds from push to
//! reply, for the first [`PoolMeters::max`] pools named; every later pool is
//! counted under [`OTHER`], so the labelled set stays bounded whatever producers name.
//!
//! A pool's [`PoolMeter`] is claimed once, when a worker registers in the pool or an admitted
//! dispatch names it, and travels from then on with the registry's pool, a slot reserved in it
//! and the flight that took the slot: counting a dispatch takes a few relaxed atomic adds, no
//! look-up and no lock.
//! Claimed meters are kept for the node's life, so their counters never go back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lintel_wire::channel::dispatch_channel_name;

use crate::idmap::KeyedMap;
use crate::latency::{Latency, LatencySnapshot};

/// Pools labelled by name unless `metrics_max_pools` says otherwise.
pub const DEFAULT_MAX_POOLS: usize = 256;
/// The largest `metrics_max_pools`: a scrape stays within a few megabytes.
pub const MAX_POOLS: usize = 65_536;
/// The label of every pool past the bound, summed.
pub const OTHER: &str = "other";
/// Outcome classes counted per pool, in the order `dispatch::outcome::CLASSES` names them.
pub const OUTCOME_CLASSES: usize = 9;

/// One pool's counts (or `other`'s): shared by the registry's pool, its reservations and the
/// flights that end in it.
#[derive(Debug)]
pub struct PoolMeter {
    /// The pool's channel name, or [`OTHER`].
    label: Box<str>,
    outcomes: [AtomicU64; OUTCOME_CLASSES],
    push_to_reply: Latency,
}

/// A pool's counts at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSnapshot {
    /// The pool's channel name, or [`OTHER`].
    pub pool: String,
    /// Dispatches ended, by outcome class index.
    pub outcomes: [u64; OUTCOME_CLASSES],
    /// Seconds from a completed dispatch's first push (or relay) to its reply.
    pub push_to_reply: LatencySnapshot,
}

impl PoolMeter {
    fn new(label: Box<str>) -> Self {
        Self {
            label,
            outcomes: Default::default(),
            push_to_reply: Latency::default(),
        }
    }

    /// The pool's channel name, or [`OTHER`].
    pub fn label(&self) -> &str {
        &self.label
    }

    /// A dispatch of this pool ended in outcome class `class`.
    pub(crate) fn ended(&self, class: usize) {
        if let Some(count) = self.outcomes.get(class) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A dispatch of this pool was answered `elapsed` after its first push.
    pub(crate) fn replied(&self, elapsed: Duration) {
        self.push_to_reply.observe(elapsed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> PoolSnapshot {
        PoolSnapshot {
            pool: self.label.to_string(),
            outcomes: std::array::from_fn(|at| {
                self.outcomes
                    .get(at)
                    .map_or(0, |count| count.load(Ordering::Relaxed))
            }),
            push_to_reply: self.push_to_reply.snapshot(),
        }
    }
}

/// The meters of the labelled pools, and `other`'s.
#[derive(Debug)]
pub struct PoolMeters {
    max: usize,
    other: Arc<PoolMeter>,
    /// namespace -> task queue -> meter; at most `max` meters in all.
    named: Mutex<Named>,
}

#[derive(Debug, Default)]
struct Named {
    by_pool: KeyedMap<String, KeyedMap<String, Arc<PoolMeter>>>,
    count: usize,
}

impl PoolMeters {
    /// Meters for the first `max` pools claimed; the rest share `other`'s.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            other: Arc::new(PoolMeter::new(OTHER.into())),
            named: Mutex::default(),
        })
    }

    /// Most pools labelled by name.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The meter of pool `(namespace, task_queue)`: its own if it has one or one is left to
    /// give, `other`'s otherwise. The task queue is normalized already.
    pub fn claim(&self, namespace: &str, task_queue: &str) -> Arc<PoolMeter> {
        let mut named = self.lock();
        if let Some(meter) = named
            .by_pool
            .get(namespace)
            .and_then(|queues| queues.get(task_queue))
        {
            return Arc::clone(meter);
        }
        if named.count >= self.max {
            return Arc::clone(&self.other);
        }
        named.count += 1;
        let label = dispatch_channel_name(namespace, task_queue, None);
        let meter = Arc::new(PoolMeter::new(label.into()));
        named
            .by_pool
            .entry(namespace.to_owned())
            .or_default()
            .insert(task_queue.to_owned(), Arc::clone(&meter));
        meter
    }

    /// The label pool `(namespace, task_queue)` is counted under, claiming nothing.
    pub fn label_of(&self, namespace: &str, task_queue: &str) -> String {
        let named = self.lock();
        named
            .by_pool
            .get(namespace)
            .and_then(|queues| queues.get(task_queue))
            .map_or_else(|| OTHER.to_owned(), |meter| meter.label.to_string())
    }

    /// Every labelled pool's counts, sorted by label, then `other`'s.
    pub fn snapshots(&self) -> Vec<PoolSnapshot> {
        let mut snapshots: Vec<PoolSnapshot> = {
            let named = self.lock();
            named
                .by_pool
                .values()
                .flat_map(KeyedMap::values)
                .map(|meter| meter.snapshot())
                .collect()
        };
        snapshots.sort_unstable_by(|a, b| a.pool.cmp(&b.pool));
        snapshots.push(self.other.snapshot());
        snapshots
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Named> {
        // Every update leaves the map consistent before it can panic, so poison is ignorable.
        self.named
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_pools_share_other_and_a_claimed_pool_keeps_its_meter() {
        let meters = PoolMeters::new(2);
        let a = meters.claim("a", "default");
        let b = meters.claim("b", "default");
        let c = meters.claim("c", "default");
        assert_eq!(a.label(), "aion.dispatch.a.default");
        assert_eq!(b.label(), "aion.dispatch.b.default");
        assert_eq!(c.label(), OTHER);
        assert!(Arc::ptr_eq(&a, &meters.claim("a", "default")));
        assert_eq!(meters.label_of("c", "default"), OTHER);
        a.ended(0);
        c.ended(1);
        meters.claim("d", "default").ended(1);
        let labels: Vec<(String, [u64; OUTCOME_CLASSES])> = meters
            .snapshots()
            .into_iter()
            .map(|s| (s.pool, s.outcomes))
            .collect();
        assert_eq!(labels.len(), 3);
        assert_eq!(labels[0].1[0], 1);
        assert_eq!((labels[2].0.as_str(), labels[2].1[1]), (OTHER, 2));
    }
}
