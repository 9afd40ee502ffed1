//! lintel under test: a node, `workers` echo workers and one producer dispatching `echo`,
//! placed as the [`Mode`] says. The node is a `lintel serve` child process ([`LintelChild`]) or a
//! [`Node`] in this process; workers are `lintel worker` processes or SDK [`Worker`]s here; the
//! producer is a `lintel bench --workers 0` process per round, the SDK [`Client`] here, or (when
//! the node is embedded) the node's own [`Dispatcher`], with no network hop.
//!
//! Cross-node ([`Topology::CrossNode`]) there are two `lintel serve` children peered with
//! `--peer`, node `a` and node `b`: the workers register on `b`, the producer connects to `a`,
//! and `a` relays each dispatch to `b`. Only the all-separate layout has it, and it is measured
//! once `a` has answered a dispatch through `b` ([`wait_until_relayed`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lintel::activities::BuiltIn;
use lintel::dispatch::{DispatchOptions, Dispatcher};
use lintel::sdk::{
    ActivityOutcome, Client, ClientConfig, Dispatch, DispatchResult, Worker, WorkerConfig,
    WorkerConfigBuilder, WorkerHandle,
};
use lintel::wire::DispatchRequest;
use lintel::{Node, NodeConfig};
use serde::Deserialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::measure::{self, Load, Sample, Target};
use crate::mode::{Mode, Producer};
use crate::process::{self, Proc, Stream};
use crate::tls::TlsFiles;
use crate::topology::Topology;

/// The `lintel` binary built beside this harness (release for `cargo bench`).
const LINTEL_BIN: &str = env!("CARGO_BIN_EXE_lintel");

/// The namespace every benchmark worker registers in, unless told otherwise.
pub const NAMESPACE: &str = "bench";

/// Capacity of each echo worker: enough for the highest concurrency on one worker.
pub const WORKER_CAPACITY: u32 = 1024;

/// Producer connections; lanes take them in turn. One, two and four measured alike on 2 cores.
const PRODUCERS: usize = 1;

/// Workers registering at once; more would overflow the listen backlog and back off.
const REGISTER_BATCH: usize = 256;

/// How long a worker may take to register.
const REGISTER_WAIT: Duration = Duration::from_secs(30);

/// How long the producer waits for a free worker before giving up on a dispatch.
const WAIT_FOR_WORKER: Duration = Duration::from_secs(5);

/// How long the workers' presence may take to reach the producer's node, cross-node.
const PRESENCE_WAIT: Duration = Duration::from_secs(30);

/// How long each probe dispatch waits for a worker while the presence is on its way.
const PROBE_WAIT_FOR_WORKER: Duration = Duration::from_millis(100);

/// Where the node runs.
enum Serving {
    InProcess {
        node: Arc<Node>,
        stop: Option<oneshot::Sender<()>>,
        server: JoinHandle<()>,
    },
    Child(LintelChild),
    /// Two peered nodes: the producer's (`a`) and the workers' (`b`).
    Peered {
        a: LintelChild,
        b: LintelChild,
    },
}

/// Where the workers run.
enum Workers {
    Sdk(Vec<WorkerHandle>),
    Processes(Vec<Proc>),
}

/// Where the producer runs.
enum Producing {
    Sdk(Vec<Client>, Arc<LintelTarget>),
    Embedded(Arc<EmbeddedTarget>),
    /// `lintel bench` against this address, one process per round.
    Process(SocketAddr),
}

/// A node, its workers and its producer.
pub struct Lintel {
    serving: Serving,
    workers: Workers,
    producing: Producing,
    /// TLS between every piece and its node, when set.
    tls: Option<TlsFiles>,
}

