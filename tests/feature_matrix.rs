//! The feature matrix: every scenario, for every (worker SDK, producer SDK) pair among Rust,
//! TypeScript and Python, each run against a `lintel serve` of its own, with the results table
//! kept in the README between `<!-- matrix -->` and `<!-- /matrix -->`.
//!
//! Each SDK has an agent, a small program that plays a scenario's worker or producer and
//! prints `ready`, `started`, `cancelled`, `drained`, `pass`, `fail: REASON` or
//! `unsupported: WHAT` (exit 3: the cell shows —) on stdout; the runner starts them, waits on
//! those lines (every wait bounded), kills, signals or writes `go` to them as the scenario
//! says, and shows every agent's output when a run fails. The Rust agent is this test binary
//! run again with `LINTEL_MATRIX_AGENT` set (`feature_matrix/rust_agent.rs`); TypeScript's is
//! `node clients/typescript/dist/matrix/agent.js`, Python's `python3 -m lintel_matrix` with
//! `PYTHONPATH=clients/python/src:clients/python/matrix`.
//!
//! Run it with `cargo test --test feature_matrix -- --nocapture` (after `npm ci && npm run
//! build` in `clients/typescript`); an SDK whose agent or interpreter is missing is skipped,
//! saying so, and the README is then not checked, unless `CI_REQUIRE_SDKS=1` (as `.ci/run`
//! sets), which fails instead. `UPDATE_MATRIX=1` rewrites the README's table (every SDK ran);
//! `LINTEL_MATRIX_CLIENTS=DIR` runs the agents under `DIR` instead of the repo's `clients/`.
//!
//! # Layout
//! - `sdks`: which SDKs can run here and the command that starts each agent.
//! - `agent`: one agent process, its lines, its signals and its transcript.
//! - `scenarios`: the scenarios and the runner's steps for each.
//! - `table`: the results table and its README block.
//! - `rust_agent`: the Rust agent.

#[path = "feature_matrix/agent.rs"]
mod agent;
#[path = "feature_matrix/rust_agent.rs"]
mod rust_agent;
#[path = "feature_matrix/scenarios.rs"]
mod scenarios;
#[path = "feature_matrix/sdks.rs"]
mod sdks;
#[path = "feature_matrix/table.rs"]
mod table;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lintel_test_support::processes::NodeProcess;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

use agent::Problem;
use scenarios::{Run, Scenario};
use sdks::{Agents, Sdk, AGENT_VAR};
use table::{Cell, Outcome};

