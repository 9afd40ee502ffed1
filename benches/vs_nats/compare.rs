//! The side-by-side run: every scenario measures lintel, NATS and the floor in turn, round after
//! round, so machine noise hits all three alike; each metric is the median of the rounds.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::measure::{self, Load, Sample};
use crate::nats::NatsServer;
use crate::systems::{Kind, Running};

/// How long and how often to measure.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub runs: usize,
    pub seconds: f64,
    pub max_count: u64,
    /// Run lintel's node as a `lintel serve` child process, as nats-server runs, instead of in
    /// the harness process.
    pub lintel_child: bool,
}

impl Settings {
    pub fn round(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }

    /// An unrecorded run before the rounds: connections warm, buffers grown.
    pub fn warmup(&self) -> Duration {
        Duration::from_secs_f64((self.seconds / 5.0).clamp(0.05, 0.5))
    }
}

/// One cell of the grid.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub concurrency: usize,
    pub workers: usize,
    pub payload_bytes: usize,
}

impl Scenario {
    pub fn name(&self) -> String {
        format!(
            "c{}-w{}-{}",
            self.concurrency,
            self.workers,
            payload_label(self.payload_bytes)
        )
    }
}

/// `64B`, `4KiB`, `1MiB`.
pub fn payload_label(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        format!("{}KiB", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}

/// The grid: every concurrency × workers × payload.
pub fn grid(concurrency: &[usize], workers: &[usize], payloads: &[usize]) -> Vec<Scenario> {
    let mut scenarios = Vec::new();
    for &payload_bytes in payloads {
        for &workers in workers {
            for &concurrency in concurrency {
                scenarios.push(Scenario {
                    concurrency,
                    workers,
                    payload_bytes,
                });
            }
        }
    }
    scenarios
}

/// What one scenario measured: the median sample per system, `None` where it did not run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub scenario: Scenario,
    pub results: BTreeMap<Kind, Option<Sample>>,
    /// Why a system has no result, or which requests failed.
    pub notes: Vec<String>,
}

/// Runs one scenario on each of `kinds`.
pub async fn run_scenario(
    scenario: &Scenario,
    kinds: &[Kind],
    server: Option<&NatsServer>,
    settings: &Settings,
) -> Outcome {
    let mut notes = Vec::new();
    let mut running = Vec::new();
    for &kind in kinds {
        match Running::start(kind, scenario.workers, server, settings.lintel_child).await {
            Ok(system) => running.push((kind, system)),
            Err(err) => notes.push(format!(
                "{}: {} not run: {err}",
                scenario.name(),
                kind.key()
            )),
        }
    }
    let warmup = Load::new(
        scenario.concurrency,
        settings.warmup(),
        settings.max_count,
        scenario.payload_bytes,
    );
    let load = Load {
        duration: settings.round(),
        ..warmup.clone()
    };
    for (_, system) in &running {
        system.measure(&warmup).await;
    }
    let mut rounds: BTreeMap<Kind, Vec<Sample>> = BTreeMap::new();
    for _ in 0..settings.runs.max(1) {
        for (kind, system) in &running {
            rounds
                .entry(*kind)
                .or_default()
                .push(system.measure(&load).await);
        }
    }
    for (_, system) in running {
        system.stop().await;
    }
    let mut results = BTreeMap::new();
    for kind in Kind::ALL {
        let sample = rounds.get(&kind).map(|rounds| measure::median_of(rounds));
        if let Some(sample) = &sample {
            if sample.failed() > 0 {
                notes.push(format!(
                    "{}: {} had {} failed requests: {:?}",
                    scenario.name(),
                    kind.key(),
                    sample.failed(),
                    sample.failures
                ));
            }
        }
        results.insert(kind, sample);
    }
    for note in &notes {
        eprintln!("  ! {note}");
    }
    Outcome {
        scenario: scenario.clone(),
        results,
        notes,
    }
}
