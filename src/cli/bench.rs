//! `lintel bench`: closed-loop load against a running node, with its own echo workers.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use lintel_client::{Client, ClientTls, DispatchOptions, Worker, WorkerConfig, WorkerHandle};

use super::connect::NodeArgs;
use super::exit::{fail, usage};
use super::extras::{self, FairnessArgs, KeySpread};
use super::histogram;
use super::loadgen::{self, Load, Run};
use lintel::activities::BuiltIn;

#[derive(Debug, clap::Args)]
#[command(override_usage = "lintel bench [OPTIONS]")]
pub(super) struct Args {
    #[command(flatten)]
    target: NodeArgs,
    /// Dispatches in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Input bytes per dispatch.
    #[arg(long, default_value_t = 64)]
    payload: usize,
    /// Run for this many seconds [default: 5 when no --count]; with --count too, whichever
    /// ends first.
    #[arg(long)]
    duration: Option<f64>,
    /// Run this many dispatches.
    #[arg(long)]
    count: Option<u64>,
    /// Write the report as JSON to this file, or to stdout with `-` (the summary line then
    /// goes to stderr).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Echo workers to start against the node; 0 uses the workers already there.
    #[arg(long, default_value_t = 4)]
    pub(super) workers: usize,
    /// Capacity of each started worker.
    #[arg(long, default_value_t = 256)]
    worker_concurrency: u32,
    /// Namespace to dispatch in (and register the started workers in).
    #[arg(long, default_value = "bench")]
    namespace: String,
    /// Write the latency distribution as an SVG to this file, or as text bars with `-` (to
    /// stdout, or to stderr when `--json -` takes stdout).
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
    #[command(flatten)]
    fairness: FairnessArgs,
    /// Spread the load over fairness keys: a count N (keys k0 to kN-1) or a comma list of
    /// KEY[:WEIGHT]. Dispatch loop i of --concurrency dispatches with key i mod their number, so each
    /// key keeps its share in flight; the report counts completions per key.
    #[arg(long, value_name = "N|KEYS", value_parser = extras::key_spread, conflicts_with = "fairness_key")]
    fairness_keys: Option<KeySpread>,
}

pub(super) async fn run(args: Args) -> ExitCode {
    let spread = args.fairness_keys.as_ref().map_or(0, |keys| keys.0.len());
    if spread > args.concurrency.max(1) {
        return usage(format!(
            "--fairness-keys names {spread} keys, more than the {} lanes of --concurrency",
            args.concurrency.max(1)
        ));
    }
    let config = match args.target.config("lintel-bench") {
        Ok(config) => config,
        Err(err) => return fail(err),
    };
    let workers = match start_workers(&args, config.tls.as_ref()).await {
        Ok(workers) => workers,
        Err(message) => return fail(message),
    };
    let client = match Client::connect_nodes(args.target.nodes(), config).await {
        Ok(client) => client,
        Err(err) => return fail(args.target.cannot_connect(&err)),
    };
    let duration = match (args.duration, args.count) {
        (Some(seconds), _) => Some(Duration::from_secs_f64(seconds.max(0.0))),
        (None, None) => Some(Duration::from_secs(5)),
        (None, Some(_)) => None,
    };
    let options = args
        .fairness
        .apply(DispatchOptions::default().wait_for_worker(Duration::from_secs(5)));
    let keys = args
        .fairness_keys
        .as_ref()
        .map(|spread| {
            spread
                .0
                .iter()
                .map(|(key, weight)| {
                    let mut options = options.clone().fairness_key(key.clone());
                    if let Some(weight) = weight {
                        options = options.fairness_weight(weight.0);
                    }
                    (key.clone(), options)
                })
                .collect()
        })
        .unwrap_or_default();
    let load = Load {
        namespace: args.namespace.clone(),
        activity: "echo".into(),
        payload: args.payload,
        concurrency: args.concurrency,
        count: args.count,
        duration,
        options,
        keys,
        progress: true,
    };
    eprintln!(
        "bench: {} in flight, {} B payload, {}",
        args.concurrency,
        args.payload,
        match (duration, args.count) {
            (Some(d), _) => format!("{:.1}s", d.as_secs_f64()),
            (None, Some(n)) => format!("{n} dispatches"),
            (None, None) => String::new(),
        }
    );
    let Run { report, latencies } = match loadgen::run(&client, &load).await {
        Ok(run) => run,
        Err(err) => {
            eprintln!("cannot record latencies: {err}");
            return ExitCode::FAILURE;
        }
    };
    client.close().await;
    for worker in &workers {
        worker.drain(Duration::from_secs(5)).await;
    }
    let json_to_stdout = args.json.as_deref() == Some(Path::new("-"));
    let mut summary = format!(
        "{} dispatches in {:.2}s: {:.0}/s  p50 {:.1} us  p99 {:.1} us  p99.9 {:.1} us\n",
        report.dispatches,
        report.elapsed_s,
        report.rps,
        report.p50_us,
        report.p99_us,
        report.p999_us
    );
    for (class, count) in &report.outcomes {
        let _ = writeln!(summary, "  {class}: {count}");
        if class == "refused" {
            for (reason, refusals) in &report.refusals {
                let (count, detail) = (refusals.count, &refusals.detail);
                let _ = writeln!(summary, "    {reason}: {count} ({detail})");
            }
        }
        if let Some(why) = report.oversized.as_ref().filter(|_| class == "oversized") {
            let _ = writeln!(summary, "    {why}");
        }
    }
    if !report.by_key.is_empty() {
        let _ = writeln!(summary, "  by fairness key (completed, p50, p99):");
        for (key, seen) in &report.by_key {
            let _ = writeln!(
                summary,
                "    {key}: {}  p50 {:.1} us  p99 {:.1} us",
                seen.completed, seen.p50_us, seen.p99_us
            );
        }
    }
    if json_to_stdout {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    if let Some(path) = &args.histogram {
        if let Err(err) = histogram::write(path, &latencies, json_to_stdout) {
            return fail(format!(
                "cannot write the histogram to {}: {err}",
                path.display()
            ));
        }
    }
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(|err| err.to_string())
            .and_then(|json| {
                if json_to_stdout {
                    println!("{json}");
                    Ok(())
                } else {
                    std::fs::write(path, json).map_err(|err| err.to_string())
                }
            });
        if let Err(err) = written {
            return fail(format!("cannot write {}: {err}", path.display()));
        }
    }
    if report.failures() > 0 {
        return fail(format!("{} dispatches did not complete", report.failures()));
    }
    ExitCode::SUCCESS
}

async fn start_workers(args: &Args, tls: Option<&ClientTls>) -> Result<Vec<WorkerHandle>, String> {
    let mut workers = Vec::with_capacity(args.workers);
    for index in 0..args.workers {
        let mut config = WorkerConfig::builder()
            .nodes(args.target.nodes())
            .namespace(args.namespace.clone())
            .activity("echo")
            .identity(format!("bench-worker-{index}"))
            .concurrency(args.worker_concurrency)
            .build()
            .map_err(|err| format!("a bench worker: {err}"))?;
        config.auth_token = args.target.auth_token.clone();
        config.tls = tls.cloned();
        workers.push(Worker::spawn(config, BuiltIn));
    }
    for worker in &workers {
        worker
            .wait_registered(Duration::from_secs(10))
            .await
            .map_err(|err| format!("a bench worker did not register: {err}"))?;
    }
    Ok(workers)
}
