//! The node: accept loop, connection limit, and the drain-then-close shutdown.
//!
//! [`Node::serve`] accepts TCP; [`Node::serve_connections`] serves connections from any source,
//! and [`Node::with_dialer`] opens peer links through any [`Dialer`], so a test can run nodes
//! over a simulated network; [`Node::with_resolver`] resolves peer names through any
//! [`Resolver`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use lintel_wire::{Frame, NodeStatus, PeerStatus, Refusal, RefusalCode};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use crate::cluster::Mesh;
use crate::config::{ConfigError, NodeConfig};
use crate::connection;
use crate::dispatch::Dispatcher;
use crate::listener;
use crate::registrations::{ConnectionNotifier, Registrations};
use crate::registry::Registry;
use crate::shared::Shared;
use crate::tls::{NodeTls, Reload};
use lintel_transport::resolve::Resolver;
use lintel_transport::{Batched, Dialer, Socket, TcpDialer};

/// Connections refused for the limit that may be answering at once; beyond it they are dropped.
const REFUSAL_LANE: usize = 64;

/// Longest pause after an accept error.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// Why serving stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("listener error: {0}")]
    Listener(#[from] std::io::Error),
    /// An address in the config could not be bound; `key` is `listen` or `admin_listen`.
    #[error("cannot bind {key} = {addr}: {source}{}", in_use_hint(source))]
    Bind {
        key: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

fn in_use_hint(err: &std::io::Error) -> &'static str {
    match err.kind() {
        io::ErrorKind::AddrInUse => " (another process, perhaps another node, listens there)",
        io::ErrorKind::AddrNotAvailable => " (no interface of this machine has that address)",
        _ => "",
    }
}

/// A lintel node. Embed it to dispatch in-process, and [`Node::serve`] it to accept connections.
pub struct Node {
    shared: Arc<Shared>,
}

impl Node {
    /// A node with the default notifier.
    ///
    /// # Examples
    /// A node on loopback, a worker of the built-in activities, and an in-process dispatch:
    /// ```
    /// use std::time::Duration;
    ///
    /// use lintel::activities::BuiltIn;
    /// use lintel::sdk::{DispatchOptions, Worker, WorkerConfig};
    /// use lintel::wire::{DispatchRequest, DispatchResult};
    /// use lintel::{Node, NodeConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let node = std::sync::Arc::new(Node::new(NodeConfig::default())?);
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let addr = listener.local_addr()?.to_string();
    /// let serving = std::sync::Arc::clone(&node);
    /// tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    ///
    /// let config = WorkerConfig::builder()
    ///     .node(addr)
    ///     .namespace("demo")
    ///     .activity("echo")
    ///     .identity("echo-worker")
    ///     .concurrency(4)
    ///     .build()?;
    /// let worker = Worker::spawn(config, BuiltIn);
    /// worker.wait_registered(Duration::from_secs(5)).await?;
    ///
    /// let request = DispatchRequest {
    ///     namespace: "demo".into(),
    ///     task_queue: String::new(),
    ///     activity_type: "echo".into(),
    ///     node: None,
    ///     workflow_id: "wf-1".into(),
    ///     ordinal: 1,
    ///     run_id: None,
    ///     attempt: 1,
    ///     input: "hello".into(),
    ///     deadline_unix_ms: None,
    /// };
    /// let result = node.dispatcher().dispatch(request, &DispatchOptions::default()).await;
    /// assert!(matches!(result, DispatchResult::Completed(_)));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`ConfigError`] for an unusable configuration.
    pub fn new(config: NodeConfig) -> Result<Self, ConfigError> {
        Self::with_notifier(config, |registry| Arc::new(Registrations::new(registry)))
    }

    /// A node whose registrations go through the notifier `make` builds over the registry;
    /// its peers are dialled over TCP at every address their names resolve to.
    ///
    /// # Errors
    /// [`ConfigError`] for an unusable configuration.
    pub fn with_notifier(
        config: NodeConfig,
        make: impl FnOnce(Arc<Registry>) -> Arc<dyn ConnectionNotifier>,
    ) -> Result<Self, ConfigError> {
        Ok(Self::with_dialer(config, make, Arc::new(TcpDialer))?.with_resolver(Resolver::system()))
    }

    /// A node whose registrations go through the notifier `make` builds over the registry, and
    /// whose links to peers are opened by `dialer`, which is given each peer name as it is
    /// (see [`Node::with_resolver`]).
    ///
    /// # Errors
    /// [`ConfigError`] for an unusable configuration.
    pub fn with_dialer(
        config: NodeConfig,
        make: impl FnOnce(Arc<Registry>) -> Arc<dyn ConnectionNotifier>,
        dialer: Arc<dyn Dialer>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let tls = config.load_tls()?;
        let probation = (config.worker_probation_pings > 0).then(|| config.worker_ping_timeout());
        let registry = Registry::admitting(
            config.admission_limits(),
            probation,
            &config.fairness_policy(),
            config.metrics_max_pools,
        );
        let mesh = Mesh::telling(config.max_set_len, registry.events().clone());
        let dispatcher = Dispatcher::clustered(
            Arc::clone(&registry),
            mesh,
            config.dispatch_limits(),
            config.placement,
        );
        let notifier = make(registry);
        Ok(Self {
            shared: Arc::new(Shared::new(config, dispatcher, notifier, dialer, tls)),
        })
    }

    /// This node, resolving each peer name through `resolver` and dialling every address it
    /// names, again every `peer_resolve_interval_ms`. Takes effect before the node serves.
    #[must_use]
    pub fn with_resolver(mut self, resolver: Resolver) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.resolver = Some(resolver);
        }
        self
    }

    /// The dispatcher, for in-process producers.
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.shared.dispatcher
    }

    /// The registry of connected workers.
    pub fn registry(&self) -> &Arc<Registry> {
        self.shared.dispatcher.registry()
    }

    /// The node's status now.
    pub fn status(&self) -> NodeStatus {
        self.shared.status()
    }

    /// The node's peers now.
    pub fn peers(&self) -> Vec<PeerStatus> {
        self.shared.dispatcher.mesh().status()
    }

    /// The node's TLS: its certificates in use and how reloading them went.
    pub fn tls(&self) -> &NodeTls {
        &self.shared.tls
    }

    /// Reads the TLS files again now, as `lintel serve` does on SIGHUP: changed files that load
    /// serve every later handshake; files that do not load are logged and the old kept.
    pub fn reload_tls(&self) -> Reload {
        self.shared.tls.reload(true)
    }

    /// Accepts connections on `listener` until `shutdown` resolves, then drains: takes workers
    /// out of selection, tells them to drain, waits up to the drain timeout for in-flight
    /// dispatches and each worker's `Drained`, closes every connection and waits for its task.
    ///
    /// With `admin_listen` set, the admin HTTP listener is bound too and served until the
    /// connections close.
    ///
    /// # Errors
    /// [`ServeError::Listener`] when the listener's address cannot be read,
    /// [`ServeError::Bind`] when the admin listener cannot bind.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError> {
        let local = listener.local_addr()?;
        if let Some(addr) = self.shared.config.admin_listen {
            let admin = TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Bind {
                    key: "admin_listen",
                    addr,
                    source,
                })?;
            tracing::info!(addr = %admin.local_addr()?, "admin listening");
            let closing = self.shared.closing.clone();
            tokio::spawn(crate::admin::serve(
                admin,
                Arc::clone(&self.shared),
                closing,
            ));
        }
        let incoming = futures_util::stream::unfold(listener, |listener| async move {
            let accepted = listener.accept().await.map(|(stream, _)| {
                listener::tune(&stream);
                Socket::from(stream)
            });
            Some((accepted, listener))
        });
        self.serve_connections(local, incoming, shutdown).await;
        Ok(())
    }

    /// As [`Node::serve`], for connections from `incoming`, a listener bound at `local`: serves
    /// each until `shutdown` resolves or `incoming` ends, then drains. An accept error backs
    /// off before the next accept.
    ///
    /// `incoming` must be cancel-safe: `next` may be dropped when shutdown wins the race, and
    /// the connection it was accepting must not be lost (a stream built with
    /// [`futures_util::stream::unfold`] keeps its pending future across calls).
    pub async fn serve_connections(
        &self,
        local: SocketAddr,
        incoming: impl Stream<Item = io::Result<Socket>>,
        shutdown: impl Future<Output = ()>,
    ) {
        let shared = &self.shared;
        shared.set_node_id(shared.config.effective_node_id(local.port()));
        shared.set_advertise(shared.config.effective_advertise(local));
        // Written at time 0: any admin call, on any node, is a later word.
        for pool in &shared.config.pools {
            let settings = shared.dispatcher.settings();
            let address = (pool.namespace.as_str(), pool.task_queue.as_str());
            let by = (0, shared.node_id());
            if let Err(err) = settings.set(address, Some(&pool.deployment), by) {
                tracing::warn!(namespace = %pool.namespace, %err, "pool setting not taken");
            }
        }
        let tls = match (shared.tls.is_enabled(), &shared.config.tls_client_ca) {
            (false, _) => "off",
            (true, None) => "on",
            (true, Some(_)) => "on, client certificates required",
        };
        tracing::info!(addr = %local, node_id = shared.node_id(), tls, "listening");
        let limit = Arc::new(Semaphore::new(shared.config.max_connections));
        let refusals = Arc::new(Semaphore::new(REFUSAL_LANE));
        let tasks = TaskTracker::new();
        tasks.spawn(connection::supervise_peers(
            Arc::clone(shared),
            tasks.clone(),
        ));
        if let Some(every) = shared.config.tls_poll() {
            let shared = Arc::clone(shared);
            tasks.spawn(async move { shared.tls.watch(every, shared.closing.clone()).await });
        }
        let next_pid = AtomicU64::new(1);
        let mut backoff = Duration::from_millis(5);
        let mut incoming = Box::pin(incoming);
        tokio::pin!(shutdown);
        // Polled only once shutdown began: until the drain is over the listener keeps
        // accepting, and each new connection is refused `Draining` at its hello.
        let drain = self.drain(&tasks);
        tokio::pin!(drain);
        let mut draining = false;
        let mut drained = false;
        loop {
            // Cancel-safe, as required above: losing the race to shutdown loses no connection.
            // Biased: a flood of connections cannot starve shutdown, and a replayed simulation
            // takes the same branch.
            let accepted = tokio::select! {
                biased;
                () = &mut shutdown, if !draining => {
                    draining = true;
                    continue;
                }
                () = &mut drain, if draining => {
                    drained = true;
                    break;
                }
                accepted = incoming.next() => accepted,
            };
            let stream = match accepted {
                None => break,
                Some(Ok(stream)) => stream,
                Some(Err(err)) => {
                    tracing::warn!(error = %err, "accept failed; backing off");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                    continue;
                }
            };
            backoff = Duration::from_millis(5);
            let pid = next_pid.fetch_add(1, Ordering::Relaxed);
            match Arc::clone(&limit).try_acquire_owned() {
                Ok(permit) => spawn_connection(&tasks, shared, stream, pid, permit),
                Err(_) => {
                    if let Ok(permit) = Arc::clone(&refusals).try_acquire_owned() {
                        tasks.spawn(refuse_connection(Arc::clone(shared), stream, permit));
                    }
                }
            }
        }
        // Stops accepting: a TCP listener closes here.
        drop(incoming);
        if !drained {
            // The listener ended before the drain did: finish it now.
            drain.await;
        }
    }

    /// Tells every worker to drain, then waits, up to the drain timeout, until no dispatch is
    /// in flight and every registered worker said `Drained` or left; then retires every peer
    /// link (each relay it handled answered, then a farewell) within what is left of the drain
    /// timeout, and closes everything.
    async fn drain(&self, tasks: &TaskTracker) {
        let shared = &self.shared;
        tracing::info!(active = shared.dispatcher.active(), "draining");
        shared.dispatcher.drain();
        shared.draining.cancel();
        shared.undrained.close();
        let drain_timeout = shared.config.drain_timeout();
        let deadline = tokio::time::Instant::now() + drain_timeout;
        let settled = async {
            tokio::join!(shared.dispatcher.wait_idle(), shared.undrained.wait());
        };
        if tokio::time::timeout_at(deadline, settled).await.is_err() {
            tracing::warn!(
                active = shared.dispatcher.active(),
                undrained = shared.undrained.len(),
                "drain timeout; closing anyway"
            );
        } else {
            shared.retiring.cancel();
            shared.peer_links.close();
            if tokio::time::timeout_at(deadline, shared.peer_links.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    links = shared.peer_links.len(),
                    "drain timeout while retiring peer links; closing anyway"
                );
            }
        }
        shared.closing.cancel();
        tasks.close();
        let _ = tokio::time::timeout(drain_timeout, tasks.wait()).await;
        tracing::info!("node stopped");
    }
}

