//! Each pool's outcome rates and push-to-reply latency over about the last [`SPAN`] seconds,
//! for the console's pool cards, read from the per-pool meters (`pool_metrics`) by the same
//! once-a-second sampler as the node-wide [`Window`](super::Window).
//!
//! Memory is bounded by a few readings, not by history: every [`STEP`] readings one is kept as
//! a checkpoint, at most [`CHECKPOINTS`] of them, plus the latest reading, so at most
//! `CHECKPOINTS + 1` readings are held. A reading holds one snapshot per labelled pool and one
//! for `other`, so at most `metrics_max_pools + 1` of them (the meters are bounded so), each
//! 31 counters (248 bytes) and its channel name: about 4 × 257 × 300 bytes, 300 kB, at the
//! default bound. The figures run from the oldest checkpoint to the latest reading, a span of
//! [`SPAN`] to [`SPAN`] plus [`STEP`] intervals once the sampler has run that long, and
//! whatever it has run until then. The readings sit behind a std mutex, locked to store one or
//! to clone two `Arc`s, never across an `.await`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use tokio::time::Instant;

use crate::dispatch::outcome::CLASSES;
use crate::pool_metrics::PoolSnapshot;

/// Intervals the figures span at least, once the sampler has run that long.
const SPAN: usize = 10;

/// Readings from one checkpoint to the next.
const STEP: usize = 5;

/// Checkpoints kept: enough that the oldest is at least [`SPAN`] intervals old.
const CHECKPOINTS: usize = SPAN / STEP + 1;

/// Every pool's counts at one moment.
#[derive(Debug)]
pub(super) struct Reading {
    pub(super) at: Instant,
    pub(super) pools: Vec<PoolSnapshot>,
}

/// The checkpoints and the latest reading.
#[derive(Debug, Default)]
pub(crate) struct PoolWindow {
    readings: Mutex<Readings>,
}

#[derive(Debug, Default)]
struct Readings {
    /// Oldest first; at most [`CHECKPOINTS`].
    checkpoints: VecDeque<Arc<Reading>>,
    /// Readings since the newest checkpoint.
    since_checkpoint: usize,
    latest: Option<Arc<Reading>>,
}

/// What `/window` answers as `pools`.
#[derive(Debug, Serialize)]
pub(crate) struct PoolsView {
    /// How long the figures span, in milliseconds; 0 until two readings are taken.
    span_ms: u64,
    /// Each labelled pool's figures by its channel name, and `other`'s: the pools past
    /// `metrics_max_pools`, summed.
    channels: BTreeMap<String, PoolFigures>,
}

/// One pool's figures over the span.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct PoolFigures {
    /// Dispatches ended, by outcome class; a class with none is left out.
    counts: BTreeMap<&'static str, u64>,
    /// The same per second.
    rates: BTreeMap<&'static str, f64>,
    /// Push-to-reply percentiles of the dispatches answered; none when none was.
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
}

impl PoolWindow {
    /// Keeps `reading` as the latest, and as a checkpoint every [`STEP`] readings.
    pub(super) fn record(&self, reading: Reading) {
        let reading = Arc::new(reading);
        let mut readings = self.readings.lock().unwrap_or_else(PoisonError::into_inner);
        if readings.checkpoints.is_empty() || readings.since_checkpoint + 1 >= STEP {
            if readings.checkpoints.len() == CHECKPOINTS {
                readings.checkpoints.pop_front();
            }
            readings.checkpoints.push_back(Arc::clone(&reading));
            readings.since_checkpoint = 0;
        } else {
            readings.since_checkpoint += 1;
        }
        readings.latest = Some(reading);
    }

    /// Each pool's figures from the oldest checkpoint to the latest reading.
    pub(crate) fn view(&self) -> PoolsView {
        let (first, latest) = {
            let readings = self.readings.lock().unwrap_or_else(PoisonError::into_inner);
            (
                readings.checkpoints.front().cloned(),
                readings.latest.clone(),
            )
        };
        let empty = PoolsView {
            span_ms: 0,
            channels: BTreeMap::new(),
        };
        let (Some(first), Some(latest)) = (first, latest) else {
            return empty;
        };
        let span = latest.at.saturating_duration_since(first.at);
        if span.is_zero() {
            return empty;
        }
        let earlier: HashMap<&str, &PoolSnapshot> = first
            .pools
            .iter()
            .map(|pool| (pool.pool.as_str(), pool))
            .collect();
        let channels = latest
            .pools
            .iter()
            .map(|now| {
                let then = earlier.get(now.pool.as_str()).copied();
                (now.pool.clone(), figures(then, now, span.as_secs_f64()))
            })
            .collect();
        PoolsView {
            span_ms: u64::try_from(span.as_millis()).unwrap_or(u64::MAX),
            channels,
        }
    }
}

