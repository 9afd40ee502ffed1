//! The side-by-side results as JSON and as a table with the ratios lintel/NATS and lintel/floor.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::compare::Outcome;
use crate::measure::Sample;
use crate::systems::Kind;

/// `{"p50_us":..,"p99_us":..,"rps":..}`, or null when the system did not run.
pub fn sample_json(sample: Option<&Sample>) -> Value {
    match sample {
        Some(sample) => json!({
            "p50_us": round1(sample.p50_us),
            "p99_us": round1(sample.p99_us),
            "rps": sample.rps.round(),
        }),
        None => Value::Null,
    }
}

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// The document written to `vs-nats.json`.
pub fn to_json(machine: Value, outcomes: &[Outcome]) -> Value {
    let scenarios: Vec<Value> = outcomes
        .iter()
        .map(|outcome| {
            let results: serde_json::Map<String, Value> = Kind::ALL
                .iter()
                .map(|kind| {
                    let sample = outcome.results.get(kind).and_then(Option::as_ref);
                    (kind.key().to_owned(), sample_json(sample))
                })
                .collect();
            json!({
                "name": outcome.scenario.name(),
                "concurrency": outcome.scenario.concurrency,
                "workers": outcome.scenario.workers,
                "payload_bytes": outcome.scenario.payload_bytes,
                "results": results,
            })
        })
        .collect();
    let notes: Vec<&String> = outcomes.iter().flat_map(|o| &o.notes).collect();
    let mut doc = json!({ "machine": machine, "scenarios": scenarios });
    if !notes.is_empty() {
        doc["notes"] = json!(notes);
    }
    doc
}

/// Writes `doc` pretty-printed to `path`, creating its directory.
///
/// # Errors
/// The I/O error, as text.
pub fn write_json(path: &Path, doc: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(doc).map_err(|err| err.to_string())?;
    std::fs::write(path, text + "\n").map_err(|err| format!("{}: {err}", path.display()))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "-".to_owned(),
    }
}

fn cell(sample: Option<&Sample>) -> String {
    match sample {
        Some(s) => format!("{:>8.1} {:>8.1} {:>9.0}", s.p50_us, s.p99_us, s.rps),
        None => format!("{:>8} {:>8} {:>9}", "-", "-", "-"),
    }
}

/// The table: per system p50 us, p99 us and rps, then lintel/NATS and lintel/floor for p50 and rps.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} | {:^27} | {:^27} | {:^27} | {:^13} | {:^13}",
        "scenario", "lintel", "nats", "floor", "lintel/nats", "lintel/floor"
    );
    let head = format!("{:>8} {:>8} {:>9}", "p50 us", "p99 us", "rps");
    let _ = writeln!(
        out,
        "{:<16} | {head} | {head} | {head} | {:>6} {:>6} | {:>6} {:>6}",
        "", "p50", "rps", "p50", "rps"
    );
    let _ = writeln!(out, "{}", "-".repeat(16 + 3 * 30 + 2 * 16 + 1));
    for outcome in outcomes {
        let get = |kind| outcome.results.get(&kind).and_then(Option::as_ref);
        let (lintel, nats, floor) = (get(Kind::Lintel), get(Kind::Nats), get(Kind::Floor));
        let p50 = |s: Option<&Sample>| s.map(|s| s.p50_us);
        let rps = |s: Option<&Sample>| s.map(|s| s.rps);
        let _ = writeln!(
            out,
            "{:<16} | {} | {} | {} | {:>6} {:>6} | {:>6} {:>6}",
            outcome.scenario.name(),
            cell(lintel),
            cell(nats),
            cell(floor),
            ratio(p50(lintel), p50(nats)),
            ratio(rps(lintel), rps(nats)),
            ratio(p50(lintel), p50(floor)),
            ratio(rps(lintel), rps(floor)),
        );
    }
    out.push_str(
        "ratios: p50 below 1 means lintel answers faster; rps above 1 means lintel carries more\n",
    );
    out
}
