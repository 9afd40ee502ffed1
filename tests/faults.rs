//! The fault suite: a `lintel serve` process under seeded load from raw producers while `lintel
//! worker` processes are SIGKILLed at random moments and restarted, one is SIGSTOPped (half-open)
//! until the node's pings find it, connections flood past `max_connections`, garbage arrives at
//! every protocol state, and producers submit and never read.
//!
//! Each run asserts:
//! - every submission ends in exactly one outcome, none for an id never sent, none later than
//!   its wait plus its reply timeout plus a margin; completions carry their own request's
//!   result; worker-lost names a worker the run killed or stopped, and comes soon after;
//! - the SIGSTOPped worker, its pings missed, is dropped when its session's grace (short here)
//!   runs out, well under the reply timeout, and after SIGCONT it registers anew;
//! - each piece of garbage gets the answer `wire/PROTOCOL.md` gives it and closes only its own
//!   connection; each flood connection is welcomed, refused `TooManyConnections`, or closed;
//! - afterwards nothing leaks: no dispatch in flight or waiting, only the live workers
//!   registered, every slot free, no pool but the load's, no connection but the workers';
//! - the node's peak resident memory (`VmHWM`) stays under [`PEAK_RSS_BOUND_KIB`] plus
//!   [`NEVER_READER_ALLOWANCE_KIB`] per producer that never reads held at once (CI size: 32 +
//!   2 x 48 = 128 MiB; long mode: 32 + 4 x 48 = 224 MiB).
//!
//! Sizes: `cargo test --test faults` runs the CI size, seeds [`CI_SEEDS`], in well under two
//! minutes. `LINTEL_FAULTS=long cargo test --release --test faults -- --nocapture` (or
//! `cargo test --release --test faults -- --ignored long --nocapture`) runs the long mode:
//! `LINTEL_FAULT_SECONDS` (default 300) of faults with many more kills, on a seed drawn from the
//! clock. `LINTEL_FAULT_SEED=N` replays seed N in either size. A seed fixes the sequence of faults,
//! the gaps between them and the workload; how they interleave with the processes' scheduling
//! varies between replays. Every wait for an effect is on the event itself, or for the node's
//! state on its admin endpoints, and bounded.
//! Every run prints one summary line (seed, dispatches, kills, outcomes by class, peak memory);
//! a failing run prints its seed and the command that replays it.
use lintel_test_support as support;

use lintel_test_support::abuse;
use lintel_test_support::load;
use lintel_test_support::processes;

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use abuse::{garbage_at, Flood, NeverReader, Reception, GARBAGE, STATES};
use lintel::wire::DispatchResult;
use load::{check, produce, Bounds, Deaths, Ended, Ledger, LoadSpec, Tally};
use processes::{until, NodeProcess, NodeSettings, WorkerProcess};
use support::{within, WAIT};

/// The seeds `cargo test` runs.
const CI_SEEDS: [u64; 3] = [1, 2, 3];

/// The node's peak resident memory must stay under this, in KiB, plus
/// [`NEVER_READER_ALLOWANCE_KIB`] for each producer that never reads alive at once. Measured on
/// the CI size: 18 MiB without producers that never read.
const PEAK_RSS_BOUND_KIB: u64 = 32 * 1024;

/// What a producer that never reads may cost the node, in KiB: the outcomes it is owed for the
/// 3000 echoes of 4 KiB it submits (20 to 39 MiB each, measured).
const NEVER_READER_ALLOWANCE_KIB: u64 = 48 * 1024;

/// Producers that never read alive at once, at most: two in the CI size, four in the long mode.
const NEVER_READERS_HELD: usize = 4;

/// The namespace the load runs in.
const LOAD_NAMESPACE: &str = "faults";

/// The namespace producers that never read submit into, served by a worker of its own so
/// their dispatches never take the load's slots.
const UNREAD_NAMESPACE: &str = "unread";

/// Workers kept running, and each one's slots.
const WORKERS: usize = 4;
const CAPACITY: u32 = 4;

/// Load producers, each keeping a window of submissions in flight.
const PRODUCERS: u32 = 3;

/// How long the node keeps a lost worker's session for it to resume: short, so a worker
/// stopped or killed lets go of its slots and pushes soon.
const RESUME_GRACE_MS: u64 = 1_500;

