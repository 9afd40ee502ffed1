//! The producer SDK: many dispatches in flight on one connection, each ending in one result.
//!
//! Every dispatch gets exactly one answer: the node's [`DispatchResult`], or
//! [`ClientError::ConnectionLost`] the moment the connection is lost, saying whether the
//! submission reached the socket. Dropping a dispatch future forgets its entry and cancels it
//! on the node.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;

use lintel_wire::{
    feature, Cancel, DispatchRequest, DispatchResult, ErrorCode, ErrorFrame, Event, EventTopic,
    FeatureSet, Frame, FrameRef, Goodbye, Pong, RefusalCode, Role, StatusQuery, Submit, Subscribe,
    SubscriptionEnded, Welcome, DEFAULT_MAX_FRAME_LEN, PROTOCOL_VERSION,
};
use tokio::net::ToSocketAddrs;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::connect::{
    connect, connect_tls, decode_error_frame, ConnectError, Connection, Handshake,
    MIN_PROTOCOL_VERSION,
};
use crate::dispatch::{Dispatch, InvalidDispatch};
use crate::node_info::NodeInfo;
use crate::nodes::Nodes;
use crate::options::{DispatchOptions, ProgressTo, RetryReason, DEFAULT_REPLY_TIMEOUT};
use crate::status::Status;
use crate::subscription::{self, Sink, Subscription};
use crate::tls::ClientTls;
use crate::worker::Backoff;
use lintel_transport::burst::Burst;
use lintel_transport::keepalive::{Keepalive, Tick};
use lintel_transport::{Batched, FrameReader, Outbound, SendError, WriteMark};

/// What a producer understands of what version 4 adds: the outcomes it hands its caller
/// as they come (a missed heartbeat, a role not granted).
const PRODUCER_UNDERSTANDS: FeatureSet = FeatureSet::HEARTBEAT_TIMEOUT
    .with(FeatureSet::ROLE_NOT_GRANTED)
    .with(FeatureSet::PROGRESS);

/// How a [`Client`] introduces itself and sizes its connection.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use lintel_client::ClientConfig;
///
/// let config = ClientConfig::default()
///     .name("billing")
///     .auth_token("secret")
///     .handshake_timeout(Duration::from_secs(3));
/// assert_eq!(config.name, "billing");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// Free-form name, for the node's logs and status.
    pub name: String,
    /// The token of a node that requires one (`Hello`'s `auth_token`); `None` by default.
    pub auth_token: Option<String>,
    /// Bounds the TCP connect, the TLS handshake and the wait for `Welcome` together.
    pub handshake_timeout: Duration,
    /// Largest frame body this side reads or writes.
    pub max_frame_len: usize,
    /// Frames the outbound queue holds before a dispatch waits for room.
    pub queue_len: usize,
    /// Speak TLS to the node; `None` is plaintext. Each node's certificate is checked against
    /// the TLS server name when one is set, else the host of the address it was given as,
    /// else the IP address dialled.
    pub tls: Option<ClientTls>,
    /// Delays between rounds of reconnecting to the nodes of [`Client::connect_nodes`]:
    /// after each round in which no node answered, the next waits longer, with jitter.
    pub reconnect: Backoff,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            name: "lintel-client".to_owned(),
            auth_token: None,
            handshake_timeout: Duration::from_secs(10),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            queue_len: 1024,
            tls: None,
            reconnect: Backoff::default(),
        }
    }
}

impl ClientConfig {
    /// Names the client in the node's logs and status.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sends `token` to a node that requires one.
    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// Bounds the TCP connect, the TLS handshake and the wait for the welcome together.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Largest frame body this side reads or writes.
    pub fn max_frame_len(mut self, len: usize) -> Self {
        self.max_frame_len = len;
        self
    }

    /// Frames the outbound queue holds before a dispatch waits for room.
    pub fn queue_len(mut self, len: usize) -> Self {
        self.queue_len = len;
        self
    }

    /// Speaks TLS to the nodes.
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Delays between rounds of reconnecting to the nodes of [`Client::connect_nodes`].
    pub fn reconnect(mut self, backoff: Backoff) -> Self {
        self.reconnect = backoff;
        self
    }
}

/// Why a dispatch or status query has no answer from the node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The dispatch breaks a limit the node stated at the handshake; nothing was sent.
    #[error("invalid dispatch: {0}")]
    Invalid(#[from] InvalidDispatch),
    /// The client was closed ([`Client::close`]); nothing was sent.
    #[error("the client is closed")]
    Closed,
    /// The connection was lost before the answer arrived. `may_have_run` is true exactly when
    /// the submission had been written whole to the socket: the node may have run it. A
    /// status query or subscription lost this way says false.
    #[error(
        "connection to the node lost before the answer arrived (may have run: {may_have_run})"
    )]
    ConnectionLost {
        /// The submission was written whole to the socket: the node may have run it.
        may_have_run: bool,
    },
    /// The submission does not fit in one frame the node accepts; nothing was sent.
    #[error("submission of {len} bytes exceeds the frame limit of {max} bytes")]
    Oversize {
        /// The submission's frame body, in bytes.
        len: usize,
        /// The largest frame body both sides accept.
        max: usize,
    },
    /// The call needs what the node's protocol version cannot carry (`what`: a request's
    /// `headers`, `priority`, `fairness_key`, `fairness_weight`, `deployment` or `extensions`,
    /// or `events`, all of version 3); nothing was sent.
    #[error("the node speaks protocol version {version}; {what} needs version 3")]
    Unsupported {
        /// The connection's protocol version.
        version: u16,
        /// What needs a later version.
        what: &'static str,
    },
    /// The node's status document is not the JSON of a status.
    #[error("the node's status document does not read as a status: {0}")]
    BadStatus(String),
    /// The node refused a subscription (`Unauthorized` without the observer role).
    #[error("the node refused the subscription ({code:?}): {reason}")]
    Refused {
        /// The node's refusal code.
        code: RefusalCode,
        /// The node's reason, for people.
        reason: String,
    },
    /// The connection was gone and no node could be reached again; nothing was sent. The
    /// reason names each address tried and its error.
    #[error("{reason}")]
    Unreachable {
        /// Each address tried and its error.
        reason: String,
    },
}

