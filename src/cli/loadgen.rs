//! A closed-loop load generator: `concurrency` dispatch loops over one producer connection,
//! bounded by a count or a duration, recording latency and outcome classes.
//!
//! Each loop keeps its own latency histogram, outcome counts and serving-node counts, merged
//! at the end, so memory stays flat however long the run and the loops share nothing but the
//! remaining count and the progress tally.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::{CreationError, Histogram};
use lintel_client::{
    ActivityOutcome, Client, ClientError, Dispatch, DispatchOptions, DispatchResult,
};
use serde::Serialize;

use super::progress::{self, Tally};
use lintel::dispatch::outcome;

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
    /// Fairness keys to spread the load over, each with its options: lane `i` dispatches with
    /// the options of key `i` mod their number, so each key keeps its share of the lanes in
    /// flight. Empty: every lane with `options`.
    pub(super) keys: Vec<(String, DispatchOptions)>,
    /// Draw a live progress line on stderr when it is a terminal and the run lasts a while.
    pub(super) progress: bool,
}

/// What happened; `--json` writes it as is.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Report {
    pub(super) concurrency: usize,
    pub(super) payload_bytes: usize,
    /// Dispatches that ended, whatever their outcome.
    pub(super) dispatches: u64,
    pub(super) elapsed_s: f64,
    /// `dispatches` per second of `elapsed_s`.
    pub(super) rps: f64,
    /// Latency percentiles over every dispatch that ended, in microseconds to three
    /// significant digits (recorded in nanoseconds).
    pub(super) p50_us: f64,
    pub(super) p90_us: f64,
    pub(super) p99_us: f64,
    pub(super) p999_us: f64,
    /// Dispatches per outcome class; `completed` counts successful completions.
    pub(super) outcomes: BTreeMap<String, u64>,
    /// Dispatches per node that served them, as the node named it; a dispatch whose node
    /// named none (a version-1 node, a lost connection) is not counted.
    pub(super) served_by: BTreeMap<String, u64>,
    /// Per fairness key the load was spread over (`Load::keys`): what its lanes saw.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) by_key: BTreeMap<String, KeyReport>,
    /// Refused dispatches by reason, as the node's metrics name it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) refusals: BTreeMap<String, Refusals>,
    /// Why dispatches counted `oversized` were not sent: they do not fit in a frame, or break
    /// another limit the node stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) oversized: Option<String>,
}

/// The refusals of one reason: how many, and what the node said of the first.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Refusals {
    pub(super) count: u64,
    pub(super) detail: String,
}

/// What one lane saw beside latencies.
#[derive(Debug, Default)]
struct Seen {
    outcomes: BTreeMap<&'static str, u64>,
    served_by: BTreeMap<String, u64>,
    refusals: BTreeMap<String, Refusals>,
    oversized: Option<String>,
}

impl Seen {
    fn refused(&mut self, refused: &lintel_wire::RefusedDispatch) {
        self.refusals
            .entry(format!("{:?}", refused.reason))
            .or_insert_with(|| Refusals {
                count: 0,
                detail: refused.detail.clone(),
            })
            .count += 1;
    }

    /// Adds what another lane saw.
    fn merge(into: &mut Report, seen: Seen) {
        for (class, count) in seen.outcomes {
            *into.outcomes.entry(class.to_owned()).or_default() += count;
        }
        for (node, count) in seen.served_by {
            *into.served_by.entry(node).or_default() += count;
        }
        for (reason, refusals) in seen.refusals {
            into.refusals
                .entry(reason)
                .or_insert_with(|| Refusals {
                    count: 0,
                    detail: refusals.detail,
                })
                .count += refusals.count;
        }
        if into.oversized.is_none() {
            into.oversized = seen.oversized;
        }
    }
}

/// What the lanes of one fairness key saw.
#[derive(Debug, Clone, Serialize)]
pub(super) struct KeyReport {
    /// Dispatches that ended, whatever their outcome.
    pub(super) dispatches: u64,
    /// Successful completions.
    pub(super) completed: u64,
    pub(super) p50_us: f64,
    pub(super) p99_us: f64,
}

impl Report {
    /// Dispatches that did not complete successfully.
    pub(super) fn failures(&self) -> u64 {
        self.dispatches - self.outcomes.get("completed").copied().unwrap_or(0)
    }
}

/// A finished run: its report and every latency it recorded, in nanoseconds.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) report: Report,
    pub(super) latencies: Histogram<u64>,
}

