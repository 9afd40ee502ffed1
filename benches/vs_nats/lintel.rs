//! lintel under test: an in-process [`Node`] on 127.0.0.1:0, SDK echo workers, and the producer
//! SDK [`Client`] dispatching `echo`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// A node serving in this process, its workers and one producer connection.
pub struct Lintel {
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
    workers: Vec<WorkerHandle>,
    clients: Vec<Client>,
}

impl Lintel {
    /// A node with default settings and `workers` echo workers in [`NAMESPACE`].
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start(workers: usize) -> Result<Self, String> {
        let registrations = (0..workers.max(1))
            .map(|index| echo_registration(vec![NAMESPACE.to_owned()], index))
            .collect();
        Self::start_with(NodeConfig::default(), registrations).await
    }

    /// A node with `config` (its listen address replaced by 127.0.0.1:0) and one echo worker per
    /// registration.
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
        let workers = spawn_workers(addr, registrations).await?;
        let mut clients = Vec::new();
        for _ in 0..PRODUCERS {
            clients.push(connect_client(addr).await?);
        }
        Ok(Self {
            stop: Some(stop),
            server,
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
    pub async fn stop(mut self) {
        for client in &self.clients {
            client.close().await;
        }
        stop_workers(&self.workers).await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), &mut self.server).await;
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