/// A dispatch's result, the node that served it, and the attempts before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatched {
    /// How the dispatch ended.
    pub result: DispatchResult,
    /// The node whose worker ran it or that decided the outcome; `None` from a version-1 node.
    pub served_by: Option<String>,
    /// The address of the node it was submitted to, when known (a client made by
    /// [`Client::connect_nodes`] knows it).
    pub node: Option<SocketAddr>,
    /// The earlier attempts, in order, each retried under the dispatch's
    /// [`RetryPolicy`](crate::RetryPolicy);
    /// empty when the first attempt stood.
    pub retried: Vec<Retried>,
}

/// A node's answer to one submission, as the reader hands it to the waiting call: kept
/// apart from [`Dispatched`] so that what moves per dispatch stays small.
#[derive(Debug)]
struct Answer {
    result: DispatchResult,
    served_by: Option<String>,
}

impl Dispatched {
    /// Attempts made in all, this one included.
    pub fn attempts(&self) -> usize {
        self.retried.len() + 1
    }
}

/// An attempt that was tried again: where it went and why it did not stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retried {
    /// The address of the node it was submitted to, when known.
    pub node: Option<SocketAddr>,
    /// The node that answered it, when one did and said so.
    pub served_by: Option<String>,
    /// Why it was tried again.
    pub reason: RetryReason,
}

/// A producer connected to one node at a time; clones share it.
///
/// Made by [`Client::connect_nodes`], it moves to another of its nodes when the one it uses
/// says goodbye, is lost, or answers a dispatch `draining`: the next call connects again,
/// trying the others first, with jittered backoff between rounds in which none answered.
/// Made by [`Client::connect`], it keeps its one connection. Dropping the last clone closes
/// the connection and fails whatever is still pending.
#[derive(Debug, Clone)]
pub struct Client {
    core: Arc<Core>,
}

/// What every clone shares: the connection in use and how to make another.
#[derive(Debug)]
struct Core {
    /// The connection in use; replaced, never emptied. Its lock is held only to read or swap
    /// the pointer.
    current: Mutex<Arc<Inner>>,
    /// `None` for a client of one connection, which is never replaced.
    nodes: Option<Nodes>,
    handshake: Handshake,
    tls: Option<ClientTls>,
    reconnect: Backoff,
    /// One caller reconnects at a time; the others wait for its connection.
    redial: tokio::sync::Mutex<Redial>,
    /// Set by [`Client::close`].
    closed: CancellationToken,
}

/// Reconnection rounds that found no node, and when the next may start.
#[derive(Debug, Default)]
struct Redial {
    failures: u32,
    not_before: Option<tokio::time::Instant>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    /// The node's address, for the result's attempts and to try it last after it drained.
    address: Option<SocketAddr>,
    /// The node answered a dispatch `draining`: the next call connects elsewhere.
    draining: std::sync::atomic::AtomicBool,
    outbound: Outbound,
    welcome: Welcome,
    local_addr: Option<SocketAddr>,
    next_correlation: AtomicU64,
    reader: AbortHandle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reader.abort();
        self.shared.fail_all();
    }
}

/// State shared by the callers and the reader task.
#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    /// Cancelled once the connection is gone.
    closed: CancellationToken,
    /// Set with `closed`: read on every dispatch, where the token's lock would cost more.
    gone: std::sync::atomic::AtomicBool,
    /// Set when [`Client::close`] ended the connection, not the node or the network.
    closed_by_caller: std::sync::atomic::AtomicBool,
    /// Set when the node said goodbye on a connection of version 2 or later: it answers every
    /// submission it read before its goodbye, so one it did not answer it never read.
    answered_all: std::sync::atomic::AtomicBool,
    /// The connection's protocol version.
    version: u16,
}

/// The pending-reply table. Its lock is only ever held for a map operation, never across `.await`.
#[derive(Debug, Default)]
struct Pending {
    closed: bool,
    dispatches: IdMap<oneshot::Sender<Answer>>,
    /// Where the progress of the dispatches that asked for it goes, until their outcome.
    progress: IdMap<mpsc::Sender<Bytes>>,
    statuses: IdMap<oneshot::Sender<Result<Status, ClientError>>>,
    subscriptions: IdMap<Sink>,
}

impl Pending {
    /// Removes dispatch `correlation`'s entry, and where its progress went.
    fn remove_dispatch(&mut self, correlation: u64) -> Option<oneshot::Sender<Answer>> {
        if !self.progress.is_empty() {
            self.progress.remove(&correlation);
        }
        self.dispatches.remove(&correlation)
    }
}

/// A map keyed by a correlation id this client assigned itself. The ids are sequential and
/// never come from the node, so nobody can choose them to collide: a fixed-seed fast hasher
/// is enough, and costs a fraction of SipHash.
type IdMap<V> = HashMap<u64, V, foldhash::fast::FixedState>;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the connection gone: every waiter hears that it was lost now, and new
    /// entries are refused.
    fn fail_all(&self) {
        let (dispatches, progress, statuses, subscriptions) = {
            let mut pending = self.lock();
            pending.closed = true;
            (
                std::mem::take(&mut pending.dispatches),
                std::mem::take(&mut pending.progress),
                std::mem::take(&mut pending.statuses),
                std::mem::take(&mut pending.subscriptions),
            )
        };
        // Gone before any waiter wakes, so none of them sends on this connection again.
        self.gone.store(true, Ordering::Release);
        self.closed.cancel();
        // Dropping the senders wakes the waiters, outside the lock.
        drop((dispatches, progress, statuses, subscriptions));
    }
}

impl Shared {
    /// What a call hears when the connection is gone without its answer.
    fn lost(&self, may_have_run: bool) -> ClientError {
        let may_have_run = may_have_run && !self.answered_all.load(Ordering::Acquire);
        if self.closed_by_caller.load(Ordering::Acquire) && !may_have_run {
            ClientError::Closed
        } else {
            ClientError::ConnectionLost { may_have_run }
        }
    }

