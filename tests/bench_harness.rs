//! The vs_nats benchmark harness on a tiny path, so it cannot rot unnoticed: in the default mode
//! (every middle, worker and producer in a process of its own) lintel, the floor and, when
//! `nats-server` is installed, NATS each carry a short closed-loop load over two interleaved
//! rounds; every request completes; the per-round ratios, the middle's CPU per request, the
//! report and the plot are produced. The other modes carry a load too and label themselves, and
//! so does the cross-node topology, each system with two middles in a row.
//!
//! The harness starts its NATS and floor peers by running this test binary again with the role
//! in an environment variable; [`vs_nats_peer_entry`] is where they land.
#![allow(dead_code, unreachable_pub)]

#[path = "../benches/vs_nats/compare.rs"]
mod compare;
#[path = "../benches/vs_nats/floor.rs"]
mod floor;
#[path = "../benches/vs_nats/kind.rs"]
mod kind;
#[path = "../benches/vs_nats/lintel.rs"]
mod lintel;
#[path = "../benches/vs_nats/machine.rs"]
mod machine;
#[path = "../benches/vs_nats/measure.rs"]
mod measure;
#[path = "../benches/vs_nats/mode.rs"]
mod mode;
#[path = "../benches/vs_nats/nats.rs"]
mod nats;
#[path = "../benches/vs_nats/peer.rs"]
mod peer;
#[path = "../benches/vs_nats/plot.rs"]
mod plot;
#[path = "../benches/vs_nats/process.rs"]
mod process;
#[path = "../benches/vs_nats/report.rs"]
mod report;
#[path = "../benches/vs_nats/systems.rs"]
mod systems;
#[path = "../benches/vs_nats/tls.rs"]
mod tls;
#[path = "../benches/vs_nats/topology.rs"]
mod topology;

use std::collections::BTreeMap;
use std::time::Duration;

use compare::{Measured, Outcome, Round, Scenario, Settings, RATIOS};
use kind::Kind;
use measure::Sample;
use mode::Mode;
use topology::Topology;

/// The name of [`vs_nats_peer_entry`], which peers are started at.
const PEER_ENTRY: &str = "vs_nats_peer_entry";

fn settings(mode: Mode, topology: Topology, runs: usize) -> Settings {
    Settings {
        runs,
        seconds: 0.2,
        max_count: 200_000,
        mode,
        topology,
        launcher: process::Launcher::test_entry(PEER_ENTRY).expect("this test binary's path"),
        tls: None,
    }
}

/// Not a test of its own: when the harness starts this binary as a peer process, the role in
/// the environment runs here, and the process ends with it. Otherwise it does nothing.
#[test]
fn vs_nats_peer_entry() {
    if let Some(role) = process::Role::from_env() {
        let code = match role {
            Ok(role) => peer::run(role),
            Err(err) => {
                eprintln!("{err}");
                std::process::ExitCode::FAILURE
            }
        };
        std::process::exit(if code == std::process::ExitCode::SUCCESS {
            0
        } else {
            1
        });
    }
}

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

fn round(p50_us: f64, rps: f64) -> Round {
    Round {
        sample: Sample {
            completed: 100,
            p50_us,
            p99_us: p50_us * 2.0,
            rps,
            ..Sample::default()
        },
        middle_cpu: Some(Duration::from_millis(5)),
    }
}

fn measured(rounds: Vec<Round>) -> Option<Measured> {
    let samples: Vec<Sample> = rounds.iter().map(|r| r.sample.clone()).collect();
    Some(Measured {
        median: measure::median_of(&samples),
        cpu_us_per_request: Some(50.0),
        rounds,
    })
}

#[test]
fn ratios_are_taken_within_each_round_then_their_median() {
    // Round 2 is slow for both: a ratio of medians would say 2.0/1.5, the rounds say 1.0 each.
    let lintel = measured(vec![round(10.0, 0.0), round(30.0, 0.0), round(20.0, 0.0)]);
    let floor = measured(vec![round(10.0, 0.0), round(30.0, 0.0), round(20.0, 0.0)]);
    let outcome = Outcome {
        scenario: Scenario {
            concurrency: 1,
            workers: 1,
            payload_bytes: 64,
        },
        results: BTreeMap::from([
            (Kind::Lintel, lintel),
            (Kind::Nats, None),
            (Kind::Floor, floor),
        ]),
        notes: Vec::new(),
    };
    let (median, rounds) = outcome.ratio(&RATIOS[0]).expect("lintel/floor p50");
    assert_eq!(RATIOS[0].key, "lintel_floor_p50");
    assert_eq!(rounds, vec![1.0, 1.0, 1.0]);
    assert_eq!(median, 1.0);
    assert!(outcome.ratio(&RATIOS[1]).is_none(), "no NATS, no ratio");
    assert_eq!(round(1.0, 1.0).cpu_us_per_request(), Some(50.0));
}

