//! lintel side by side with NATS request-reply and a plain two-hop TCP relay (the floor), on
//! loopback, plus a scaling mode.
//!
//! ```sh
//! cargo bench --bench vs_nats -- --quick      # under a minute; results in target/vs-nats-quick/
//! cargo bench --bench vs_nats                 # 5 rounds x 5 s per system and scenario
//! cargo bench --bench vs_nats -- --scaling    # connections, pools, payload, idle memory
//! ```
//!
//! # Layout
//! - `measure`: closed-loop load and percentiles; `systems`: the three systems behind one enum;
//!   `lintel`, `nats`, `floor`: each system; `compare`: the interleaved scenario grid;
//!   `scaling`: the scaling mode; `report`: JSON and table; `plot`: the SVG;
//!   `machine`: machine facts, open-file limit, resident memory.

mod compare;
mod floor;
mod lintel;
mod machine;
mod measure;
mod nats;
mod plot;
mod report;
mod scaling;
mod systems;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use serde_json::json;

use crate::compare::Settings;
use crate::systems::Kind;

/// The allocator the `lintel` binary ships with; every system measured in this process
/// (lintel, the NATS client and responders, the floor) runs on it alike.
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
    /// Run lintel's node as a `lintel serve` child process, as nats-server runs, instead of in
    /// the harness process.
    #[arg(long)]
    lintel_process: bool,
    /// Leave NATS out.
    #[arg(long)]
    no_nats: bool,
    /// Measure only these systems (lintel, nats, floor); the others are recorded as null.
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
    let args = Args::parse();
    if !args.bench {
        println!("vs_nats is a benchmark: run it with `cargo bench --bench vs_nats [-- --quick]`");
        return ExitCode::SUCCESS;
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
        lintel_child: args.lintel_process,
    };
    let nats_wanted = args.only.is_empty() || args.only.iter().any(|o| o == "nats");
    let server_bin = if args.no_nats || !nats_wanted {
        println!("NATS left out; its results are recorded as null");
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

fn mode(args: &Args, settings: &Settings) -> String {
    format!(
        "{}{}: {} round(s) x {} s per system and scenario; lintel node {}",
        if args.scaling { "scaling" } else { "compare" },
        if args.quick { " quick" } else { "" },
        settings.runs,
        settings.seconds,
        if settings.lintel_child {
            "in a lintel serve child process"
        } else {
            "in the harness process"
        }
    )
}

async fn run_compare(
    args: &Args,
    settings: &Settings,
    server_bin: Option<&Path>,
    out: &Path,
) -> Result<(), String> {
    let server = match server_bin {
        Some(bin) => match nats::NatsServer::start(bin) {
            Ok(server) => Some(server),
            Err(err) => {
                eprintln!("SKIPPING NATS: {err}");
                None
            }
        },
        None => None,
    };
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| *k != Kind::Nats || server.is_some())
        .filter(|k| args.only.is_empty() || args.only.iter().any(|o| o == k.key()))
        .collect();
    // Taken before measuring, so the date and commit are those of the build being measured.
    let extra = json!({
        "runs": settings.runs,
        "seconds_per_round": settings.seconds,
        "nats_server": server.as_ref().map(|s| s.version.clone()),
    });
    let machine = machine::describe(&mode(args, settings), extra);
    let mut scenarios = if args.quick {
        compare::grid(&[1, 64, 256], &[4], &[64, 4 << 10, 64 << 10])
    } else {
        compare::grid(&[1, 64, 256], &[1, 4], &[64, 4 << 10, 64 << 10])
    };
    if !args.scenarios.is_empty() {
        scenarios.retain(|scenario| args.scenarios.contains(&scenario.name()));
    }
    println!(
        "{} scenarios x {} systems, {}",
        scenarios.len(),
        kinds.len(),
        mode(args, settings)
    );
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        let outcome = compare::run_scenario(scenario, &kinds, server.as_ref(), settings).await;
        let brief: Vec<String> = Kind::ALL
            .iter()
            .map(
                |kind| match outcome.results.get(kind).and_then(Option::as_ref) {
                    Some(s) => format!("{} {:.1}us {:.0}/s", kind.key(), s.p50_us, s.rps),
                    None => format!("{} -", kind.key()),
                },
            )
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
    let doc = report::to_json(machine.clone(), &outcomes);
    let json_path = out.join("vs-nats.json");
    report::write_json(&json_path, &doc)?;
    println!("\n{}", report::table(&outcomes));
    let svg_path = out.join("vs-nats.svg");
    let subtitle = format!(
        "{} cores, {}, kernel {}, {}, commit {}; {}",
        machine["cores"],
        machine["cpu_model"].as_str().unwrap_or("?"),
        machine["kernel"].as_str().unwrap_or("?"),
        machine["date"].as_str().unwrap_or("?"),
        machine["commit"].as_str().unwrap_or("?"),
        machine["mode"].as_str().unwrap_or("?"),
    );
    plot::draw(&svg_path, &outcomes, 4, 64, &subtitle)?;
    println!("wrote {} and {}", json_path.display(), svg_path.display());
    Ok(())
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
    println!("scaling, {}", mode(args, settings));
    let machine = machine::describe(
        &mode(args, settings),
        json!({ "runs": settings.runs, "seconds_per_round": settings.seconds }),
    );
    let mut doc = scaling::run(&levels, settings, server_bin).await;
    doc["machine"] = machine;
    let path = out.join("scaling.json");
    report::write_json(&path, &doc)?;
    println!("wrote {}", path.display());
    Ok(())
}