    fn complete(&self, correlation: u64, answer: Answer) {
        let waiter = self.lock().remove_dispatch(correlation);
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(answer);
            }
            None => tracing::debug!(correlation, "outcome for a dispatch nobody waits for"),
        }
    }

    /// Passes `details` on to where dispatch `correlation` sends its progress, if it asked;
    /// dropped when that channel is full or closed.
    fn progress(&self, correlation: u64, details: &Bytes) {
        if let Some(to) = self.lock().progress.get(&correlation) {
            if to.try_send(details.clone()).is_err() {
                tracing::debug!(
                    correlation,
                    "progress channel full or closed; details dropped"
                );
            }
        }
    }

    fn event(&self, event: Event) {
        if let Some(sink) = self.lock().subscriptions.get_mut(&event.correlation) {
            sink.deliver(event);
        }
    }

    fn ended(&self, ended: SubscriptionEnded) {
        let sink = self.lock().subscriptions.remove(&ended.correlation);
        if let Some(sink) = sink {
            sink.end(ended);
        }
    }

    fn report(&self, correlation: u64, status: Result<Status, ClientError>) {
        let waiter = self.lock().statuses.remove(&correlation);
        if let Some(waiter) = waiter {
            let _ = waiter.send(status);
        }
    }
}

/// Which table a pending entry lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Dispatch,
    Status,
}

/// Owns one pending entry: dropping it removes the entry, and cancels a submitted dispatch
/// on the node when no outcome has arrived yet.
struct PendingGuard<'a> {
    inner: &'a Inner,
    table: Table,
    correlation: u64,
    submitted: bool,
    /// The waiter heard back (an answer or the connection's end), so whoever dropped its
    /// sender already removed the entry: nothing is left to remove or cancel.
    settled: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let removed = {
            let mut pending = self.inner.shared.lock();
            match self.table {
                Table::Dispatch => pending.remove_dispatch(self.correlation).is_some(),
                Table::Status => pending.statuses.remove(&self.correlation).is_some(),
            }
        };
        if removed && self.submitted && self.table == Table::Dispatch {
            self.inner.send_cancel(self.correlation);
        }
    }
}

impl Client {
    /// Connects to the node at `addr` as a producer.
    ///
    /// # Examples
    /// A dispatch that may wait a second for a free worker, and what became of it:
    /// ```
    /// use std::time::Duration;
    ///
    /// use lintel_client::{ActivityOutcome, Client, ClientConfig, Dispatch, DispatchOptions, DispatchResult};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let addr = node().await?;
    /// let client = Client::connect(addr.as_str(), ClientConfig::default()).await?;
    /// let dispatch = Dispatch::new("demo", "upper")
    ///     .input("hello")
    ///     .workflow("order-17", 1);
    /// let options = DispatchOptions::default()
    ///     .wait_for_worker(Duration::from_millis(100))
    ///     .reply_timeout(Duration::from_secs(5));
    /// match client.dispatch(&dispatch, &options).await? {
    ///     DispatchResult::Completed(response) => match response.outcome {
    ///         ActivityOutcome::Success(bytes) => println!("result: {bytes:?}"),
    ///         ActivityOutcome::Failure { message, retryable } => {
    ///             println!("failed (retry: {retryable}): {message}")
    ///         }
    ///     },
    ///     DispatchResult::NoWorker(census) => println!("no worker: {:?}", census.reason),
    ///     other => println!("not run here: {other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// # async fn node() -> Result<String, Box<dyn std::error::Error>> {
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let addr = listener.local_addr()?.to_string();
    /// #     let node = lintel::Node::new(lintel::NodeConfig::default())?;
    /// #     tokio::spawn(async move { node.serve(listener, std::future::pending()).await });
    /// #     Ok(addr)
    /// # }
    /// ```
    ///
    /// # Errors
    /// A [`ConnectError`] when the connection or the handshake fails.
    pub async fn connect<A: ToSocketAddrs>(
        addr: A,
        config: ClientConfig,
    ) -> Result<Self, ConnectError> {
        let handshake = handshake(&config);
        let connection = match &config.tls {
            None => connect(addr, &handshake).await?,
            Some(tls) => connect_tls(addr, None, tls, &handshake).await?,
        };
        Ok(Self::start(
            Inner::start(connection, None),
            None,
            handshake,
            config,
        ))
    }

