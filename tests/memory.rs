//! Memory bounded in bytes, against `lintel serve` as its own process: producers that never
//! read are read no further, then closed as slow consumers, and the node's peak resident
//! memory stays bounded however many of them there are.

use lintel_test_support as support;

use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use lintel::sdk::Worker;
use lintel::wire::{
    DispatchRequest, ErrorCode, Frame, FrameCodec, Hello, NodeRouting, Role, Submit,
};
use support::{hello_at, lintel, loopback_address, plain, request, WAIT};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};
use tokio_util::codec::Framed;

/// Producers that never read.
const PRODUCERS: usize = 4;
/// Submissions each producer tries at most; the node stops reading long before (refused
/// submissions owe only small outcomes, so it may take a thousand to fill the queue).
const SUBMISSIONS: u64 = 4096;
/// Input bytes per submission.
const INPUT: usize = 1024 * 1024;
/// The node's peak resident memory must stay under this.
const PEAK_LIMIT_KB: u64 = 256 * 1024;
/// The wait for each producer's slow-consumer close, from its first submission.
const RUN_BOUND: Duration = Duration::from_secs(60);

/// `lintel serve` on a free loopback port, its connection log lines on a channel.
struct Node {
    child: Child,
    addr: String,
    log: mpsc::UnboundedReceiver<String>,
    /// Pids the node logged closing as slow consumers, in order.
    shed: watch::Receiver<Vec<u64>>,
}

impl Node {
    async fn start() -> Self {
        let mut child = Command::from(lintel())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info,lintel::connection=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lintel serve");
        let (tx, log) = mpsc::unbounded_channel();
        let (shed_tx, shed) = watch::channel(Vec::new());
        let stderr = child.stderr.take().expect("stderr");
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(pid) = slow_consumer_pid(&line) {
                    shed_tx.send_modify(|pids| pids.push(pid));
                }
                let _ = tx.send(line);
            }
        });
        let mut node = Self {
            child,
            addr: String::new(),
            log,
            shed,
        };
        let listening = node.until(WAIT, |line| line.contains("listening")).await;
        node.addr = loopback_address(&listening).expect("the listening line names its address");
        node
    }

    /// Waits for a log line `wanted` holds for, at most `bound`.
    async fn until(&mut self, bound: Duration, wanted: impl Fn(&str) -> bool) -> String {
        let found = tokio::time::timeout(bound, async {
            while let Some(line) = self.log.recv().await {
                if wanted(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            Ok(None) => panic!("the node's log ended"),
            Err(_) => panic!("timed out waiting for the node's log"),
        }
    }

    /// The node's peak resident memory so far, in KiB (`VmHWM`).
    fn peak_kb(&self) -> u64 {
        let pid = self.child.id().expect("the node runs");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }
}

/// The pid in a "closing a slow consumer" log line.
fn slow_consumer_pid(line: &str) -> Option<u64> {
    if !line.contains("closing a slow consumer") {
        return None;
    }
    let rest = &line[line.find("pid=")? + 4..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Waits until the node closed producer `pid` as a slow consumer, then reads what was on
/// its way to the end; returns the last frame.
async fn last_frame_once_shed(
    mut shed: watch::Receiver<Vec<u64>>,
    pid: u64,
    mut stream: impl futures_util::Stream<Item = Result<Frame, lintel::wire::CodecError>> + Unpin,
) -> Option<Frame> {
    tokio::time::timeout(RUN_BOUND, shed.wait_for(|pids| pids.contains(&pid)))
        .await
        .unwrap_or_else(|_| panic!("producer {pid} was never closed as a slow consumer"))
        .expect("the node's log");
    tokio::time::timeout(WAIT, async {
        let mut last = None;
        while let Some(Ok(frame)) = stream.next().await {
            last = Some(frame);
        }
        last
    })
    .await
    .expect("the stream never ended")
}

/// A producer speaking up to `version`, past its handshake, and its pid.
async fn producer(addr: &str, version: u16) -> (Framed<TcpStream, FrameCodec>, u64) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let mut framed = Framed::new(stream, FrameCodec::new(8 * 1024 * 1024));
    let hello: Hello = hello_at(Role::Producer, version);
    framed.send(Frame::Hello(hello)).await.expect("hello");
    match tokio::time::timeout(WAIT, framed.next()).await {
        Ok(Some(Ok(Frame::Welcome(welcome)))) => (framed, welcome.pid),
        other => panic!("expected Welcome, got {other:?}"),
    }
}

fn submission(correlation: u64, input: &Bytes) -> Frame {
    Frame::from(Submit {
        correlation,
        request: DispatchRequest {
            input: input.clone(),
            ..request("mem", "echo", "")
        },
        wait_for_worker_ms: Some(60_000),
        reply_timeout_ms: Some(60_000),
        routing: NodeRouting::Any,
        extras: Default::default(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_that_never_read_are_closed_as_slow_consumers_and_the_node_stays_small() {
    let mut node = Node::start().await;
    let mut workers = Vec::new();
    for n in 0..4 {
        let config = support::worker_config(
            node.addr.clone(),
            plain("mem", "echo", 8, &format!("echo-{n}")),
        );
        let worker = Worker::spawn(config, lintel::activities::BuiltIn);
        assert!(worker.wait_registered(WAIT).await.is_ok());
        workers.push(worker);
    }
    let input = Bytes::from(vec![b'm'; INPUT]);
    let mut producers = Vec::new();
    for n in 0..PRODUCERS {
        // Half speak version 2, half version 1, which knows no `SlowConsumer`.
        let version = if n % 2 == 0 { 2 } else { 1 };
        let (framed, pid) = producer(&node.addr, version).await;
        let (mut sink, stream) = framed.split();
        let input = input.clone();
        // Writes until the node stops reading (the write then waits) or closes; never reads.
        let writer = tokio::spawn(async move {
            for correlation in 1..=SUBMISSIONS {
                if sink.send(submission(correlation, &input)).await.is_err() {
                    break;
                }
            }
        });
        // Reads nothing until the node says it closed this producer.
        let last = tokio::spawn(last_frame_once_shed(node.shed.clone(), pid, stream));
        producers.push((pid, version, last, writer));
    }

    let mut closed = 0;
    for (pid, version, last, writer) in producers {
        let last = last.await.expect("reader task");
        match last {
            Some(Frame::Error(error)) if version >= 2 => {
                assert_eq!(error.code, ErrorCode::SlowConsumer);
                assert!(error.reason.contains("full"), "{}", error.reason);
            }
            Some(Frame::Goodbye(goodbye)) if version < 2 => {
                assert!(
                    goodbye.reason.starts_with("slow consumer"),
                    "{}",
                    goodbye.reason
                );
            }
            other => panic!("producer {pid} (version {version}) ended on {other:?}"),
        }
        writer.abort();
        closed += 1;
    }
    assert_eq!(closed, PRODUCERS);
    let peak = node.peak_kb();
    println!("lintel serve peak resident memory: {} MiB", peak / 1024);
    assert!(
        peak < PEAK_LIMIT_KB,
        "peak resident memory {} MiB is over {} MiB",
        peak / 1024,
        PEAK_LIMIT_KB / 1024
    );
    for worker in workers {
        worker.shutdown().await;
    }
    let _ = node.child.kill().await;
}
