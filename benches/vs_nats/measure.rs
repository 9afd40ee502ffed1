//! Closed-loop load: `concurrency` lanes, each sending its next request when the last one is
//! answered, bounded by a duration and a count cap together; per-request latency, p50/p99/rps.
//!
//! A system under test is a [`Target`]: one request in, `Ok` when the echo came back whole,
//! `Err(class)` otherwise. Failures are counted by class, never hidden.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// One request/reply path of a system under test.
pub trait Target: Send + Sync + 'static {
    /// Sends `payload` from `lane` and waits for its echo. `Err` names the outcome class.
    fn call(&self, lane: usize, payload: Bytes) -> impl Future<Output = Result<(), String>> + Send;
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Load {
    /// Requests in flight at once, one per lane.
    pub concurrency: usize,
    /// Stop starting requests after this long...
    pub duration: Duration,
    /// ...or after this many, whichever comes first.
    pub max_count: u64,
    pub payload: Bytes,
}

impl Load {
    /// A load of `payload_bytes` filler bytes.
    pub fn new(
        concurrency: usize,
        duration: Duration,
        max_count: u64,
        payload_bytes: usize,
    ) -> Self {
        Self {
            concurrency: concurrency.max(1),
            duration,
            max_count,
            payload: Bytes::from(vec![b'x'; payload_bytes]),
        }
    }
}

/// What one run measured; peer processes hand it back as JSON.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Requests whose echo came back whole.
    pub completed: u64,
    /// Requests that ended otherwise, by class.
    pub failures: BTreeMap<String, u64>,
    pub elapsed: Duration,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Completed requests per second of wall time.
    pub rps: f64,
}

impl Sample {
    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    /// A run that could not happen at all: nothing completed, one failure of class `why`.
    pub fn failed_with(why: String) -> Self {
        Self {
            failures: BTreeMap::from([(why, 1)]),
            ..Self::default()
        }
    }
}

/// Runs `load` against `target` and reports. Every lane stops at the deadline or when the shared
/// count is used up; a lane whose request fails records the class and stops, so a broken system
/// ends the run early instead of spinning.
pub async fn run<T: Target>(target: &Arc<T>, load: &Load) -> Sample {
    let remaining = Arc::new(AtomicU64::new(load.max_count));
    let started = Instant::now();
    let deadline = started + load.duration;
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..load.concurrency {
        let target = Arc::clone(target);
        let remaining = Arc::clone(&remaining);
        let payload = load.payload.clone();
        lanes.spawn(async move {
            let mut latencies: Vec<u32> = Vec::with_capacity(4096);
            let mut failure = None;
            while Instant::now() < deadline
                && remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
            {
                let sent = Instant::now();
                match target.call(lane, payload.clone()).await {
                    Ok(()) => {
                        let nanos = sent.elapsed().as_nanos();
                        latencies.push(u32::try_from(nanos).unwrap_or(u32::MAX));
                    }
                    Err(class) => {
                        failure = Some(class);
                        break;
                    }
                }
            }
            (latencies, failure)
        });
    }
    let mut latencies = Vec::new();
    let mut failures = BTreeMap::new();
    while let Some(lane) = lanes.join_next().await {
        match lane {
            Ok((mut lane, failure)) => {
                latencies.append(&mut lane);
                if let Some(class) = failure {
                    *failures.entry(class).or_insert(0) += 1;
                }
            }
            Err(err) => *failures.entry(format!("lane panicked: {err}")).or_insert(0) += 1,
        }
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let completed = latencies.len() as u64;
    Sample {
        completed,
        failures,
        elapsed,
        p50_us: percentile_us(&latencies, 0.50),
        p99_us: percentile_us(&latencies, 0.99),
        rps: completed as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE),
    }
}

/// The nearest-rank value at quantile `q` of sorted nanosecond latencies, in microseconds; 0 when
/// empty.
pub fn percentile_us(sorted_nanos: &[u32], q: f64) -> f64 {
    if sorted_nanos.is_empty() {
        return 0.0;
    }
    let rank = ((sorted_nanos.len() as f64) * q).ceil() as usize;
    let index = rank.saturating_sub(1).min(sorted_nanos.len() - 1);
    f64::from(sorted_nanos[index]) / 1_000.0
}

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The per-metric median of several rounds of one system; failures are summed.
pub fn median_of(rounds: &[Sample]) -> Sample {
    let pick = |f: fn(&Sample) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    let mut failures = BTreeMap::new();
    for round in rounds {
        for (class, count) in &round.failures {
            *failures.entry(class.clone()).or_insert(0) += count;
        }
    }
    Sample {
        completed: rounds.iter().map(|r| r.completed).sum(),
        failures,
        elapsed: rounds.iter().map(|r| r.elapsed).sum(),
        p50_us: pick(|s| s.p50_us),
        p99_us: pick(|s| s.p99_us),
        rps: pick(|s| s.rps),
    }
}
