//! `lintel serve` and `lintel worker` as processes of their own: started on loopback, read
//! through the node's admin listener and `/proc`, and killed, stopped or resumed by signal.
//!
//! Every child is killed when its handle drops, so a failing test leaves no process behind.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lintel::status::Status;
use prometheus_parse::{Scrape, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::within;

/// How often [`until`] looks again at a process it can only poll.
const POLL: Duration = Duration::from_millis(25);

/// Looks at `check` until it yields a value, at most `bound`; fails the test with `what` and
/// the last thing `check` saw otherwise. For state in another process, which cannot notify us.
pub async fn until<T>(
    what: &str,
    bound: Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval(POLL);
    loop {
        ticks.tick().await;
        match check().await {
            Ok(value) => return value,
            Err(last) if started.elapsed() > bound => {
                panic!("timed out after {bound:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => {}
        }
    }
}

/// A counter's or gauge's value.
fn value(sample: &prometheus_parse::Sample) -> Option<f64> {
    match sample.value {
        Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => Some(value),
        _ => None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends `signal` (a `kill -s` name such as `STOP`) to process `pid`.
pub async fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .await
        .expect("run kill");
    assert!(status.success(), "kill -s {signal} {pid} failed: {status}");
}

/// The node's settings that the fault tests vary.
#[derive(Debug, Clone)]
pub struct NodeSettings {
    pub max_connections: usize,
    pub ping_interval_ms: u64,
    pub max_missed_pings: u32,
    pub reply_timeout_ms: u64,
    /// How long the node keeps a lost worker's session for it to resume.
    pub worker_resume_grace_ms: u64,
}

/// A `lintel serve` process on ephemeral loopback ports, with its admin listener.
pub struct NodeProcess {
    child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pid: u32,
    /// Every line of the node's log read so far.
    log: Arc<Mutex<Vec<String>>>,
    drain_log: JoinHandle<()>,
}

impl NodeProcess {
    /// Starts a node with `settings` and waits until both its listeners are bound.
    pub async fn start(settings: &NodeSettings) -> Self {
        let args = [
            "--node-id".to_owned(),
            "faults".to_owned(),
            "--max-connections".to_owned(),
            settings.max_connections.to_string(),
            "--ping-interval-ms".to_owned(),
            settings.ping_interval_ms.to_string(),
            "--reply-timeout-ms".to_owned(),
            settings.reply_timeout_ms.to_string(),
        ];
        let missed = settings.max_missed_pings.to_string();
        let grace = settings.worker_resume_grace_ms.to_string();
        let envs = [
            ("LINTEL_MAX_MISSED_PINGS", missed.as_str()),
            ("LINTEL_WORKER_RESUME_GRACE_MS", grace.as_str()),
        ];
        Self::launch(&args, &envs).await
    }

    /// Starts `lintel serve` on ephemeral loopback ports, admin listener included, with `args`
    /// and `envs` besides, and waits until both its listeners are bound.
    pub async fn launch(args: &[String], envs: &[(&str, &str)]) -> Self {
        Self::launch_at("127.0.0.1:0", args, envs).await
    }

    /// As [`NodeProcess::launch`], listening on `listen`: `127.0.0.1:0`, or the address of a
    /// node that exited, to start it again where its clients look for it.
    pub async fn launch_at(listen: &str, args: &[String], envs: &[(&str, &str)]) -> Self {
        let mut child = Command::from(crate::lintel())
            .args(["serve", "--listen", listen])
            .args(["--admin-listen", "127.0.0.1:0"])
            .args(args)
            .env("RUST_LOG", "info")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lintel serve");
        let pid = child.id().expect("a running node has a pid");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let (mut addr, mut admin) = (None, None);
        let log = Arc::new(Mutex::new(Vec::new()));
        within("the node's listeners", async {
            while addr.is_none() || admin.is_none() {
                let line = lines
                    .next_line()
                    .await
                    .expect("read the node's log")
                    .expect("the node exited before listening");
                lock(&log).push(line.clone());
                let bound = line
                    .split_once("addr=")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .and_then(|text| text.parse::<SocketAddr>().ok());
                if line.contains("admin listening") {
                    admin = bound;
                } else if line.contains("listening") {
                    addr = bound;
                }
            }
        })
        .await;
        // Keep reading, so the node never blocks on a full pipe.
        let kept = Arc::clone(&log);
        let drain_log = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                lock(&kept).push(line);
            }
        });
        Self {
            child,
            addr: addr.expect("listen address"),
            admin: admin.expect("admin address"),
            pid,
            log,
            drain_log,
        }
    }

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The node's log so far.
    pub fn log(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    /// Kills the node and returns its whole log.
    pub async fn kill(mut self) -> Vec<String> {
        self.child.start_kill().expect("SIGKILL the node");
        within("a killed node to exit", self.child.wait())
            .await
            .expect("reap the node");
        let _ = within("the killed node's log to end", &mut self.drain_log).await;
        std::mem::take(&mut *lock(&self.log))
    }

    /// Sends the node `name` (a `kill -s` name such as `TERM`) and waits, at most `bound`, for
    /// it to exit: how it exited and its whole log.
    pub async fn stop(
        mut self,
        name: &str,
        bound: Duration,
    ) -> (std::process::ExitStatus, Vec<String>) {
        signal(self.pid, name).await;
        let exited = tokio::time::timeout(bound, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the node did not exit within {bound:?} of SIG{name}"))
            .expect("reap the node");
        let _ = within("the node's log to end", &mut self.drain_log).await;
        (exited, std::mem::take(&mut *lock(&self.log)))
    }

    /// GETs `path` from the admin listener: the status code and the body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        crate::admin_get(self.admin, path).await
    }

    /// The node's status, from `/status`.
    pub async fn status(&self) -> Status {
        let (code, body) = self.get("/status").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("/status is a Status")
    }

    /// The unlabelled gauge or counter `name` from `/metrics`.
    pub async fn metric(&self, name: &str) -> f64 {
        let scrape = self.scrape().await;
        scrape
            .samples
            .iter()
            .find(|sample| sample.metric == name && sample.labels.is_empty())
            .and_then(value)
            .unwrap_or_else(|| panic!("no metric {name}"))
    }

    /// The sum of every sample of `name` in `/metrics`, whatever its labels; 0 when none.
    pub async fn metric_sum(&self, name: &str) -> f64 {
        let scrape = self.scrape().await;
        scrape
            .samples
            .iter()
            .filter(|sample| sample.metric == name)
            .filter_map(value)
            .sum()
    }

    async fn scrape(&self) -> Scrape {
        let (code, body) = self.get("/metrics").await;
        assert_eq!(code, 200, "{body}");
        Scrape::parse(body.lines().map(|line| Ok(line.to_owned()))).expect("parse")
    }

    /// The node's peak resident memory so far (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.pid, "VmHWM:")
    }

    /// The node's resident memory now (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        proc_status_kib(self.pid, "VmRSS:")
    }

    /// True while the node process runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.drain_log.abort();
    }
}

