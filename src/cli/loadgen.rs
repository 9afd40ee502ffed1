//! A closed-loop load generator: `concurrency` dispatch loops over one producer connection,
//! bounded by a count or a duration, recording latency and outcome classes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lintel_wire::{DispatchRequest, DispatchResult};
use serde::Serialize;

use crate::dispatch::{outcome, DispatchOptions};
use crate::sdk::Client;

/// What to run.
#[derive(Debug, Clone)]
pub(super) struct Load {
    pub(super) namespace: String,
    pub(super) activity: String,
    pub(super) payload: usize,
    pub(super) concurrency: usize,
    /// Stop after this many dispatches...
    pub(super) count: Option<u64>,
    /// ...or after this long, whichever comes first.
    pub(super) duration: Option<Duration>,
    pub(super) options: DispatchOptions,
    /// Print a progress line to stderr every second.
    pub(super) progress: bool,
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Report {
    pub(super) dispatches: u64,
    pub(super) elapsed_s: f64,
    pub(super) rps: f64,
    pub(super) p50_us: u64,
    pub(super) p99_us: u64,
    pub(super) p999_us: u64,
    /// Dispatches per outcome class; `completed` counts successful completions.
    pub(super) outcomes: BTreeMap<String, u64>,
}

impl Report {
    /// Dispatches that did not complete successfully.
    pub(super) fn failures(&self) -> u64 {
        self.dispatches - self.outcomes.get("completed").copied().unwrap_or(0)
    }
}

/// Runs `load` through `client` and reports.
pub(super) async fn run(client: &Client, load: &Load) -> Report {
    let remaining = Arc::new(AtomicU64::new(load.count.unwrap_or(u64::MAX)));
    let done = Arc::new(AtomicU64::new(0));
    let deadline = load.duration.map(|d| Instant::now() + d);
    let input = Bytes::from(vec![b'x'; load.payload]);
    let outcomes = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let started = Instant::now();
    let mut loops = Vec::with_capacity(load.concurrency);
    for lane in 0..load.concurrency.max(1) {
        let client = client.clone();
        let remaining = Arc::clone(&remaining);
        let done = Arc::clone(&done);
        let outcomes = Arc::clone(&outcomes);
        let input = input.clone();
        let load = load.clone();
        loops.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut ordinal = 0u64;
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                if remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_err()
                {
                    break;
                }
                ordinal += 1;
                let request = DispatchRequest {
                    namespace: load.namespace.clone(),
                    task_queue: String::new(),
                    activity_type: load.activity.clone(),
                    node: None,
                    workflow_id: format!("load-{lane}"),
                    ordinal,
                    run_id: None,
                    attempt: 1,
                    input: input.clone(),
                    deadline_unix_ms: None,
                };
                let sent = Instant::now();
                let class = match client.dispatch(request, &load.options).await {
                    Ok(result) => class_of(&result),
                    Err(_) => "connection-lost",
                };
                latencies.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
                done.fetch_add(1, Ordering::Relaxed);
                *outcomes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .entry(class.to_owned())
                    .or_default() += 1;
                if class == "connection-lost" {
                    break;
                }
            }
            latencies
        }));
    }
    let progress = load.progress.then(|| {
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let mut last = 0;
            loop {
                tick.tick().await;
                let now = done.load(Ordering::Relaxed);
                eprintln!(
                    "  {:>6.1}s  {now:>10} dispatches  {:>9} /s",
                    started.elapsed().as_secs_f64(),
                    now - last
                );
                last = now;
            }
        })
    });
    let mut latencies = Vec::new();
    for lane in loops {
        if let Ok(mut lane) = lane.await {
            latencies.append(&mut lane);
        }
    }
    if let Some(progress) = progress {
        progress.abort();
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let dispatches = latencies.len() as u64;
    let outcomes = std::mem::take(
        &mut *outcomes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    Report {
        dispatches,
        elapsed_s: elapsed,
        rps: if elapsed > 0.0 {
            dispatches as f64 / elapsed
        } else {
            0.0
        },
        p50_us: percentile(&latencies, 0.50),
        p99_us: percentile(&latencies, 0.99),
        p999_us: percentile(&latencies, 0.999),
        outcomes,
    }
}

fn class_of(result: &DispatchResult) -> &'static str {
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            lintel_wire::ActivityOutcome::Success(_) => "completed",
            lintel_wire::ActivityOutcome::Failure { .. } => "activity-failed",
        },
        other => outcome::class(other),
    }
}

/// The value at quantile `q` of sorted `values`, 0 when empty.
fn percentile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = ((values.len() as f64) * q).ceil() as usize;
    values
        .get(rank.saturating_sub(1).min(values.len() - 1))
        .copied()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 0.50), 50);
        assert_eq!(percentile(&values, 0.99), 99);
        assert_eq!(percentile(&values, 0.999), 100);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