/// How long a SIGSTOPped worker may stay registered: its pings missed (1 s here), then its
/// session's grace, with room for a loaded machine; well under the reply timeout (20 s).
const HALF_OPEN_FOUND_WITHIN: Duration = Duration::from_millis(8_000 + RESUME_GRACE_MS);

/// How long after a worker dies its pushes may end worker-lost: its connection found closed or
/// its pings missed, then its session's grace, with room for a loaded machine.
const LOST_WITHIN: Duration = Duration::from_millis(8_000 + RESUME_GRACE_MS);

/// How late past its budget an outcome may arrive on a loaded machine.
const MARGIN: Duration = Duration::from_secs(5);

/// How long the node may take to let go of everything once the run is over.
const SETTLE: Duration = Duration::from_secs(20);

/// Which size of run, from the environment.
#[derive(Debug, Clone)]
struct Mode {
    long: Option<Duration>,
}

impl Mode {
    fn from_env() -> Self {
        let long = std::env::var("LINTEL_FAULTS").is_ok_and(|mode| mode == "long");
        Self {
            long: long.then(long_seconds),
        }
    }

    fn name(&self) -> &'static str {
        if self.long.is_some() {
            "long"
        } else {
            "ci"
        }
    }

    /// The seeds to run: the replayed one, else the CI list, else one from the clock.
    fn seeds(&self) -> Vec<u64> {
        if let Some(seed) = std::env::var("LINTEL_FAULT_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
        {
            return vec![seed];
        }
        match self.long {
            None => CI_SEEDS.to_vec(),
            Some(_) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs());
                vec![now]
            }
        }
    }

    fn replay(&self, seed: u64) -> String {
        match self.long {
            None => format!("LINTEL_FAULT_SEED={seed} cargo test --test faults -- --nocapture"),
            Some(seconds) => format!(
                "LINTEL_FAULTS=long LINTEL_FAULT_SECONDS={} LINTEL_FAULT_SEED={seed} cargo test --release --test faults -- --nocapture",
                seconds.as_secs()
            ),
        }
    }

    fn spec(&self) -> LoadSpec {
        LoadSpec {
            namespace: LOAD_NAMESPACE.into(),
            window: 8,
            max_submissions: if self.long.is_some() {
                10_000_000
            } else {
                100_000
            },
            wait_for_worker_ms: 3_000,
            reply_timeout_ms: 20_000,
            cancel_percent: 5,
            max_sleep_ms: 30,
            max_echo_len: 2_048,
        }
    }
}

fn long_seconds() -> Duration {
    let seconds = std::env::var("LINTEL_FAULT_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse().ok())
        .unwrap_or(300);
    Duration::from_secs(seconds)
}

/// One fault.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// SIGKILL a worker, then start another after this many milliseconds.
    Kill {
        restart_after_ms: u64,
    },
    /// SIGSTOP a worker until the node drops it, then SIGCONT it.
    Stop,
    Garbage(abuse::State, abuse::Garbage),
    /// Connections past the limit.
    Flood {
        excess: usize,
    },
    /// Producers that submit and never read.
    NeverReaders,
}

/// The CI size's faults, in a seeded order: six kills, a stop, garbage at every state (and two
/// more), a flood and two producers that never read.
fn ci_plan(rng: &mut fastrand::Rng) -> Vec<Event> {
    let mut plan: Vec<Event> = (0..6)
        .map(|_| Event::Kill {
            restart_after_ms: rng.u64(0..300),
        })
        .collect();
    plan.push(Event::Stop);
    for state in STATES {
        plan.push(Event::Garbage(state, GARBAGE[rng.usize(..GARBAGE.len())]));
    }
    for _ in 0..2 {
        plan.push(random_garbage(rng));
    }
    plan.push(Event::Flood {
        excess: rng.usize(16..64),
    });
    plan.push(Event::NeverReaders);
    rng.shuffle(&mut plan);
    plan
}

fn random_garbage(rng: &mut fastrand::Rng) -> Event {
    Event::Garbage(
        STATES[rng.usize(..STATES.len())],
        GARBAGE[rng.usize(..GARBAGE.len())],
    )
}

/// The long mode's next fault: mostly kills.
fn long_event(rng: &mut fastrand::Rng) -> Event {
    match rng.u32(0..100) {
        0..60 => Event::Kill {
            restart_after_ms: rng.u64(0..300),
        },
        60..85 => random_garbage(rng),
        85..90 => Event::Stop,
        90..95 => Event::Flood {
            excess: rng.usize(16..128),
        },
        _ => Event::NeverReaders,
    }
}

