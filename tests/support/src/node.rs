//! The node under test: a node on 127.0.0.1:0 that shuts down on drop, the counting notifier
//! behind its events, and the bound every wait uses.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lintel::link::WorkerLink;
use lintel::registrations::{ConnectionNotifier, Registrations};
use lintel::registry::{Registry, WorkerId};
use lintel::transport::resolve::Resolver;
use lintel::wire::{Refusal, Register};
use lintel::{Node, NodeConfig};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

/// The bound every wait in the tests uses: generous, never a synchronisation sleep.
pub const WAIT: Duration = Duration::from_secs(10);

/// Waits for `future` at most [`WAIT`], failing the test with `what` otherwise.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(WAIT, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Counts notifier events per pid, wrapping the default notifier.
#[derive(Default)]
pub struct Events {
    registered: Mutex<HashMap<u64, u32>>,
    unregistered: Mutex<HashMap<u64, u32>>,
    changed: Notify,
}

impl Events {
    pub fn registered(&self, pid: u64) -> u32 {
        self.registered
            .lock()
            .unwrap()
            .get(&pid)
            .copied()
            .unwrap_or(0)
    }

    pub fn unregistered(&self, pid: u64) -> u32 {
        self.unregistered
            .lock()
            .unwrap()
            .get(&pid)
            .copied()
            .unwrap_or(0)
    }

    pub fn total_unregistered(&self) -> u32 {
        self.unregistered.lock().unwrap().values().sum()
    }

    pub fn total_registered(&self) -> u32 {
        self.registered.lock().unwrap().values().sum()
    }

    /// Waits until `pid` has been unregistered at least once.
    pub async fn wait_unregistered(&self, pid: u64) {
        within("unregistration", async {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if self.unregistered(pid) > 0 {
                    return;
                }
                changed.await;
            }
        })
        .await;
    }
}

struct CountingNotifier {
    inner: Registrations,
    events: Arc<Events>,
}

impl ConnectionNotifier for CountingNotifier {
    fn on_worker_registered(
        &self,
        pid: u64,
        registration: &Register,
        link: WorkerLink,
    ) -> Result<WorkerId, Refusal> {
        let result = self.inner.on_worker_registered(pid, registration, link);
        if result.is_ok() {
            *self
                .events
                .registered
                .lock()
                .unwrap()
                .entry(pid)
                .or_default() += 1;
            self.events.changed.notify_waiters();
        }
        result
    }

    fn on_worker_unregistered(&self, pid: u64, reason: lintel::wire::DepartureReason) {
        self.inner.on_worker_unregistered(pid, reason);
        *self
            .events
            .unregistered
            .lock()
            .unwrap()
            .entry(pid)
            .or_default() += 1;
        self.events.changed.notify_waiters();
    }
}

/// A node serving on an ephemeral loopback port; dropping it shuts it down.
pub struct TestNode {
    pub addr: SocketAddr,
    pub node: Arc<Node>,
    pub events: Arc<Events>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// How long a shutdown may take: its drain's bound, then [`WAIT`] for the rest.
    shutdown_wait: Duration,
}

impl TestNode {
    /// A node with the default config (on port 0).
    pub async fn start() -> Self {
        Self::with_config(NodeConfig::default()).await
    }

    /// A node with `config`, on an ephemeral loopback port unless the config names another.
    pub async fn with_config(mut config: NodeConfig) -> Self {
        if config.listen == NodeConfig::default().listen {
            config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        }
        let listener = lintel::listener::bind(config.listen, config.backlog).expect("bind");
        Self::on_listener(config, listener).await
    }

    /// A node with `config` serving `listener`, bound beforehand by a test that needs the
    /// address before the node starts.
    pub async fn on_listener(config: NodeConfig, listener: tokio::net::TcpListener) -> Self {
        Self::serving(config, listener, Resolver::system()).await
    }

    /// A node with `config` on an ephemeral loopback port, resolving its peer names through
    /// `resolver`.
    pub async fn resolving(mut config: NodeConfig, resolver: Resolver) -> Self {
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let listener = lintel::listener::bind(config.listen, config.backlog).expect("bind");
        Self::serving(config, listener, resolver).await
    }

    async fn serving(
        config: NodeConfig,
        listener: tokio::net::TcpListener,
        resolver: Resolver,
    ) -> Self {
        let events = Arc::new(Events::default());
        let counting = Arc::clone(&events);
        let node = Node::with_notifier(config.clone(), move |registry: Arc<Registry>| {
            Arc::new(CountingNotifier {
                inner: Registrations::new(registry),
                events: counting,
            })
        })
        .expect("valid config")
        .with_resolver(resolver);
        let node = Arc::new(node);
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = oneshot::channel::<()>();
        let serving = Arc::clone(&node);
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            serving.serve(listener, shutdown).await.expect("serve");
        });
        Self {
            addr,
            node,
            events,
            shutdown: Some(tx),
            task: Some(task),
            shutdown_wait: WAIT + Duration::from_millis(config.drain_timeout_ms),
        }
    }

    pub fn registry(&self) -> &Arc<Registry> {
        self.node.registry()
    }

    /// Waits until `holds` is true of the node's registry, looking again on every change.
    pub async fn wait_registry(&self, what: &str, holds: impl Fn(&Registry) -> bool) {
        let registry = self.registry();
        within(what, async {
            loop {
                let mut seen = registry.changes().epoch();
                if holds(registry) {
                    return;
                }
                registry.changes().changed(&mut seen).await;
            }
        })
        .await;
    }

    /// Starts the drain-then-close shutdown and waits for it to finish.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            match tokio::time::timeout(self.shutdown_wait, task).await {
                Ok(served) => served.expect("serve task"),
                Err(_) => panic!("timed out waiting for node shutdown"),
            }
        }
    }

    /// Starts the shutdown without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A node config with `outbound_queue` frames per connection and no pings to get in the way.
pub fn quiet_config(outbound_queue: usize) -> NodeConfig {
    NodeConfig {
        outbound_queue,
        ping_interval_ms: 600_000,
        ..NodeConfig::default()
    }
}

/// A listener on an ephemeral loopback port, bound as the node binds, and its address.
pub fn loopback_listener() -> (tokio::net::TcpListener, SocketAddr) {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = lintel::listener::bind(any, NodeConfig::default().backlog).expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}
