//! lintel under test: a [`Node`] on 127.0.0.1:0, SDK echo workers, and the producer SDK
//! [`Client`] dispatching `echo`. The node serves either in this process or as a `lintel serve`
//! child process ([`LintelChild`]), the way nats-server runs beside the harness.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lintel::activities::BuiltIn;
use lintel::dispatch::DispatchOptions;
use lintel::sdk::{Client, ClientConfig, Worker, WorkerConfig, WorkerHandle};
use lintel::wire::{ActivityOutcome, DispatchRequest, DispatchResult, Register};
use lintel::{Node, NodeConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::measure::Target;

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

/// Where the node runs.
enum Serving {
    InProcess {
        stop: Option<oneshot::Sender<()>>,
        server: JoinHandle<()>,
    },
    Child(LintelChild),
}

/// A node, its workers and one producer connection.
pub struct Lintel {
    serving: Serving,
    workers: Vec<WorkerHandle>,
    clients: Vec<Client>,
}

impl Lintel {
    /// A node with default settings and `workers` echo workers in [`NAMESPACE`]: in this process,
    /// or as a `lintel serve` child process when `child_process`.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start(workers: usize, child_process: bool) -> Result<Self, String> {
        let registrations = (0..workers.max(1))
            .map(|index| echo_registration(vec![NAMESPACE.to_owned()], index))
            .collect();
        if !child_process {
            return Self::start_with(NodeConfig::default(), registrations).await;
        }
        let child = LintelChild::start(workers.max(1) + 100).await?;
        let addr = child.addr;
        Self::connect(Serving::Child(child), addr, registrations).await
    }

    /// A node in this process with `config` (its listen address replaced by 127.0.0.1:0) and one
    /// echo worker per registration.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start_with(
        mut config: NodeConfig,
        registrations: Vec<Register>,
    ) -> Result<Self, String> {
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let listener = lintel::listener::bind(config.listen, config.backlog)
            .map_err(|err| format!("cannot bind a loopback port: {err}"))?;
        let addr = listener.local_addr().map_err(|err| err.to_string())?;
        let node = Node::new(config).map_err(|err| err.to_string())?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(err) = node.serve(listener, shutdown).await {
                eprintln!("lintel node stopped: {err}");
            }
        });
        let serving = Serving::InProcess {
            stop: Some(stop),
            server,
        };
        Self::connect(serving, addr, registrations).await
    }

    async fn connect(
        serving: Serving,
        addr: SocketAddr,
        registrations: Vec<Register>,
    ) -> Result<Self, String> {
        let workers = spawn_workers(addr, registrations).await?;
        let mut clients = Vec::new();
        for _ in 0..PRODUCERS {
            clients.push(connect_client(addr).await?);
        }
        Ok(Self {
            serving,
            workers,
            clients,
        })
    }

    /// The request path: `echo` in [`NAMESPACE`].
    pub fn target(&self) -> Arc<LintelTarget> {
        Arc::new(LintelTarget::new(
            self.clients.clone(),
            vec![NAMESPACE.to_owned()],
        ))
    }

    /// The request path: `echo` in each of `namespaces` in turn.
    pub fn target_over(&self, namespaces: Vec<String>) -> Arc<LintelTarget> {
        Arc::new(LintelTarget::new(self.clients.clone(), namespaces))
    }

    /// Closes the producer, stops the workers, then drains and stops the node.
    pub async fn stop(self) {
        for client in &self.clients {
            client.close().await;
        }
        stop_workers(&self.workers).await;
        match self.serving {
            Serving::InProcess { stop, mut server } => {
                if let Some(stop) = stop {
                    let _ = stop.send(());
                }
                let _ = tokio::time::timeout(Duration::from_secs(15), &mut server).await;
            }
            Serving::Child(child) => drop(child),
        }
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
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|err| format!("no free port: {err}"))?
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(env!("CARGO_BIN_EXE_lintel"))
            .args(["serve", "--listen", &addr.to_string(), "--max-connections"])
            .arg(max_connections.to_string())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|err| format!("cannot start lintel serve: {err}"))?;
        let child = Self { child, addr };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(child);
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

impl Drop for LintelChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An echo worker's registration in `namespaces`.
pub fn echo_registration(namespaces: Vec<String>, index: usize) -> Register {
    Register {
        namespaces,
        task_queue: String::new(),
        node: None,
        activity_types: vec!["echo".into()],
        identity: format!("bench-worker-{index}"),
        max_concurrency: WORKER_CAPACITY,
    }
}

/// Starts one echo worker per registration against `addr`, a batch at a time, and waits until
/// each has registered.
///
/// # Errors
/// The first worker that did not register.
pub async fn spawn_workers(
    addr: SocketAddr,
    registrations: Vec<Register>,
) -> Result<Vec<WorkerHandle>, String> {
    let mut workers = Vec::with_capacity(registrations.len());
    let mut registrations = registrations.into_iter().peekable();
    while registrations.peek().is_some() {
        let batch: Vec<WorkerHandle> = registrations
            .by_ref()
            .take(REGISTER_BATCH)
            .map(|registration| {
                Worker::spawn(WorkerConfig::new(addr.to_string(), registration), BuiltIn)
            })
            .collect();
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
    let config = ClientConfig {
        name: "vs-nats".into(),
        ..ClientConfig::default()
    };
    Client::connect(addr, config)
        .await
        .map_err(|err| format!("cannot connect the lintel producer: {err}"))
}

/// Dispatches `echo` through one producer connection, over its namespaces in turn.
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
            options: DispatchOptions::default().wait_for_worker(Duration::from_secs(5)),
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
        let request = DispatchRequest {
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
        };
        let client = &self.clients[lane % self.clients.len()];
        match client.dispatch(request, &self.options).await {
            Ok(DispatchResult::Completed(response)) => match response.outcome {
                ActivityOutcome::Success(echo) if echo.len() == len => Ok(()),
                ActivityOutcome::Success(echo) => Err(format!("wrong-echo-length {}", echo.len())),
                ActivityOutcome::Failure { message, .. } => {
                    Err(format!("activity-failed: {message}"))
                }
            },
            Ok(other) => Err(lintel::dispatch::outcome::describe(&other)),
            Err(err) => Err(format!("client: {err}")),
        }
    }
}
