//! The mesh at scale in the deterministic simulation (turmoil, as `cluster_sim.rs`): one
//! cluster of nodes taken through a join storm, rest, worker churn, a flapping link under load
//! and a partition into two halves that heals, measured and checked on the way.
//!
//! The phases, in simulated time:
//! 1. Join storm: every node starts at once, each given one seed (a random tree drawn from the
//!    seed, so the mesh can form). Measured: the time until every node sees every other up
//!    with its snapshot, and the links turned down as duplicates. Checked, once settled:
//!    exactly one live link per pair of nodes, at most one duplicate per pair.
//! 2. Rest: presence bytes per node per second with a worker on every even node, nothing
//!    changing.
//! 3. Churn: 100 worker registrations and 100 departures a second across the cluster;
//!    presence bytes per node per second while it goes on.
//! 4. Flap: producers on odd nodes relay every dispatch to the workers on even nodes, and one
//!    more on `n01` only to a worker of its own on `n00`, while the link between `n01` and `n00`
//!    is reset every 2 s for 30 s. Both nodes live, so every relay
//!    cut by a reset resumes on the next link: none may end `PeerLost`.
//! 5. Partition: the two halves of the cluster are cut apart for 3 s, then healed. Measured:
//!    the time from the heal until every node sees every other again; checked again: one live
//!    link per pair.
//! 6. Rolling restart: under load from fresh producers, every node in turn drains (its workers
//!    finish and leave, its links retire with a farewell), stops, and starts again as a new
//!    incarnation; the next waits until every node sees every other again. Measured: the
//!    restart's length and the `PeerLost` outcomes of dispatches submitted during it (none is
//!    explained: no cut happens then).
//!
//! Every run checks what `cluster_sim.rs` checks (one outcome per dispatch, one push, one hop,
//! `served_by`), and that no relay ended `PeerLost` unless the partition severed its two nodes
//! meanwhile, that no relay went on a link its sender had begun to close (or
//! retire), and that no link turned down as a duplicate carried a relay.
//!
//! `cargo test` runs 20 nodes. 50 nodes run by hand, in release (a few minutes):
//! `cargo test --release --test mesh_sim -- --ignored --nocapture`; `LINTEL_SIM_SEED=<seed>`
//! picks another seed. Each run prints one JSON line of its figures.
use lintel_test_support::sim;
use lintel_test_support::sim_checks;
use lintel_test_support::sim_clients;

use std::collections::BTreeMap;
use std::time::Duration;

use lintel::wire::{DispatchResult, PeerLinkState};
use lintel::NodeConfig;
use sim::{address, node_host, Record};
use sim_checks::{ledger_violations, unexplained_peer_lost, Cut};
use sim_clients::{churn, producer, worker, ProducerSpec, WorkerSpec};

/// One step of simulated time.
const TICK: Duration = Duration::from_millis(2);
/// Peer pings and the misses allowed: a cut link is found dead within about 750 ms.
const PEER_PING_MS: u64 = 250;
const MAX_MISSED_PINGS: u32 = 3;
/// How long after a cut a relay may still end `PeerLost` because of it.
const DETECTION: Duration = Duration::from_millis(2_000);
/// Longest a join storm or a heal may take before the run fails.
const CONVERGE_BOUND: Duration = Duration::from_secs(20);
/// Time for links turned down to finish closing before live links are counted.
const SETTLE: Duration = Duration::from_secs(1);
const REST: Duration = Duration::from_secs(2);
/// Churn: registrations (and as many departures) a second, each worker's stay, the warm-up
/// before measuring and the window measured.
const CHURN_RATE: u32 = 100;
const CHURN_STAY: Duration = Duration::from_secs(1);
const CHURN_WARMUP: Duration = Duration::from_secs(1);
const CHURN_WINDOW: Duration = Duration::from_secs(3);
/// The flapping link is reset this often, this many times.
const FLAP_EVERY: Duration = Duration::from_secs(2);
const FLAPS: u32 = 15;
/// The node label of the worker whose dispatches all cross the flapping link.
const FLAP_LABEL: &str = "flap";
const PARTITION: Duration = Duration::from_secs(3);
/// Dispatches each producer submits: enough to last through the flap and the partition.
const DISPATCHES: u64 = 200;
/// Producers, on the first odd nodes.
const PRODUCERS: usize = 4;
/// Producers of the rolling restart, on every odd node; they submit until it is over, pausing
/// this little between submissions, so relays keep arriving as each node drains.
const RESTART_PRODUCERS: usize = 10;
const RESTART_PAUSE_MS: (u64, u64) = (10, 100);
/// Longest one node's drain may take before the run fails.
const DRAIN_BOUND: Duration = Duration::from_secs(30);
/// Simulated time by which every producer must have heard every outcome.
const DEADLINE: Duration = Duration::from_secs(300);