/// The node's settings for every run.
fn settings() -> NodeSettings {
    NodeSettings {
        max_connections: 48,
        ping_interval_ms: 250,
        max_missed_pings: 3,
        reply_timeout_ms: 20_000,
        worker_resume_grace_ms: RESUME_GRACE_MS,
    }
}

/// What one run did, for its summary line.
#[derive(Debug, Default)]
struct Figures {
    kills: u32,
    stops: u32,
    garbage: u32,
    floods: u32,
    flood_answers: [usize; 3],
    never_readers: u32,
    never_read_submissions: u64,
    never_readers_held: usize,
    /// Workers the node dropped on its own (missed pings) and that reconnected.
    dropped_by_node: u32,
    /// Dispatches that ended worker-lost on a SIGSTOPped worker.
    lost_half_open: u64,
    /// The longest a SIGSTOPped worker stayed registered.
    half_open_found_ms: u128,
    outcomes: Tally,
    start_rss_kib: u64,
    peak_rss_kib: u64,
}

/// A running worker process and the worker id of its current registration.
struct Running {
    process: WorkerProcess,
    worker_id: u64,
}

/// Prints the seed and the replay command if the run fails.
struct Replay(String);

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.0);
        }
    }
}

#[tokio::test]
async fn every_dispatch_ends_once_through_kills_stops_floods_and_garbage() {
    let mode = Mode::from_env();
    for seed in mode.seeds() {
        run(seed, &mode).await;
    }
}

#[tokio::test]
#[ignore = "long mode: minutes of faults; cargo test --release --test faults -- --ignored long"]
async fn long_run_of_faults() {
    let mode = Mode {
        long: Some(long_seconds()),
    };
    for seed in mode.seeds() {
        run(seed, &mode).await;
    }
}

/// A producer that submits 64 KiB echoes and never reads is closed by the node, another producer
/// is served meanwhile, and the node's memory stays within its footprint plus one never-reader's
/// allowance: what a connection is owed is bounded in bytes, not frames.
#[tokio::test]
async fn a_producer_that_never_reads_is_closed_as_a_slow_consumer() {
    let node = NodeProcess::start(&settings()).await;
    let _worker = start_worker(&node, LOAD_NAMESPACE, "w0").await;
    let reader = NeverReader::start(
        node.addr,
        LOAD_NAMESPACE,
        64 * 1024,
        2_000,
        Duration::from_secs(1),
    )
    .await;
    until(
        "the node to close the producer that never reads",
        Duration::from_secs(30),
        async || match node.status().await.connections {
            1 => Ok(()),
            connections => Err(format!("{connections} connections")),
        },
    )
    .await;
    let spec = LoadSpec {
        max_submissions: 50,
        ..Mode { long: None }.spec()
    };
    let (_stop, stopped) = watch::channel(false);
    let ledger = within(
        "a producer served beside the one that never reads",
        produce(node.addr, 0, spec.clone(), 7, stopped, MARGIN),
    )
    .await;
    let bounds = Bounds {
        margin: MARGIN,
        lost_within: LOST_WITHIN,
    };
    let tally = check(&ledger, &spec, &Deaths::new(), bounds).expect("one outcome each");
    assert_eq!(tally.completed + tally.cancelled, 50, "{tally:?}");
    let peak = node.peak_rss_kib();
    assert!(peak <= rss_bound(1), "peak resident memory {peak} KiB");
    drop(reader);
}

