//! The Python worker and producer of `examples/python`, written with the Python SDK
//! (`clients/python`, standard library only, on `PYTHONPATH`), against a real `lintel serve`
//! process: the worker registers and answers 50 dispatches of the producer's with the right
//! bytes; an unregistered namespace is printed as no-worker; a reply timeout reaches the
//! worker's handler as a cancellation; and when the node is interrupted the worker is drained
//! and exits 0. Against a node requiring mutual TLS, both speak TLS with their client
//! certificates, and without `--tls-ca` the producer is told the node speaks TLS.
//!
//! Every test is skipped, saying why, when `python3` is not on PATH (`.ci/run` installs it).

use lintel_test_support as support;

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};

use lintel::sdk::{Client, ClientConfig};
use support::{lintel, loopback_address, within, Pki};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

const DISPATCHES: usize = 50;
const NODE_ID: &str = "py-node";
const IDENTITY: &str = "py-test-worker";

/// `python3 --version`, or why there is none.
fn python3() -> Result<String, String> {
    match std::process::Command::new("python3")
        .arg("--version")
        .output()
    {
        Ok(out) if out.status.success() => {
            let version =
                String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
            Ok(version.trim().to_owned())
        }
        Ok(out) => Err(format!("`python3 --version` failed: {}", out.status)),
        Err(err) => Err(format!("python3 is not on PATH ({err})")),
    }
}

/// Whether to run: prints the reason and returns false when python3 is missing.
fn have_python(test: &str) -> bool {
    match python3() {
        Ok(version) => {
            eprintln!("{test}: using {version}");
            true
        }
        Err(reason) => {
            println!("skipping {test}: {reason}; scripts/install-python.sh installs it");
            false
        }
    }
}

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/python")
}

/// Where the Python SDK's package lives, for `PYTHONPATH`.
fn sdk_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients/python/src")
}