    /// Connects to one of the nodes at `nodes` (each `host:port`; a name that resolves to
    /// several addresses counts as each), and moves between them as the type's doc says.
    ///
    /// # Examples
    /// ```
    /// use lintel_client::{Client, ClientConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let (a, b) = (node().await?, node().await?);
    /// let client = Client::connect_nodes([a.as_str(), b.as_str()], ClientConfig::default()).await?;
    /// println!("connected to {:?}", client.node_addr());
    /// # Ok(())
    /// # }
    /// # async fn node() -> Result<String, Box<dyn std::error::Error>> {
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let addr = listener.local_addr()?.to_string();
    /// #     let node = lintel::Node::new(lintel::NodeConfig::default())?;
    /// #     tokio::spawn(async move { node.serve(listener, std::future::pending()).await });
    /// #     Ok(addr)
    /// # }
    /// ```
    ///
    /// # Errors
    /// With one address, its [`ConnectError`]; with several, [`ConnectError::AllFailed`]
    /// naming each address and its error, within `handshake_timeout`;
    /// [`ConnectError::NoNodes`] when `nodes` is empty.
    pub async fn connect_nodes<I, S>(nodes: I, config: ClientConfig) -> Result<Self, ConnectError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let nodes = Nodes::new(nodes)?;
        let handshake = handshake(&config);
        let (connection, address) = nodes
            .connect(&handshake, config.tls.as_ref(), None, None)
            .await?;
        let inner = Inner::start(connection, Some(address));
        Ok(Self::start(inner, Some(nodes), handshake, config))
    }

    fn start(
        inner: Inner,
        nodes: Option<Nodes>,
        handshake: Handshake,
        config: ClientConfig,
    ) -> Self {
        Self {
            core: Arc::new(Core {
                current: Mutex::new(Arc::new(inner)),
                nodes,
                handshake,
                tls: config.tls,
                reconnect: config.reconnect,
                redial: tokio::sync::Mutex::new(Redial::default()),
                closed: CancellationToken::new(),
            }),
        }
    }

    /// The connection in use now.
    fn link(&self) -> Arc<Inner> {
        Arc::clone(
            &self
                .core
                .current
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// As [`Client::usable`], given up `budget` after `start`.
    async fn usable_by(
        &self,
        start: tokio::time::Instant,
        budget: Duration,
    ) -> Result<Arc<Inner>, ClientError> {
        match tokio::time::timeout_at(start + budget, self.usable()).await {
            Ok(usable) => usable,
            Err(_) => Err(ClientError::Unreachable {
                reason: format!("no node could be reached within {budget:?}"),
            }),
        }
    }

    /// A connection to send on: the one in use while it is open and not draining, else a new
    /// one to another node (a client of one connection keeps its own, to fail on it).
    async fn usable(&self) -> Result<Arc<Inner>, ClientError> {
        let link = self.link();
        if link.is_usable() {
            return Ok(link);
        }
        let Some(nodes) = &self.core.nodes else {
            return Ok(link);
        };
        if self.core.closed.is_cancelled() {
            return Err(ClientError::Closed);
        }
        let mut redial = self.core.redial.lock().await;
        let link = self.link();
        if link.is_usable() {
            return Ok(link);
        }
        if let Some(not_before) = redial.not_before {
            tokio::time::sleep_until(not_before).await;
        }
        let tls = self.core.tls.as_ref();
        match nodes
            .connect(&self.core.handshake, tls, link.address, None)
            .await
        {
            Ok((connection, address)) => {
                *redial = Redial::default();
                let fresh = Arc::new(Inner::start(connection, Some(address)));
                *self
                    .core
                    .current
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Arc::clone(&fresh);
                if self.core.closed.is_cancelled() {
                    fresh.abandon("client closed");
                    fresh.shared.fail_all();
                    return Err(ClientError::Closed);
                }
                Ok(fresh)
            }
            Err(err) => {
                let delay = self.core.reconnect.delay(redial.failures);
                redial.failures = redial.failures.saturating_add(1);
                let now = tokio::time::Instant::now();
                redial.not_before = Some(
                    now.checked_add(delay)
                        .unwrap_or(now + Duration::from_secs(86_400)),
                );
                Err(ClientError::Unreachable {
                    reason: err.to_string(),
                })
            }
        }
    }

    /// Checks `dispatch` against the limits the node stated, submits it and waits for its
    /// one result, retrying as `options.retry` allows.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    ///
    /// use lintel_client::{Client, ClientConfig, Dispatch, DispatchOptions, DispatchResult};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let addr = node().await?;
    /// let client = Client::connect_nodes([addr], ClientConfig::default()).await?;
    /// let dispatch = Dispatch::new("demo", "upper").input("hello").workflow("order-17", 1);
    /// let options = DispatchOptions::default().wait_for_worker(Duration::from_millis(100));
    /// let dispatched = client.submit(&dispatch, &options).await?;
    /// match dispatched.result {
    ///     DispatchResult::Completed(response) => println!("{:?}", response.outcome),
    ///     other => println!("after {} attempts: {other:?}", dispatched.retried.len() + 1),
    /// }
    /// # Ok(())
    /// # }
    /// # async fn node() -> Result<String, Box<dyn std::error::Error>> {
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let addr = listener.local_addr()?.to_string();
    /// #     let node = lintel::Node::new(lintel::NodeConfig::default())?;
    /// #     tokio::spawn(async move { node.serve(listener, std::future::pending()).await });
    /// #     Ok(addr)
    /// # }
    /// ```
    ///
    /// The per-call check compares lengths with the limits the node stated at the handshake
    /// and allocates nothing; the dispatch is encoded from where it lies, so a caller sending
    /// many alike keeps one [`Dispatch`] and changes it in place
    /// ([`Dispatch::set_ordinal`]).
    ///
    /// The node bounds the wait by `options`; to bound it locally as well, wrap the call in
    /// `tokio::time::timeout`: dropping the future removes its entry and sends `Cancel`.
    ///
    /// # Errors
    /// [`ClientError::Invalid`] before anything is sent, when the dispatch breaks a limit;
    /// [`ClientError::ConnectionLost`] when the connection is lost before the outcome arrives
    /// (`may_have_run` when the submission was written); [`ClientError::Closed`] after
    /// [`Client::close`]; [`ClientError::Oversize`] when the submission does not fit in a
    /// frame; [`ClientError::Unsupported`] when `options` carry extras (headers, priority,
    /// fairness, a deployment) a node before version 3 cannot carry;
    /// [`ClientError::Unreachable`] when no node could be reached again.
    pub async fn submit(
        &self,
        dispatch: &Dispatch,
        options: &DispatchOptions,
    ) -> Result<Dispatched, ClientError> {
        let link = self.link();
        dispatch.check(&link.welcome, options)?;
        let request = dispatch.request();
        // The time budget counts from the call.
        let start = tokio::time::Instant::now();
        // The first attempt is made here, the retry loop built only for one that did not
        // stand: boxed, so that what every dispatch holds and moves stays small.
        if !link.is_usable() {
            return Box::pin(self.retrying(link, request, options, start, None)).await;
        }
        let correlation = link.next_correlation.fetch_add(1, Ordering::Relaxed);
        let submit = submission(correlation, request, options);
        let first = match link.enter(correlation, &submit, &options.progress) {
            // Cancel-safe to drop while sending: an unsent Submit needs no Cancel, and `guard`
            // knows it.
            Ok((mut guard, answer)) => match link.outbound.send_marked(&submit).await {
                Ok(mark) => {
                    guard.submitted = true;
                    let answer = answer.await;
                    guard.settled = true;
                    match answer {
                        Ok(answer) if options.retry.retries(&answer.result).is_none() => {
                            return Ok(Dispatched {
                                result: answer.result,
                                served_by: answer.served_by,
                                node: link.address,
                                retried: Vec::new(),
                            });
                        }
                        Ok(answer) => Ok(answer),
                        Err(_) => Err(link.lost_after(mark).await),
                    }
                }
                Err(err) => Err(link.send_failed(err)),
            },
            Err(err) => Err(err),
        };
        Box::pin(self.retrying(link, request, options, start, Some(first))).await
    }

    /// As [`Client::submit`], giving only how the dispatch ended: the node's result, without
    /// the node that served it or the attempts before it.
    ///
    /// The node bounds the wait by `options`; to bound it locally as well, wrap the call in
    /// `tokio::time::timeout`: dropping the future removes its entry and sends `Cancel`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    ///
    /// use lintel_client::{ActivityOutcome, Client, ClientConfig, Dispatch, DispatchOptions, DispatchResult};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let addr = node().await?;
    /// let client = Client::connect(addr.as_str(), ClientConfig::default()).await?;
    /// let dispatch = Dispatch::new("demo", "upper").input("hello");
    /// let options = DispatchOptions::default().wait_for_worker(Duration::from_millis(100));
    /// match client.dispatch(&dispatch, &options).await? {
    ///     DispatchResult::Completed(response) => match response.outcome {
    ///         ActivityOutcome::Success(bytes) => println!("result: {bytes:?}"),
    ///         ActivityOutcome::Failure { message, retryable } => {
    ///             println!("failed (retry: {retryable}): {message}")
    ///         }
    ///     },
    ///     DispatchResult::NoWorker(census) => println!("no worker: {:?}", census.reason),
    ///     other => println!("not run here: {other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// # async fn node() -> Result<String, Box<dyn std::error::Error>> {
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let addr = listener.local_addr()?.to_string();
    /// #     let node = lintel::Node::new(lintel::NodeConfig::default())?;
    /// #     tokio::spawn(async move { node.serve(listener, std::future::pending()).await });
    /// #     Ok(addr)
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Client::submit`].
    pub async fn dispatch(
        &self,
        dispatch: &Dispatch,
        options: &DispatchOptions,
    ) -> Result<DispatchResult, ClientError> {
        Ok(self.submit(dispatch, options).await?.result)
    }

    /// The attempts of a dispatch after its first (`first`, on `current`) did not stand, or
    /// all of them when `current` was not usable to begin with (`first` is `None`), as
    /// `options.retry` allows within the budget counted from `start`.
    async fn retrying(
        &self,
        mut current: Arc<Inner>,
        request: &DispatchRequest,
        options: &DispatchOptions,
        start: tokio::time::Instant,
        mut first: Option<Result<Answer, ClientError>>,
    ) -> Result<Dispatched, ClientError> {
        let policy = &options.retry;
        let budget = policy
            .time_budget()
            .or(options.reply_timeout)
            .unwrap_or(DEFAULT_REPLY_TIMEOUT);
        let mut retried = Vec::new();
        let retry = |retried: &Vec<Retried>, reason: RetryReason| {
            let attempts = if reason.proves_unsent() {
                // A client of one connection keeps it, so nothing else could be tried.
                if self.core.nodes.is_none() {
                    return false;
                }
                policy.max_unsent_attempts()
            } else {
                policy.max_attempts()
            };
            retried.len() + 1 < attempts as usize && start.elapsed() < budget
        };
        loop {
            let (link, answer) = match first.take() {
                Some(answer) => (current, answer),
                None => {
                    let link = if current.is_usable() {
                        current
                    } else {
                        match self.usable_by(start, budget).await {
                            Ok(link) => link,
                            Err(err @ ClientError::Unreachable { .. })
                                if retry(&retried, RetryReason::Unreachable) =>
                            {
                                tracing::debug!(error = %err, "no node reachable; trying again");
                                retried.push(Retried {
                                    node: None,
                                    served_by: None,
                                    reason: RetryReason::Unreachable,
                                });
                                current = self.link();
                                continue;
                            }
                            Err(err) => return Err(err),
                        }
                    };
                    let answer = link.dispatch(request, options).await;
                    (link, answer)
                }
            };
            let reason = match &answer {
                Ok(answer) => {
                    if let DispatchResult::Draining = answer.result {
                        // Left before the next call: it takes no new work.
                        link.draining.store(true, Ordering::Relaxed);
                    }
                    policy.retries(&answer.result)
                }
                Err(ClientError::ConnectionLost {
                    may_have_run: false,
                }) => Some(RetryReason::NotSent),
                Err(ClientError::ConnectionLost { may_have_run: true })
                    if policy.is_idempotent() =>
                {
                    Some(RetryReason::MayHaveRun)
                }
                Err(_) => None,
            };
            if let Some(reason) = reason {
                if retry(&retried, reason) {
                    retried.push(Retried {
                        node: link.address,
                        served_by: answer.ok().and_then(|answer| answer.served_by),
                        reason,
                    });
                    current = self.link();
                    continue;
                }
            }
            let Answer { result, served_by } = answer?;
            return Ok(Dispatched {
                result,
                served_by,
                node: link.address,
                retried,
            });
        }
    }

    /// Asks the node for its status, as operators read it (the JSON of `lintel status
    /// --json`): from a version-3 node its status document, from an earlier one its report
    /// read the same way (no peers from version 1).
    ///
    /// # Errors
    /// [`ClientError::ConnectionLost`] when the connection is lost before the report arrives,
    /// [`ClientError::BadStatus`] when the node's document does not read as a status.
    pub async fn status(&self) -> Result<Status, ClientError> {
        self.usable().await?.status().await
    }

    /// Subscribes to the node's lifecycle events of `topics` (every topic when empty): workers
    /// registering, excluded, restored and departing, peer links up and down. Resolves once
    /// the node has taken the subscription, so every event after this call is in the stream.
    /// Needs the observer role where the node requires credentials.
    ///
    /// # Errors
    /// [`ClientError::Unsupported`] from a node before version 3, [`ClientError::Refused`]
    /// when the node refuses it (`Unauthorized` without the observer role, `Unsupported` from
    /// a node without the feature `events`), [`ClientError::ConnectionLost`] when the
    /// connection is lost.
    pub async fn subscribe(&self, topics: &[EventTopic]) -> Result<Subscription, ClientError> {
        let link = self.usable().await?;
        let inner = &*link;
        let version = inner.welcome.version;
        if version < 3 {
            return Err(ClientError::Unsupported {
                version,
                what: feature::EVENTS,
            });
        }
        let correlation = inner.next_correlation.fetch_add(1, Ordering::Relaxed);
        let (sink, events, mut ending) = Sink::new();
        {
            let mut pending = inner.shared.lock();
            if pending.closed {
                return Err(inner.shared.lost(false));
            }
            pending.subscriptions.insert(correlation, sink);
        }
        // Until it is handed over, a subscription this call leaves is forgotten and cancelled.
        let unclaimed = Unclaimed {
            link: &link,
            correlation,
        };
        inner
            .outbound
            .send(Frame::Subscribe(Subscribe {
                correlation,
                topics: topics.to_vec(),
            }))
            .await
            .map_err(|_| inner.shared.lost(false))?;
        // The node answers in order: once this status arrives, it has taken the subscription
        // or refused it.
        link.status().await?;
        match ending.try_recv() {
            Ok(ended) => {
                return Err(ClientError::Refused {
                    code: ended.code,
                    reason: ended.reason,
                })
            }
            Err(oneshot::error::TryRecvError::Closed) => return Err(inner.shared.lost(false)),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        std::mem::forget(unclaimed);
        let connection: Arc<dyn subscription::Connection> = Arc::clone(&link) as _;
        Ok(Subscription::new(connection, correlation, events, ending))
    }

    /// Says `Goodbye` and closes the connection for good: submissions not yet written are
    /// dropped and fail with [`ClientError::Closed`], those written with
    /// `ConnectionLost{may_have_run: true}`, later calls with `Closed`. Resolves once the
    /// writer has stopped.
    pub async fn close(&self) {
        self.core.closed.cancel();
        let link = self.link();
        link.shared.closed_by_caller.store(true, Ordering::Release);
        link.abandon("client closed");
        link.shared.fail_all();
        link.outbound.closed().await;
    }

    /// The node in use as its welcome described it: version, id, this connection's pid, its
    /// limits and features. It may change when the client moves to another node.
    pub fn node_info(&self) -> NodeInfo {
        NodeInfo::from(&self.link().welcome)
    }

    /// This side's address of the connection in use, when the socket could tell.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.link().local_addr
    }

    /// The address of the node in use, when the socket could tell.
    pub fn node_addr(&self) -> Option<SocketAddr> {
        self.link().address
    }

    /// True once the client cannot send any more: after [`Client::close`], and for a client of
    /// one connection ([`Client::connect`]) once that connection is gone.
    pub fn is_closed(&self) -> bool {
        self.core.closed.is_cancelled()
            || (self.core.nodes.is_none() && self.link().shared.closed.is_cancelled())
    }

    /// Resolves once the connection in use is gone (it may be replaced at the next call when
    /// the client has several nodes), or the client is closed.
    pub async fn closed(&self) {
        let link = self.link();
        tokio::select! {
            () = link.shared.closed.cancelled() => {}
            () = self.core.closed.cancelled() => {}
        }
    }
}

/// How long a lost dispatch waits for the writer to stop before judging from what it has
/// written so far: a socket the peer stopped reading can hold a frame in the middle.
const WRITER_STOP_GRACE: Duration = Duration::from_secs(1);

/// The submission of `request` under `correlation`, lent from where it lies.
#[inline]
fn submission<'a>(
    correlation: u64,
    request: &'a DispatchRequest,
    options: &'a DispatchOptions,
) -> FrameRef<'a> {
    FrameRef::Submit(Submit {
        correlation,
        request: request.view(),
        extras: options.extras.lend(),
        wait_for_worker_ms: options.wait_for_worker_ms(),
        reply_timeout_ms: options.reply_timeout_ms(),
        routing: options.routing.view(),
    })
}