/// Runs at once, each with a node and agents of its own.
const PARALLEL: usize = 4;
/// The bound on one run, all its waits included.
const RUN_BOUND: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_passes_every_scenario_against_every_other() {
    if let Ok(words) = std::env::var(AGENT_VAR) {
        rust_agent::main(&words).await;
    }
    let started = Instant::now();
    let agents = Agents::from_env();
    let required = std::env::var("CI_REQUIRE_SDKS").is_ok_and(|value| value == "1");
    let (mut sdks, mut skipped) = (Vec::new(), Vec::new());
    for sdk in Sdk::ALL {
        match agents.unavailable(sdk) {
            None => sdks.push(sdk),
            Some(why) => {
                assert!(
                    !required,
                    "{} is unavailable ({why}) and CI_REQUIRE_SDKS=1",
                    sdk.name()
                );
                println!("skipping {}: {why}", sdk.name());
                skipped.push(sdk);
            }
        }
    }

    let mut jobs = Vec::new();
    for scenario in Scenario::ALL {
        for &worker in &sdks {
            for &producer in &sdks {
                // No worker runs in `no-worker`: one run per producer SDK.
                if scenario.has_worker() || worker == producer {
                    jobs.push((scenario, worker, producer));
                }
            }
        }
    }
    let permits = Arc::new(Semaphore::new(PARALLEL));
    let mut running = JoinSet::new();
    for (scenario, worker, producer) in jobs.iter().copied() {
        let (permits, agents) = (Arc::clone(&permits), agents.clone());
        running.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let began = Instant::now();
            let (result, report) = run_one(scenario, worker, producer, &agents).await;
            let outcome = Outcome {
                scenario,
                worker,
                producer,
                result,
            };
            (outcome, report, began.elapsed())
        });
    }
    let mut outcomes = Vec::new();
    let mut reports = Vec::new();
    while let Some(joined) = running.join_next().await {
        let (outcome, report, took) = joined.expect("a run's task panicked");
        let verdict = match &outcome.result {
            Ok(()) => "pass".to_owned(),
            Err(Problem::Unsupported { role, what }) => {
                format!("unsupported by the {} ({what})", role.name())
            }
            Err(Problem::Failed(why)) => {
                reports.push(format!(
                    "== {} with a {} worker and a {} producer: {why}\n{report}",
                    outcome.scenario.name(),
                    outcome.worker.name(),
                    outcome.producer.name()
                ));
                format!("FAILED: {why}")
            }
        };
        println!(
            "matrix: {:<11} {:>10} worker × {:<10} producer {:>5.2}s  {verdict}",
            outcome.scenario.name(),
            outcome.worker.name(),
            outcome.producer.name(),
            took.as_secs_f64()
        );
        outcomes.push(outcome);
    }
    let table = table::render(&sdks, &outcomes);
    println!(
        "matrix: {} runs in {:.1}s, {PARALLEL} at once\n{table}",
        outcomes.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        reports.is_empty(),
        "{} of {} runs failed:\n{}",
        reports.len(),
        outcomes.len(),
        reports.join("\n")
    );
    let failed_cells: BTreeMap<_, _> = Scenario::ALL
        .iter()
        .flat_map(|&scenario| sdks.iter().map(move |&sdk| (scenario, sdk)))
        .flat_map(|(scenario, sdk)| {
            [sdks::Role::Worker, sdks::Role::Producer].map(|role| {
                (
                    (scenario, sdk, role),
                    table::cell(&outcomes, scenario, sdk, role),
                )
            })
        })
        .filter(|(_, cell)| *cell == Cell::Failed)
        .collect();
    assert!(failed_cells.is_empty(), "failed cells: {failed_cells:?}");
    check_readme(&table, &skipped);
}

/// One scenario for one pair on a node of its own: how it went, and every agent's output.
async fn run_one(
    scenario: Scenario,
    worker: Sdk,
    producer: Sdk,
    agents: &Agents,
) -> (Result<(), Problem>, String) {
    let node = NodeProcess::launch(&[], scenario.node_env()).await;
    let mut run = Run::new(scenario, worker, producer, node.addr, agents);
    let result = match tokio::time::timeout(RUN_BOUND, run.steps()).await {
        Ok(result) => result,
        Err(_) => Err(Problem::Failed(format!("the run took over {RUN_BOUND:?}"))),
    };
    let report = match &result {
        Err(Problem::Failed(_)) => {
            let log = node.log();
            let tail = log.len().saturating_sub(40);
            format!(
                "{}\n--- node log (last 40 lines)\n{}",
                run.report().await,
                log.get(tail..).unwrap_or_default().join("\n")
            )
        }
        _ => String::new(),
    };
    drop(node.kill().await);
    (result, report)
}

/// Compares the README's matrix block with `table`: a mismatch fails, or with `UPDATE_MATRIX=1`
/// is rewritten; with an SDK skipped the table is incomplete, neither checked nor rewritten.
fn check_readme(table: &str, skipped: &[Sdk]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("read README.md");
    let current = table::block(&readme).unwrap_or_else(|| {
        panic!(
            "README.md has no {} ... {} block",
            table::OPEN,
            table::CLOSE
        )
    });
    if current == table::framed(table) {
        return;
    }
    let skipped_names: Vec<&str> = skipped.iter().map(|sdk| sdk.name()).collect();
    if !skipped.is_empty() {
        println!(
            "the README's matrix table was not checked (nor rewritten): {skipped_names:?} skipped, \
             so the table is incomplete"
        );
        return;
    }
    if std::env::var_os("UPDATE_MATRIX").is_some() {
        let updated = table::replace(&readme, table).expect("the README's matrix block");
        std::fs::write(&path, updated).expect("write README.md");
        return;
    }
    panic!(
        "README.md's matrix table is out of date (UPDATE_MATRIX=1 rewrites it); expected:\n{}\n{table}{}",
        table::OPEN,
        table::CLOSE
    );
}