#[test]
fn cpu_time_of_a_process_is_read_from_proc() {
    let before = machine::cpu_time(std::process::id()).expect("this process's CPU time");
    let spin = std::time::Instant::now();
    while spin.elapsed() < Duration::from_millis(30) {
        std::hint::black_box(0u64);
    }
    let after = machine::cpu_time(std::process::id()).expect("this process's CPU time");
    assert!(after >= before);
    assert!(machine::cpu_time(u32::MAX).is_none());
}

fn nats_servers(topology: Topology) -> Option<nats::NatsServers> {
    match nats::find_server() {
        Some(bin) => Some(match topology {
            Topology::OneMiddle => nats::NatsServers::one(&bin).expect("nats-server starts"),
            Topology::CrossNode => {
                nats::NatsServers::routed_pair(&bin).expect("two routed nats-servers start")
            }
        }),
        None => {
            println!(
                "nats-server not installed: NATS SKIPPED (scripts/install-nats.sh installs it)"
            );
            None
        }
    }
}

fn nats_server() -> Option<nats::NatsServers> {
    nats_servers(Topology::OneMiddle)
}

/// Runs a tiny scenario in `mode` and checks every system that ran completed every request.
async fn tiny(
    mode: Mode,
    runs: usize,
    workers: usize,
    server: Option<&nats::NatsServers>,
) -> (Vec<Kind>, Outcome) {
    tiny_in(mode, Topology::OneMiddle, runs, workers, server).await
}