async fn run(seed: u64, mode: &Mode) {
    let _replay = Replay(format!(
        "faults: seed {seed} failed; replay with: {}",
        mode.replay(seed)
    ));
    let started = Instant::now();
    let mut chaos = Chaos::start(seed).await;
    let spec = mode.spec();
    let (stop, stopped) = watch::channel(false);
    let producers: Vec<JoinHandle<Ledger>> = (0..PRODUCERS)
        .map(|producer| {
            tokio::spawn(produce(
                chaos.node.addr,
                producer,
                spec.clone(),
                seed,
                stopped.clone(),
                MARGIN,
            ))
        })
        .collect();

    let mut planned = match mode.long {
        None => ci_plan(&mut chaos.rng).into_iter(),
        Some(_) => Vec::new().into_iter(),
    };
    loop {
        let event = match mode.long {
            None => match planned.next() {
                Some(event) => event,
                None => break,
            },
            Some(seconds) if started.elapsed() < seconds => long_event(&mut chaos.rng),
            Some(_) => break,
        };
        chaos.play(event).await;
    }

    stop.send_replace(true);
    let mut ledgers = Vec::with_capacity(producers.len());
    for producer in producers {
        let ledger = tokio::time::timeout(spec.budget() + MARGIN + WAIT, producer)
            .await
            .expect("a producer to finish")
            .expect("a producer task");
        ledgers.push(ledger);
    }
    chaos.never_readers.clear();
    let Chaos {
        mut node,
        mut workers,
        mut unread,
        mut deaths,
        half_open,
        mut figures,
        ..
    } = chaos;
    assert_nothing_leaks(&node, async || {
        note_reconnects(&mut workers, &mut deaths, &mut figures);
        note_reconnects(&mut unread, &mut deaths, &mut figures);
        workers.iter().chain(&unread).map(|w| w.worker_id).collect()
    })
    .await;

    let bounds = Bounds {
        margin: MARGIN,
        lost_within: LOST_WITHIN,
    };
    let mut violations = Vec::new();
    for ledger in &ledgers {
        match check(ledger, &spec, &deaths, bounds) {
            Ok(tally) => figures.outcomes.add(tally),
            Err(found) => violations.extend(found),
        }
        figures.lost_half_open += lost_to(ledger, &half_open);
    }
    assert!(
        violations.is_empty(),
        "seed {seed}: {} violations, the first:\n{}",
        violations.len(),
        violations
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(figures.outcomes.completed > 0, "nothing completed");
    assert!(
        figures.lost_half_open >= u64::from(figures.stops),
        "{} stopped workers held only {} pushes between them: the half-open case went untested",
        figures.stops,
        figures.lost_half_open
    );
    assert!(node.running(), "the node process exited");
    figures.peak_rss_kib = node.peak_rss_kib();
    let bound = rss_bound(figures.never_readers_held);
    assert!(
        figures.peak_rss_kib <= bound,
        "peak resident memory {} KiB over the bound {bound} KiB",
        figures.peak_rss_kib
    );
    print_summary(seed, mode, &figures, started.elapsed());
}

/// The node, its workers and the faults done to them so far.
struct Chaos {
    node: NodeProcess,
    settings: NodeSettings,
    rng: fastrand::Rng,
    /// The load's workers.
    workers: Vec<Running>,
    /// The worker serving the producers that never read.
    unread: [Running; 1],
    /// Every registration the run ended (killed, stopped, or dropped by the node).
    deaths: Deaths,
    /// The registrations that ended SIGSTOPped.
    half_open: BTreeSet<u64>,
    never_readers: Vec<NeverReader>,
    figures: Figures,
    events: u32,
}

impl Chaos {
    /// A node with its workers, all registered.
    async fn start(seed: u64) -> Self {
        let settings = settings();
        let node = NodeProcess::start(&settings).await;
        let mut workers = Vec::with_capacity(WORKERS);
        for index in 0..WORKERS {
            workers.push(start_worker(&node, LOAD_NAMESPACE, &format!("w{index}")).await);
        }
        let unread = [start_worker(&node, UNREAD_NAMESPACE, "unread").await];
        let figures = Figures {
            start_rss_kib: node.rss_kib(),
            ..Figures::default()
        };
        Self {
            node,
            settings,
            rng: fastrand::Rng::with_seed(seed),
            workers,
            unread,
            deaths: Deaths::new(),
            half_open: BTreeSet::new(),
            never_readers: Vec::new(),
            figures,
            events: 0,
        }
    }

    /// Waits a seeded gap, then does `event` and waits for its effect.
    async fn play(&mut self, event: Event) {
        self.events += 1;
        tokio::time::sleep(Duration::from_millis(self.rng.u64(50..300))).await;
        note_reconnects(&mut self.workers, &mut self.deaths, &mut self.figures);
        match event {
            Event::Kill { restart_after_ms } => self.kill(restart_after_ms).await,
            Event::Stop => self.stop().await,
            Event::Garbage(state, garbage) => {
                let namespace = format!("garbage-{}", self.events);
                let case = garbage_at(self.node.addr, state, garbage, &namespace, &mut self.rng);
                within("a garbage case", case).await;
                self.figures.garbage += 1;
            }
            Event::Flood { excess } => self.flood(excess).await,
            Event::NeverReaders => self.never_read().await,
        }
    }

    /// SIGKILLs a worker, and starts another in its place after `restart_after_ms`.
    async fn kill(&mut self, restart_after_ms: u64) {
        let index = self.rng.usize(..self.workers.len());
        let dead = self.workers.swap_remove(index);
        self.deaths.insert(dead.worker_id, Instant::now());
        let identity = dead.process.identity.clone();
        for id in dead.process.kill().await {
            // It had reconnected unseen: that registration died with it too.
            self.deaths.insert(id, Instant::now());
            self.figures.dropped_by_node += 1;
        }
        self.figures.kills += 1;
        tokio::time::sleep(Duration::from_millis(restart_after_ms)).await;
        let mut process = WorkerProcess::start(self.node.addr, LOAD_NAMESPACE, CAPACITY, &identity);
        let worker_id = process.registered().await;
        self.workers.push(Running { process, worker_id });
    }

    /// SIGSTOPs a worker, waits until the node drops it (its pings missed, then its session's
    /// grace out), and SIGCONTs it: it finds its session gone and registers anew.
    async fn stop(&mut self) {
        let index = self.rng.usize(..self.workers.len());
        let stopped = &mut self.workers[index];
        let stopped_id = stopped.worker_id;
        let at = Instant::now();
        self.deaths.insert(stopped_id, at);
        self.half_open.insert(stopped_id);
        stopped.process.stop().await;
        let node = &self.node;
        until(
            "the node to drop the stopped worker",
            HALF_OPEN_FOUND_WITHIN,
            async || {
                let ids = worker_ids(&node.status().await);
                if ids.contains(&stopped_id) {
                    Err(format!("still registered: {ids:?}"))
                } else {
                    Ok(())
                }
            },
        )
        .await;
        let found = at.elapsed().as_millis();
        self.figures.half_open_found_ms = self.figures.half_open_found_ms.max(found);
        stopped.process.resume().await;
        stopped.worker_id = stopped.process.registered().await;
        assert_ne!(
            stopped.worker_id, stopped_id,
            "a worker back past its session's grace registers anew"
        );
        self.figures.stops += 1;
    }

    /// Opens connections up to the limit and `excess` past it, and checks how each was answered.
    async fn flood(&mut self, excess: usize) {
        let limit = self.settings.max_connections;
        let before = self.node.status().await.connections as usize;
        let total = limit.saturating_sub(before) + excess;
        let flood = Flood::open(self.node.addr, total).await;
        let held = self.node.status().await.connections as usize;
        assert!(
            held <= limit,
            "{held} connections held past the limit of {limit}"
        );
        let turned_away = flood.count(Reception::Refused) + flood.count(Reception::Closed);
        assert!(
            turned_away >= 1 && flood.count(Reception::Welcomed) >= 1,
            "a flood of {total} with {before} connected: {:?}",
            flood.answers
        );
        self.figures.floods += 1;
        self.figures.flood_answers[0] += flood.count(Reception::Welcomed);
        self.figures.flood_answers[1] += flood.count(Reception::Refused);
        self.figures.flood_answers[2] += flood.count(Reception::Closed);
    }

    /// Two more producers that submit and never read, held for the rest of the run; the
    /// oldest two go when [`NEVER_READERS_HELD`] are held already.
    async fn never_read(&mut self) {
        if self.never_readers.len() >= NEVER_READERS_HELD {
            self.never_readers.drain(..2);
        }
        for _ in 0..2 {
            let reader = NeverReader::start(
                self.node.addr,
                UNREAD_NAMESPACE,
                4_096,
                3_000,
                Duration::from_secs(1),
            )
            .await;
            self.figures.never_readers += 1;
            self.figures.never_read_submissions += reader.submitted;
            self.never_readers.push(reader);
        }
        let held = self.never_readers.len();
        self.figures.never_readers_held = self.figures.never_readers_held.max(held);
    }
}

async fn start_worker(node: &NodeProcess, namespace: &str, identity: &str) -> Running {
    let mut process = WorkerProcess::start(node.addr, namespace, CAPACITY, identity);
    let worker_id = process.registered().await;
    Running { process, worker_id }
}

/// Notes each worker the node dropped without the run killing or stopping it (its pings went
/// unanswered on a starved machine), as the worker's re-registration shows: its old id joins
/// `deaths` as of now, and it runs on under the new one.
fn note_reconnects(workers: &mut [Running], deaths: &mut Deaths, figures: &mut Figures) {
    for worker in workers {
        while let Some((id, at)) = worker.process.reregistered() {
            deaths.insert(worker.worker_id, at);
            worker.worker_id = id;
            figures.dropped_by_node += 1;
        }
    }
}

/// Dispatches in `ledger` that ended worker-lost on one of `workers`.
fn lost_to(ledger: &Ledger, workers: &BTreeSet<u64>) -> u64 {
    let lost = ledger.heard.values().flatten().filter(|heard| {
        matches!(&heard.ended, Ended::Other(DispatchResult::WorkerLost { worker_id }) if workers.contains(worker_id))
    });
    lost.count() as u64
}

fn worker_ids(status: &lintel::status::Status) -> BTreeSet<u64> {
    status
        .pools
        .iter()
        .flat_map(|pool| pool.workers.iter().map(|worker| worker.worker_id))
        .collect()
}

/// Waits until the node holds nothing but the workers `live` names, idle: no dispatch in flight
/// or waiting, every live worker registered with all its slots free, no other worker, no pool
/// but the load's and the unread one's, no connection but the workers'.
async fn assert_nothing_leaks(node: &NodeProcess, mut live: impl AsyncFnMut() -> BTreeSet<u64>) {
    until("the node to let go of everything", SETTLE, async || {
        let live = live().await;
        let in_flight = node.metric("lintel_dispatches_in_flight").await;
        let waiting = node.metric("lintel_dispatches_waiting").await;
        let status = node.status().await;
        let registered = worker_ids(&status);
        let busy: Vec<_> = status
            .pools
            .iter()
            .flat_map(|pool| &pool.workers)
            .filter(|w| w.in_flight != 0 || w.max_concurrency != CAPACITY || w.draining)
            .map(|w| (w.worker_id, w.in_flight, w.max_concurrency, w.draining))
            .collect();
        let pools: BTreeSet<_> = status.pools.iter().map(|p| p.namespace.as_str()).collect();
        let clean = in_flight == 0.0
            && waiting == 0.0
            && registered == live
            && busy.is_empty()
            && pools == BTreeSet::from([LOAD_NAMESPACE, UNREAD_NAMESPACE])
            && status.connections as usize == live.len();
        if clean {
            Ok(())
        } else {
            Err(format!(
                "in flight {in_flight}, waiting {waiting}, registered {registered:?} (live {live:?}), \
                 not idle {busy:?}, pools {pools:?}, connections {}",
                status.connections
            ))
        }
    })
    .await;
}

/// The peak memory allowed with `never_readers` producers that never read held at once, in KiB.
fn rss_bound(never_readers: usize) -> u64 {
    PEAK_RSS_BOUND_KIB + NEVER_READER_ALLOWANCE_KIB * never_readers as u64
}

fn print_summary(seed: u64, mode: &Mode, figures: &Figures, elapsed: Duration) {
    let o = &figures.outcomes;
    let [welcomed, refused, closed] = figures.flood_answers;
    println!(
        "faults seed={seed} mode={} dispatches={} completed={} worker-lost={} no-worker={} \
         cancelled={} kills={} dropped-by-node={} stops={} (found in {}ms at most, {} dispatches lost on them) garbage={} floods={} (welcomed {welcomed}, refused {refused}, \
         closed {closed}) never-readers={} ({} submissions unread) rss-at-start={:.1}MiB \
         peak-rss={:.1}MiB (bound {}MiB) elapsed={:.1}s",
        mode.name(),
        o.submitted,
        o.completed,
        o.worker_lost,
        o.no_worker,
        o.cancelled,
        figures.kills,
        figures.dropped_by_node,
        figures.stops,
        figures.half_open_found_ms,
        figures.lost_half_open,
        figures.garbage,
        figures.floods,
        figures.never_readers,
        figures.never_read_submissions,
        figures.start_rss_kib as f64 / 1024.0,
        figures.peak_rss_kib as f64 / 1024.0,
        rss_bound(figures.never_readers_held) / 1024,
        elapsed.as_secs_f64(),
    );
}
