//! Scaling: lintel's latency (1 in flight) and throughput (64 in flight) as connected workers
//! grow, as distinct pools grow and as the payload grows (that one beside NATS and the floor);
//! and resident memory per idle worker connection for a `lintel serve` process and for
//! nats-server.

use std::sync::Arc;
use std::time::Instant;

use lintel::NodeConfig;
use serde_json::{json, Value};

use crate::compare::{self, Scenario, Settings};
use crate::kind::Kind;
use crate::lintel::{self as lintel_sys, Lintel, LintelChild, LintelTarget};
use crate::machine;
use crate::measure::{self, Load, Sample, Target};
use crate::nats::{self, NatsServer};
use crate::report::sample_json;

/// The levels to walk.
#[derive(Debug, Clone)]
pub struct Levels {
    pub connections: Vec<usize>,
    pub pools: Vec<usize>,
    pub payloads: Vec<usize>,
    /// Idle connections for the resident-memory measurement.
    pub idle: usize,
    /// Which of `idle`, `connections`, `pools`, `payload` to run; empty runs all.
    pub sections: Vec<String>,
}

impl Levels {
    pub fn full() -> Self {
        Self {
            connections: vec![1, 100, 1_000, 10_000],
            pools: vec![1, 100, 1_000, 10_000, 100_000],
            payloads: vec![64, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20],
            idle: 10_000,
            sections: Vec::new(),
        }
    }

    pub fn quick() -> Self {
        Self {
            connections: vec![1, 100, 1_000],
            pools: vec![1, 1_000, 10_000],
            payloads: vec![64, 64 << 10, 1 << 20],
            idle: 1_000,
            sections: Vec::new(),
        }
    }
}

/// Namespaces one worker registers in the pools test; the node's `max_set_len` is raised to it.
const POOLS_PER_WORKER: usize = 1_000;

/// File descriptors kept back for everything that is not a worker connection.
const FD_RESERVE: u64 = 512;

