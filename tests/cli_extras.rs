//! What a dispatch carries beside its request, from the real `lintel` binary: headers a
//! `lintel worker` prints back through its `headers` activity, on one node and across two; the
//! node's debug line naming a dispatch's trace id; priority, fairness key and weight flags;
//! each bad value refused before anything connects, and headers past the node's limits
//! refused by the node with the reason.

use lintel_test_support as support;

use std::process::{Child, Output, Stdio};

use support::{lintel, Served};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `lintel worker` child serving `headers` and `echo` in namespace `cli`, killed on drop.
struct WorkerChild(Child);

impl WorkerChild {
    fn start(connect: &str) -> Self {
        let child = lintel()
            .args(["worker", "--connect", connect, "--namespace", "cli"])
            .args(["--activity", "headers", "--activity", "echo"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("lintel worker starts");
        Self(child)
    }
}

impl Drop for WorkerChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lintel serve` on loopback with the variable `name` set to `value`; it and its address.
fn serve_with(name: &str, value: &str) -> (Served, String) {
    let mut command = lintel();
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env(name, value);
    let mut node = Served::spawn(command);
    let addr = node.listening();
    (node, addr)
}

/// `lintel dispatch` at `connect` of `activity` in `cli`, waiting up to 20 s for a worker,
/// with `extra` flags, run to its end.
fn dispatch(connect: &str, activity: &str, extra: &[&str]) -> Output {
    lintel()
        .args(["dispatch", "--connect", connect, "--namespace", "cli"])
        .args(["--activity", activity, "--input", "x", "--wait-ms", "20000"])
        .args(extra)
        .output()
        .expect("lintel dispatch runs")
}

/// The JSON object a `headers` dispatch printed.
fn printed(out: &Output) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!("not JSON ({err}): {}", text(&out.stdout));
    })
}

#[test]
fn a_header_given_to_dispatch_is_printed_back_by_the_headers_activity() {
    let (_node, addr) = Served::on_loopback(&[]);
    let _worker = WorkerChild::start(&addr);
    let traceparent = format!("traceparent={TRACEPARENT}");
    let out = dispatch(
        &addr,
        "headers",
        &[
            "--header",
            &traceparent,
            "--header",
            "Tracestate=congo=t61rcWkgMzE",
            "--header",
            "x-tag=a",
            "--header",
            "x-tag=b",
        ],
    );
    let headers = printed(&out);
    assert_eq!(
        headers,
        serde_json::json!({
            "traceparent": TRACEPARENT,
            "tracestate": "congo=t61rcWkgMzE",
            "x-tag": ["a", "b"],
        })
    );
    let none = dispatch(&addr, "headers", &[]);
    assert_eq!(printed(&none), serde_json::json!({}));
}

#[test]
fn a_header_crosses_to_a_worker_on_another_node() {
    let (_a, at_a) = Served::on_loopback(&["--node-id", "a"]);
    let (_b, at_b) = Served::on_loopback(&[
        "--node-id",
        "b",
        "--peer",
        &at_a,
        "--peer-ping-interval-ms",
        "100",
    ]);
    let _worker = WorkerChild::start(&at_a);
    let traceparent = format!("traceparent={TRACEPARENT}");
    let out = dispatch(&at_b, "headers", &["--header", &traceparent, "--verbose"]);
    assert_eq!(
        printed(&out),
        serde_json::json!({ "traceparent": TRACEPARENT })
    );
    assert!(
        text(&out.stderr).contains("served by a"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_nodes_debug_line_for_a_dispatch_names_its_trace_id() {
    let (mut node, addr) = serve_with("RUST_LOG", "lintel=debug");
    let traceparent = format!("traceparent={TRACEPARENT}");
    // Nobody serves `nothing`: the dispatch ends no-worker, which the node logs at debug.
    let out = lintel()
        .args(["dispatch", "--connect", &addr, "--namespace", "cli"])
        .args([
            "--activity",
            "nothing",
            "--input",
            "x",
            "--header",
            &traceparent,
        ])
        .output()
        .expect("lintel dispatch runs");
    assert_eq!(out.status.code(), Some(11), "{}", text(&out.stderr));
    let line = node.wait_for("dispatch ended");
    assert!(
        line.contains("trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"")
            || line.contains("trace_id=4bf92f3577b34da6a3ce929d0e0e4736"),
        "{line}"
    );
}

#[test]
fn headers_past_the_nodes_limits_are_refused_with_the_reason() {
    let (_node, addr) = serve_with("LINTEL_MAX_HEADERS", "2");
    let many: Vec<String> = (0..3).map(|i| format!("x-{i}=v")).collect();
    let mut flags = Vec::new();
    for header in &many {
        flags.extend(["--header", header.as_str()]);
    }
    let out = dispatch(&addr, "headers", &flags);
    assert_eq!(out.status.code(), Some(14), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("refused") && said.contains("3 headers, over the node's limit of 2"),
        "{said}"
    );

    let big = format!("x-big={}", "v".repeat(9_000));
    let out = dispatch(&addr, "headers", &["--header", &big]);
    assert_eq!(out.status.code(), Some(14), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("over the node's limit of 8192"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_malformed_flag_is_refused_before_connecting() {
    // Nothing listens at port 9 of loopback: a refusal there would be exit 1, not 2.
    let cases: [(&[&str], &str); 6] = [
        (&["--header", "no-equals-sign"], "NAME=VALUE"),
        (&["--header", "bad name=v"], "is not a token"),
        (&["--priority", "0"], "--priority"),
        (&["--priority", "6"], "--priority"),
        (&["--fairness-weight", "0"], "between 0.001 and 1000"),
        (&["--fairness-key", ""], "not empty"),
    ];
    for (flags, says) in cases {
        let out = lintel()
            .args(["dispatch", "--connect", "127.0.0.1:9", "--namespace", "n"])
            .args(["--activity", "echo", "--input", "x"])
            .args(flags)
            .output()
            .expect("lintel dispatch runs");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flags:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(says),
            "{flags:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_dispatch_with_priority_key_and_weight_completes() {
    let (_node, addr) = Served::on_loopback(&[]);
    let _worker = WorkerChild::start(&addr);
    let out = dispatch(
        &addr,
        "echo",
        &[
            "--priority",
            "1",
            "--fairness-key",
            "tenant-a",
            "--fairness-weight",
            "2.5",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "x\n");
}

#[test]
fn bench_spreads_its_load_over_fairness_keys_and_reports_each() {
    let (_node, addr) = Served::on_loopback(&[]);
    // One slot for eight lanes: the pool is full throughout, so the weights decide.
    let out = lintel()
        .args(["bench", "--connect", &addr, "--workers", "1"])
        .args([
            "--worker-concurrency",
            "1",
            "--concurrency",
            "8",
            "--count",
            "400",
        ])
        .args(["--fairness-keys", "gold:3,bronze", "--json", "-"])
        .output()
        .expect("lintel bench runs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let completed = |key: &str| report["by_key"][key]["completed"].as_u64().expect(key);
    let (gold, bronze) = (completed("gold"), completed("bronze"));
    assert_eq!(gold + bronze, 400, "{report}");
    // 3:1 is 300:100; the last dispatches of each lane blur it, so generously.
    assert!(gold > 2 * bronze, "gold {gold} bronze {bronze}");
    let summary = text(&out.stderr);
    assert!(summary.contains("by fairness key"), "{summary}");
    assert!(
        summary.contains("gold:") && summary.contains("bronze:"),
        "{summary}"
    );

    let too_many = lintel()
        .args([
            "bench",
            "--connect",
            &addr,
            "--concurrency",
            "2",
            "--fairness-keys",
            "3",
        ])
        .output()
        .expect("lintel bench runs");
    assert_eq!(too_many.status.code(), Some(2));
    assert!(text(&too_many.stderr).contains("more than the 2 lanes"));
}