/// What a client says in its hello, from its config.
fn handshake(config: &ClientConfig) -> Handshake {
    Handshake {
        versions: MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION,
        role: Role::Producer,
        name: config.name.clone(),
        auth_token: config.auth_token.clone(),
        timeout: config.handshake_timeout,
        max_frame_len: config.max_frame_len,
        queue_len: config.queue_len,
        understands: PRODUCER_UNDERSTANDS,
    }
}

impl Inner {
    /// Starts the reader of a handshaken connection to the node at `address`.
    fn start(connection: Connection, address: Option<SocketAddr>) -> Self {
        let Connection {
            reader,
            outbound,
            writer: _,
            welcome,
            max_send_len: _,
        } = connection;
        let local_addr = reader.get_ref().local_addr().ok();
        let shared = Arc::new(Shared {
            version: welcome.version,
            ..Shared::default()
        });
        let keepalive = Keepalive::from_limits(&welcome.limits);
        let reader = tokio::spawn(Batched::new(read_loop(
            reader,
            outbound.clone(),
            Arc::clone(&shared),
            keepalive,
        )))
        .abort_handle();
        Self {
            shared,
            address,
            draining: std::sync::atomic::AtomicBool::new(false),
            outbound,
            welcome,
            local_addr,
            next_correlation: AtomicU64::new(1),
            reader,
        }
    }