/// Runs every scaling test and returns the document for `scaling.json`.
pub async fn run(
    levels: &Levels,
    settings: &Settings,
    server_bin: Option<&std::path::Path>,
) -> Value {
    let nofile = machine::raise_nofile(65_536);
    let cap = usize::try_from(nofile.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
    println!("open-file limit {nofile}: at most {cap} worker connections from this process");
    let capped = |n: usize| {
        if n > cap {
            println!("  capping {n} connections at {cap} (open-file limit)");
        }
        n.min(cap)
    };

    let wanted = |section: &str| {
        let wanted = levels.sections.is_empty() || levels.sections.iter().any(|s| s == section);
        if !wanted {
            println!("\n== {section}: skipped");
        }
        wanted
    };

    let mut idle_rss = Value::Null;
    if wanted("idle") {
        let idle = capped(levels.idle);
        println!("\n== resident memory per idle worker connection, {idle} connections");
        idle_rss = self::idle_rss(idle, server_bin).await;
        println!(
            "{}",
            serde_json::to_string_pretty(&idle_rss).unwrap_or_default()
        );
    }

    let mut by_connections = Value::Null;
    if wanted("connections") {
        println!(
            "\n== lintel as connected workers grow (all in one pool; lintel serve child process)"
        );
        let connections: Vec<usize> = levels.connections.iter().map(|&n| capped(n)).collect();
        by_connections = self::by_connections(&connections, settings)
            .await
            .map_or_else(|err| failed("connections", err), Value::Array);
    }

    let mut by_pools = Value::Null;
    if wanted("pools") {
        println!(
            "\n== lintel as distinct pools grow ({POOLS_PER_WORKER} namespaces per worker connection)"
        );
        by_pools = self::by_pools(&levels.pools, settings)
            .await
            .map_or_else(|err| failed("pools", err), Value::Array);
    }

    let mut by_payload = Value::Null;
    if wanted("payload") {
        println!(
            "\n== payload growth, lintel vs NATS vs floor (4 workers, mode {})",
            settings.mode.key()
        );
        by_payload = self::by_payload(&levels.payloads, settings, server_bin).await;
    }

    json!({
        "open_files_limit": nofile,
        "idle_rss": idle_rss,
        "connections": by_connections,
        "pools": by_pools,
        "payload": by_payload,
    })
}

fn failed(section: &str, err: String) -> Value {
    eprintln!("  ! {section} scaling failed: {err}");
    json!({ "error": err })
}

fn per_connection(before: Option<u64>, after: Option<u64>, n: usize) -> Value {
    match (before, after) {
        (Some(before), Some(after)) if n > 0 => json!({
            "connections": n,
            "rss_before_kib": before,
            "rss_after_kib": after,
            "bytes_per_connection": (after.saturating_sub(before) * 1024) / n as u64,
        }),
        _ => Value::Null,
    }
}

/// VmRSS before and after `n` idle registered workers (lintel) or queue subscribers (NATS).
async fn idle_rss(n: usize, server_bin: Option<&std::path::Path>) -> Value {
    let lintel = async {
        let child = LintelChild::start(n + 100).await?;
        let before = machine::rss_kib(child.pid());
        let registrations = (0..n)
            .map(|i| lintel_sys::echo_registration(vec!["idle".into()], i))
            .collect();
        let workers = lintel_sys::spawn_workers(child.addr, registrations).await?;
        let after = machine::rss_kib(child.pid());
        lintel_sys::stop_workers(&workers).await;
        Ok::<_, String>(per_connection(before, after, n))
    }
    .await
    .unwrap_or_else(|err| {
        eprintln!("  ! lintel idle rss failed: {err}");
        json!({ "error": err })
    });
    let nats = match server_bin {
        None => Value::Null,
        Some(bin) => async {
            let server = NatsServer::start(bin)?;
            let before = machine::rss_kib(server.pid());
            let streams = nats::idle_subscribers(server.addr, n).await?;
            let after = machine::rss_kib(server.pid());
            drop(streams);
            Ok::<_, String>(per_connection(before, after, n))
        }
        .await
        .unwrap_or_else(|err| {
            eprintln!("  ! nats idle rss failed: {err}");
            json!({ "error": err })
        }),
    };
    json!({ "lintel": lintel, "nats": nats })
}

/// Warm-up, then `settings.runs` rounds; the per-metric median.
async fn median_run<T: Target>(
    target: &Arc<T>,
    concurrency: usize,
    payload: usize,
    settings: &Settings,
) -> Sample {
    let warmup = Load::new(concurrency, settings.warmup(), settings.max_count, payload);
    measure::run(target, &warmup).await;
    let load = Load {
        duration: settings.round(),
        ..warmup
    };
    let mut rounds = Vec::new();
    for _ in 0..settings.runs.max(1) {
        rounds.push(measure::run(target, &load).await);
    }
    measure::median_of(&rounds)
}

/// [`median_run`] through a lintel set up with [`Lintel::start_with`].
async fn median_run_on(
    lintel: &Lintel,
    concurrency: usize,
    payload: usize,
    settings: &Settings,
) -> Sample {
    let warmup = Load::new(concurrency, settings.warmup(), settings.max_count, payload);
    lintel.measure(&warmup).await;
    let load = Load {
        duration: settings.round(),
        ..warmup
    };
    let mut rounds = Vec::new();
    for _ in 0..settings.runs.max(1) {
        rounds.push(lintel.measure(&load).await);
    }
    measure::median_of(&rounds)
}

fn print_row(label: &str, c1: &Sample, c64: &Sample, extra: &str) {
    println!(
        "  {label:<22} c=1: p50 {:>8.1} us  p99 {:>8.1} us | c=64: {:>9.0} rps  p50 {:>8.1} us{extra}",
        c1.p50_us, c1.p99_us, c64.rps, c64.p50_us
    );
    for sample in [c1, c64] {
        if sample.failed() > 0 {
            eprintln!("  ! {label}: failed requests {:?}", sample.failures);
        }
    }
}

/// Grows one pool of echo workers on a `lintel serve` child through `levels` connections.
async fn by_connections(levels: &[usize], settings: &Settings) -> Result<Vec<Value>, String> {
    let most = levels.iter().copied().max().unwrap_or(1);
    let child = LintelChild::start(most + 100).await?;
    let client = lintel_sys::connect_client(child.addr).await?;
    let target = Arc::new(LintelTarget::new(
        vec![client],
        vec![lintel_sys::NAMESPACE.into()],
    ));
    let mut workers = Vec::new();
    let mut rows = Vec::new();
    for &level in levels {
        let more = (workers.len()..level)
            .map(|i| lintel_sys::echo_registration(vec![lintel_sys::NAMESPACE.into()], i))
            .collect();
        workers.extend(lintel_sys::spawn_workers(child.addr, more).await?);
        let c1 = median_run(&target, 1, 64, settings).await;
        let c64 = median_run(&target, 64, 64, settings).await;
        let rss = machine::rss_kib(child.pid());
        print_row(
            &format!("{level} connections"),
            &c1,
            &c64,
            &format!("  node rss {} KiB", rss.unwrap_or(0)),
        );
        rows.push(json!({
            "connections": level,
            "c1": sample_json(Some(&c1)),
            "c64": sample_json(Some(&c64)),
            "node_rss_kib": rss,
        }));
    }
    lintel_sys::stop_workers(&workers).await;
    Ok(rows)
}

/// An in-process node with `pools` pools, [`POOLS_PER_WORKER`] per worker connection; requests go
/// to each pool in turn (a stride through them, so consecutive requests hit different workers).
async fn by_pools(levels: &[usize], settings: &Settings) -> Result<Vec<Value>, String> {
    let mut rows = Vec::new();
    for &pools in levels {
        let names: Vec<String> = (0..pools).map(|i| format!("p{i}")).collect();
        let registrations: Vec<_> = names
            .chunks(POOLS_PER_WORKER)
            .enumerate()
            .map(|(i, chunk)| lintel_sys::echo_registration(chunk.to_vec(), i))
            .collect();
        let connections = registrations.len();
        let config = NodeConfig {
            max_set_len: POOLS_PER_WORKER,
            ..NodeConfig::default()
        };
        // A stride coprime to the count visits every pool, in an order that hops between workers.
        let stride = (0..)
            .map(|k| 7_919 + k)
            .find(|s| gcd(*s, pools) == 1)
            .unwrap_or(1);
        let order: Vec<String> = (0..pools)
            .map(|i| names[(i * stride) % pools].clone())
            .collect();
        let started = Instant::now();
        let lintel = Lintel::start_with(config, registrations, order).await?;
        let registered_in = started.elapsed();
        let c1 = median_run_on(&lintel, 1, 64, settings).await;
        let c64 = median_run_on(&lintel, 64, 64, settings).await;
        print_row(
            &format!("{pools} pools"),
            &c1,
            &c64,
            &format!(
                "  ({connections} connections, registered in {:.0} ms)",
                registered_in.as_secs_f64() * 1e3
            ),
        );
        rows.push(json!({
            "pools": pools,
            "connections": connections,
            "register_ms": (registered_in.as_secs_f64() * 1e3).round(),
            "c1": sample_json(Some(&c1)),
            "c64": sample_json(Some(&c64)),
        }));
        lintel.stop().await;
    }
    Ok(rows)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Payload growth at 1 and 64 in flight, 4 workers, the three systems interleaved.
async fn by_payload(
    payloads: &[usize],
    settings: &Settings,
    server_bin: Option<&std::path::Path>,
) -> Value {
    let server = server_bin.and_then(|bin| {
        nats::NatsServers::one(bin)
            .map_err(|err| eprintln!("  ! {err}; NATS left out of the payload scaling"))
            .ok()
    });
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| *k != Kind::Nats || server.is_some())
        .filter(|k| settings.mode.runs(*k))
        .collect();
    let mut rows = Vec::new();
    for &payload_bytes in payloads {
        let mut row = json!({ "payload_bytes": payload_bytes });
        for concurrency in [1, 64] {
            let scenario = Scenario {
                concurrency,
                workers: 4,
                payload_bytes,
            };
            let outcome = compare::run_scenario(&scenario, &kinds, server.as_ref(), settings).await;
            let cell = |kind: Kind| outcome.sample(kind);
            let line: Vec<String> = Kind::ALL
                .iter()
                .map(|&kind| match cell(kind) {
                    Some(s) => format!("{} p50 {:.1} us {:.0} rps", kind.key(), s.p50_us, s.rps),
                    None => format!("{} -", kind.key()),
                })
                .collect();
            println!("  {:<16} {}", scenario.name(), line.join(" | "));
            let results: serde_json::Map<String, Value> = Kind::ALL
                .iter()
                .map(|&kind| (kind.key().to_owned(), sample_json(cell(kind))))
                .collect();
            row[format!("c{concurrency}")] = Value::Object(results);
        }
        rows.push(row);
    }
    Value::Array(rows)
}
