//! `--connect a,b,c` on the real `lintel` binary: a command reaches the node that answers
//! past one that does not, and a command none of whose nodes answers names each address.

use lintel_test_support as support;

use std::net::TcpListener;
use std::process::{Output, Stdio};

use support::{line_with, lintel, stderr_lines, Served};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An address on this host nothing listens on: bound, then let go.
fn closed_addr() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds a port");
    let addr = listener.local_addr().expect("a local address").to_string();
    drop(listener);
    addr
}

/// Runs `lintel` with `args` to its end.
fn run(args: &[&str]) -> Output {
    lintel().args(args).output().expect("lintel runs")
}

#[test]
fn dispatch_reaches_the_live_node_past_a_closed_one_and_status_names_every_dead_one() {
    let mut command = lintel();
    command.args(["serve", "--listen", "127.0.0.1:0"]);
    let mut node = Served::spawn(command);
    let live = node.listening();
    let mut worker = lintel()
        .args(["worker", "--connect", &live, "--namespace", "multi"])
        .args(["--activity", "echo"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintel worker starts");
    let lines = stderr_lines(&mut worker);
    line_with(&lines, &mut Vec::new(), "registered as worker");

    let closed = closed_addr();
    let nodes = format!("{closed},{live}");
    let out = run(&[
        "dispatch",
        "--connect",
        &nodes,
        "--namespace",
        "multi",
        "--activity",
        "echo",
        "--input",
        "over two nodes",
        "--wait-ms",
        "10000",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "over two nodes\n");

    let (first, second) = (closed_addr(), closed_addr());
    let nodes = format!("{first},{second}");
    let out = run(&["status", "--connect", &nodes]);
    assert!(!out.status.success(), "status with every node down fails");
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&first), "names {first}: {stderr}");
    assert!(stderr.contains(&second), "names {second}: {stderr}");

    let _ = worker.kill();
    let _ = worker.wait();
}