    /// Asks this connection's node for its status.
    async fn status(&self) -> Result<Status, ClientError> {
        let inner = self;
        let correlation = inner.next_correlation.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut guard = inner.insert(Table::Status, correlation, |pending| {
            pending.statuses.insert(correlation, tx);
        })?;
        inner
            .outbound
            .send(Frame::StatusQuery(StatusQuery { correlation }))
            .await
            .map_err(|_| inner.shared.lost(false))?;
        let answer = rx.await;
        guard.settled = true;
        answer.map_err(|_| inner.shared.lost(false))?
    }

    /// Open, and its node not known to drain.
    fn is_usable(&self) -> bool {
        !self.shared.gone.load(Ordering::Acquire) && !self.draining.load(Ordering::Relaxed)
    }

    /// Submits on this connection and waits for the one result.
    async fn dispatch(
        &self,
        request: &DispatchRequest,
        options: &DispatchOptions,
    ) -> Result<Answer, ClientError> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let submit = submission(correlation, request, options);
        let (mut guard, answer) = self.enter(correlation, &submit, &options.progress)?;
        // Cancel-safe to drop here: an unsent Submit needs no Cancel, and `guard` knows it.
        let mark = self
            .outbound
            .send_marked(&submit)
            .await
            .map_err(|err| self.send_failed(err))?;
        guard.submitted = true;
        let answer = answer.await;
        guard.settled = true;
        match answer {
            Ok(answer) => Ok(answer),
            Err(_) => Err(self.lost_after(mark).await),
        }
    }

    /// Enters the dispatch `submit` (under `correlation`) in the pending table, giving its
    /// entry and the answer to wait for; refused when the node's version cannot carry it or
    /// the connection is gone.
    fn enter(
        &self,
        correlation: u64,
        submit: &FrameRef<'_>,
        progress: &ProgressTo,
    ) -> Result<(PendingGuard<'_>, oneshot::Receiver<Answer>), ClientError> {
        // Refused before it is entered: what the node's version cannot carry is never sent.
        if let Err(err) = submit.kind_at(self.welcome.version) {
            return Err(match SendError::from(err) {
                SendError::Unsupported {
                    field: Some(field),
                    version,
                    ..
                } => ClientError::Unsupported {
                    version,
                    what: field,
                },
                _ => self.shared.lost(false),
            });
        }
        let (tx, rx) = oneshot::channel();
        let guard = self.insert(Table::Dispatch, correlation, |pending| {
            pending.dispatches.insert(correlation, tx);
            if let Some(to) = &progress.0 {
                pending.progress.insert(correlation, to.clone());
            }
        })?;
        Ok((guard, rx))
    }

    /// What the caller of a submission the outbound refused hears: the outbound refuses one
    /// past the bound both sides accept, and any once the connection is closing. A closing
    /// outbound marks the connection gone at once, before its reader notices: a retry then
    /// connects again instead of trying this connection until its attempts run out.
    fn send_failed(&self, err: SendError) -> ClientError {
        match err {
            SendError::TooLarge { len, max, .. } => ClientError::Oversize { len, max },
            _ => {
                self.shared.gone.store(true, Ordering::Release);
                self.shared.lost(false)
            }
        }
    }

    /// Drops every frame not yet started and closes, saying `Goodbye`: nothing more is
    /// written once the connection is given up, so what was written stays what was written.
    fn abandon(&self, reason: &str) {
        let goodbye = Frame::Goodbye(Goodbye {
            reason: reason.to_owned(),
        });
        let _ = self.outbound.discard_and_close_with(&goodbye);
    }

    /// What the caller of the submission `mark` came from hears once the connection ended
    /// without its answer.
    async fn lost_after(&self, mark: WriteMark) -> ClientError {
        // Boxed: the wait for the writer is rare, and would otherwise size every dispatch.
        let written = Box::pin(self.submission_written(mark)).await;
        self.shared.lost(written)
    }

    /// Whether the submission `mark` came from was written whole to the socket, judged once
    /// the writer stopped (a frame it had started it finishes first); if the writer is still
    /// stuck in a frame after [`WRITER_STOP_GRACE`], from what it wrote so far.
    async fn submission_written(&self, mark: WriteMark) -> bool {
        self.abandon("connection lost");
        let _ = tokio::time::timeout(WRITER_STOP_GRACE, self.outbound.closed()).await;
        self.outbound.written(mark)
    }

    /// Inserts an entry through `insert` unless the connection is already gone.
    fn insert(
        &self,
        table: Table,
        correlation: u64,
        insert: impl FnOnce(&mut Pending),
    ) -> Result<PendingGuard<'_>, ClientError> {
        let mut pending = self.shared.lock();
        if pending.closed {
            return Err(self.shared.lost(false));
        }
        insert(&mut pending);
        drop(pending);
        Ok(PendingGuard {
            inner: self,
            table,
            correlation,
            submitted: false,
            settled: false,
        })
    }

    /// Tells the node to abandon a submission whose caller went away.
    ///
    /// Never waits: when the queue is full the cancel is sent from a task instead.
    fn send_cancel(&self, correlation: u64) {
        let cancel = Frame::Cancel(Cancel { correlation });
        if let Err(SendError::Full) = self.outbound.try_send(cancel) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let outbound = self.outbound.clone();
                runtime.spawn(async move {
                    let _ = outbound.send(Frame::Cancel(Cancel { correlation })).await;
                });
            }
        }
    }
}

