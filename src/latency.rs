//! A latency histogram: 20 doubling buckets from 50 us to about 26 s, plus one past
//! them, each an atomic counter, so recording takes no lock and the buckets can be read back
//! (the admin listener's windowed figures subtract two readings).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bound of the first bucket, in nanoseconds; each next bound doubles it.
const FIRST_BOUND_NS: u64 = 50_000;

/// Bounded buckets; one more counts what is past the last bound.
const BOUNDED: usize = 20;

/// Every bucket, the unbounded last one included.
pub const BUCKETS: usize = BOUNDED + 1;

/// Durations counted by bucket: a dispatch's from admission to outcome, or a pool's from push
/// to reply.
#[derive(Debug, Default)]
pub struct Latency {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// The histogram at one moment: per-bucket counts (not cumulative) and the sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    pub buckets: [u64; BUCKETS],
    pub sum_ns: u64,
}

impl Latency {
    /// Records one duration, `elapsed`.
    pub(crate) fn observe(&self, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        if let Some(bucket) = self.buckets.get(bucket_of(ns)) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            buckets: std::array::from_fn(|at| {
                self.buckets
                    .get(at)
                    .map_or(0, |bucket| bucket.load(Ordering::Relaxed))
            }),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// The bucket a duration of `ns` nanoseconds falls in: the first whose bound is at least it.
fn bucket_of(ns: u64) -> usize {
    let halvings = ns.saturating_sub(1) / FIRST_BOUND_NS;
    let at = (u64::BITS - halvings.leading_zeros()) as usize;
    at.min(BOUNDED)
}

/// The upper bound of bucket `at` in seconds; `None` for the unbounded last one.
pub fn upper_bound_secs(at: usize) -> Option<f64> {
    let shift = u32::try_from(at)
        .ok()
        .filter(|&at| (at as usize) < BOUNDED)?;
    Some((FIRST_BOUND_NS << shift) as f64 / 1e9)
}

impl LatencySnapshot {
    /// Dispatches counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What was recorded after `earlier`, a reading of the same histogram.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            buckets: std::array::from_fn(|at| {
                let now = self.buckets.get(at).copied().unwrap_or(0);
                let then = earlier.buckets.get(at).copied().unwrap_or(0);
                now.saturating_sub(then)
            }),
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
        }
    }

    /// The `q` quantile (0 to 1) in seconds, interpolated within its bucket as Prometheus's
    /// `histogram_quantile` does; the last bound for what lies past it, `None` when empty.
    pub fn quantile_secs(&self, q: f64) -> Option<f64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * count as f64;
        let mut below = 0u64;
        for (at, &n) in self.buckets.iter().enumerate() {
            let upto = below + n;
            if n > 0 && upto as f64 >= rank {
                let lower = at.checked_sub(1).and_then(upper_bound_secs).unwrap_or(0.0);
                let Some(upper) = upper_bound_secs(at) else {
                    return Some(lower);
                };
                let within = (rank - below as f64) / n as f64;
                return Some(lower + (upper - lower) * within);
            }
            below = upto;
        }
        None
    }
}

impl TypedMetric for LatencySnapshot {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencySnapshot {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(at, &n)| (upper_bound_secs(at).unwrap_or(f64::MAX), n))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(
            self.sum_ns as f64 / 1e9,
            self.count(),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_falls_in_the_first_bucket_whose_bound_holds_it() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(50_000), 0);
        assert_eq!(bucket_of(50_001), 1);
        assert_eq!(bucket_of(100_000), 1);
        assert_eq!(bucket_of(100_001), 2);
        assert_eq!(bucket_of(200_000), 2);
        assert_eq!(bucket_of(FIRST_BOUND_NS << 19), 19);
        assert_eq!(bucket_of((FIRST_BOUND_NS << 19) + 1), BOUNDED);
        assert_eq!(bucket_of(u64::MAX), BOUNDED);
    }

    #[test]
    fn quantiles_interpolate_within_a_bucket_and_subtract_an_earlier_reading() {
        let latency = Latency::default();
        for _ in 0..10 {
            latency.observe(Duration::from_secs(3));
        }
        let earlier = latency.snapshot();
        for _ in 0..100 {
            latency.observe(Duration::from_micros(75));
        }
        let window = latency.snapshot().since(&earlier);
        assert_eq!(window.count(), 100);
        // Every one of the 100 is in (50 us, 100 us]: the median interpolates to 75 us.
        let p50 = window.quantile_secs(0.5).unwrap();
        assert!((p50 - 0.000_075).abs() < 1e-9, "{p50}");
        assert!(window.quantile_secs(0.99).unwrap() <= 0.000_1);
        assert_eq!(LatencySnapshot::default().quantile_secs(0.5), None);
    }
}
