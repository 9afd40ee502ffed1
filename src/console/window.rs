//! Figures over the last minutes: a ring of the dispatch counters read once a second, at most
//! [`SAMPLES`] of them, and the per-interval rates and latency percentiles between neighbours.
//!
//! The counters and the latency histogram count from the node's start; subtracting two
//! readings gives what happened between them. The ring holds plain numbers behind a std mutex,
//! locked for a push or a copy, never across an `.await`. The same tick reads each pool's
//! meters into a [`PoolWindow`], which keeps a few readings only.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::pools::{PoolWindow, PoolsView, Reading};
use crate::dispatch::latency::LatencySnapshot;
use crate::shared::Shared;

/// How often the counters are read.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// Readings kept: five minutes at one a second.
pub(crate) const SAMPLES: usize = 300;

/// Outcome classes counted, as `/metrics` names them.
const OUTCOMES: usize = 9;

/// The counters at one moment.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    unix_ms: u64,
    outcomes: [(&'static str, u64); OUTCOMES],
    latency: LatencySnapshot,
    in_flight: usize,
    waiting: usize,
}

/// The last [`SAMPLES`] readings of the node's counters.
#[derive(Debug, Default)]
pub(crate) struct Window {
    ring: Mutex<VecDeque<Sample>>,
    pools: PoolWindow,
}

/// What happened in one interval, as `/window` answers it.
#[derive(Debug, Serialize)]
pub(crate) struct Point {
    /// The end of the interval, in milliseconds since the Unix epoch.
    unix_ms: u64,
    /// Dispatches ended per second, by outcome class.
    rates: BTreeMap<&'static str, f64>,
    /// Latency percentiles of the dispatches that ended in the interval; none when none did.
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    /// Dispatches in flight and waiting for a worker at the end of the interval.
    in_flight: usize,
    waiting: usize,
}

/// The answer to `/window`.
#[derive(Debug, Serialize)]
pub(crate) struct WindowView {
    interval_ms: u64,
    /// Intervals the ring holds when full.
    span: usize,
    /// Each interval, oldest first.
    points: Vec<Point>,
    /// The last [`SUMMARY`] taken as one interval, or what the ring holds of it.
    last_minute: Option<Point>,
    /// Each pool's outcome rates and push-to-reply latency over about the last ten seconds.
    pools: PoolsView,
}

/// How far back `last_minute` reaches.
const SUMMARY: Duration = Duration::from_secs(60);

impl Window {
    /// Reads the node's counters once every [`INTERVAL`] until `closing` fires.
    pub(crate) async fn sample(self: Arc<Self>, shared: Arc<Shared>, closing: CancellationToken) {
        let mut ticks = tokio::time::interval(INTERVAL);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                () = closing.cancelled() => return,
                _ = ticks.tick() => {
                    let at = Instant::now();
                    self.record(read(&shared, at));
                    let pools = shared.dispatcher.pool_snapshots();
                    self.pools.record(Reading { at, pools });
                }
            }
        }
    }

    fn record(&self, sample: Sample) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() == SAMPLES {
            ring.pop_front();
        }
        ring.push_back(sample);
    }

    /// Each interval between neighbouring readings, oldest first.
    pub(crate) fn view(&self) -> WindowView {
        let samples: Vec<Sample> = self
            .ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        let points = samples
            .windows(2)
            .filter_map(|pair| match pair {
                [earlier, later] => Some(point(earlier, later)),
                _ => None,
            })
            .collect();
        let last_minute = samples.last().and_then(|latest| {
            let first = samples
                .iter()
                .find(|sample| latest.at.saturating_duration_since(sample.at) <= SUMMARY)?;
            (first.at < latest.at).then(|| point(first, latest))
        });
        WindowView {
            interval_ms: u64::try_from(INTERVAL.as_millis()).unwrap_or(u64::MAX),
            span: SAMPLES - 1,
            points,
            last_minute,
            pools: self.pools.view(),
        }
    }
}

fn read(shared: &Shared, at: Instant) -> Sample {
    let dispatcher = &shared.dispatcher;
    let unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
    Sample {
        at,
        unix_ms,
        outcomes: dispatcher.counters().by_outcome(),
        latency: dispatcher.counters().latency().snapshot(),
        in_flight: dispatcher.active(),
        waiting: dispatcher.registry().waiting(),
    }
}

fn point(earlier: &Sample, later: &Sample) -> Point {
    let seconds = later
        .at
        .saturating_duration_since(earlier.at)
        .as_secs_f64()
        .max(f64::EPSILON);
    let rates = later
        .outcomes
        .iter()
        .zip(&earlier.outcomes)
        .map(|(&(name, now), &(_, then))| (name, now.saturating_sub(then) as f64 / seconds))
        .collect();
    let latency = later.latency.since(&earlier.latency);
    let ms = |q| latency.quantile_secs(q).map(|secs| secs * 1e3);
    Point {
        unix_ms: later.unix_ms,
        rates,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        in_flight: later.in_flight,
        waiting: later.waiting,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Instant, completed: u64, latency: LatencySnapshot) -> Sample {
        let mut outcomes = crate::dispatch::DispatchCounters::default().by_outcome();
        outcomes[0] = ("completed", completed);
        Sample {
            at,
            unix_ms: 0,
            outcomes,
            latency,
            in_flight: 1,
            waiting: 2,
        }
    }

    #[test]
    fn the_ring_keeps_the_last_readings_and_rates_are_per_second() {
        let window = Window::default();
        let start = Instant::now();
        for n in 0..(SAMPLES as u64 + 10) {
            let at = start + Duration::from_secs(n);
            window.record(sample(at, n * 3, LatencySnapshot::default()));
        }
        let view = window.view();
        assert_eq!(view.points.len(), SAMPLES - 1);
        let point = &view.points[0];
        assert_eq!(point.rates.get("completed"), Some(&3.0));
        assert_eq!((point.p50_ms, point.in_flight, point.waiting), (None, 1, 2));
        let minute = view.last_minute.expect("a summary");
        assert_eq!(minute.rates.get("completed"), Some(&3.0));
    }
}
