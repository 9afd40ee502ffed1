//! The side-by-side run: every scenario measures lintel, NATS and the floor in turn, round after
//! round (lintel 1, NATS 1, floor 1, lintel 2, ...), so machine noise hits all three alike. Each
//! metric is the median of the rounds; each ratio between systems is taken within a round, and
//! the median of those per-round ratios is what is reported. Around each round the CPU time of
//! the system's middle process (both middles, cross-node: see [`Topology`]) is read, for CPU per
//! request; where the producer is a process of its own, that window also holds its start,
//! connect and close, once per round.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::kind::Kind;
use crate::machine;
use crate::measure::{self, Load, Sample};
use crate::mode::Mode;
use crate::nats::NatsServers;
use crate::process::Launcher;
use crate::systems::Running;
use crate::tls::TlsFiles;
use crate::topology::Topology;

/// How long and how often to measure, and where the processes go.
#[derive(Debug, Clone)]
pub struct Settings {
    pub runs: usize,
    pub seconds: f64,
    pub max_count: u64,
    pub mode: Mode,
    /// One middle between producer and workers, or two.
    pub topology: Topology,
    /// How peer processes (NATS responders and requester, the floor's pieces) are started.
    pub launcher: Launcher,
    /// Certificates for lintel over TLS, made when `--tls` asks for it.
    pub tls: Option<TlsFiles>,
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

/// One round of one system.
#[derive(Debug, Clone)]
pub struct Round {
    pub sample: Sample,
    /// CPU time the middle's processes (both, cross-node) used over the round; `None` when it
    /// could not be read.
    pub middle_cpu: Option<Duration>,
}

impl Round {
    /// Middle CPU microseconds per completed request.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        let cpu = self.middle_cpu?;
        (self.sample.completed > 0).then(|| cpu.as_secs_f64() * 1e6 / self.sample.completed as f64)
    }
}

/// What one system measured in a scenario.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The per-metric median of the rounds.
    pub median: Sample,
    /// The median of the rounds' middle CPU microseconds per request.
    pub cpu_us_per_request: Option<f64>,
    pub rounds: Vec<Round>,
}

impl Measured {
    fn of(rounds: Vec<Round>) -> Self {
        let samples: Vec<Sample> = rounds.iter().map(|r| r.sample.clone()).collect();
        let cpu: Vec<f64> = rounds
            .iter()
            .filter_map(Round::cpu_us_per_request)
            .collect();
        Self {
            median: measure::median_of(&samples),
            cpu_us_per_request: (!cpu.is_empty()).then(|| measure::median(&cpu)),
            rounds,
        }
    }
}

/// Which figure a ratio compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    P50,
    Rps,
}

/// `of / to` in `metric`, taken within each round.
#[derive(Debug, Clone, Copy)]
pub struct RatioSpec {
    pub key: &'static str,
    pub of: Kind,
    pub to: Kind,
    pub metric: Metric,
}

/// The ratios reported, headline first: lintel's p50 over the floor's, lintel's throughput over
/// NATS's.
pub const RATIOS: [RatioSpec; 6] = [
    RatioSpec {
        key: "lintel_floor_p50",
        of: Kind::Lintel,
        to: Kind::Floor,
        metric: Metric::P50,
    },
    RatioSpec {
        key: "lintel_nats_rps",
        of: Kind::Lintel,
        to: Kind::Nats,
        metric: Metric::Rps,
    },
    RatioSpec {
        key: "lintel_nats_p50",
        of: Kind::Lintel,
        to: Kind::Nats,
        metric: Metric::P50,
    },
    RatioSpec {
        key: "lintel_floor_rps",
        of: Kind::Lintel,
        to: Kind::Floor,
        metric: Metric::Rps,
    },
    RatioSpec {
        key: "tls_plain_p50",
        of: Kind::LintelTls,
        to: Kind::Lintel,
        metric: Metric::P50,
    },
    RatioSpec {
        key: "tls_plain_rps",
        of: Kind::LintelTls,
        to: Kind::Lintel,
        metric: Metric::Rps,
    },
];

impl RatioSpec {
    /// The ratio in each round both systems completed requests in; empty when there is none.
    pub fn per_round(&self, results: &BTreeMap<Kind, Option<Measured>>) -> Vec<f64> {
        let rounds = |kind| {
            results
                .get(&kind)
                .and_then(Option::as_ref)
                .map_or(&[][..], |m| &m.rounds[..])
        };
        let value = |round: &Round| match self.metric {
            Metric::P50 => round.sample.p50_us,
            Metric::Rps => round.sample.rps,
        };
        rounds(self.of)
            .iter()
            .zip(rounds(self.to))
            .filter(|(a, b)| a.sample.completed > 0 && b.sample.completed > 0 && value(b) > 0.0)
            .map(|(a, b)| value(a) / value(b))
            .collect()
    }
}

/// What one scenario measured: per system, `None` where it did not run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub scenario: Scenario,
    pub results: BTreeMap<Kind, Option<Measured>>,
    /// Why a system has no result, or which requests failed.
    pub notes: Vec<String>,
}

impl Outcome {
    /// The median sample of `kind`, if it ran.
    pub fn sample(&self, kind: Kind) -> Option<&Sample> {
        Some(&self.results.get(&kind)?.as_ref()?.median)
    }

    /// The ratio `spec` per round, and their median; `None` when no round has it.
    pub fn ratio(&self, spec: &RatioSpec) -> Option<(f64, Vec<f64>)> {
        let rounds = spec.per_round(&self.results);
        (!rounds.is_empty()).then(|| (measure::median(&rounds), rounds))
    }
}

/// The CPU time `pids` used together; `None` when one cannot be read.
fn cpu_time(pids: &[u32]) -> Option<Duration> {
    pids.iter().map(|&pid| machine::cpu_time(pid)).sum()
}

/// Runs one scenario on each of `kinds`, interleaving their rounds.
pub async fn run_scenario(
    scenario: &Scenario,
    kinds: &[Kind],
    servers: Option<&NatsServers>,
    settings: &Settings,
) -> Outcome {
    let mut notes = Vec::new();
    let mut running = Vec::new();
    for &kind in kinds {
        let started = Running::start(
            kind,
            scenario.workers,
            settings.mode,
            settings.topology,
            servers,
            &settings.launcher,
            settings.tls.as_ref(),
        )
        .await;
        match started {
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
    let mut rounds: BTreeMap<Kind, Vec<Round>> = BTreeMap::new();
    for _ in 0..settings.runs.max(1) {
        for (kind, system) in &running {
            let pids = system.middle_pids();
            let before = cpu_time(&pids);
            let sample = system.measure(&load).await;
            let after = cpu_time(&pids);
            let middle_cpu = before.zip(after).map(|(b, a)| a.saturating_sub(b));
            rounds
                .entry(*kind)
                .or_default()
                .push(Round { sample, middle_cpu });
        }
    }
    for (_, system) in running {
        system.stop().await;
    }
    let mut results = BTreeMap::new();
    for kind in Kind::EVERY {
        let measured = rounds.remove(&kind).map(Measured::of);
        if let Some(measured) = &measured {
            let failed: u64 = measured.rounds.iter().map(|r| r.sample.failed()).sum();
            if failed > 0 {
                let mut classes = BTreeMap::<&str, u64>::new();
                for round in &measured.rounds {
                    for (class, count) in &round.sample.failures {
                        *classes.entry(class).or_default() += count;
                    }
                }
                notes.push(format!(
                    "{}: {} had {failed} failed requests: {classes:?}",
                    scenario.name(),
                    kind.key(),
                ));
            }
        }
        results.insert(kind, measured);
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