impl Lintel {
    /// A node with default settings (two peered nodes, cross-node) and `workers` echo workers
    /// in [`NAMESPACE`], placed as `mode` says; with `tls`, every connection to a node is TLS
    /// (mode `all` only: each piece is a `lintel` process given the certificate files).
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start(
        workers: usize,
        mode: Mode,
        topology: Topology,
        tls: Option<&TlsFiles>,
    ) -> Result<Self, String> {
        if tls.is_some() && mode != Mode::All {
            return Err(format!(
                "lintel over TLS runs in mode all only, not {}",
                mode.key()
            ));
        }
        let serve_args = tls.map(TlsFiles::serve_args).unwrap_or_default();
        let client_args = tls.map(TlsFiles::client_args).unwrap_or_default();
        let workers = workers.max(1);
        let (serving, addr, producer_addr) = match topology {
            Topology::OneMiddle if mode.middle_own_process() => {
                let child = LintelChild::start_with_args(workers + 100, &serve_args).await?;
                let addr = child.addr;
                (Serving::Child(child), addr, addr)
            }
            Topology::OneMiddle => {
                let (serving, addr) = serve_in_process(NodeConfig::default())?;
                (serving, addr, addr)
            }
            Topology::CrossNode if mode == Mode::All => {
                let (a, b) = LintelChild::start_peered_pair(workers + 100, &serve_args).await?;
                let (a_addr, b_addr) = (a.addr, b.addr);
                (Serving::Peered { a, b }, b_addr, a_addr)
            }
            Topology::CrossNode => {
                return Err(format!(
                    "lintel has no {} layout in mode {}",
                    topology.key(),
                    mode.key()
                ))
            }
        };
        let started = if mode.workers_own_processes() {
            spawn_worker_processes(addr, workers, &client_args)
                .await
                .map(Workers::Processes)
        } else {
            let registrations = (0..workers)
                .map(|index| echo_registration(vec![NAMESPACE.to_owned()], index))
                .collect();
            spawn_workers(addr, registrations).await.map(Workers::Sdk)
        };
        let workers = match started {
            Ok(workers) => workers,
            Err(err) => {
                stop_serving(serving).await;
                return Err(err);
            }
        };
        if producer_addr != addr {
            if let Err(err) = wait_until_relayed(producer_addr, PRESENCE_WAIT, tls).await {
                stop_parts(workers, serving).await;
                return Err(err);
            }
        }
        let producing = match (mode.producer(), &serving) {
            (Producer::OwnProcess, _) => Ok(Producing::Process(producer_addr)),
            (Producer::InMiddle, Serving::InProcess { node, .. }) => {
                Ok(Producing::Embedded(Arc::new(EmbeddedTarget {
                    dispatcher: Arc::clone(node.dispatcher()),
                    options: dispatch_options(),
                })))
            }
            (Producer::InMiddle, Serving::Child(_) | Serving::Peered { .. }) => {
                Err("an embedded producer needs the node in this process".to_owned())
            }
            (Producer::Harness, _) => sdk_producer(producer_addr, vec![NAMESPACE.to_owned()]).await,
        };
        match producing {
            Ok(producing) => Ok(Self {
                serving,
                workers,
                producing,
                tls: tls.cloned(),
            }),
            Err(err) => {
                stop_parts(workers, serving).await;
                Err(err)
            }
        }
    }

    /// A node in this process with `config` (its listen address replaced by 127.0.0.1:0), one SDK
    /// echo worker per registration and the SDK producer, all in this process; requests go to
    /// each of `namespaces` in turn.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start_with(
        config: NodeConfig,
        registrations: Vec<WorkerConfigBuilder>,
        namespaces: Vec<String>,
    ) -> Result<Self, String> {
        let (serving, addr) = serve_in_process(config)?;
        let workers = match spawn_workers(addr, registrations).await {
            Ok(workers) => Workers::Sdk(workers),
            Err(err) => {
                stop_serving(serving).await;
                return Err(err);
            }
        };
        match sdk_producer(addr, namespaces).await {
            Ok(producing) => Ok(Self {
                serving,
                workers,
                producing,
                tls: None,
            }),
            Err(err) => {
                stop_parts(workers, serving).await;
                Err(err)
            }
        }
    }

    /// The processes the nodes run in: their own, or the harness's.
    pub fn middle_pids(&self) -> Vec<u32> {
        match &self.serving {
            Serving::Child(child) => vec![child.pid()],
            Serving::Peered { a, b } => vec![a.pid(), b.pid()],
            Serving::InProcess { .. } => vec![std::process::id()],
        }
    }

    /// Runs `load` from wherever the producer is.
    pub async fn measure(&self, load: &Load) -> Sample {
        match &self.producing {
            Producing::Sdk(_, target) => measure::run(target, load).await,
            Producing::Embedded(target) => measure::run(target, load).await,
            Producing::Process(addr) => bench_process(*addr, load, self.tls.as_ref())
                .await
                .unwrap_or_else(Sample::failed_with),
        }
    }

    /// Closes the producer, stops the workers, then drains and stops the node.
    pub async fn stop(self) {
        if let Producing::Sdk(clients, _) = &self.producing {
            for client in clients {
                client.close().await;
            }
        }
        stop_parts(self.workers, self.serving).await;
    }
}

