//! lintel side by side with NATS request-reply and a plain two-hop TCP relay (the floor), on
//! loopback, plus a scaling mode.
//!
//! ```sh
//! cargo bench --bench vs_nats -- --quick      # under a minute; results in target/vs-nats-quick/
//! cargo bench --bench vs_nats                 # 5 rounds x 5 s per system and scenario
//! cargo bench --bench vs_nats -- --mode embedded   # the producer inside lintel's node
//! cargo bench --bench vs_nats -- --scaling    # connections, pools, payload, idle memory
//! cargo bench --bench vs_nats -- --cross-node # producer and workers on different middles
//! ```
//!
//! By default (`--mode all`) every system's middle (`lintel serve`, nats-server, the floor's
//! relay), each of its workers and its producer run in processes of their own; see [`mode`].
//! The NATS and floor pieces are this binary started again in a peer role (`process`, `peer`).
//!
//! `--cross-node` puts a second middle between producer and workers: two peered lintel nodes,
//! two routed nats-servers, a three-hop floor; see [`topology`]. It measures 1 and 256 in
//! flight and writes `cross-node.json`.
//!
//! # Layout
//! - `mode`: where each piece runs; `topology`: one middle or two; `kind`: the three systems; `systems`: them behind one enum;
//!   `lintel`, `nats`, `floor`: each system; `process`: child processes and the peer protocol;
//!   `peer`: the peer roles; `measure`: closed-loop load and percentiles; `compare`: the
//!   interleaved scenario grid and per-round ratios; `scaling`: the scaling mode; `report`: JSON
//!   and table; `plot`: the SVG; `machine`: machine facts, open-file limit, memory and CPU time
//!   of a process.

mod compare;
mod floor;
mod kind;
mod lintel;
mod machine;
mod measure;
mod mode;
mod nats;
mod peer;
mod plot;
mod process;
mod report;
mod scaling;
mod systems;
mod tls;
mod topology;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use serde_json::json;

use crate::compare::Settings;
use crate::kind::Kind;
use crate::mode::Mode;
use crate::process::{Launcher, Role};
use crate::topology::Topology;

