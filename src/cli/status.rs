//! `lintel status`: a node's pools, workers, capacity, in-flight work and waiting dispatches.

use std::process::ExitCode;

use lintel_client::{Client, ClientConfig};
use lintel_wire::NodeStatus;

use super::exit::fail;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Node address.
    #[arg(long, default_value = "127.0.0.1:7400", env = "LINTEL_CONNECT")]
    connect: String,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
    /// Auth token for nodes that require one.
    #[arg(long, env = "LINTEL_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
}

pub(super) async fn run(args: Args) -> ExitCode {
    let config = ClientConfig {
        name: "lintel-status".into(),
        auth_token: args.auth_token,
        ..ClientConfig::default()
    };
    let client = match Client::connect(args.connect.as_str(), config).await {
        Ok(client) => client,
        Err(err) => return fail(format!("cannot connect to {}: {err}", args.connect)),
    };
    let status = match client.status().await {
        Ok(status) => status,
        Err(err) => return fail(format!("no status: {err}")),
    };
    client.close().await;
    if args.json {
        match serde_json::to_string_pretty(&status) {
            Ok(json) => println!("{json}"),
            Err(err) => return fail(err),
        }
    } else {
        print!("{}", render(&status));
    }
    ExitCode::SUCCESS
}

/// The status as text for people.
fn render(status: &NodeStatus) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let c = &status.counters;
    let _ = writeln!(
        out,
        "node {}  up {:.1}s  connections {}{}",
        status.node_id,
        status.uptime_ms as f64 / 1000.0,
        status.connections,
        if status.draining { "  DRAINING" } else { "" }
    );
    let _ = writeln!(
        out,
        "submitted {}  pushed {}  completed {}  no-worker {}  worker-lost {}  timeout {}  refused {}  cancelled {}  draining {}",
        c.submitted, c.pushed, c.completed, c.no_worker, c.worker_lost, c.timed_out, c.refused, c.cancelled, c.draining
    );
    let _ = writeln!(
        out,
        "late-replies {}  dropped-replies {}  reclaimed-slots {}",
        c.late_replies, c.dropped_replies, c.reclaimed_slots
    );
    if status.pools.is_empty() {
        let _ = writeln!(out, "\nno pools: no worker is registered");
    }
    for pool in &status.pools {
        let _ = writeln!(
            out,
            "\npool {}  ({} / {})",
            pool.channel, pool.namespace, pool.task_queue
        );
        let _ = writeln!(
            out,
            "  {:>6} {:>6} {:<24} {:<12} {:>9} {:<}",
            "worker", "conn", "identity", "node", "in-flight", "activities"
        );
        for w in &pool.workers {
            let _ = writeln!(
                out,
                "  {:>6} {:>6} {:<24} {:<12} {:>4}/{:<4} {}{}",
                w.worker_id,
                w.pid,
                w.identity,
                w.node.as_deref().unwrap_or("-"),
                w.in_flight,
                w.max_concurrency,
                w.activity_types.join(","),
                if w.draining { "  (draining)" } else { "" }
            );
        }
    }
    for waiting in &status.waiting {
        let _ = writeln!(
            out,
            "\nwaiting {} at {}/{}/{}: {:?}",
            waiting.waiting,
            waiting.namespace,
            waiting.task_queue,
            waiting.activity_type,
            waiting.census.reason
        );
    }
    out
}