/// Stops the workers, then drains and stops the node.
async fn stop_parts(workers: Workers, serving: Serving) {
    match workers {
        Workers::Sdk(workers) => stop_workers(&workers).await,
        Workers::Processes(procs) => {
            for proc in procs {
                proc.stop().await;
            }
        }
    }
    stop_serving(serving).await;
}

/// A node with `config` serving on a free loopback port in this process.
fn serve_in_process(mut config: NodeConfig) -> Result<(Serving, SocketAddr), String> {
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = lintel::listener::bind(config.listen, config.backlog)
        .map_err(|err| format!("cannot bind a loopback port: {err}"))?;
    let addr = listener.local_addr().map_err(|err| err.to_string())?;
    let node = Arc::new(Node::new(config).map_err(|err| err.to_string())?);
    let (stop, stopped) = oneshot::channel::<()>();
    let serving_node = Arc::clone(&node);
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        if let Err(err) = serving_node.serve(listener, shutdown).await {
            eprintln!("lintel node stopped: {err}");
        }
    });
    let serving = Serving::InProcess {
        node,
        stop: Some(stop),
        server,
    };
    Ok((serving, addr))
}

async fn stop_serving(serving: Serving) {
    match serving {
        Serving::InProcess {
            stop, mut server, ..
        } => {
            if let Some(stop) = stop {
                let _ = stop.send(());
            }
            let _ = tokio::time::timeout(Duration::from_secs(15), &mut server).await;
        }
        Serving::Child(child) => drop(child),
        Serving::Peered { a, b } => drop((a, b)),
    }
}

/// Dispatches `echo` to the node at `addr` until one completes, each dispatch waiting briefly
/// for a worker, for at most `within`: the node can reach the workers then.
///
/// # Errors
/// None completed in time.
async fn wait_until_relayed(
    addr: SocketAddr,
    within: Duration,
    tls: Option<&TlsFiles>,
) -> Result<(), String> {
    let client = connect_client_with(addr, tls).await?;
    let options = DispatchOptions::default().wait_for_worker(PROBE_WAIT_FOR_WORKER);
    let deadline = Instant::now() + within;
    let mut last = String::new();
    // The count bounds the loop even if dispatches end faster than they wait.
    let most = within.as_millis() / PROBE_WAIT_FOR_WORKER.as_millis() + 1;
    for _ in 0..most {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let tried = Instant::now();
        let dispatch = echo_dispatch(NAMESPACE.to_owned(), Bytes::from_static(b"ping"));
        match tokio::time::timeout(left, client.dispatch(&dispatch, &options)).await {
            Ok(Ok(result)) => match check_echo(result, 4) {
                Ok(()) => {
                    client.close().await;
                    return Ok(());
                }
                Err(err) => last = err,
            },
            Ok(Err(err)) => last = format!("client: {err}"),
            Err(_) => last = "timed out".to_owned(),
        }
        if last.starts_with("client: ") {
            // The connection itself failed: another try on it would fail alike.
            break;
        }
        // Paced even when the node refuses at once instead of waiting for a worker.
        let took = tried.elapsed();
        if took < PROBE_WAIT_FOR_WORKER {
            tokio::time::sleep(PROBE_WAIT_FOR_WORKER - took).await;
        }
    }
    client.close().await;
    Err(format!(
        "no dispatch through {addr} completed within {within:?} (last: {last})"
    ))
}