/// [`tiny`] in `topology`.
async fn tiny_in(
    mode: Mode,
    topology: Topology,
    runs: usize,
    workers: usize,
    server: Option<&nats::NatsServers>,
) -> (Vec<Kind>, Outcome) {
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|kind| *kind != Kind::Nats || server.is_some())
        .filter(|kind| mode.runs(*kind))
        .collect();
    let scenario = Scenario {
        concurrency: 4,
        workers,
        payload_bytes: 64,
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        compare::run_scenario(&scenario, &kinds, server, &settings(mode, topology, runs)),
    )
    .await
    .expect("the scenario finishes");
    assert!(outcome.notes.is_empty(), "notes: {:?}", outcome.notes);
    for kind in &kinds {
        let measured = outcome.results[kind]
            .as_ref()
            .unwrap_or_else(|| panic!("{} has a result", kind.key()));
        assert_eq!(measured.rounds.len(), runs, "{kind:?}");
        for round in &measured.rounds {
            let sample = &round.sample;
            assert!(
                sample.completed > 0 && sample.rps > 0.0,
                "{mode:?} {kind:?}: {sample:?}"
            );
            assert!(
                sample.failures.is_empty(),
                "{mode:?} {kind:?}: {:?}",
                sample.failures
            );
            assert!(
                sample.p50_us > 0.0 && sample.p99_us >= sample.p50_us,
                "{sample:?}"
            );
            assert!(round.middle_cpu.is_some(), "{mode:?} {kind:?}: middle CPU");
        }
        let median = &measured.median;
        println!(
            "{} {}: p50 {:.1} us, p99 {:.1} us, {:.0} rps, middle cpu {:?} us/request",
            mode.key(),
            kind.key(),
            median.p50_us,
            median.p99_us,
            median.rps,
            measured.cpu_us_per_request
        );
    }
    (kinds, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_every_piece_runs_in_its_own_process_and_the_report_is_written() {
    let server = nats_server();
    let (kinds, outcome) = tiny(Mode::All, 2, 2, server.as_ref()).await;
    assert_eq!(kinds.len(), if server.is_some() { 3 } else { 2 });

    let (median, rounds) = outcome.ratio(&RATIOS[0]).expect("lintel/floor p50");
    assert_eq!(rounds.len(), 2);
    assert!(median > 0.0);

    let outcomes = [outcome];
    let doc = report::to_json(
        machine::describe("test", serde_json::json!({})),
        Mode::All,
        &outcomes,
    );
    assert_eq!(doc["mode"], "all");
    assert_eq!(doc["publishable"], true);
    assert!(doc["commit"].is_string() || doc["commit"].is_null());
    assert_eq!(doc["processes"]["lintel"]["middle"], "lintel serve");
    assert_eq!(doc["processes"]["nats"]["middle"], "nats-server");
    let scenario = &doc["scenarios"][0];
    let results = &scenario["results"];
    assert_eq!(scenario["concurrency"], 4);
    assert!(results["lintel"]["p50_us"].is_number());
    assert!(results["lintel"]["middle_cpu_us_per_request"].is_number());
    assert_eq!(
        results["lintel"]["rounds"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(results["floor"]["rps"].is_number());
    assert!(results["nats"].is_null() == server.is_none());
    let ratio = &scenario["ratios"]["lintel_floor_p50"];
    assert_eq!(ratio["rounds"].as_array().map(Vec::len), Some(2));
    assert!(ratio["median"].is_number());
    assert!(scenario["ratios"]["lintel_nats_rps"].is_null() == server.is_none());
    assert!(doc["machine"]["cores"].as_u64().unwrap_or(0) > 0);
    let table = report::table(Mode::All, &outcomes);
    assert!(table.contains("c4-w2-64B") && table.contains("mode all"));
    assert!(!table.contains("NOT FOR PUBLICATION"));

    let dir = std::env::temp_dir().join(format!("bench-harness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("plot.svg");
    plot::draw(&svg, &outcomes, 2, 64, Mode::All, "test").expect("the plot is drawn");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("lintel"));
    let missing = plot::draw(&dir.join("none.svg"), &outcomes, 4, 64, Mode::All, "test");
    assert!(missing.is_err(), "no 4-worker scenario, nothing to draw");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_puts_the_producer_in_the_node_and_leaves_nats_out() {
    let server = nats_server();
    let (kinds, outcome) = tiny(Mode::Embedded, 1, 2, server.as_ref()).await;
    assert_eq!(kinds, vec![Kind::Lintel, Kind::Floor]);
    assert!(outcome.results[&Kind::Nats].is_none());
    let outcomes = [outcome];
    let doc = report::to_json(
        machine::describe("test", serde_json::json!({})),
        Mode::Embedded,
        &outcomes,
    );
    assert_eq!(doc["mode"], "embedded");
    assert_eq!(doc["publishable"], true);
    assert!(doc["processes"]["nats"].is_null());
    assert_eq!(
        doc["processes"]["lintel"]["middle"],
        "harness: node and producer"
    );
    assert!(report::table(Mode::Embedded, &outcomes).contains("mode embedded: embedded:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn middle_and_diagnostic_carry_a_short_load_and_diagnostic_says_so() {
    let server = nats_server();
    tiny(Mode::Middle, 1, 1, server.as_ref()).await;
    let (_, outcome) = tiny(Mode::Diagnostic, 1, 1, server.as_ref()).await;
    let outcomes = [outcome];
    let doc = report::to_json(
        machine::describe("test", serde_json::json!({})),
        Mode::Diagnostic,
        &outcomes,
    );
    assert_eq!(doc["publishable"], false);
    assert!(doc["mode_label"]
        .as_str()
        .is_some_and(|label| label.contains("not for publication")));
    assert!(report::table(Mode::Diagnostic, &outcomes).contains("NOT FOR PUBLICATION"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_node_puts_a_second_middle_between_producer_and_workers() {
    let servers = nats_servers(Topology::CrossNode);
    let (kinds, outcome) = tiny_in(Mode::All, Topology::CrossNode, 1, 2, servers.as_ref()).await;
    assert_eq!(kinds.len(), if servers.is_some() { 3 } else { 2 });
    let outcomes = [outcome];
    let mut doc = report::to_json(
        machine::describe("test", serde_json::json!({})),
        Mode::All,
        &outcomes,
    );
    Topology::CrossNode.annotate(&mut doc);
    assert_eq!(doc["topology"], "cross-node");
    for kind in Kind::ALL {
        let middle = doc["processes"][kind.key()]["middle"]
            .as_str()
            .unwrap_or("");
        assert!(middle.starts_with("two "), "{}: {middle}", kind.key());
    }
    assert!(doc["scenarios"][0]["ratios"]["lintel_floor_p50"]["median"].is_number());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_lintel_over_tls_runs_beside_plaintext_lintel_and_their_ratio_is_reported() {
    let dir = std::env::temp_dir().join(format!("lintel-bench-tls-{}", std::process::id()));
    let files = tls::TlsFiles::generate(&dir).expect("certificates");
    let settings = Settings {
        tls: Some(files),
        ..settings(Mode::All, Topology::OneMiddle, 2)
    };
    let scenario = Scenario {
        concurrency: 4,
        workers: 1,
        payload_bytes: 64,
    };
    let kinds = [Kind::Lintel, Kind::LintelTls];
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        compare::run_scenario(&scenario, &kinds, None, &settings),
    )
    .await
    .expect("the scenario finishes");
    assert!(outcome.notes.is_empty(), "notes: {:?}", outcome.notes);
    for kind in kinds {
        let measured = outcome.results[&kind].as_ref().expect("a result");
        assert_eq!(measured.rounds.len(), 2, "{kind:?}");
        for round in &measured.rounds {
            assert!(round.sample.completed > 0, "{kind:?}: {:?}", round.sample);
            assert!(
                round.sample.failures.is_empty(),
                "{kind:?}: {:?}",
                round.sample
            );
        }
    }
    let doc = report::to_json(
        machine::describe("test", serde_json::json!({})),
        Mode::All,
        &[outcome],
    );
    assert!(doc["scenarios"][0]["results"]["lintel-tls"].is_object());
    let ratio = &doc["scenarios"][0]["ratios"]["tls_plain_rps"];
    assert_eq!(ratio["rounds"].as_array().map(Vec::len), Some(2), "{ratio}");
    let _ = std::fs::remove_dir_all(dir);
}