/// A subscription [`Client::subscribe`] has not handed over yet: dropped, it is forgotten and
/// cancelled on the node.
struct Unclaimed<'a> {
    link: &'a Inner,
    correlation: u64,
}

impl Drop for Unclaimed<'_> {
    fn drop(&mut self) {
        let inner = self.link;
        if subscription::Connection::forget(inner, self.correlation) {
            inner.send_cancel(self.correlation);
        }
    }
}

impl subscription::Connection for Inner {
    fn cancel(&self, correlation: u64) {
        self.send_cancel(correlation);
    }

    fn forget(&self, correlation: u64) -> bool {
        let sink = self.shared.lock().subscriptions.remove(&correlation);
        sink.is_some()
    }
}

/// Completes pending entries from the node's frames until the connection ends, then fails the
/// rest at once.
async fn read_loop(
    mut reader: FrameReader,
    outbound: Outbound,
    shared: Arc<Shared>,
    mut keepalive: Keepalive,
) {
    'read: loop {
        // Both branches are cancel-safe: `FrameReader::ready` keeps partial frames buffered, and
        // `Keepalive::tick` changes nothing until it resolves.
        tokio::select! {
            found = reader.ready() => {
                // The frames already read behind this one are handled in the same pass, so a
                // burst of outcomes costs one pass through the select and cannot keep the
                // keepalive waiting long.
                let mut found = found;
                let mut burst = Burst::after_first();
                loop {
                    match reader.take(found) {
                        Some(Ok(frame)) => {
                            keepalive.heard();
                            if let Err(violation) = on_frame(frame, &shared, &outbound) {
                                shared.fail_all();
                                outbound.close_with(Frame::Error(violation)).await;
                                return;
                            }
                        }
                        Some(Err(err)) => {
                            tracing::warn!(error = %err, "producer connection failed");
                            shared.fail_all();
                            if let Some(error) = decode_error_frame(&err) {
                                outbound.close_with(Frame::Error(error)).await;
                            }
                            break 'read;
                        }
                        None => break 'read,
                    }
                    match burst.next(&mut reader) {
                        Some(next) => found = next,
                        None => break,
                    }
                }
            }
            tick = keepalive.tick() => match tick {
                Tick::Ping(ping) => {
                    let _ = outbound.try_send(Frame::Ping(ping));
                }
                Tick::Dead { .. } => {
                    tracing::warn!("node stopped answering pings; closing the producer connection");
                    break;
                }
                // No timeout is set here: the node's silence counts only in missed pings.
                Tick::Overdue => {}
            },
        }
    }
    // Nothing queued is worth writing now: no answer would come back for it.
    let _ = outbound.discard_and_close_with(&Frame::Goodbye(Goodbye {
        reason: "connection lost".to_owned(),
    }));
    shared.fail_all();
}