/// What `now` counted since `then`, a reading of the same pool (none: since it was claimed),
/// over `seconds`.
fn figures(then: Option<&PoolSnapshot>, now: &PoolSnapshot, seconds: f64) -> PoolFigures {
    let counts: BTreeMap<&'static str, u64> = CLASSES
        .iter()
        .zip(&now.outcomes)
        .enumerate()
        .filter_map(|(at, (&class, &count))| {
            let before = then.and_then(|then| then.outcomes.get(at)).copied();
            let ended = count.saturating_sub(before.unwrap_or(0));
            (ended > 0).then_some((class, ended))
        })
        .collect();
    let rates = counts
        .iter()
        .map(|(&class, &count)| (class, count as f64 / seconds))
        .collect();
    let latency = match then {
        Some(then) => now.push_to_reply.since(&then.push_to_reply),
        None => now.push_to_reply,
    };
    let ms = |q| latency.quantile_secs(q).map(|secs| secs * 1e3);
    PoolFigures {
        counts,
        rates,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pool_metrics::PoolMeters;

    /// A reading of `meters` taken `secs` seconds after `start`.
    fn reading(meters: &PoolMeters, start: Instant, secs: u64) -> Reading {
        Reading {
            at: start + Duration::from_secs(secs),
            pools: meters.snapshots(),
        }
    }

    #[test]
    fn a_pools_figures_count_what_ended_in_it_over_the_span_and_nothing_of_others() {
        let meters = PoolMeters::new(2);
        let billing = meters.claim("billing", "default");
        let reports = meters.claim("reports", "default");
        let start = Instant::now();
        let window = PoolWindow::default();
        // Before the first reading: outside every span.
        billing.ended(0);
        window.record(reading(&meters, start, 0));
        // Seven completed in billing, answered in about 1 ms; two timed out; reports idle.
        for _ in 0..7 {
            billing.ended(0);
            billing.replied(Duration::from_millis(1));
        }
        billing.ended(3);
        billing.ended(3);
        // A pool first named after the first reading, and one past the bound.
        meters.claim("late", "default").ended(0);
        window.record(reading(&meters, start, 2));

        let view = window.view();
        assert_eq!(view.span_ms, 2000);
        let billing = &view.channels["aion.dispatch.billing.default"];
        assert_eq!(
            billing.counts,
            BTreeMap::from([("completed", 7), ("timeout", 2)])
        );
        assert_eq!(
            billing.rates,
            BTreeMap::from([("completed", 3.5), ("timeout", 1.0)])
        );
        let p50 = billing.p50_ms.expect("a p50");
        assert!((0.5..=1.7).contains(&p50), "{p50}");
        assert!(billing.p99_ms >= billing.p50_ms);
        let idle = &view.channels["aion.dispatch.reports.default"];
        assert!(idle.counts.is_empty() && idle.rates.is_empty());
        assert_eq!((idle.p50_ms, idle.p99_ms), (None, None));
        assert_eq!(
            view.channels["other"].counts,
            BTreeMap::from([("completed", 1)])
        );
        drop(reports);
    }

    #[test]
    fn at_most_a_few_readings_are_kept_and_the_span_stays_near_its_bound() {
        let meters = PoolMeters::new(1);
        let pool = meters.claim("billing", "default");
        let start = Instant::now();
        let window = PoolWindow::default();
        for secs in 0..100 {
            // Three completions a second.
            for _ in 0..3 {
                pool.ended(0);
            }
            window.record(reading(&meters, start, secs));
            let readings = window
                .readings
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            assert!(readings.checkpoints.len() <= CHECKPOINTS);
            drop(readings);
            let view = window.view();
            let span = view.span_ms / 1000;
            let ran = secs.min(SPAN as u64);
            assert!(
                (ran..ran + STEP as u64).contains(&span) || secs == 0,
                "{secs}: {span}"
            );
            if secs > 0 {
                let figures = &view.channels["aion.dispatch.billing.default"];
                assert_eq!(figures.counts.get("completed"), Some(&(3 * span)));
                assert_eq!(figures.rates.get("completed"), Some(&3.0));
            }
        }
    }
}
