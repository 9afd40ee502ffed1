//! State every connection task of a node shares: configuration, dispatcher, notifier, how peers
//! are dialled, and the shutdown signals. It sits below the connection roles, which read it and
//! never own it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use lintel_transport::resolve::Resolver;
use lintel_transport::Dialer;
use lintel_wire::{ClusterStatusReport, NodeStatus};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

use crate::config::NodeConfig;
use crate::connection_counts::ConnectionCounts;
use crate::dispatch::Dispatcher;
use crate::link::Retention;
use crate::registrations::ConnectionNotifier;
use crate::sessions::Sessions;
use crate::tls::NodeTls;

/// State every connection task shares.
pub(crate) struct Shared {
    pub(crate) config: NodeConfig,
    pub(crate) dispatcher: Arc<Dispatcher>,
    pub(crate) notifier: Arc<dyn ConnectionNotifier>,
    /// Opens the links to peers, over TLS when the node speaks it.
    pub(crate) dialer: Arc<dyn Dialer>,
    /// Resolves `peers` names to the addresses to dial; `None` dials each name as given.
    pub(crate) resolver: Option<Resolver>,
    /// The listener's TLS; off unless configured.
    pub(crate) tls: NodeTls,
    /// Fires first on shutdown: workers are told to drain.
    pub(crate) draining: CancellationToken,
    /// Fires once the drain's work is done, and with `closing`: every peer link is retired
    /// and no member is dialled any more.
    pub(crate) retiring: CancellationToken,
    /// Fires after the drain: every connection closes.
    pub(crate) closing: CancellationToken,
    /// A token per peer link until it has ended; the drain waits for none to be left.
    pub(crate) peer_links: TaskTracker,
    /// A token per registered worker until it says `Drained` or its connection ends; the
    /// drain waits for none to be left.
    pub(crate) undrained: TaskTracker,
    node_id: OnceLock<String>,
    /// Where peers dial this node, known once the listener is bound.
    advertise: OnceLock<String>,
    /// Chosen at random at start: a restarted node is a new peer.
    pub(crate) incarnation: u64,
    started: Instant,
    connections: AtomicU32,
    /// Connections by role, refusals and errors, for the metrics endpoint.
    pub(crate) connection_counts: ConnectionCounts,
    /// The bound on relay outcomes kept for peers until they acknowledge them.
    pub(crate) retention: Arc<Retention>,
    /// Lost worker connections' sessions, kept for a resume.
    pub(crate) sessions: Sessions,
}

impl Shared {
    pub(crate) fn new(
        config: NodeConfig,
        dispatcher: Arc<Dispatcher>,
        notifier: Arc<dyn ConnectionNotifier>,
        dialer: Arc<dyn Dialer>,
        tls: NodeTls,
    ) -> Self {
        let closing = CancellationToken::new();
        let retention = Retention::new(config.relay_retention_bytes);
        let sessions = Sessions::new(
            config.worker_resume_grace(),
            config.worker_resume_max_sessions,
            config.worker_resume_max_pushes,
        );
        Self {
            config,
            dispatcher,
            notifier,
            dialer: tls.peer_dialer(dialer),
            resolver: None,
            tls,
            draining: CancellationToken::new(),
            retiring: closing.child_token(),
            closing,
            peer_links: TaskTracker::new(),
            undrained: TaskTracker::new(),
            node_id: OnceLock::new(),
            advertise: OnceLock::new(),
            incarnation: fastrand::u64(1..),
            started: Instant::now(),
            connections: AtomicU32::new(0),
            connection_counts: ConnectionCounts::default(),
            retention,
            sessions,
        }
    }

    /// Names the node once its listener's port is known; later calls change nothing.
    pub(crate) fn set_node_id(&self, node_id: String) {
        let _ = self.node_id.set(node_id);
    }

    pub(crate) fn node_id(&self) -> &str {
        self.node_id.get().map_or("lintel", String::as_str)
    }

    /// Records where peers dial this node; later calls change nothing.
    pub(crate) fn set_advertise(&self, advertise: String) {
        let _ = self.advertise.set(advertise);
    }

    pub(crate) fn advertise(&self) -> &str {
        self.advertise.get().map_or("", String::as_str)
    }

    /// Counts an open connection until the guard drops.
    pub(crate) fn connection_opened(self: &Arc<Self>) -> OpenConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(self))
    }

    pub(crate) fn status(&self) -> NodeStatus {
        let (pools, waiting) = self.dispatcher.registry().snapshot();
        NodeStatus {
            node_id: self.node_id().to_owned(),
            uptime_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            connections: self.connections.load(Ordering::Relaxed),
            draining: self.dispatcher.is_draining(),
            pools,
            waiting,
            counters: self.dispatcher.counters().snapshot(),
        }
    }
}

impl Shared {
    /// The status with the node's peers, for version-2 producers.
    pub(crate) fn cluster_status(&self, correlation: u64) -> ClusterStatusReport {
        ClusterStatusReport {
            correlation,
            status: self.status(),
            peers: self.dispatcher.mesh().status(),
            peer_lost: self.dispatcher.counters().peer_lost(),
        }
    }
}

/// One open connection, counted in the node's status while it lives.
pub(crate) struct OpenConnection(Arc<Shared>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

pin_project_lite::pin_project! {
    /// Resolves once `token` is cancelled, for a loop that polls it on every turn: once
    /// registered with the polling task it only reads the token's state, and registers again
    /// only when the task's waker changes. Cancel-safe; pin it once per loop, not per turn.
    pub(crate) struct Fired<'a> {
        token: &'a CancellationToken,
        // Held in place, not boxed: an idle connection pays no allocation for it.
        #[pin]
        wait: WaitForCancellationFuture<'a>,
        // The waker the wait is registered with.
        registered: Option<Waker>,
    }
}

impl<'a> Fired<'a> {
    pub(crate) fn new(token: &'a CancellationToken) -> Self {
        Self {
            token,
            wait: token.cancelled(),
            registered: None,
        }
    }
}

impl Future for Fired<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this
            .registered
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()))
        {
            // This task is woken by the cancel already: only the state needs reading.
            return if this.token.is_cancelled() {
                Poll::Ready(())
            } else {
                Poll::Pending
            };
        }
        let polled = this.wait.poll(cx);
        if polled.is_pending() {
            *this.registered = Some(cx.waker().clone());
        }
        polled
    }
}