async fn sdk_producer(addr: SocketAddr, namespaces: Vec<String>) -> Result<Producing, String> {
    let mut clients = Vec::new();
    for _ in 0..PRODUCERS {
        clients.push(connect_client(addr).await?);
    }
    let target = Arc::new(LintelTarget::new(clients.clone(), namespaces));
    Ok(Producing::Sdk(clients, target))
}

fn dispatch_options() -> DispatchOptions {
    DispatchOptions::default().wait_for_worker(WAIT_FOR_WORKER)
}

/// `workers` `lintel worker` processes serving `echo` in [`NAMESPACE`] with [`WORKER_CAPACITY`]
/// and `extra` arguments, each waited for until it says it registered.
///
/// # Errors
/// The first that did not register.
async fn spawn_worker_processes(
    addr: SocketAddr,
    workers: usize,
    extra: &[String],
) -> Result<Vec<Proc>, String> {
    let mut procs = Vec::with_capacity(workers);
    for index in 0..workers {
        let mut command = tokio::process::Command::new(LINTEL_BIN);
        command
            .arg("worker")
            .args(["--connect", &addr.to_string()])
            .args(["--namespace", NAMESPACE, "--activity", "echo"])
            .args(["--concurrency", &WORKER_CAPACITY.to_string()])
            .args(["--identity", &format!("bench-worker-{index}")])
            .args(extra)
            // Its `registered as worker` line is the command's own, logged at info.
            .env("RUST_LOG", "warn,lintel::cli::worker=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let started = Proc::start_ready(
            command,
            "lintel worker",
            "registered as worker",
            Stream::Stderr,
        )
        .await;
        match started {
            Ok((proc, _)) => procs.push(proc),
            Err(err) => {
                for proc in procs {
                    proc.stop().await;
                }
                return Err(err);
            }
        }
    }
    Ok(procs)
}

/// What `lintel bench --json -` prints, as far as the harness reads it.
#[derive(Debug, Deserialize)]
struct BenchReport {
    elapsed_s: f64,
    p50_us: f64,
    p99_us: f64,
    outcomes: BTreeMap<String, u64>,
}

impl BenchReport {
    fn sample(mut self) -> Sample {
        let completed = self.outcomes.remove("completed").unwrap_or(0);
        Sample {
            completed,
            failures: self.outcomes,
            elapsed: Duration::from_secs_f64(self.elapsed_s.max(0.0)),
            p50_us: self.p50_us,
            p99_us: self.p99_us,
            rps: completed as f64 / self.elapsed_s.max(f64::MIN_POSITIVE),
        }
    }
}

/// Runs `load` as a `lintel bench --workers 0` process against the node at `addr`, over TLS
/// when `tls` is set.
///
/// # Errors
/// It failed or printed no report.
async fn bench_process(
    addr: SocketAddr,
    load: &Load,
    tls: Option<&TlsFiles>,
) -> Result<Sample, String> {
    let seconds = load.duration.as_secs_f64();
    let mut command = tokio::process::Command::new(LINTEL_BIN);
    command
        .arg("bench")
        .args(["--connect", &addr.to_string(), "--workers", "0"])
        .args(["--namespace", NAMESPACE])
        .args(["--concurrency", &load.concurrency.to_string()])
        .args(["--payload", &load.payload.len().to_string()])
        .args(["--duration", &seconds.to_string()])
        .args(["--count", &load.max_count.to_string()])
        .args(["--json", "-"])
        .args(tls.map(TlsFiles::client_args).unwrap_or_default())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    let limit = load.duration + Duration::from_secs(60);
    let (status, stdout, stderr) = process::output_within(command, "lintel bench", limit).await?;
    match serde_json::from_str::<BenchReport>(&stdout) {
        Ok(report) => Ok(report.sample()),
        Err(_) => Err(process::failed("lintel bench", status, &stderr)),
    }
}