/// Binds `config.listen` and serves until `shutdown` resolves.
///
/// # Errors
/// [`ServeError`] for a bad configuration, or [`ServeError::Bind`] naming the address that
/// cannot be bound.
pub async fn serve(
    config: NodeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let (node, listener) = bind(config)?;
    node.serve(listener, shutdown).await
}

/// A node for `config` and its listener bound at `config.listen`, to [`Node::serve`].
///
/// # Errors
/// As [`serve`].
pub fn bind(config: NodeConfig) -> Result<(Node, TcpListener), ServeError> {
    let listener =
        listener::bind(config.listen, config.backlog).map_err(|source| ServeError::Bind {
            key: "listen",
            addr: config.listen,
            source,
        })?;
    Ok((Node::new(config)?, listener))
}

/// Spawns connection `pid`'s task. Not generic, unlike its caller: the task's machinery is
/// built in this crate beside the connection's code, whatever crate calls [`Node::serve`].
fn spawn_connection(
    tasks: &TaskTracker,
    shared: &Arc<Shared>,
    stream: Socket,
    pid: u64,
    permit: OwnedSemaphorePermit,
) {
    let opening = connection::open(Arc::clone(shared), stream, pid);
    let shared = Arc::clone(shared);
    // Not an `async fn`: what it captures is the task's own state, not copied into it again.
    tasks.spawn(Batched::new(async move {
        let _open = shared.connection_opened();
        connection::serve(shared, opening, pid).await;
        drop(permit);
    }));
}

/// Tells a connection over the limit why it is refused, then closes it.
async fn refuse_connection(shared: Arc<Shared>, stream: Socket, permit: OwnedSemaphorePermit) {
    let deadline = tokio::time::Instant::now() + shared.config.handshake_timeout();
    let Ok(secured) = shared.tls.accept(stream, deadline).await else {
        return;
    };
    let (_reader, outbound, writer) =
        lintel_transport::split(secured.socket, shared.config.max_frame_len, 1);
    let refusal = Frame::HelloRefused(Refusal {
        code: RefusalCode::TooManyConnections,
        reason: format!(
            "node is at its limit of {} connections",
            shared.config.max_connections
        ),
    });
    outbound.close_with(refusal).await;
    drop(outbound);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
    drop(permit);
}