/// The allocator the `lintel` binary ships with; every system measured in this process (and in
/// its peer processes) runs on it alike.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "lintel vs NATS vs the TCP relay floor, on loopback")]
struct Args {
    /// One short round per scenario on a reduced grid; finishes in under a minute.
    #[arg(long)]
    quick: bool,
    /// Run the scaling tests instead of the side-by-side grid.
    #[arg(long)]
    scaling: bool,
    /// Producer and workers on different middles (two peered lintel nodes, two routed
    /// nats-servers, a three-hop floor), at 1 and 256 in flight; writes `cross-node.json`.
    /// Mode `all` only.
    #[arg(long, conflicts_with = "scaling")]
    cross_node: bool,
    /// Where each system's pieces run: `all` (middle, workers and producer each in their own
    /// processes), `middle` (only the middle in its own process), `embedded` (the producer in
    /// the middle's process, workers in their own; NATS left out) or `diagnostic` (everything
    /// in the harness but nats-server; not for publication).
    #[arg(long, value_enum, default_value_t = Mode::All)]
    mode: Mode,
    /// Rounds per system and scenario; each metric is the median of the rounds
    /// [default: 5, scaling 3, quick 1].
    #[arg(long)]
    runs: Option<usize>,
    /// Seconds per round [default: 5, scaling 2, quick 0.3].
    #[arg(long)]
    seconds: Option<f64>,
    /// Most requests in one round, whatever the duration.
    #[arg(long, default_value_t = 20_000_000)]
    max_count: u64,
    /// Where results go [default: bench-results, or target/vs-nats-quick with --quick].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also run lintel with TLS between every piece and its node (`lintel-tls`, certificates
    /// made for the run), interleaved with the rest; writes `vs-nats-tls.json` (or
    /// `cross-node-tls.json`). Mode `all` only.
    #[arg(long, conflicts_with = "scaling")]
    tls: bool,
    /// Leave NATS out.
    #[arg(long)]
    no_nats: bool,
    /// Measure only these systems (lintel, nats, floor, lintel-tls); the others are recorded as
    /// null.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run only these scenarios of the grid, by name (`c256-w4-64B`).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// With --scaling: run only these sections (idle, connections, pools, payload).
    #[arg(long, value_delimiter = ',')]
    sections: Vec<String>,
    /// Passed by `cargo bench`; without it the binary only explains itself.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> ExitCode {
    // Started by the harness as a peer process: do that and nothing else.
    match Role::from_env() {
        Some(Ok(role)) => return peer::run(role),
        Some(Err(err)) => {
            eprintln!("vs_nats peer: {err}");
            return ExitCode::FAILURE;
        }
        None => {}
    }
    let args = Args::parse();
    if !args.bench {
        println!("vs_nats is a benchmark: run it with `cargo bench --bench vs_nats [-- --quick]`");
        return ExitCode::SUCCESS;
    }
    if args.cross_node && args.mode != Mode::All {
        eprintln!("vs_nats: --cross-node runs in mode all only");
        return ExitCode::FAILURE;
    }
    if args.tls && args.mode != Mode::All {
        eprintln!("vs_nats: --tls runs in mode all only");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let launcher = match Launcher::this_binary() {
        Ok(launcher) => launcher,
        Err(err) => {
            eprintln!("vs_nats: {err}");
            return ExitCode::FAILURE;
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tls = if args.tls {
        match tls::TlsFiles::generate(&root.join("target/vs-nats-tls")) {
            Ok(files) => Some(files),
            Err(err) => {
                eprintln!("vs_nats: {err}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let out = args.out.clone().unwrap_or_else(|| {
        if args.quick {
            root.join("target/vs-nats-quick")
        } else {
            root.join("bench-results")
        }
    });
    let (default_runs, default_seconds) = match (args.quick, args.scaling) {
        (true, _) => (1, 0.3),
        (false, true) => (3, 2.0),
        (false, false) => (5, 5.0),
    };
    let settings = Settings {
        runs: args.runs.unwrap_or(default_runs).max(1),
        seconds: args.seconds.unwrap_or(default_seconds).max(0.01),
        max_count: args.max_count.max(1),
        mode: args.mode,
        topology: if args.cross_node {
            Topology::CrossNode
        } else {
            Topology::OneMiddle
        },
        launcher,
        tls,
    };
    let nats_wanted = args.only.is_empty() || args.only.iter().any(|o| o == "nats");
    let server_bin = if args.no_nats || !nats_wanted {
        println!("NATS left out; its results are recorded as null");
        None
    } else if !args.scaling && !args.mode.runs(Kind::Nats) {
        println!(
            "NATS has no {} layout (nats-server cannot run inside another process); its results \
             are recorded as null",
            args.mode.key()
        );
        None
    } else {
        match nats::find_or_install() {
            Ok(bin) => Some(bin),
            Err(err) => {
                eprintln!("SKIPPING NATS: {err}");
                eprintln!("NATS results are recorded as null.");
                None
            }
        }
    };
    let started = Instant::now();
    let result = runtime.block_on(async {
        if args.scaling {
            run_scaling(&args, &settings, server_bin.as_deref(), &out).await
        } else {
            run_compare(&args, &settings, server_bin.as_deref(), &out).await
        }
    });
    println!("\nfinished in {:.1} s", started.elapsed().as_secs_f64());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("vs_nats: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The run in one line: what, how long, which mode.
fn describe_run(args: &Args, settings: &Settings) -> String {
    format!(
        "{}{}: {} round(s) x {} s per system and scenario; mode {}",
        match (args.scaling, settings.topology) {
            (true, _) => "scaling",
            (false, Topology::OneMiddle) => "compare",
            (false, Topology::CrossNode) => "compare cross-node",
        },
        if args.quick { " quick" } else { "" },
        settings.runs,
        settings.seconds,
        settings.mode.key(),
    )
}

/// `vs-nats.json` for the default mode, `vs-nats-<mode>.<ext>` for the others, so a run in
/// another mode never replaces the all-separate results; `cross-node.<ext>` cross-node; a run
/// with `--tls` adds `-tls` to the name.
fn result_file(out: &Path, settings: &Settings, ext: &str) -> PathBuf {
    let tls = if settings.tls.is_some() { "-tls" } else { "" };
    match (settings.topology, settings.mode) {
        (Topology::CrossNode, _) => out.join(format!("cross-node{tls}.{ext}")),
        (Topology::OneMiddle, Mode::All) => out.join(format!("vs-nats{tls}.{ext}")),
        (Topology::OneMiddle, other) => out.join(format!("vs-nats-{}{tls}.{ext}", other.key())),
    }
}

async fn run_compare(
    args: &Args,
    settings: &Settings,
    server_bin: Option<&Path>,
    out: &Path,
) -> Result<(), String> {
    let servers = server_bin.map(|bin| match settings.topology {
        Topology::OneMiddle => nats::NatsServers::one(bin),
        Topology::CrossNode => nats::NatsServers::routed_pair(bin),
    });
    let servers = match servers {
        Some(Ok(servers)) => Some(servers),
        Some(Err(err)) => {
            eprintln!("SKIPPING NATS: {err}");
            None
        }
        None => None,
    };
    let kinds: Vec<Kind> = Kind::EVERY
        .into_iter()
        .filter(|k| *k != Kind::Nats || servers.is_some())
        .filter(|k| *k != Kind::LintelTls || settings.tls.is_some())
        .filter(|k| settings.mode.runs(*k))
        .filter(|k| args.only.is_empty() || args.only.iter().any(|o| o == k.key()))
        .collect();
    // Taken before measuring, so the date and commit are those of the build being measured.
    let extra = json!({
        "runs": settings.runs,
        "seconds_per_round": settings.seconds,
        "nats_server": servers.as_ref().map(nats::NatsServers::version),
    });
    let machine = machine::describe(&describe_run(args, settings), extra);
    let mut scenarios = match (settings.topology, args.quick) {
        (Topology::OneMiddle, true) => compare::grid(&[1, 64, 256], &[4], &[64, 4 << 10, 64 << 10]),
        (Topology::OneMiddle, false) => {
            compare::grid(&[1, 64, 256], &[1, 4], &[64, 4 << 10, 64 << 10])
        }
        (Topology::CrossNode, true) => compare::grid(&[1, 256], &[4], &[64]),
        (Topology::CrossNode, false) => compare::grid(&[1, 256], &[4], &[64, 4 << 10]),
    };
    if !args.scenarios.is_empty() {
        let known: Vec<String> = scenarios.iter().map(compare::Scenario::name).collect();
        let unknown: Vec<&String> = args
            .scenarios
            .iter()
            .filter(|name| !known.contains(name))
            .collect();
        if !unknown.is_empty() {
            println!(
                "not in this grid, left out: {unknown:?}; the grid has {}",
                known.join(", ")
            );
        }
        scenarios.retain(|scenario| args.scenarios.contains(&scenario.name()));
    }
    println!(
        "{} scenarios x {} systems, {}\n{}; {}{}",
        scenarios.len(),
        kinds.len(),
        describe_run(args, settings),
        settings.mode.label(),
        settings.topology.label(),
        if settings.mode.publishable() {
            ""
        } else {
            "\nDIAGNOSTIC, NOT FOR PUBLICATION"
        }
    );
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        let outcome = compare::run_scenario(scenario, &kinds, servers.as_ref(), settings).await;
        let brief: Vec<String> = Kind::EVERY
            .iter()
            .filter(|kind| **kind != Kind::LintelTls || settings.tls.is_some())
            .map(|&kind| match outcome.sample(kind) {
                Some(s) => format!("{} {:.1}us {:.0}/s", kind.key(), s.p50_us, s.rps),
                None => format!("{} -", kind.key()),
            })
            .collect();
        println!(
            "[{:>2}/{}] {:>6.1}s {:<16} {}",
            index + 1,
            scenarios.len(),
            started.elapsed().as_secs_f64(),
            scenario.name(),
            brief.join("  ")
        );
        outcomes.push(outcome);
    }
    let mut doc = report::to_json(machine.clone(), settings.mode, &outcomes);
    settings.topology.annotate(&mut doc);
    let json_path = result_file(out, settings, "json");
    report::write_json(&json_path, &doc)?;
    println!("\n{}", report::table(settings.mode, &outcomes));
    println!("topology {}", settings.topology.label());
    println!("wrote {}", json_path.display());
    if settings.topology == Topology::CrossNode {
        // Two concurrencies make no curve; the table and the JSON say it all.
        return Ok(());
    }
    let svg_path = result_file(out, settings, "svg");
    let subtitle = format!(
        "{} cores, {}, kernel {}, {}, commit {}; {}",
        machine["cores"],
        machine["cpu_model"].as_str().unwrap_or("?"),
        machine["kernel"].as_str().unwrap_or("?"),
        machine["date"].as_str().unwrap_or("?"),
        machine["commit"].as_str().unwrap_or("?"),
        settings.mode.label(),
    );
    let Some((workers, payload)) = plot_family(&outcomes) else {
        println!("plot skipped: no scenario was measured");
        return Ok(());
    };
    match plot::draw(
        &svg_path,
        &outcomes,
        workers,
        payload,
        settings.mode,
        &subtitle,
    ) {
        Ok(()) => println!("wrote {}", svg_path.display()),
        Err(err) => println!("plot skipped: {err}"),
    }
    Ok(())
}

/// The scenario family the plot draws: 4 workers at 64 B when measured, otherwise the family
/// with the most scenarios measured (the first of them on a tie).
fn plot_family(outcomes: &[compare::Outcome]) -> Option<(usize, usize)> {
    let families: Vec<(usize, usize)> = outcomes
        .iter()
        .map(|outcome| (outcome.scenario.workers, outcome.scenario.payload_bytes))
        .collect();
    if families.contains(&(4, 64)) {
        return Some((4, 64));
    }
    let count = |family: &(usize, usize)| families.iter().filter(|f| *f == family).count();
    families
        .iter()
        .copied()
        .rev()
        .max_by_key(|family| count(family))
}

async fn run_scaling(
    args: &Args,
    settings: &Settings,
    server_bin: Option<&Path>,
    out: &Path,
) -> Result<(), String> {
    let mut levels = if args.quick {
        scaling::Levels::quick()
    } else {
        scaling::Levels::full()
    };
    levels.sections.clone_from(&args.sections);
    println!("scaling, {}", describe_run(args, settings));
    let machine = machine::describe(
        &describe_run(args, settings),
        json!({ "runs": settings.runs, "seconds_per_round": settings.seconds }),
    );
    let mut doc = scaling::run(&levels, settings, server_bin).await;
    doc["machine"] = machine;
    let path = out.join("scaling.json");
    report::write_json(&path, &doc)?;
    println!("wrote {}", path.display());
    Ok(())
}
