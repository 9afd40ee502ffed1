//! The side-by-side results as JSON and as a table, with the per-round ratios lintel/floor and
//! lintel/NATS and the middle's CPU per request.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::compare::{Measured, Metric, Outcome, Round, RATIOS};
use crate::kind::Kind;
use crate::measure::Sample;
use crate::mode::Mode;

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

fn round_json(round: &Round) -> Value {
    json!({
        "p50_us": round1(round.sample.p50_us),
        "p99_us": round1(round.sample.p99_us),
        "rps": round.sample.rps.round(),
        "completed": round.sample.completed,
        "failed": round.sample.failed(),
        "middle_cpu_us_per_request": round.cpu_us_per_request().map(round2),
    })
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// A system's medians, its middle's CPU per request and each round; null when it did not run.
fn measured_json(measured: Option<&Measured>) -> Value {
    let Some(measured) = measured else {
        return Value::Null;
    };
    let mut value = sample_json(Some(&measured.median));
    value["middle_cpu_us_per_request"] = json!(measured.cpu_us_per_request.map(round2));
    value["rounds"] = measured.rounds.iter().map(round_json).collect();
    value
}

/// The document written to `vs-nats.json`: the mode and what it places where, the machine and
/// commit, and per scenario each system's medians and rounds and each ratio's per-round values
/// with their median.
pub fn to_json(machine: Value, mode: Mode, outcomes: &[Outcome]) -> Value {
    let scenarios: Vec<Value> = outcomes
        .iter()
        .map(|outcome| {
            let results: serde_json::Map<String, Value> = Kind::EVERY
                .iter()
                .map(|kind| {
                    let measured = outcome.results.get(kind).and_then(Option::as_ref);
                    (kind.key().to_owned(), measured_json(measured))
                })
                .collect();
            let ratios: serde_json::Map<String, Value> = RATIOS
                .iter()
                .map(|spec| {
                    let value = outcome.ratio(spec).map_or(Value::Null, |(median, rounds)| {
                        json!({
                            "median": round3(median),
                            "rounds": rounds.into_iter().map(round3).collect::<Vec<_>>(),
                        })
                    });
                    (spec.key.to_owned(), value)
                })
                .collect();
            json!({
                "name": outcome.scenario.name(),
                "concurrency": outcome.scenario.concurrency,
                "workers": outcome.scenario.workers,
                "payload_bytes": outcome.scenario.payload_bytes,
                "results": results,
                "ratios": ratios,
            })
        })
        .collect();
    let notes: Vec<&String> = outcomes.iter().flat_map(|o| &o.notes).collect();
    let mut doc = json!({
        "mode": mode.key(),
        "mode_label": mode.label(),
        "publishable": mode.publishable(),
        "commit": machine["commit"].clone(),
        "processes": mode.processes(),
        "machine": machine,
        "scenarios": scenarios,
    });
    if !notes.is_empty() {
        doc["notes"] = json!(notes);
    }
    doc
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
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

fn cell(measured: Option<&Measured>) -> String {
    match measured {
        Some(m) => format!(
            "{:>8.1} {:>8.1} {:>9.0} {:>6}",
            m.median.p50_us,
            m.median.p99_us,
            m.median.rps,
            m.cpu_us_per_request
                .map_or_else(|| "-".to_owned(), |cpu| format!("{cpu:.1}"))
        ),
        None => format!("{:>8} {:>8} {:>9} {:>6}", "-", "-", "-", "-"),
    }
}

/// The table: per system p50 us, p99 us, rps and the middle's CPU us per request, then the
/// median of each per-round ratio, under a line naming the mode.
pub fn table(mode: Mode, outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    if mode.publishable() {
        let _ = writeln!(out, "mode {}: {}", mode.key(), mode.label());
    } else {
        let _ = writeln!(
            out,
            "mode {}: {} -- DIAGNOSTIC, NOT FOR PUBLICATION",
            mode.key(),
            mode.label()
        );
    }
    let ratio_names: Vec<String> = RATIOS
        .iter()
        .map(|spec| {
            let metric = match spec.metric {
                Metric::P50 => "p50",
                Metric::Rps => "rps",
            };
            format!("{}/{} {metric}", spec.of.key(), spec.to.key())
        })
        .collect();
    let _ = writeln!(
        out,
        "{:<16} | {:^34} | {:^34} | {:^34} | {}",
        "scenario",
        "lintel",
        "nats",
        "floor",
        ratio_names
            .iter()
            .map(|name| format!("{name:>16}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let head = format!(
        "{:>8} {:>8} {:>9} {:>6}",
        "p50 us", "p99 us", "rps", "cpu us"
    );
    let _ = writeln!(out, "{:<16} | {head} | {head} | {head} |", "");
    let _ = writeln!(out, "{}", "-".repeat(16 + 3 * 37 + 2 + 17 * RATIOS.len()));
    for outcome in outcomes {
        let get = |kind| outcome.results.get(&kind).and_then(Option::as_ref);
        let ratios: Vec<String> = RATIOS
            .iter()
            .map(|spec| match outcome.ratio(spec) {
                Some((median, _)) => format!("{median:>16.2}"),
                None => format!("{:>16}", "-"),
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<16} | {} | {} | {} | {}",
            outcome.scenario.name(),
            cell(get(Kind::Lintel)),
            cell(get(Kind::Nats)),
            cell(get(Kind::Floor)),
            ratios.join(" "),
        );
    }
    out.push_str(
        "cpu us: CPU time of the middle's process per request (see `processes` in the JSON)\n\
         ratios: the median of ratios taken within each round; p50 below 1 means lintel answers \
         faster, rps above 1 means lintel carries more\n",
    );
    out
}
