//! `lintel dispatch` takes its input as bytes from the command line, a file or standard input,
//! UTF-8 or not, and an input over what the node takes is refused before it is sent, naming
//! the exact limit and the size; `lintel bench` says why its dispatches were refused, and
//! counts a payload too large for a frame apart.

use lintel_test_support as support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Output, Stdio};

use support::{line_with, lintel, stderr_lines, Served};

/// The node's frame limit in these tests: the smallest it accepts.
const MAX_FRAME_LEN: usize = 65_536;

/// Bytes a push keeps in reserve (`lintel::dispatch::FRAME_OVERHEAD`).
const RESERVE: usize = 16_384;

/// A node with the small frame limit and an echo worker registered on it; its address.
fn node_and_worker() -> (Served, Child, String) {
    let mut command = lintel();
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("LINTEL_MAX_FRAME_LEN", MAX_FRAME_LEN.to_string());
    let mut node = Served::spawn(command);
    let addr = node.listening();
    let mut worker = lintel()
        .args(["worker", "--connect", &addr, "--namespace", "input"])
        .args(["--activity", "echo"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintel worker starts");
    let lines = stderr_lines(&mut worker);
    line_with(&lines, &mut Vec::new(), "registered as worker");
    (node, worker, addr)
}

/// `lintel dispatch` of `echo` with `input_args`, `stdin` written to its standard input.
fn echo(addr: &str, input_args: &[&str], stdin: &[u8]) -> Output {
    let mut child = lintel()
        .args(["dispatch", "--connect", addr, "--namespace", "input"])
        .args(["--activity", "echo", "--wait-ms", "10000"])
        .args(input_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintel dispatch starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    // Written on a thread: the command reads its input only once it is connected, and may
    // stop reading early.
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&stdin);
    });
    let out = child.wait_with_output().expect("lintel dispatch ends");
    let _ = writer.join();
    out
}

/// A file of `bytes` in the target's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cli-input-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).expect("write the input file");
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 path")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn input_that_is_not_utf8_goes_through_from_stdin_and_from_a_file() {
    let (_node, mut worker, addr) = node_and_worker();
    let bytes = b"\xff\xfe\x00 not UTF-8 \xc3\x28";
    let out = echo(&addr, &["--input", "-"], bytes);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, [&bytes[..], b"\n"].concat());

    let file = Scratch::new("binary", bytes);
    let out = echo(&addr, &["--input-file", file.path()], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, [&bytes[..], b"\n"].concat());

    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let argument = std::ffi::OsStr::from_bytes(b"\xff\xfe argument");
        let out = lintel()
            .args(["dispatch", "--connect", &addr, "--namespace", "input"])
            .args(["--activity", "echo", "--input"])
            .arg(argument)
            .output()
            .expect("lintel dispatch runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(out.stdout, b"\xff\xfe argument\n");
    }
    let _ = worker.kill();
    let _ = worker.wait();
}

#[test]
fn the_largest_input_the_node_takes_goes_through_and_one_byte_more_is_refused_with_both_sizes() {
    let (_node, mut worker, addr) = node_and_worker();
    let probe = lintel()
        .args(["dispatch", "--connect", &addr, "--namespace", "input"])
        .args(["--activity", "echo", "--input-file", "/nonexistent/input"])
        .output()
        .expect("lintel dispatch runs");
    assert_eq!(probe.status.code(), Some(1));
    assert!(
        text(&probe.stderr).contains("cannot read the input file /nonexistent/input"),
        "{}",
        text(&probe.stderr)
    );

    // The limit: the frame less the push's reserve and the request's id, `cli-` and the
    // process id in ten digits.
    let limit = MAX_FRAME_LEN - RESERVE - 14;
    let over = vec![b'x'; MAX_FRAME_LEN];
    let out = echo(&addr, &["--input", "-"], &over);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!(
            "the input is {MAX_FRAME_LEN} bytes, over the {limit} a dispatch to {addr} can \
             carry: the node's max_frame_len of {MAX_FRAME_LEN} bytes, less {RESERVE} for the \
             push and 14 for the request's id and headers"
        )),
        "{said}"
    );

    let largest = Scratch::new("largest", &vec![b'y'; limit]);
    let out = echo(&addr, &["--input-file", largest.path()], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout.len(), limit + 1);
    let one_more = Scratch::new("one-more", &vec![b'y'; limit + 1]);
    let out = echo(&addr, &["--input-file", one_more.path()], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&format!(
            "the input is {} bytes, over the {limit}",
            limit + 1
        )),
        "{}",
        text(&out.stderr)
    );
    let _ = worker.kill();
    let _ = worker.wait();
}

#[test]
fn bench_says_why_dispatches_were_refused_and_counts_an_oversized_payload_apart() {
    let mut command = lintel();
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("LINTEL_MAX_FRAME_LEN", MAX_FRAME_LEN.to_string());
    let mut node = Served::spawn(command);
    let addr = node.listening();
    let bench = |payload: usize| {
        let out = lintel()
            .args([
                "bench",
                "--connect",
                &addr,
                "--count",
                "8",
                "--concurrency",
                "2",
            ])
            .args(["--workers", "1", "--payload", &payload.to_string()])
            .output()
            .expect("lintel bench runs");
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // Over what a push can carry, within a frame: the node refuses each, saying why.
    let refused = bench(MAX_FRAME_LEN - RESERVE + 100);
    assert!(refused.contains("  refused: 8\n"), "{refused}");
    assert!(
        refused.contains("    InvalidRequest: 8 (input, ids, headers and extensions of"),
        "{refused}"
    );
    // Over a frame: nothing is sent; each lane stops at its first.
    let oversized = bench(MAX_FRAME_LEN + 100);
    assert!(oversized.contains("  oversized: 2\n"), "{oversized}");
    assert!(
        oversized.contains(&format!(
            "exceeds the frame limit of {MAX_FRAME_LEN} bytes; nothing was sent"
        )),
        "{oversized}"
    );
    assert!(!oversized.contains("connection-lost"), "{oversized}");
}