/// The value of the `/proc/PID/status` line starting `key`, in KiB.
fn proc_status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc");
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// A `lintel worker` process serving `echo` and `sleep`, and the worker ids it registered as.
pub struct WorkerProcess {
    child: Child,
    pub pid: u32,
    pub identity: String,
    registrations: mpsc::UnboundedReceiver<u64>,
    read_log: JoinHandle<()>,
}

impl WorkerProcess {
    /// Starts a worker in `namespace` with `concurrency` slots; see [`WorkerProcess::registered`].
    pub fn start(node: SocketAddr, namespace: &str, concurrency: u32, identity: &str) -> Self {
        let mut child = Command::from(crate::lintel())
            .args(["worker", "--connect", &node.to_string()])
            .args(["--namespace", namespace])
            .args(["--activity", "echo", "--activity", "sleep"])
            .args(["--concurrency", &concurrency.to_string()])
            .args(["--identity", identity])
            .env("RUST_LOG", "warn,lintel::cli::worker=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start lintel worker");
        let pid = child.id().expect("a running worker has a pid");
        let (tx, registrations) = mpsc::unbounded_channel();
        let read_log = tokio::spawn(read_registrations(child.stderr.take().expect("stderr"), tx));
        Self {
            child,
            pid,
            identity: identity.to_owned(),
            registrations,
            read_log,
        }
    }

    /// A registration that came without being waited for (the worker reconnected after the
    /// node dropped it), with when it was read; `None` when there is none.
    pub fn reregistered(&mut self) -> Option<(u64, tokio::time::Instant)> {
        let id = self.registrations.try_recv().ok()?;
        Some((id, tokio::time::Instant::now()))
    }

    /// Waits for the worker's next registration and returns its worker id.
    pub async fn registered(&mut self) -> u64 {
        within("a worker process to register", self.registrations.recv())
            .await
            .unwrap_or_else(|| panic!("worker {} exited before registering", self.identity))
    }

    /// SIGKILLs the worker and reaps it; returns the ids of registrations it made that were not
    /// waited for.
    pub async fn kill(mut self) -> Vec<u64> {
        self.child.start_kill().expect("SIGKILL the worker");
        within("a killed worker to exit", self.child.wait())
            .await
            .expect("reap the worker");
        // Its log ends with it: every registration it made is in the channel once the reader stops.
        let _ = within("the killed worker's log to end", &mut self.read_log).await;
        let mut unseen = Vec::new();
        while let Ok(id) = self.registrations.try_recv() {
            unseen.push(id);
        }
        unseen
    }

    /// SIGSTOPs the worker: its sockets stay open and nothing on them is read or answered.
    pub async fn stop(&self) {
        signal(self.pid, "STOP").await;
    }

    /// SIGCONTs a stopped worker.
    pub async fn resume(&self) {
        signal(self.pid, "CONT").await;
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.read_log.abort();
    }
}

/// Forwards the ID of each `registered as worker ID` log line of a worker as it comes.
async fn read_registrations(stderr: ChildStderr, registrations: mpsc::UnboundedSender<u64>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let id = line
            .split_once("registered as worker ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|id| id.parse().ok());
        if let Some(id) = id {
            let _ = registrations.send(id);
        }
    }
}