/// `lintel serve` (the binary built beside this harness) as a child process on a free loopback
/// port; killed and reaped on drop.
pub struct LintelChild {
    child: Child,
    pub addr: SocketAddr,
}

impl LintelChild {
    /// Starts the node and waits, bounded, until its port accepts.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start(max_connections: usize) -> Result<Self, String> {
        Self::start_with_args(max_connections, &[]).await
    }

    /// [`LintelChild::start`] with `extra` arguments to `lintel serve`.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start_with_args(max_connections: usize, extra: &[String]) -> Result<Self, String> {
        let [addr] = free_addrs()?;
        Self::start_at(addr, max_connections, extra).await
    }

    /// Node `a` and node `b`, each started with the other as its `--peer` and with `extra`
    /// arguments; both listening.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start_peered_pair(
        max_connections: usize,
        extra: &[String],
    ) -> Result<(Self, Self), String> {
        let [a_addr, b_addr] = free_addrs()?;
        let args = |id: &str, peer: SocketAddr| {
            let mut args = ["--node-id", id, "--peer", &peer.to_string()]
                .map(str::to_owned)
                .to_vec();
            args.extend_from_slice(extra);
            args
        };
        let b = Self::start_at(b_addr, max_connections, &args("b", a_addr)).await?;
        let a = Self::start_at(a_addr, max_connections, &args("a", b_addr)).await?;
        Ok((a, b))
    }

    /// `lintel serve` on `addr` with `extra` arguments; waits, bounded, until it accepts.
    async fn start_at(
        addr: SocketAddr,
        max_connections: usize,
        extra: &[String],
    ) -> Result<Self, String> {
        let child = Command::new(LINTEL_BIN)
            .args(["serve", "--listen", &addr.to_string(), "--max-connections"])
            .arg(max_connections.to_string())
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|err| format!("cannot start lintel serve: {err}"))?;
        let mut child = Self { child, addr };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(child);
            }
            if let Ok(Some(status)) = child.child.try_wait() {
                return Err(format!("lintel serve exited before it listened: {status}"));
            }
            if Instant::now() > deadline {
                return Err(format!("lintel serve did not listen on {addr} within 10 s"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// `N` loopback addresses that were free a moment ago, all different.
fn free_addrs<const N: usize>() -> Result<[SocketAddr; N], String> {
    let listeners = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| format!("no free port: {err}"))?;
    let mut addrs = [SocketAddr::from(([127, 0, 0, 1], 0)); N];
    for (addr, listener) in addrs.iter_mut().zip(&listeners) {
        *addr = listener
            .local_addr()
            .map_err(|err| format!("no free port: {err}"))?;
    }
    Ok(addrs)
}

impl Drop for LintelChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An echo worker's registration in `namespaces`, its node not yet given.
pub fn echo_registration(namespaces: Vec<String>, index: usize) -> WorkerConfigBuilder {
    WorkerConfig::builder()
        .namespaces(namespaces)
        .activity("echo")
        .identity(format!("bench-worker-{index}"))
        .concurrency(WORKER_CAPACITY)
}

/// Starts one echo worker per registration against `addr`, a batch at a time, and waits until
/// each has registered.
///
/// # Errors
/// The first worker that did not register.
pub async fn spawn_workers(
    addr: SocketAddr,
    registrations: Vec<WorkerConfigBuilder>,
) -> Result<Vec<WorkerHandle>, String> {
    let mut workers = Vec::with_capacity(registrations.len());
    let mut registrations = registrations.into_iter().peekable();
    while registrations.peek().is_some() {
        let batch: Vec<WorkerHandle> = registrations
            .by_ref()
            .take(REGISTER_BATCH)
            .map(|registration| {
                let config = registration.node(addr.to_string()).build();
                config.map(|config| Worker::spawn(config, BuiltIn))
            })
            .collect::<Result<_, _>>()
            .map_err(|err| format!("a lintel worker's config: {err}"))?;
        for worker in &batch {
            worker
                .wait_registered(REGISTER_WAIT)
                .await
                .map_err(|err| format!("a lintel worker did not register: {err}"))?;
        }
        workers.extend(batch);
    }
    Ok(workers)
}

/// Stops workers at once (nothing is in flight between measurements).
pub async fn stop_workers(workers: &[WorkerHandle]) {
    for worker in workers {
        worker.shutdown().await;
    }
}

/// A producer connection to `addr`.
///
/// # Errors
/// The connect error, as text.
pub async fn connect_client(addr: SocketAddr) -> Result<Client, String> {
    connect_client_with(addr, None).await
}

/// A producer connection to `addr`, over TLS trusting `tls`'s CA when set.
///
/// # Errors
/// The connect error, as text.
async fn connect_client_with(addr: SocketAddr, tls: Option<&TlsFiles>) -> Result<Client, String> {
    let tls = match tls {
        Some(files) => Some(
            lintel_client::ClientTls::from_files(&files.ca, None)
                .map_err(|err| format!("cannot load the bench CA: {err}"))?,
        ),
        None => None,
    };
    let config = {
        let mut config = ClientConfig::default();
        config.name = "vs-nats".into();
        config.tls = tls;
        config
    };
    Client::connect(addr, config)
        .await
        .map_err(|err| format!("cannot connect the lintel producer: {err}"))
}

/// The `echo` dispatch the harness sends through the SDK.
fn echo_dispatch(namespace: String, payload: Bytes) -> Dispatch {
    Dispatch::new(namespace, "echo")
        .input(payload)
        .workflow("bench", 1)
}

/// The `echo` request the harness sends through an embedded node's dispatcher.
fn echo_request(namespace: String, payload: Bytes) -> DispatchRequest {
    DispatchRequest {
        namespace,
        task_queue: String::new(),
        activity_type: "echo".into(),
        node: None,
        workflow_id: "bench".into(),
        ordinal: 1,
        run_id: None,
        attempt: 1,
        input: payload,
        deadline_unix_ms: None,
    }
}

/// `Ok` when `result` is an echo of `len` bytes, else its outcome class.
fn check_echo(result: DispatchResult, len: usize) -> Result<(), String> {
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            ActivityOutcome::Success(echo) if echo.len() == len => Ok(()),
            ActivityOutcome::Success(echo) => Err(format!("wrong-echo-length {}", echo.len())),
            ActivityOutcome::Failure { message, .. } => Err(format!("activity-failed: {message}")),
        },
        other => Err(lintel::dispatch::outcome::describe(&other)),
    }
}