/// `python3 -u examples/python/<script> <args>`, killed when dropped.
fn python(script: &str, args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg("-u")
        .arg(examples_dir().join(script))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONPATH", sdk_dir())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// The lines a child writes to one of its pipes, read as they come.
struct Lines {
    rx: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn of(pipe: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            rx,
            seen: Vec::new(),
        }
    }

    /// The next line for which `wanted` holds, waiting at most `within`'s bound.
    async fn until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let found = within(what, async {
            while let Some(line) = self.rx.recv().await {
                self.seen.push(line.clone());
                if wanted(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        found.unwrap_or_else(|| panic!("the pipe closed before {what}; it said:\n{:#?}", self.seen))
    }

    /// Every line still to come, once the child closed the pipe.
    async fn rest(mut self, what: &str) -> Vec<String> {
        within(what, async {
            let mut rest = Vec::new();
            while let Some(line) = self.rx.recv().await {
                rest.push(line);
            }
            rest
        })
        .await
    }
}

/// `lintel serve` on a free loopback port, once it logged that it listens.
struct Node {
    child: Child,
    addr: String,
    log: Lines,
}

impl Node {
    async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// `lintel serve` with `extra` flags.
    async fn start_with(extra: &[&str]) -> Self {
        let mut child = Command::from(lintel())
            .args(["serve", "--listen", "127.0.0.1:0", "--node-id", NODE_ID])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lintel serve");
        let mut log = Lines::of(child.stderr.take().expect("stderr"));
        let listening = log
            .until("the node to listen", |line| line.contains("listening"))
            .await;
        let addr = loopback_address(&listening).expect("the listening line names its address");
        Self { child, addr, log }
    }
}

/// A finished Python producer.
struct Run {
    status: ExitStatus,
    stdout: String,
}

impl Run {
    fn line(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{}", self.stdout))
    }
}

async fn producer(addr: &str, args: &[&str]) -> Run {
    let mut all = vec!["--addr", addr, "--timeout", "8"];
    all.extend_from_slice(args);
    let child = python("producer.py", &all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start producer.py");
    let out = within("producer.py to finish", child.wait_with_output())
        .await
        .expect("producer.py's output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("producer.py {args:?} -> {}\n{stdout}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "producer.py wrote to stderr:\n{stderr}");
    Run {
        status: out.status,
        stdout,
    }
}

#[tokio::test]
async fn the_python_worker_and_producer_run_against_lintel_serve() {
    if !have_python("the_python_worker_and_producer_run_against_lintel_serve") {
        return;
    }
    let mut node = Node::start().await;
    let addr = node.addr.clone();

    let mut worker = python(
        "worker.py",
        &[
            "--addr",
            &addr,
            "--namespace",
            "py",
            "--activities",
            "echo,upper,sleep",
            "--capacity",
            "8",
            "--identity",
            IDENTITY,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start worker.py");
    let mut said = Lines::of(worker.stdout.take().expect("stdout"));
    let complained = Lines::of(worker.stderr.take().expect("stderr"));
    let registered = said
        .until("worker.py to register", |line| {
            line.starts_with("registered ")
        })
        .await;
    assert!(
        registered.contains(&format!("node={NODE_ID} version=4")),
        "{registered}"
    );

    // The node sees what the Python worker registered.
    let client = within(
        "an SDK producer",
        Client::connect(addr.as_str(), ClientConfig::default()),
    )
    .await
    .expect("connect");
    let status = within("the node's status", client.status())
        .await
        .expect("status");
    let pool = status
        .pools
        .iter()
        .find(|pool| pool.namespace == "py")
        .unwrap_or_else(|| panic!("no pool py in {status:?}"));
    assert_eq!(pool.task_queue, "default");
    let [registered] = &pool.workers[..] else {
        panic!("one worker expected in {pool:?}");
    };
    assert_eq!(registered.identity, IDENTITY);
    assert_eq!(registered.max_concurrency, 8);
    let mut types = registered.activity_types.clone();
    types.sort();
    assert_eq!(types, ["echo", "sleep", "upper"]);
    client.close().await;

    // 50 dispatches over version 2: each completed by this node with its upper-cased input.
    let count = DISPATCHES.to_string();
    let run = producer(
        &addr,
        &[
            "--namespace",
            "py",
            "--activity",
            "upper",
            "--count",
            &count,
            "--status",
        ],
    )
    .await;
    assert!(run.status.success(), "{}\n{}", run.status, run.stdout);
    for i in 0..DISPATCHES {
        assert_eq!(
            run.line(&format!("dispatch {i}: ")),
            format!("dispatch {i}: completed, served by {NODE_ID}: success b'HELLO-{i}'")
        );
    }
    assert_eq!(
        run.line("summary: "),
        format!("summary: completed={DISPATCHES}")
    );
    // The Python decoding of the node's ClusterStatus.
    assert!(
        run.line("status   worker ")
            .contains(&format!("identity={IDENTITY} activities=")),
        "{}",
        run.stdout
    );
    assert!(
        run.line("status counters ")
            .contains(&format!("completed={DISPATCHES} no_worker=0")),
        "{}",
        run.stdout
    );

    // Nobody serves this namespace: no-worker, decoded with its census, and exit 1.
    let run = producer(
        &addr,
        &[
            "--namespace",
            "nobody",
            "--count",
            "1",
            "--wait-for-worker-ms",
            "0",
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stdout);
    assert!(
        run.line("dispatch 0: ").starts_with(&format!(
            "dispatch 0: no-worker, decided by {NODE_ID}: reason=PoolEmpty pool_workers=0 "
        )),
        "{}",
        run.stdout
    );
    assert_eq!(run.line("summary: "), "summary: no-worker=1");

    // A reply timeout: the producer hears Timeout, the worker's handler is cancelled.
    let run = producer(
        &addr,
        &[
            "--namespace",
            "py",
            "--activity",
            "sleep",
            "--input",
            "60000",
            "--reply-timeout-ms",
            "200",
            "--count",
            "1",
        ],
    )
    .await;
    assert_eq!(run.status.code(), Some(1), "{}", run.stdout);
    let timeout = run.line("dispatch 0: ");
    assert!(
        timeout.starts_with(&format!(
            "dispatch 0: timeout, decided by {NODE_ID}: worker_id="
        )) && timeout.ends_with(" after_ms=200"),
        "{timeout}"
    );
    said.until("worker.py's handler to be cancelled", |line| {
        line.starts_with("cancelled activity=sleep")
    })
    .await;

    interrupt_node(&mut node, &mut worker, &mut said, complained).await;
}

#[tokio::test]
async fn the_python_worker_and_producer_speak_mutual_tls() {
    if !have_python("the_python_worker_and_producer_speak_mutual_tls") {
        return;
    }
    let pki = Pki::new();
    let (cert, key) = pki.node_files("node");
    let ca = pki.ca_path();
    let client = |name: &str| {
        let leaf = pki.leaf(&[name]);
        (
            pki.write(&format!("{name}.pem"), &leaf.cert),
            pki.write(&format!("{name}.key"), &leaf.key),
        )
    };
    let (worker_cert, worker_key) = client("py-worker");
    let (producer_cert, producer_key) = client("py-producer");
    let text = |path: &std::path::Path| path.to_str().expect("UTF-8 path").to_owned();
    let (cert, key, ca) = (text(&cert), text(&key), text(&ca));
    let node = Node::start_with(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-client-ca",
        &ca,
    ])
    .await;
    let addr = node.addr.clone();

    let (worker_cert, worker_key) = (text(&worker_cert), text(&worker_key));
    let mut worker = python(
        "worker.py",
        &[
            "--addr",
            &addr,
            "--namespace",
            "py",
            "--tls-ca",
            &ca,
            "--tls-cert",
            &worker_cert,
            "--tls-key",
            &worker_key,
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("start worker.py");
    let mut said = Lines::of(worker.stdout.take().expect("stdout"));
    said.until("worker.py to register over TLS", |line| {
        line.starts_with("registered ")
    })
    .await;

    let (producer_cert, producer_key) = (text(&producer_cert), text(&producer_key));
    let tls = [
        "--tls-ca",
        ca.as_str(),
        "--tls-cert",
        producer_cert.as_str(),
        "--tls-key",
        producer_key.as_str(),
    ];
    let mut args = vec!["--namespace", "py", "--activity", "upper", "--count", "20"];
    args.extend_from_slice(&tls);
    let run = producer(&addr, &args).await;
    assert!(run.status.success(), "{}\n{}", run.status, run.stdout);
    for i in 0..20 {
        assert_eq!(
            run.line(&format!("dispatch {i}: ")),
            format!("dispatch {i}: completed, served by {NODE_ID}: success b'HELLO-{i}'")
        );
    }

    // Plaintext to a TLS node: told so. Without a client certificate: refused in the handshake.
    let plain = producer(&addr, &["--namespace", "py", "--count", "1"]).await;
    assert_eq!(plain.status.code(), Some(1), "{}", plain.stdout);
    assert!(
        plain.stdout.contains("the node speaks TLS"),
        "{}",
        plain.stdout
    );
    let anonymous = producer(
        &addr,
        &["--namespace", "py", "--count", "1", "--tls-ca", &ca],
    )
    .await;
    assert_eq!(anonymous.status.code(), Some(1), "{}", anonymous.stdout);
    assert!(
        anonymous.stdout.starts_with("producer could not connect:"),
        "{}",
        anonymous.stdout
    );
    drop(worker);
    drop(node);
}

/// SIGINT to the node: it drains, the worker is drained and exits 0, the node exits 0.
#[cfg(unix)]
async fn interrupt_node(node: &mut Node, worker: &mut Child, said: &mut Lines, stderr: Lines) {
    let pid = node.child.id().expect("the node runs");
    let sent = std::process::Command::new("sh")
        .args(["-c", &format!("kill -INT {pid}")])
        .status();
    if !matches!(sent, Ok(status) if status.success()) {
        println!("not checking the drain: could not send SIGINT to the node ({sent:?})");
        return;
    }
    said.until("worker.py to be drained", |line| {
        line.starts_with("drain: the node drained this worker")
    })
    .await;
    let exit = within("worker.py to exit", worker.wait())
        .await
        .expect("wait");
    assert!(
        exit.success(),
        "worker.py exited {exit}; it said:\n{:#?}",
        said.seen
    );
    let complaints = stderr.rest("worker.py's stderr to close").await;
    assert!(
        complaints.is_empty(),
        "worker.py wrote to stderr: {complaints:#?}"
    );
    let exit = within("the node to exit", node.child.wait())
        .await
        .expect("wait");
    assert!(exit.success(), "lintel serve exited {exit}");
    node.log
        .until("the node to stop", |line| line.contains("node stopped"))
        .await;
}

#[cfg(not(unix))]
async fn interrupt_node(_node: &mut Node, _worker: &mut Child, _said: &mut Lines, _stderr: Lines) {
    println!("not checking the drain: no SIGINT to send on this platform");
}