/// The phases of a run, in order; each knows when it is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Storm,
    Rest,
    Churn,
    Flap,
    Partition,
    Restart,
    Finish,
}

/// What a run measured.
#[derive(Debug, Default)]
struct Figures {
    nodes: usize,
    seed: u64,
    storm_converged: Duration,
    duplicates: u64,
    max_duplicates_per_pair: usize,
    rest_presence_bytes_per_node_per_s: f64,
    churn_presence_bytes_per_node_per_s: f64,
    churn_presence_max_node_bytes_per_s: f64,
    heal_converged: Duration,
    restart: Duration,
    restart_dispatches: usize,
    restart_peer_lost: usize,
    dispatches: usize,
    completed: usize,
    peer_lost: usize,
    relays: usize,
    resumed: u64,
    simulated: Duration,
}

impl Figures {
    fn json(&self) -> String {
        format!(
            concat!(
                "{{\"nodes\": {}, \"seed\": {}, \"storm_converged_ms\": {}, \"duplicates\": {}, ",
                "\"duplicates_per_join\": {:.2}, \"max_duplicates_per_pair\": {}, ",
                "\"presence_at_rest_bytes_per_node_per_s\": {:.0}, ",
                "\"presence_under_churn_bytes_per_node_per_s\": {:.0}, ",
                "\"presence_under_churn_busiest_node_bytes_per_s\": {:.0}, ",
                "\"heal_converged_ms\": {}, \"restart_ms\": {}, \"restart_dispatches\": {}, ",
                "\"restart_peer_lost\": {}, \"dispatches\": {}, \"completed\": {}, ",
                "\"peer_lost\": {}, \"relays\": {}, \"resumed\": {}, \"simulated_ms\": {}}}"
            ),
            self.nodes,
            self.seed,
            self.storm_converged.as_millis(),
            self.duplicates,
            self.duplicates as f64 / self.nodes as f64,
            self.max_duplicates_per_pair,
            self.rest_presence_bytes_per_node_per_s,
            self.churn_presence_bytes_per_node_per_s,
            self.churn_presence_max_node_bytes_per_s,
            self.heal_converged.as_millis(),
            self.restart.as_millis(),
            self.restart_dispatches,
            self.restart_peer_lost,
            self.dispatches,
            self.completed,
            self.peer_lost,
            self.relays,
            self.resumed,
            self.simulated.as_millis(),
        )
    }
}

/// The names of `count` nodes, `n00` onwards; leaked, as a turmoil host name must live as long
/// as the simulation.
fn names(count: usize) -> Vec<&'static str> {
    (0..count)
        .map(|i| &*Box::leak(format!("n{i:02}").into_boxed_str()))
        .collect()
}

/// Each node's one seed: a random earlier node, and for the first a random later one, so the
/// seeds form a connected graph.
fn seeds(seed: u64, count: usize) -> Vec<usize> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..count)
        .map(|i| match i {
            0 => rng.usize(1..count),
            _ => rng.usize(0..i),
        })
        .collect()
}

fn node_config(name: &str, seed: &str) -> NodeConfig {
    NodeConfig {
        node_id: name.into(),
        advertise: address(name),
        peers: vec![address(seed)],
        handshake_timeout_ms: 1_000,
        ping_interval_ms: 250,
        peer_ping_interval_ms: PEER_PING_MS,
        max_missed_pings: MAX_MISSED_PINGS,
        ..NodeConfig::default()
    }
}

/// True when every node sees every other up with its whole snapshot.
fn converged(record: &Record, names: &[&str]) -> bool {
    let meshes: Vec<_> = {
        let ledger = record.lock();
        names
            .iter()
            .map(|name| ledger.meshes.get(*name).and_then(std::sync::Weak::upgrade))
            .collect()
    };
    meshes.iter().zip(names).all(|(mesh, name)| {
        let Some(mesh) = mesh else { return false };
        let peers = mesh.status();
        names.iter().filter(|other| *other != name).all(|other| {
            peers
                .iter()
                .any(|p| p.node_id == *other && p.state == PeerLinkState::Up && p.synced)
        })
    })
}

/// Presence bytes each node wrote so far.
fn presence_bytes(record: &Record) -> BTreeMap<String, u64> {
    record.lock().presence_bytes.clone()
}

