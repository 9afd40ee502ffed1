//! The built binary's log and output hygiene: `serve` logs as text without ANSI escapes or as
//! JSON lines, and one-shot clients print their result and nothing else.

use lintel_test_support as support;

use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{lintel, Served};

/// The bound on every wait for the node's output.
const WAIT: Duration = Duration::from_secs(20);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn serve_logs_text_without_ansi_escapes_when_piped() {
    let (served, _addr) = Served::on_loopback(&[]);
    for line in &served.seen {
        assert!(
            !line.contains('\u{1b}'),
            "ANSI escape in a piped log line: {line:?}"
        );
    }
    assert!(served.seen.iter().any(|line| line.contains("INFO")));
}

#[test]
fn serve_log_format_json_writes_one_object_per_line() {
    let (served, addr) = Served::on_loopback(&["--log-format", "json"]);
    for line in &served.seen {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"));
        assert!(value.is_object(), "not an object: {line}");
        assert!(value.get("level").is_some(), "no level: {line}");
    }
    let listening: serde_json::Value =
        serde_json::from_str(served.seen.last().expect("a listening line")).expect("JSON");
    assert_eq!(listening["level"], "INFO");
    assert_eq!(listening["fields"]["message"], "listening");
    assert_eq!(listening["fields"]["addr"], addr.as_str());
}

#[test]
fn json_logs_write_lists_as_arrays() {
    let (mut served, addr) = Served::on_loopback(&["--log-format", "json"]);
    let mut worker = lintel()
        .args(["worker", "--connect", &addr, "--namespace", "demo"])
        .args([
            "--namespace",
            "billing",
            "--activity",
            "echo",
            "--activity",
            "sleep",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("lintel worker starts");
    let line = served.wait_for("worker registered");
    let _ = worker.kill();
    let _ = worker.wait();
    let line: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    let fields = &line["fields"];
    assert_eq!(
        fields["namespaces"],
        serde_json::json!(["demo", "billing"]),
        "{line}"
    );
    assert_eq!(
        fields["activities"],
        serde_json::json!(["echo", "sleep"]),
        "{line}"
    );
    assert_eq!(fields["capacity"], 16, "numbers stay numbers: {line}");
    assert!(fields["identity"].is_string(), "{line}");
    assert!(
        line["timestamp"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z')),
        "{line}"
    );
    assert_eq!(line["target"], "lintel::connection::worker");
}

#[test]
fn log_format_comes_from_the_environment_too() {
    let mut child = lintel()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("LINTEL_LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintel serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = BufReader::new(stderr).read_line(&mut first);
        let _ = send.send(first);
    });
    let first = lines.recv_timeout(WAIT);
    let _ = child.kill();
    let _ = child.wait();
    let first = first.expect("a first log line");
    assert!(
        serde_json::from_str::<serde_json::Value>(&first).is_ok(),
        "LINTEL_LOG_FORMAT=json gave a non-JSON line: {first}"
    );
}

#[test]
fn dispatch_with_no_worker_prints_only_its_outcome() {
    let (_served, addr) = Served::on_loopback(&[]);
    let Output {
        status,
        stdout,
        stderr,
    } = lintel()
        .args(["dispatch", "--connect", &addr])
        .args([
            "--namespace",
            "cli-logs",
            "--activity",
            "echo",
            "--input",
            "hi",
        ])
        .output()
        .expect("lintel dispatch runs");
    assert_eq!(status.code(), Some(11), "no-worker exit code");
    assert_eq!(text(&stdout), "", "nothing on stdout");
    let stderr = text(&stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one outcome line on stderr, got:\n{stderr}");
    assert!(
        lines[0].starts_with("no-worker: "),
        "the outcome line: {stderr}"
    );
    assert!(!stderr.contains("INFO"), "an INFO log line: {stderr}");
}

#[test]
fn status_prints_no_log_lines() {
    let (_served, addr) = Served::on_loopback(&[]);
    let output = lintel()
        .args(["status", "--connect", &addr])
        .output()
        .expect("lintel status runs");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stderr), "", "nothing on stderr");
    assert!(text(&output.stdout).starts_with("node "));
}

#[test]
fn bench_piped_prints_no_progress_lines() {
    let (_served, addr) = Served::on_loopback(&[]);
    let output = lintel()
        .args(["bench", "--connect", &addr])
        .args(["--duration", "1.6", "--workers", "1", "--concurrency", "4"])
        .output()
        .expect("lintel bench runs");
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for stream in [&stdout, &stderr] {
        assert!(
            !stream.contains('\r'),
            "a redrawn line when piped: {stream:?}"
        );
        assert!(
            !stream.contains('\u{1b}'),
            "an escape when piped: {stream:?}"
        );
        assert!(
            !stream.contains(" /s"),
            "a progress line when piped: {stream:?}"
        );
    }
    assert_eq!(stderr.lines().count(), 1, "only the run's header: {stderr}");
    assert!(stdout.contains(" dispatches in "), "the summary: {stdout}");
}

#[test]
fn bench_json_to_stdout_is_the_report_alone_and_the_histogram_goes_to_stderr() {
    let (_served, addr) = Served::on_loopback(&[]);
    let output = lintel()
        .args(["bench", "--connect", &addr])
        .args(["--count", "200", "--workers", "1", "--concurrency", "4"])
        .args(["--json", "-", "--histogram", "-"])
        .output()
        .expect("lintel bench runs");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is one JSON report");
    assert_eq!(report["dispatches"], 200);
    assert_eq!(report["outcomes"]["completed"], 200);
    for key in ["rps", "p50_us", "p99_us", "p999_us", "served_by"] {
        assert!(report.get(key).is_some(), "no {key} in {report}");
    }
    let stderr = text(&output.stderr);
    assert!(stderr.contains("latency (log-scaled buckets)"), "{stderr}");
    assert!(stderr.lines().any(|line| line.contains('#')), "{stderr}");
}
