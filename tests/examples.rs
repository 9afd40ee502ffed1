//! The Rust examples against a real `lintel serve`: `examples/worker.rs` registers and serves
//! `wc`; `examples/producer.rs` dispatches to it and prints each result with the node that
//! served it; Ctrl-C drains the worker, which exits 0; then the producer says there is no
//! worker and exits non-zero.
//!
//! `cargo test` builds the examples; a narrower run (`cargo test --test examples`) builds them
//! first with the same cargo.

use lintel_test_support as support;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use support::{line_with, Served};

/// The built example `name`, built now when this run did not build it.
fn example(name: &str) -> PathBuf {
    let test = std::env::current_exe().expect("the test's path");
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let profile = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let path = profile
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        let built = Command::new(env!("CARGO"))
            .args(["build", "--example", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(built.success(), "cargo build --example {name}");
    }
    path
}

/// A child killed on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn producer(addr: &str, texts: &[&str]) -> (Output, String) {
    let out = Command::new(example("producer"))
        .arg(addr)
        .args(texts)
        .stdin(Stdio::null())
        .output()
        .expect("the producer runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

#[test]
fn the_rust_worker_and_producer_examples_run_against_a_node() {
    let (_node, addr) = Served::on_loopback(&["--node-id", "example-node"]);
    let mut child = Command::new(example("worker"))
        .arg(&addr)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the worker starts");
    let stdout = child.stdout.take().expect("stdout");
    let lines = pipe_lines(stdout);
    let mut worker = Running(child);
    let mut seen = Vec::new();
    line_with(&lines, &mut seen, "registered as worker");

    let (out, stdout) = producer(&addr, &["hello world", "two\nlines"]);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            r#""hello world": {"lines":1,"words":2,"bytes":11} (served by example-node)"#
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#""two\nlines": {"lines":2,"words":2,"bytes":9}"#),
        "{stdout}"
    );

    let interrupted = Command::new("kill")
        .args(["-INT", &worker.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    line_with(&lines, &mut seen, "drained");
    let status = worker.0.wait().expect("the worker exits");
    assert!(status.success(), "{status}");

    let (out, stdout) = producer(&addr, &["anyone?"]);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains(r#""anyone?": no worker (PoolEmpty)"#),
        "{stdout}"
    );
}

/// The lines `pipe` carries, read on a thread as they come.
fn pipe_lines(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