/// Handles one frame from the node.
///
/// # Errors
/// The `Error` frame to send before closing, for a frame a producer never receives.
fn on_frame(frame: FrameRef<'_>, shared: &Shared, outbound: &Outbound) -> Result<(), ErrorFrame> {
    match frame {
        FrameRef::Outcome(outcome) => {
            let answer = Answer {
                result: outcome.result.into_owned(),
                served_by: None,
            };
            shared.complete(outcome.correlation, answer);
        }
        FrameRef::ServedOutcome(outcome) => {
            let answer = Answer {
                result: outcome.result.into_owned(),
                served_by: Some(outcome.served_by.to_owned()),
            };
            shared.complete(outcome.correlation, answer);
        }
        FrameRef::Frame(Frame::Status(report)) => {
            let status = Status::new(report.status.clone(), Vec::new(), 0);
            shared.report(report.correlation, Ok(status));
        }
        FrameRef::Frame(Frame::ClusterStatus(report)) => {
            let (peers, peer_lost) = (report.peers.clone(), report.peer_lost);
            let status = Status::new(report.status.clone(), peers, peer_lost);
            shared.report(report.correlation, Ok(status));
        }
        FrameRef::Frame(Frame::StatusDocument(document)) => {
            let status = Status::from_json(&document.json)
                .map_err(|err| ClientError::BadStatus(err.to_string()));
            shared.report(document.correlation, status);
        }
        FrameRef::Frame(Frame::Progress(progress)) => {
            shared.progress(progress.correlation, &progress.details);
        }
        FrameRef::Frame(Frame::Event(event)) => shared.event((**event).clone()),
        FrameRef::Frame(Frame::SubscriptionEnded(ended)) => shared.ended(ended.clone()),
        FrameRef::Frame(Frame::Ping(ping)) => {
            if outbound
                .try_send(Frame::Pong(Pong { nonce: ping.nonce }))
                .is_err()
            {
                tracing::debug!("outbound queue full or closed; pong not sent");
            }
        }
        FrameRef::Frame(Frame::Pong(_)) => {}
        FrameRef::Frame(Frame::Goodbye(goodbye)) => {
            tracing::info!(reason = %goodbye.reason, "node said goodbye");
            // Before version 2 a goodbye may also close a slow consumer, whose outcomes it drops.
            if shared.version >= 2 {
                shared.answered_all.store(true, Ordering::Release);
            }
            let _ = outbound.discard_and_close_with(&Frame::Goodbye(Goodbye {
                reason: "node said goodbye".to_owned(),
            }));
            shared.fail_all();
        }
        FrameRef::Frame(Frame::Error(error)) => {
            tracing::warn!(code = ?error.code, reason = %error.reason, "node reported a protocol error");
            let _ = outbound.discard_and_close_with(&Frame::Goodbye(Goodbye {
                reason: "node reported an error".to_owned(),
            }));
            shared.fail_all();
        }
        other => {
            return Err(ErrorFrame {
                code: ErrorCode::UnexpectedFrame,
                reason: format!("{} is not a node-to-producer frame", other.name()),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes, BytesMut};
    use futures_util::StreamExt;
    use lintel_wire::{
        encode_frame, ActivityOutcome, DispatchResponse, DispatchResult, Frame, FrameCodec,
        OutcomeFrame, DEFAULT_MAX_FRAME_LEN,
    };
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;
    use tokio_util::codec::FramedRead;

    use super::{Client, ClientConfig};
    use crate::{Dispatch, DispatchOptions};
    use lintel_transport::burst::FRAMES_PER_TURN;
    use lintel_transport::fixtures;

    #[tokio::test]
    async fn outcomes_arriving_in_one_burst_longer_than_a_batch_each_reach_their_dispatch() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let count = 3 * FRAMES_PER_TURN + 1;
        // A node that answers every submission at once, in one write, once all have arrived.
        let node = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            let (read, mut write) = socket.into_split();
            let mut frames = FramedRead::new(read, FrameCodec::new(DEFAULT_MAX_FRAME_LEN));
            let Some(Ok(Frame::Hello(_))) = frames.next().await else {
                panic!("expected Hello");
            };
            let welcome = fixtures::welcome();
            let mut bytes = BytesMut::new();
            encode_frame(&welcome, 2, &mut bytes, DEFAULT_MAX_FRAME_LEN).unwrap();
            write.write_all(&bytes).await.unwrap();
            bytes.clear();
            for _ in 0..count {
                let Some(Ok(Frame::Submit(submit))) = frames.next().await else {
                    panic!("expected Submit");
                };
                let outcome = Frame::Outcome(OutcomeFrame {
                    correlation: submit.correlation,
                    result: DispatchResult::Completed(DispatchResponse {
                        workflow_id: submit.request.workflow_id.clone(),
                        ordinal: submit.request.ordinal,
                        run_id: None,
                        outcome: ActivityOutcome::Success(submit.request.input.clone()),
                    }),
                });
                encode_frame(&outcome, 2, &mut bytes, DEFAULT_MAX_FRAME_LEN).unwrap();
            }
            write.write_all(&bytes).await.unwrap();
            (frames, write)
        });
        let client = Client::connect(addr, ClientConfig::default())
            .await
            .unwrap();
        let options = DispatchOptions::default();
        let dispatches = (0..count as u64).map(|ordinal| {
            let client = client.clone();
            let options = options.clone();
            tokio::spawn(async move {
                let dispatch = Dispatch::new("ns", "echo")
                    .input(ordinal.to_string())
                    .workflow(format!("wf-{ordinal}"), ordinal);
                client.dispatch(&dispatch, &options).await
            })
        });
        let results = futures_util::future::join_all(dispatches.collect::<Vec<_>>()).await;
        for (ordinal, result) in results.into_iter().enumerate() {
            let DispatchResult::Completed(response) = result.unwrap().unwrap() else {
                panic!("dispatch {ordinal} did not complete");
            };
            assert_eq!(response.workflow_id, format!("wf-{ordinal}"));
            assert_eq!(
                response.outcome,
                ActivityOutcome::Success(Bytes::from(ordinal.to_string()))
            );
        }
        assert!(!client.is_closed());
        let _node_side = node.await.unwrap();
    }
}