/// Bytes per node per second between two readings `over` apart: the mean and the busiest node.
fn rate(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    names: &[&str],
    over: Duration,
) -> (f64, f64) {
    let per_node: Vec<f64> = names
        .iter()
        .map(|name| {
            let was = before.get(*name).copied().unwrap_or(0);
            let is = after.get(*name).copied().unwrap_or(0);
            (is - was) as f64 / over.as_secs_f64()
        })
        .collect();
    let mean = per_node.iter().sum::<f64>() / per_node.len() as f64;
    let max = per_node.iter().copied().fold(0.0, f64::max);
    (mean, max)
}

/// Live links per pair of nodes: every pair must have exactly one.
fn one_link_per_pair(record: &Record, names: &[&str], when: &str) -> Vec<String> {
    let live = record.lock().links.live();
    let mut found = Vec::new();
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            let count = live
                .get(&((*a).to_owned(), (*b).to_owned()))
                .copied()
                .unwrap_or(0);
            if count != 1 {
                found.push(format!("{count} live links between {a} and {b} {when}"));
            }
        }
    }
    found
}

struct Run<'a> {
    sim: turmoil::Sim<'a>,
    record: Record,
    names: Vec<&'static str>,
    failures: Vec<String>,
}

impl Run<'_> {
    fn now(&self) -> Duration {
        self.sim.elapsed()
    }

    /// Steps for `span` of simulated time.
    fn run_for(&mut self, span: Duration) {
        let until = self.now() + span;
        while self.now() < until {
            if let Err(err) = self.sim.step() {
                panic!("simulation failed: {err}");
            }
        }
    }

    /// Starts `specs` on one client host named `host`.
    fn producers(&mut self, host: &str, specs: Vec<ProducerSpec>, seed: u64) {
        let record = self.record.clone();
        self.sim.client(host, async move {
            let all = specs
                .into_iter()
                .map(|spec| producer(spec, seed, record.clone()));
            futures_util::future::try_join_all(all).await?;
            Ok(())
        });
    }

    /// Drains node `name` until its process ends, starts it again, and steps until every node
    /// sees every other.
    fn restart(&mut self, name: &str) {
        let drain = self.record.lock().drains.get(name).cloned();
        let Some(drain) = drain else {
            self.failures
                .push(format!("{name} cannot be told to drain"));
            return;
        };
        drain.notify_one();
        let started = self.now();
        while self.sim.is_host_running(name) {
            if self.now() - started > DRAIN_BOUND {
                self.failures
                    .push(format!("{name} still draining after {DRAIN_BOUND:?}"));
                break;
            }
            if let Err(err) = self.sim.step() {
                panic!("simulation failed: {err}");
            }
        }
        self.sim.bounce(name);
        self.until_converged(&format!("the restart of {name}"));
    }

    /// Steps until every node sees every other, looking every 10 ms; how long that took.
    fn until_converged(&mut self, what: &str) -> Duration {
        let started = self.now();
        let mut steps = 0;
        loop {
            if steps % 5 == 0 && converged(&self.record, &self.names) {
                return self.now() - started;
            }
            if self.now() - started > CONVERGE_BOUND {
                self.failures
                    .push(format!("{what}: not converged after {CONVERGE_BOUND:?}"));
                return self.now() - started;
            }
            if let Err(err) = self.sim.step() {
                panic!("simulation failed: {err}");
            }
            steps += 1;
        }
    }
}

