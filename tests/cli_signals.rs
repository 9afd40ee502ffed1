//! Ctrl-C on the built binary: `dispatch` cancels its dispatch and exits 15; `serve` and
//! `worker` say what a drain waits for and how long at most, and a second Ctrl-C leaves at
//! once, saying what it abandons.

use lintel_test_support as support;

use lintel_test_support::processes;

use std::process::Stdio;
use std::time::Duration;

use processes::{signal, until, NodeProcess, WorkerProcess};
use support::{lintel, within, Served};

/// Generous: a debug build on a busy machine.
const BOUND: Duration = Duration::from_secs(20);

/// A `lintel dispatch` of `sleep` for a minute in `namespace`, killed on drop.
fn long_dispatch(node: &NodeProcess, namespace: &str, stderr: Stdio) -> tokio::process::Child {
    tokio::process::Command::from(lintel())
        .args(["dispatch", "--connect", &node.addr.to_string()])
        .args([
            "--namespace",
            namespace,
            "--activity",
            "sleep",
            "--input",
            "60000",
        ])
        .args(["--wait-ms", "10000"])
        .stdout(Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("lintel dispatch starts")
}

/// Waits until `node` has `n` dispatches in flight.
async fn in_flight(node: &NodeProcess, n: f64) {
    until("the dispatches in flight", BOUND, async || {
        match node.metric("lintel_dispatches_in_flight").await {
            now if now == n => Ok(()),
            now => Err(format!("{now} in flight")),
        }
    })
    .await;
}

#[tokio::test]
async fn ctrl_c_on_dispatch_cancels_it_prints_cancelled_and_exits_15() {
    let node = NodeProcess::launch(&[], &[]).await;
    let mut worker = WorkerProcess::start(node.addr, "signals", 4, "sleeper");
    worker.registered().await;
    let dispatch = long_dispatch(&node, "signals", Stdio::piped());
    in_flight(&node, 1.0).await;
    signal(dispatch.id().expect("running"), "INT").await;
    let out = within("the dispatch to end", dispatch.wait_with_output())
        .await
        .expect("reap the dispatch");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(15), "{said}");
    assert!(said.starts_with("cancelled: "), "{said}");
    // The node cancelled it, and the worker, told, gave its slot back.
    until("the node to count the cancel", BOUND, async || {
        let status = node.status().await;
        let running: u32 = status
            .pools
            .iter()
            .flat_map(|pool| &pool.workers)
            .map(|worker| worker.in_flight)
            .sum();
        match (status.counters.cancelled, running) {
            (1, 0) => Ok(()),
            seen => Err(format!("cancelled, running: {seen:?}")),
        }
    })
    .await;
    let _ = worker.kill().await;
}

#[tokio::test]
async fn a_second_ctrl_c_ends_serve_at_once_saying_what_it_abandons() {
    let args = ["--drain-timeout-ms".to_owned(), "60000".to_owned()];
    let node = NodeProcess::launch(&args, &[]).await;
    let mut worker = WorkerProcess::start(node.addr, "signals", 4, "sleeper");
    worker.registered().await;
    let _dispatch = long_dispatch(&node, "signals", Stdio::null());
    in_flight(&node, 1.0).await;
    signal(node.pid(), "INT").await;
    let waiting = "interrupted: waiting up to 60 s for 1 dispatch in flight and 1 worker to \
                   finish, then stopping (Ctrl-C again to leave at once)";
    until("the node to say what it waits for", BOUND, async || {
        let log = node.log();
        match log.iter().any(|line| line.contains(waiting)) {
            true => Ok(()),
            false => Err(format!("{log:#?}")),
        }
    })
    .await;
    // Well within the minute the drain would take.
    let (exited, log) = node.stop("INT", BOUND).await;
    assert_eq!(exited.code(), Some(130), "{log:#?}");
    assert!(
        log.iter().any(|line| line
            .contains("interrupted again: leaving at once, abandoning 1 dispatch in flight")),
        "{log:#?}"
    );
    let _ = worker.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_ends_a_worker_at_once_saying_what_it_abandons() {
    let node = NodeProcess::launch(&[], &[]).await;
    let mut command = lintel();
    command
        .args(["worker", "--connect", &node.addr.to_string()])
        .args(["--namespace", "signals", "--activity", "sleep"])
        .args(["--drain-ms", "60000"]);
    let mut worker = Served::spawn(command);
    worker.wait_for("registered as worker");
    let _dispatch = long_dispatch(&node, "signals", Stdio::null());
    in_flight(&node, 1.0).await;
    let pid = worker.pid();
    signal(pid, "INT").await;
    let said = tokio::task::block_in_place(|| worker.wait_for("interrupted:"));
    assert!(
        said.contains(
            "interrupted: waiting up to 60 s (--drain-ms) for 1 request in flight, then leaving \
             (Ctrl-C again to leave at once)"
        ),
        "{said}"
    );
    signal(pid, "INT").await;
    let exited = tokio::task::block_in_place(|| worker.wait_exit());
    assert_eq!(exited.code(), Some(130), "{:#?}", worker.seen);
    assert!(
        worker.seen.iter().any(|line| line
            .contains("interrupted again: leaving at once, abandoning 1 request in flight")),
        "{:#?}",
        worker.seen
    );
}