/// Dispatches `echo` through the SDK producer, over its namespaces in turn.
pub struct LintelTarget {
    clients: Vec<Client>,
    namespaces: Vec<String>,
    next: AtomicUsize,
    options: DispatchOptions,
}

impl LintelTarget {
    pub fn new(clients: Vec<Client>, namespaces: Vec<String>) -> Self {
        Self {
            clients,
            namespaces,
            next: AtomicUsize::new(0),
            options: dispatch_options(),
        }
    }
}

impl Target for LintelTarget {
    async fn call(&self, lane: usize, payload: Bytes) -> Result<(), String> {
        let namespace = if self.namespaces.len() == 1 {
            self.namespaces[0].clone()
        } else {
            let at = self.next.fetch_add(1, Ordering::Relaxed) % self.namespaces.len();
            self.namespaces[at].clone()
        };
        let len = payload.len();
        let client = &self.clients[lane % self.clients.len()];
        match client
            .dispatch(&echo_dispatch(namespace, payload), &self.options)
            .await
        {
            Ok(result) => check_echo(result, len),
            Err(err) => Err(format!("client: {err}")),
        }
    }
}

/// Dispatches `echo` in [`NAMESPACE`] through an embedded node's dispatcher, in-process.
pub struct EmbeddedTarget {
    dispatcher: Arc<Dispatcher>,
    options: DispatchOptions,
}

impl Target for EmbeddedTarget {
    async fn call(&self, _lane: usize, payload: Bytes) -> Result<(), String> {
        let len = payload.len();
        let request = echo_request(NAMESPACE.to_owned(), payload);
        check_echo(self.dispatcher.dispatch(request, &self.options).await, len)
    }
}