/// Runs every phase on `count` nodes with `seed`; the figures, and every broken invariant.
fn run(count: usize, seed: u64) -> (Figures, Vec<String>) {
    fastrand::seed(seed);
    let names = names(count);
    let seeds = seeds(seed, count);
    let record = Record::default();
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .enable_random_order()
        .tick_duration(TICK)
        .simulation_duration(DEADLINE + Duration::from_secs(10))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(10))
        .tcp_capacity(4_096)
        .build();
    for (i, name) in names.iter().enumerate() {
        node_host(&mut sim, name, node_config(name, names[seeds[i]]), &record);
    }
    let mut figures = Figures {
        nodes: count,
        seed,
        ..Figures::default()
    };
    let mut run = Run {
        sim,
        record,
        names,
        failures: Vec::new(),
    };
    let mut cuts: Vec<Cut> = Vec::new();
    // When the rolling restart began and ended.
    let mut restarted = (Duration::ZERO, Duration::ZERO);
    let names = run.names.clone();
    let even: Vec<&'static str> = names.iter().step_by(2).copied().collect();
    let odd: Vec<&'static str> = names.iter().skip(1).step_by(2).copied().collect();
    let mut phase = Phase::Storm;
    loop {
        match phase {
            Phase::Storm => {
                figures.storm_converged = run.until_converged("join storm");
                run.run_for(SETTLE);
                let found = one_link_per_pair(&run.record, &names, "after the join storm");
                run.failures.extend(found);
                figures.duplicates = {
                    let ledger = run.record.lock();
                    ledger
                        .meshes
                        .values()
                        .filter_map(std::sync::Weak::upgrade)
                        .map(|mesh| mesh.duplicates())
                        .sum()
                };
                let (turned_down, per_pair) = duplicates_by_pair(&run.record);
                figures.max_duplicates_per_pair = per_pair;
                if turned_down as u64 != figures.duplicates {
                    run.failures.push(format!(
                        "the nodes count {} duplicates, the taps saw {turned_down}",
                        figures.duplicates
                    ));
                }
                if per_pair > 1 {
                    run.failures
                        .push(format!("{per_pair} duplicate links between one pair"));
                }
                phase = Phase::Rest;
            }
            Phase::Rest => {
                let record = run.record.clone();
                let specs: Vec<WorkerSpec> = even
                    .iter()
                    .map(|node| WorkerSpec {
                        name: Box::leak(format!("w-{node}").into_boxed_str()),
                        node,
                        capacity: 4,
                        label: None,
                    })
                    .collect();
                run.sim.client("workers", async move {
                    let all = specs
                        .into_iter()
                        .map(|spec| worker(spec, seed, record.clone()));
                    futures_util::future::join_all(all).await;
                    Ok(())
                });
                // The workers register and their pools reach every node first.
                run.run_for(SETTLE);
                let before = presence_bytes(&run.record);
                run.run_for(REST);
                let after = presence_bytes(&run.record);
                figures.rest_presence_bytes_per_node_per_s = rate(&before, &after, &names, REST).0;
                phase = Phase::Churn;
            }
            Phase::Churn => {
                let nodes = names.clone();
                let lasting = CHURN_WARMUP + CHURN_WINDOW;
                run.sim.client("churn", async move {
                    churn(nodes, CHURN_RATE, 20, CHURN_STAY, lasting).await
                });
                run.run_for(CHURN_WARMUP);
                let before = presence_bytes(&run.record);
                run.run_for(CHURN_WINDOW);
                let after = presence_bytes(&run.record);
                let (mean, max) = rate(&before, &after, &names, CHURN_WINDOW);
                figures.churn_presence_bytes_per_node_per_s = mean;
                figures.churn_presence_max_node_bytes_per_s = max;
                // The last churned workers leave.
                run.run_for(CHURN_STAY + SETTLE);
                phase = Phase::Flap;
            }
            Phase::Flap => {
                let spec = |node| ProducerSpec {
                    name: Box::leak(format!("p-{node}").into_boxed_str()),
                    node,
                    dispatches: DISPATCHES,
                    pause_ms: (20, 300),
                    pin: None,
                };
                let (x, y) = (names[1], names[0]);
                let mut specs: Vec<ProducerSpec> =
                    odd.iter().take(PRODUCERS).copied().map(spec).collect();
                // Keeps relays in flight over the flapping link at every reset.
                specs.push(ProducerSpec {
                    name: "flap",
                    node: x,
                    dispatches: DISPATCHES,
                    pause_ms: (20, 300),
                    pin: Some(FLAP_LABEL),
                });
                let flap_worker = WorkerSpec {
                    name: "w-flap",
                    node: y,
                    capacity: 4,
                    label: Some(FLAP_LABEL),
                };
                let record = run.record.clone();
                run.sim.client("flap-worker", async move {
                    worker(flap_worker, seed, record).await
                });
                // Its pool reaches `n01` first.
                run.run_for(SETTLE);
                run.producers("producers", specs, seed);
                // No cut is recorded: a reset between two live nodes excuses no `PeerLost`.
                for _ in 0..FLAPS {
                    run.run_for(FLAP_EVERY);
                    run.record.lock().links.reset(x, y);
                }
                phase = Phase::Partition;
            }
            Phase::Partition => {
                let half = names.len() / 2;
                let (left, right) = names.split_at(half);
                let from = run.now();
                for a in left {
                    for b in right {
                        run.sim.partition(*a, *b);
                    }
                }
                run.run_for(PARTITION);
                for a in left {
                    for b in right {
                        run.sim.repair(*a, *b);
                        cuts.push(Cut::link(a, b).during(from, run.now()));
                    }
                }
                figures.heal_converged = run.until_converged("heal");
                run.run_for(SETTLE);
                let found = one_link_per_pair(&run.record, &names, "after the heal");
                run.failures.extend(found);
                phase = Phase::Restart;
            }
            Phase::Restart => {
                let spec = |node| ProducerSpec {
                    name: Box::leak(format!("r-{node}").into_boxed_str()),
                    node,
                    dispatches: u64::MAX,
                    pause_ms: RESTART_PAUSE_MS,
                    pin: None,
                };
                let specs = odd
                    .iter()
                    .take(RESTART_PRODUCERS)
                    .copied()
                    .map(spec)
                    .collect();
                run.producers("restart-producers", specs, seed);
                // The producers get going before the first node drains.
                run.run_for(SETTLE);
                restarted.0 = run.now();
                for name in &names {
                    run.restart(name);
                }
                restarted.1 = run.now();
                figures.restart = restarted.1 - restarted.0;
                run.record.lock().producers_stop = true;
                run.run_for(SETTLE);
                let found = one_link_per_pair(&run.record, &names, "after the restart");
                run.failures.extend(found);
                phase = Phase::Finish;
            }
            Phase::Finish => {
                // The flap's own producer counts too.
                let producers = PRODUCERS.min(odd.len()) + 1 + RESTART_PRODUCERS.min(odd.len());
                while run.record.lock().producers_done < producers {
                    if run.now() >= DEADLINE {
                        run.failures.push(format!(
                            "producers still waiting for outcomes after {DEADLINE:?}"
                        ));
                        break;
                    }
                    if let Err(err) = run.sim.step() {
                        panic!("simulation failed: {err}");
                    }
                }
                break;
            }
        }
    }
    figures.simulated = run.now();
    let Run {
        sim,
        record,
        mut failures,
        ..
    } = run;
    drop(sim);
    let ledger = std::mem::take(&mut *record.lock());
    failures.extend(ledger_violations(&ledger));
    failures.extend(unexplained_peer_lost(&ledger, &cuts, DETECTION));
    let outcomes = || ledger.outcomes.values().flatten();
    figures.dispatches = ledger.submitted.len();
    figures.completed = outcomes()
        .filter(|ended| matches!(ended.result, DispatchResult::Completed(_)))
        .count();
    figures.peer_lost = outcomes()
        .filter(|ended| matches!(ended.result, DispatchResult::PeerLost { .. }))
        .count();
    figures.relays = ledger.relays.len();
    figures.resumed = ledger.resumed;
    let during_restart = |workflow_id: &String| {
        ledger
            .submitted_at
            .get(workflow_id)
            .is_some_and(|at| (restarted.0..=restarted.1).contains(at))
    };
    figures.restart_dispatches = ledger
        .submitted
        .keys()
        .filter(|id| during_restart(id))
        .count();
    figures.restart_peer_lost = ledger
        .outcomes
        .iter()
        .filter(|(id, _)| during_restart(id))
        .flat_map(|(_, outcomes)| outcomes)
        .filter(|ended| matches!(ended.result, DispatchResult::PeerLost { .. }))
        .count();
    (figures, failures)
}