/// Runs `load` through `client` and reports.
///
/// # Errors
/// Only if the latency histogram cannot be made.
pub(super) async fn run(client: &Client, load: &Load) -> Result<Run, CreationError> {
    // Latencies in nanoseconds from 1 ns to an hour, to three significant digits.
    let histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let remaining = Arc::new(AtomicU64::new(load.count.unwrap_or(u64::MAX)));
    let tally = Arc::new(Tally::default());
    let deadline = load.duration.map(|d| Instant::now() + d);
    let input = Bytes::from(vec![b'x'; load.payload]);
    let started = Instant::now();
    let mut loops = Vec::with_capacity(load.concurrency);
    for lane in 0..load.concurrency.max(1) {
        let client = client.clone();
        let remaining = Arc::clone(&remaining);
        let tally = Arc::clone(&tally);
        let input = input.clone();
        let key = (!load.keys.is_empty()).then(|| lane % load.keys.len());
        let options = match key.and_then(|key| load.keys.get(key)) {
            Some((_, options)) => options.clone(),
            None => load.options.clone(),
        };
        let load = load.clone();
        let mut latencies = histogram.clone();
        loops.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            // One dispatch per lane, its ordinal advanced in place and lent to each submit: the
            // names and the input are encoded from where they lie, never copied per dispatch.
            let mut dispatch = Dispatch::new(load.namespace.as_str(), load.activity.as_str())
                .input(input)
                .workflow(format!("load-{lane}"), 0);
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
                dispatch.set_ordinal(ordinal);
                let sent = Instant::now();
                let class = match client.submit(&dispatch, &options).await {
                    Ok(dispatched) => {
                        if let Some(node) = dispatched.served_by {
                            *seen.served_by.entry(node).or_default() += 1;
                        }
                        if let DispatchResult::Refused(refused) = &dispatched.result {
                            seen.refused(refused);
                        }
                        class_of(&dispatched.result)
                    }
                    Err(err @ (ClientError::Oversize { .. } | ClientError::Invalid(_))) => {
                        seen.oversized = Some(format!("{err}; nothing was sent"));
                        OVERSIZED
                    }
                    Err(_) => CONNECTION_LOST,
                };
                let nanos = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
                latencies.saturating_record(nanos.max(1));
                tally.record(class == "completed");
                *seen.outcomes.entry(class).or_default() += 1;
                // Neither gets better for trying again with the same payload.
                if class == CONNECTION_LOST || class == OVERSIZED {
                    break;
                }
            }
            (key, latencies, seen)
        }));
    }
    let live = if load.progress {
        progress::start(Arc::clone(&tally), started)
    } else {
        None
    };
    let mut latencies = histogram;
    let mut seen = Report {
        concurrency: load.concurrency.max(1),
        payload_bytes: load.payload,
        dispatches: 0,
        elapsed_s: 0.0,
        rps: 0.0,
        p50_us: 0.0,
        p90_us: 0.0,
        p99_us: 0.0,
        p999_us: 0.0,
        outcomes: BTreeMap::new(),
        served_by: BTreeMap::new(),
        by_key: BTreeMap::new(),
        refusals: BTreeMap::new(),
        oversized: None,
    };
    let mut keys = vec![(latencies.clone(), 0u64); load.keys.len()];
    for lane in loops {
        if let Ok((key, lane_latencies, lane_seen)) = lane.await {
            // Every lane's histogram has the same bounds, so adding cannot fail.
            let _ = latencies.add(&lane_latencies);
            if let Some((key_latencies, completed)) = key.and_then(|key| keys.get_mut(key)) {
                let _ = key_latencies.add(&lane_latencies);
                *completed += lane_seen.outcomes.get("completed").copied().unwrap_or(0);
            }
            Seen::merge(&mut seen, lane_seen);
        }
    }
    if let Some(live) = live {
        live.finish().await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let dispatches = latencies.len();
    let percentile = |q: f64| micros(&latencies, q);
    let by_key = load
        .keys
        .iter()
        .zip(&keys)
        .map(|((key, _), (latencies, completed))| {
            let report = KeyReport {
                dispatches: latencies.len(),
                completed: *completed,
                p50_us: micros(latencies, 0.50),
                p99_us: micros(latencies, 0.99),
            };
            (key.clone(), report)
        })
        .collect();
    let report = Report {
        dispatches,
        elapsed_s: elapsed,
        rps: if elapsed > 0.0 {
            dispatches as f64 / elapsed
        } else {
            0.0
        },
        p50_us: percentile(0.50),
        p90_us: percentile(0.90),
        p99_us: percentile(0.99),
        p999_us: percentile(0.999),
        by_key,
        ..seen
    };
    Ok(Run { report, latencies })
}

/// The class of a dispatch whose connection was lost before its outcome.
const CONNECTION_LOST: &str = "connection-lost";

/// The class of a dispatch not sent because it does not fit in a frame, or breaks another
/// limit the node stated.
const OVERSIZED: &str = "oversized";

/// The `q` quantile of `latencies` (nanoseconds) in microseconds.
fn micros(latencies: &Histogram<u64>, q: f64) -> f64 {
    latencies.value_at_quantile(q) as f64 / 1_000.0
}

fn class_of(result: &DispatchResult) -> &'static str {
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            ActivityOutcome::Success(_) => "completed",
            ActivityOutcome::Failure { .. } => "activity-failed",
        },
        other => outcome::class(other),
    }
}
