//! The vs_nats benchmark harness on a tiny path, so it cannot rot unnoticed: lintel, the floor
//! and (when `nats-server` is installed) NATS each carry a short closed-loop load, every request
//! completes, and the report and plot are produced.
#![allow(dead_code, unreachable_pub)]

#[path = "../benches/vs_nats/compare.rs"]
mod compare;
#[path = "../benches/vs_nats/floor.rs"]
mod floor;
#[path = "../benches/vs_nats/lintel.rs"]
mod lintel;
#[path = "../benches/vs_nats/machine.rs"]
mod machine;
#[path = "../benches/vs_nats/measure.rs"]
mod measure;
#[path = "../benches/vs_nats/nats.rs"]
mod nats;
#[path = "../benches/vs_nats/plot.rs"]
mod plot;
#[path = "../benches/vs_nats/report.rs"]
mod report;
#[path = "../benches/vs_nats/systems.rs"]
mod systems;

use std::time::Duration;

use compare::{Scenario, Settings};
use systems::Kind;

const SETTINGS: Settings = Settings {
    runs: 1,
    seconds: 0.2,
    max_count: 200_000,
    lintel_child: false,
};

#[test]
fn the_floor_frames_only_whole_messages() {
    let mut buf = vec![0, 0, 0, 2, 7, 7, 0, 0, 0, 3, 1];
    assert_eq!(floor::whole_messages(&buf), 6);
    buf.extend_from_slice(&[2, 3]);
    assert_eq!(floor::whole_messages(&buf), buf.len());
    assert_eq!(floor::whole_messages(&[0, 0]), 0);
}

#[test]
fn percentiles_and_medians() {
    let nanos: Vec<u32> = (1..=100).map(|us| us * 1_000).collect();
    assert_eq!(measure::percentile_us(&nanos, 0.50), 50.0);
    assert_eq!(measure::percentile_us(&nanos, 0.99), 99.0);
    assert_eq!(measure::percentile_us(&[], 0.5), 0.0);
    assert_eq!(measure::median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(measure::median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_system_carries_a_short_load_and_the_report_is_written() {
    let server = match nats::find_server() {
        Some(bin) => Some(nats::NatsServer::start(&bin).expect("nats-server starts")),
        None => {
            println!(
                "nats-server not installed: NATS SKIPPED (scripts/install-nats.sh installs it)"
            );
            None
        }
    };
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|kind| *kind != Kind::Nats || server.is_some())
        .collect();
    let scenario = Scenario {
        concurrency: 4,
        workers: 2,
        payload_bytes: 64,
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        compare::run_scenario(&scenario, &kinds, server.as_ref(), &SETTINGS),
    )
    .await
    .expect("the scenario finishes");
    assert!(outcome.notes.is_empty(), "notes: {:?}", outcome.notes);
    for kind in &kinds {
        let sample = outcome.results[kind]
            .as_ref()
            .unwrap_or_else(|| panic!("{} has a result", kind.key()));
        assert!(
            sample.completed > 0 && sample.rps > 0.0,
            "{kind:?}: {sample:?}"
        );
        assert!(
            sample.failures.is_empty(),
            "{kind:?}: {:?}",
            sample.failures
        );
        assert!(
            sample.p50_us > 0.0 && sample.p99_us >= sample.p50_us,
            "{sample:?}"
        );
        println!(
            "{}: p50 {:.1} us, p99 {:.1} us, {:.0} rps",
            kind.key(),
            sample.p50_us,
            sample.p99_us,
            sample.rps
        );
    }

    let outcomes = [outcome];
    let doc = report::to_json(machine::describe("test", serde_json::json!({})), &outcomes);
    let results = &doc["scenarios"][0]["results"];
    assert_eq!(doc["scenarios"][0]["concurrency"], 4);
    assert!(results["lintel"]["p50_us"].is_number());
    assert!(results["floor"]["rps"].is_number());
    assert!(results["nats"].is_null() == server.is_none());
    assert!(doc["machine"]["cores"].as_u64().unwrap_or(0) > 0);
    assert!(report::table(&outcomes).contains("c4-w2-64B"));

    let dir = std::env::temp_dir().join(format!("bench-harness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("plot.svg");
    plot::draw(&svg, &outcomes, 2, 64, "test").expect("the plot is drawn");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("lintel"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lintel_as_a_child_process_carries_a_short_load() {
    let settings = Settings {
        lintel_child: true,
        ..SETTINGS
    };
    let scenario = Scenario {
        concurrency: 4,
        workers: 1,
        payload_bytes: 64,
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        compare::run_scenario(&scenario, &[Kind::Lintel], None, &settings),
    )
    .await
    .expect("the scenario finishes");
    assert!(outcome.notes.is_empty(), "notes: {:?}", outcome.notes);
    let sample = outcome.results[&Kind::Lintel]
        .as_ref()
        .expect("lintel has a result");
    assert!(
        sample.completed > 0 && sample.failures.is_empty(),
        "{sample:?}"
    );
    assert!(outcome.results[&Kind::Nats].is_none());
}
