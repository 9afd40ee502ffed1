//! The built binary's log and output hygiene: `serve` logs as text without ANSI escapes or as
//! JSON lines, and one-shot clients print their result and nothing else.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// The bound on every wait for the node's output.
const WAIT: Duration = Duration::from_secs(20);

/// `lintel` with no `RUST_LOG` or `LINTEL_*` settings inherited from the caller's shell.
fn lintel() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lintel"));
    command
        .env_remove("RUST_LOG")
        .env_remove("LINTEL_LOG_FORMAT")
        .env_remove("LINTEL_CONNECT")
        .env_remove("LINTEL_AUTH_TOKEN")
        .env_remove("LINTEL_THREADS");
    command
}

/// A `lintel serve` child on a free loopback port, killed on drop.
struct Served {
    child: Child,
    addr: String,
    /// Every stderr line read so far, the `listening` line last.
    lines: Vec<String>,
    rest: Receiver<String>,
}

impl Served {
    /// Starts `lintel serve` on 127.0.0.1:0 with `extra` flags and reads its stderr until the
    /// `listening` line, taking the bound address from it.
    fn start(extra: &[&str]) -> Self {
        let mut child = lintel()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lintel serve starts");
        let rest = support::stderr_lines(&mut child);
        let mut served = Self {
            child,
            addr: String::new(),
            lines: Vec::new(),
            rest,
        };
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = served.rest.recv_timeout(left).unwrap_or_else(|_| {
                panic!("no listening line within {WAIT:?}: {:?}", served.lines)
            });
            let listening = line.contains("listening");
            if listening {
                served.addr = address_in(&line)
                    .unwrap_or_else(|| panic!("no address in the listening line: {line}"));
            }
            served.lines.push(line);
            if listening {
                return served;
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `127.0.0.1:port` in a log line, text (`addr=...`) or JSON (`"addr":"..."`).
fn address_in(line: &str) -> Option<String> {
    let start = line.find("127.0.0.1:")?;
    let addr: String = line[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    Some(addr)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn serve_logs_text_without_ansi_escapes_when_piped() {
    let served = Served::start(&[]);
    for line in &served.lines {
        assert!(
            !line.contains('\u{1b}'),
            "ANSI escape in a piped log line: {line:?}"
        );
    }
    assert!(served.lines.iter().any(|line| line.contains("INFO")));
}

#[test]
fn serve_log_format_json_writes_one_object_per_line() {
    let served = Served::start(&["--log-format", "json"]);
    for line in &served.lines {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("not a JSON log line ({err}): {line}"));
        assert!(value.is_object(), "not an object: {line}");
        assert!(value.get("level").is_some(), "no level: {line}");
    }
    let listening: serde_json::Value =
        serde_json::from_str(served.lines.last().expect("a listening line")).expect("JSON");
    assert_eq!(listening["level"], "INFO");
    assert_eq!(listening["fields"]["message"], "listening");
    assert_eq!(listening["fields"]["addr"], served.addr.as_str());
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
    let served = Served::start(&[]);
    let Output {
        status,
        stdout,
        stderr,
    } = lintel()
        .args(["dispatch", "--connect", &served.addr])
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
    let served = Served::start(&[]);
    let output = lintel()
        .args(["status", "--connect", &served.addr])
        .output()
        .expect("lintel status runs");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stderr), "", "nothing on stderr");
    assert!(text(&output.stdout).starts_with("node "));
}

#[test]
fn bench_piped_prints_no_progress_lines() {
    let served = Served::start(&[]);
    let output = lintel()
        .args(["bench", "--connect", &served.addr])
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
    let served = Served::start(&[]);
    let output = lintel()
        .args(["bench", "--connect", &served.addr])
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