/// Links turned down as duplicates, all told and most between one pair of nodes.
fn duplicates_by_pair(record: &Record) -> (usize, usize) {
    let ledger = record.lock();
    let by_pair = ledger.links.turned_down_by_pair();
    let total = by_pair.values().sum();
    let most = by_pair.values().copied().max().unwrap_or(0);
    (total, most)
}

/// The seed: `LINTEL_SIM_SEED` when set, else 1.
fn seed() -> u64 {
    std::env::var("LINTEL_SIM_SEED").map_or(1, |seed| {
        seed.parse()
            .unwrap_or_else(|_| panic!("LINTEL_SIM_SEED: {seed:?} is not a u64"))
    })
}

fn check(count: usize) {
    let seed = seed();
    let (figures, failures) = run(count, seed);
    println!("{}", figures.json());
    assert!(
        failures.is_empty(),
        "{count} nodes, seed {seed}: {} broken invariants; replay: LINTEL_SIM_SEED={seed} cargo test --test mesh_sim -- --nocapture\n  {}",
        failures.len(),
        failures.iter().take(30).cloned().collect::<Vec<_>>().join("\n  ")
    );
    assert!(figures.relays > 0, "no dispatch was relayed");
    assert!(
        figures.resumed > 0,
        "no reset cut a relay in flight: nothing was resumed"
    );
    assert!(
        figures.peer_lost > 0,
        "the partition ended no relay PeerLost"
    );
}

#[test]
fn twenty_nodes_join_at_once_flap_and_heal_a_partition_keeping_every_invariant() {
    check(20);
}

#[test]
#[ignore = "50 nodes take minutes: run by hand, in release"]
fn fifty_nodes_join_at_once_flap_and_heal_a_partition_keeping_every_invariant() {
    check(50);
}
