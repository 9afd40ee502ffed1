//! The worker SDK: connect, register, run pushed requests through a [`Handler`], reconnect.
//!
//! At most `max_concurrency` handlers run at once whatever the node sends; a cancelled push gets
//! no reply; pings are answered by the runtime, never by handler code. Only a final refusal, a
//! self-drain or a shutdown stops the reconnect loop.

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use lintel_wire::{
    ActivityOutcome, CapacityUpdate, DispatchRequest, DispatchResponse, Drain, Drained, ErrorCode,
    ErrorFrame, Frame, Goodbye, Pong, Push, Refusal, Register, Reply, Role, DEFAULT_MAX_FRAME_LEN,
};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::connect::{
    check_frame_len, connect, decode_error_frame, field_bound, is_final_refusal, next_frame,
    ConnectError, Connection, Handshake, Keepalive, KeepaliveTick, VARINT_MAX,
};
use crate::transport::{Batched, FrameReader, Outbound};

/// Executes pushed requests. The runtime runs each request on a task of its own (or, for a
/// handler that [`runs_briefly`](Handler::runs_briefly), first on the connection's task) and drops
/// it when the node cancels the request, so a handler must tolerate being dropped at any `.await`.
pub trait Handler: Send + Sync + 'static {
    /// Runs one request to its outcome. A panic becomes a non-retryable failure.
    fn handle(&self, request: DispatchRequest) -> impl Future<Output = ActivityOutcome> + Send;

    /// True when `handle` either finishes within microseconds or soon awaits: the worker then
    /// runs it on the connection's task and moves it to a task of its own only if it waits,
    /// saving a task per request. Leave it false for handlers that compute at length.
    fn runs_briefly(&self) -> bool {
        false
    }
}

/// A [`Handler`] made from a closure; see [`handler_fn`].
#[derive(Debug, Clone)]
pub struct FnHandler<F>(F);

/// Wraps `f` as a [`Handler`].
pub fn handler_fn<F, Fut>(f: F) -> FnHandler<F>
where
    F: Fn(DispatchRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ActivityOutcome> + Send + 'static,
{
    FnHandler(f)
}

impl<F, Fut> Handler for FnHandler<F>
where
    F: Fn(DispatchRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ActivityOutcome> + Send + 'static,
{
    fn handle(&self, request: DispatchRequest) -> impl Future<Output = ActivityOutcome> + Send {
        (self.0)(request)
    }
}

/// Jittered exponential reconnect delays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after a lost connection, before jitter.
    pub initial: Duration,
    /// The cap on the delay, before jitter.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (zero-based): `initial * 2^attempt` capped at
    /// `max`, of which a random half is taken off so reconnecting workers spread out.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt);
        let full = self.initial.saturating_mul(factor).min(self.max);
        let half = full / 2;
        let half_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half.saturating_add(Duration::from_nanos(fastrand::u64(0..=half_nanos)))
    }
}

/// Where to connect, what to register and how to behave on the way.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// `host:port` of the node.
    pub addr: String,
    /// Sent after every handshake; `max_concurrency` is replaced by the latest
    /// [`WorkerHandle::set_capacity`].
    pub registration: Register,
    /// Free-form client name in `Hello`, for the node's logs.
    pub name: String,
    pub auth_token: Option<String>,
    /// Bounds the connect plus `Welcome`, and separately the wait for `Registered`.
    pub handshake_timeout: Duration,
    pub reconnect: Backoff,
    /// Largest frame body this side reads or writes.
    pub max_frame_len: usize,
    /// Frames the outbound queue holds before the runtime waits for room.
    pub queue_len: usize,
}

impl WorkerConfig {
    /// A config with default timeouts, backoff and limits, named after the registration identity.
    pub fn new(addr: impl Into<String>, registration: Register) -> Self {
        Self {
            addr: addr.into(),
            name: registration.identity.clone(),
            registration,
            auth_token: None,
            handshake_timeout: Duration::from_secs(10),
            reconnect: Backoff::default(),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            queue_len: 1024,
        }
    }
}

/// Where the worker runtime is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerState {
    /// Connecting, registering, or waiting to reconnect.
    Connecting,
    /// Registered on the node's connection `pid`.
    Registered { worker_id: u64, pid: u64 },
    /// Finishing in-flight work before it closes; no new work is taken.
    Draining { worker_id: u64 },
    /// The node refused us for good; the runtime has stopped.
    Refused(Refusal),
    /// The runtime has stopped.
    Stopped,
}

/// Why a [`WorkerHandle`] call could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// The node refused the handshake or the registration for good.
    #[error("refused ({:?}): {}", .0.code, .0.reason)]
    Refused(Refusal),
    /// The runtime has stopped.
    #[error("the worker runtime has stopped")]
    Stopped,
    /// The wait ended first.
    #[error("not registered within {0:?}")]
    Timeout(Duration),
}

/// The entry point of the worker runtime.
#[derive(Debug)]
pub struct Worker;

impl Worker {
    /// Starts the runtime on the current Tokio runtime.
    ///
    /// # Panics
    /// Outside a Tokio runtime, like `tokio::spawn`.
    pub fn spawn<H: Handler>(config: WorkerConfig, handler: H) -> WorkerHandle {
        let (state_tx, state_rx) = watch::channel(WorkerState::Connecting);
        let (capacity_tx, capacity_rx) = watch::channel(config.registration.max_concurrency);
        let (drain_tx, drain_rx) = watch::channel(None);
        let shutdown = CancellationToken::new();
        let finished = CancellationToken::new();
        let runtime = Runtime {
            config,
            handler: Arc::new(handler),
            state: state_tx,
            capacity: capacity_rx,
            drain: drain_rx,
        };
        let stop = shutdown.clone();
        let done = finished.clone();
        tokio::spawn(async move {
            let _done = done.drop_guard();
            let state = runtime.state.clone();
            // Cancel-safe: dropping `run` drops the connection and aborts every handler task.
            let last = tokio::select! {
                () = stop.cancelled() => WorkerState::Stopped,
                last = runtime.run() => last,
            };
            state.send_replace(last);
        });
        WorkerHandle {
            state: state_rx,
            capacity: capacity_tx,
            drain: drain_tx,
            shutdown,
            finished,
        }
    }
}

/// Controls a running worker. Dropping it shuts the worker down.
#[derive(Debug)]
pub struct WorkerHandle {
    state: watch::Receiver<WorkerState>,
    capacity: watch::Sender<u32>,
    drain: watch::Sender<Option<Duration>>,
    shutdown: CancellationToken,
    finished: CancellationToken,
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl WorkerHandle {
    /// Waits until the worker is registered and returns its worker id.
    ///
    /// # Errors
    /// [`WorkerError::Refused`] after a final refusal, [`WorkerError::Stopped`] when the runtime
    /// stopped, [`WorkerError::Timeout`] when `timeout` passes first.
    pub async fn wait_registered(&self, timeout: Duration) -> Result<u64, WorkerError> {
        let mut state = self.state.clone();
        let settled = state.wait_for(|state| {
            matches!(
                state,
                WorkerState::Registered { .. } | WorkerState::Refused(_) | WorkerState::Stopped
            )
        });
        let settled = match tokio::time::timeout(timeout, settled).await {
            Err(_) => return Err(WorkerError::Timeout(timeout)),
            Ok(Err(_)) => return Err(WorkerError::Stopped),
            // Cloned so the watch's read lock is released here.
            Ok(Ok(state)) => state.clone(),
        };
        match settled {
            WorkerState::Registered { worker_id, .. } => Ok(worker_id),
            WorkerState::Refused(refusal) => Err(WorkerError::Refused(refusal)),
            _ => Err(WorkerError::Stopped),
        }
    }

    /// Sets the most requests in flight at once: locally at once, and on the node by a
    /// `CapacityUpdate` now if registered, else in the next registration.
    ///
    /// # Errors
    /// [`WorkerError::Stopped`] when the runtime has stopped.
    pub fn set_capacity(&self, max_concurrency: NonZeroU32) -> Result<(), WorkerError> {
        if self.finished.is_cancelled() {
            return Err(WorkerError::Stopped);
        }
        self.capacity.send_replace(max_concurrency.get());
        Ok(())
    }

    /// Drains and stops: sends `Drain`, finishes in-flight work (aborting what is left after
    /// `grace`), sends `Drained` and `Goodbye`, closes, and does not reconnect. Resolves when the
    /// runtime has stopped; when not connected it just stops.
    pub async fn drain(&self, grace: Duration) {
        self.drain.send_replace(Some(grace));
        self.finished.cancelled().await;
    }

    /// Stops at once: aborts every handler and drops the connection without a word.
    /// Resolves when the runtime has stopped.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.finished.cancelled().await;
    }

    /// Resolves when the runtime has stopped, for whatever reason.
    pub async fn stopped(&self) {
        self.finished.cancelled().await;
    }

    /// A receiver of the runtime's state.
    pub fn state(&self) -> watch::Receiver<WorkerState> {
        self.state.clone()
    }
}

/// The runtime's configuration and its side of the handle's channels.
struct Runtime<H> {
    config: WorkerConfig,
    handler: Arc<H>,
    state: watch::Sender<WorkerState>,
    capacity: watch::Receiver<u32>,
    drain: watch::Receiver<Option<Duration>>,
}

/// How one connection ended.
#[derive(Debug)]
enum SessionEnd {
    /// No registration happened; back off further.
    Unreachable(ConnectError),
    /// The connection was lost after registering; back off from the start.
    Lost,
    /// The node drained us; we may be wanted again later.
    NodeDrained,
    /// The handle's drain is done.
    SelfDrained,
    /// A refusal retrying cannot change.
    Refused(Refusal),
}

impl<H: Handler> Runtime<H> {
    /// Connects, serves and reconnects until a final refusal or a self-drain; returns the last state.
    async fn run(mut self) -> WorkerState {
        let mut failures: u32 = 0;
        loop {
            if self.drain.borrow().is_some() {
                return WorkerState::Stopped;
            }
            self.state.send_replace(WorkerState::Connecting);
            let delay = match self.session().await {
                SessionEnd::Refused(refusal) => {
                    tracing::warn!(code = ?refusal.code, reason = %refusal.reason, "worker refused");
                    return WorkerState::Refused(refusal);
                }
                SessionEnd::SelfDrained => return WorkerState::Stopped,
                SessionEnd::Lost | SessionEnd::NodeDrained => {
                    failures = 0;
                    self.config.reconnect.delay(0)
                }
                SessionEnd::Unreachable(err) => {
                    tracing::debug!(error = %err, addr = %self.config.addr, "worker cannot reach the node");
                    let delay = self.config.reconnect.delay(failures);
                    failures = failures.saturating_add(1);
                    delay
                }
            };
            self.state.send_replace(WorkerState::Connecting);
            // Both branches are cancel-safe: a sleep and a watch wait hold no data.
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = self.drain.wait_for(Option::is_some) => return WorkerState::Stopped,
            }
        }
    }

    /// One connection from dial to close.
    async fn session(&mut self) -> SessionEnd {
        let handshake = Handshake {
            role: Role::Worker,
            name: self.config.name.clone(),
            auth_token: self.config.auth_token.clone(),
            timeout: self.config.handshake_timeout,
            max_frame_len: self.config.max_frame_len,
            queue_len: self.config.queue_len,
        };
        let conn = match connect(self.config.addr.as_str(), &handshake).await {
            Ok(conn) => conn,
            Err(ConnectError::Refused(refusal)) if is_final_refusal(refusal.code) => {
                return SessionEnd::Refused(refusal)
            }
            Err(err) => return SessionEnd::Unreachable(err),
        };
        let Connection {
            mut reader,
            outbound,
            writer: _,
            welcome,
            max_send_len,
        } = conn;
        let capacity = *self.capacity.borrow_and_update();
        let registration = Register {
            max_concurrency: capacity,
            ..self.config.registration.clone()
        };
        let timeout = self.config.handshake_timeout;
        let registered = tokio::time::timeout(
            timeout,
            register(&mut reader, &outbound, Frame::Register(registration)),
        )
        .await
        .unwrap_or(Err(ConnectError::Timeout(timeout)));
        let worker_id = match registered {
            Ok(worker_id) => worker_id,
            Err(ConnectError::Refused(refusal)) if is_final_refusal(refusal.code) => {
                return SessionEnd::Refused(refusal)
            }
            Err(err) => return SessionEnd::Unreachable(err),
        };
        tracing::debug!(worker_id, pid = welcome.pid, node = %welcome.node_id, "worker registered");
        self.state.send_replace(WorkerState::Registered {
            worker_id,
            pid: welcome.pid,
        });
        let session = Session {
            handler: Arc::clone(&self.handler),
            state: &self.state,
            capacity_rx: &mut self.capacity,
            drain_rx: &mut self.drain,
            keepalive: Keepalive::new(&welcome.limits),
            reader,
            outbound,
            max_send_len,
            worker_id,
            capacity,
            tasks: JoinSet::new(),
            in_flight: HashMap::new(),
            draining: None,
        };
        Batched::new(session.serve()).await
    }
}

/// Sends the registration and waits for its answer, answering pings meanwhile.
async fn register(
    reader: &mut FrameReader,
    outbound: &Outbound,
    registration: Frame,
) -> Result<u64, ConnectError> {
    outbound
        .send(registration)
        .await
        .map_err(|_| ConnectError::Closed)?;
    loop {
        match next_frame(reader).await? {
            Frame::Registered(registered) => return Ok(registered.worker_id),
            Frame::RegisterRefused(refusal) => return Err(ConnectError::Refused(refusal)),
            Frame::Ping(ping) => {
                let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
            }
            Frame::Pong(_) => {}
            Frame::Error(error) => return Err(ConnectError::Protocol(error)),
            Frame::Goodbye(goodbye) => return Err(ConnectError::Goodbye(goodbye.reason)),
            other => {
                let kind = other.kind();
                outbound
                    .close_with(Frame::Error(ErrorFrame {
                        code: ErrorCode::UnexpectedFrame,
                        reason: format!("expected Registered or RegisterRefused, got {kind}"),
                    }))
                    .await;
                return Err(ConnectError::UnexpectedFrame(kind));
            }
        }
    }
}

/// How long a finished drain waits for `Drained` and `Goodbye` to reach the socket.
const GOODBYE_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Who asked for the drain in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DrainOrigin {
    Node,
    Handle,
}

#[derive(Debug)]
struct Draining {
    origin: DrainOrigin,
    /// In-flight work still running at this instant is aborted.
    deadline: Instant,
    /// Replies sent since the drain began.
    completed: u64,
}

/// A registered connection being served.
struct Session<'a, H> {
    handler: Arc<H>,
    state: &'a watch::Sender<WorkerState>,
    capacity_rx: &'a mut watch::Receiver<u32>,
    drain_rx: &'a mut watch::Receiver<Option<Duration>>,
    keepalive: Keepalive,
    reader: FrameReader,
    outbound: Outbound,
    max_send_len: usize,
    worker_id: u64,
    /// The local limit on handlers in flight. The session is the only place that starts
    /// handlers, so this count beside `in_flight` is the semaphore: exact, and resizable both ways.
    capacity: u32,
    tasks: JoinSet<(u64, DispatchResponse)>,
    /// Requests whose reply is still owed, by correlation id. A cancelled request leaves this
    /// map before its task is aborted, so a task that finishes anyway gets no reply.
    in_flight: HashMap<u64, AbortHandle>,
    draining: Option<Draining>,
}

/// Whether the session goes on.
type Flow = Result<(), SessionEnd>;

impl<H: Handler> Session<'_, H> {
    async fn serve(mut self) -> SessionEnd {
        loop {
            if self.draining.is_some() && self.in_flight.is_empty() {
                return self.finish_drain().await;
            }
            let deadline = self.draining.as_ref().map(|draining| draining.deadline);
            // Every branch is cancel-safe: `FramedRead::next` keeps partial frames buffered,
            // `JoinSet::join_next` and watch `changed` lose nothing when dropped, the grace sleep
            // is rebuilt from the stored deadline, and `Keepalive::tick` changes nothing until
            // it resolves.
            let flow = tokio::select! {
                frame = futures_util::StreamExt::next(&mut self.reader) => match frame {
                    Some(Ok(frame)) => {
                        self.keepalive.heard();
                        self.on_frame(frame).await
                    }
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "worker connection failed");
                        if let Some(error) = decode_error_frame(&err) {
                            self.outbound.close_with(Frame::Error(error)).await;
                        }
                        Err(SessionEnd::Lost)
                    }
                    None => Err(SessionEnd::Lost),
                },
                Some(joined) = self.tasks.join_next() => self.on_joined(joined).await,
                Ok(()) = self.capacity_rx.changed() => self.on_capacity().await,
                Ok(()) = self.drain_rx.changed(), if self.draining.is_none() => {
                    self.on_drain_request().await
                }
                () = grace_expiry(deadline) => {
                    self.abort_in_flight();
                    Ok(())
                }
                tick = self.keepalive.tick() => match tick {
                    KeepaliveTick::Ping(ping) => self.send(Frame::Ping(ping)).await,
                    KeepaliveTick::Dead => {
                        tracing::warn!("node stopped answering pings; reconnecting");
                        Err(SessionEnd::Lost)
                    }
                },
            };
            if let Err(end) = flow {
                return end;
            }
        }
    }

    async fn on_frame(&mut self, frame: Frame) -> Flow {
        match frame {
            Frame::Push(push) => self.start(push).await,
            Frame::Cancel(cancel) => {
                if let Some(task) = self.in_flight.remove(&cancel.correlation) {
                    task.abort();
                }
                Ok(())
            }
            Frame::Ping(ping) => self.send(Frame::Pong(Pong { nonce: ping.nonce })).await,
            Frame::Pong(_) => Ok(()),
            Frame::Drain(drain) => {
                if self.draining.is_none() {
                    self.begin_drain(DrainOrigin::Node, Duration::from_millis(drain.grace_ms));
                }
                Ok(())
            }
            Frame::Goodbye(goodbye) => {
                tracing::info!(reason = %goodbye.reason, "node said goodbye");
                Err(SessionEnd::Lost)
            }
            Frame::Error(error) => {
                tracing::warn!(code = ?error.code, reason = %error.reason, "node reported a protocol error");
                Err(SessionEnd::Lost)
            }
            other => {
                let kind = other.kind();
                tracing::warn!(%kind, "node sent a frame a worker never receives");
                self.outbound
                    .close_with(Frame::Error(ErrorFrame {
                        code: ErrorCode::UnexpectedFrame,
                        reason: format!("{kind} is not a node-to-worker frame here"),
                    }))
                    .await;
                Err(SessionEnd::Lost)
            }
        }
    }

    /// Runs a pushed request in its own task, or refuses it at once when at capacity.
    ///
    /// Pushes that arrive while draining still run: the node sent them before it saw the drain
    /// and waits for their replies; the grace deadline bounds them.
    async fn start(&mut self, push: Push) -> Flow {
        let Push {
            correlation,
            request,
        } = push;
        if self.in_flight.contains_key(&correlation) {
            tracing::warn!(
                correlation,
                "node reused a correlation id in flight; ignoring it"
            );
            return Ok(());
        }
        let capacity = usize::try_from(self.capacity).unwrap_or(usize::MAX);
        if self.in_flight.len() >= capacity {
            tracing::warn!(correlation, capacity, "push beyond capacity refused");
            let response = DispatchResponse {
                workflow_id: request.workflow_id,
                ordinal: request.ordinal,
                run_id: request.run_id,
                outcome: ActivityOutcome::Failure {
                    message: format!("worker is at its capacity of {capacity} requests"),
                    retryable: true,
                },
            };
            return self.reply(correlation, response).await;
        }
        let handler = Arc::clone(&self.handler);
        let run = run_handler(handler, correlation, request);
        let task = if self.handler.runs_briefly() {
            let mut run = Box::pin(run);
            // A handler that must wait is polled again, with its own waker, in its task.
            if let Some((correlation, response)) = (&mut run).now_or_never() {
                if let Some(draining) = &mut self.draining {
                    draining.completed += 1;
                }
                return self.reply(correlation, response).await;
            }
            self.tasks.spawn(run)
        } else {
            self.tasks.spawn(run)
        };
        self.in_flight.insert(correlation, task);
        Ok(())
    }

    async fn on_joined(&mut self, joined: Result<(u64, DispatchResponse), JoinError>) -> Flow {
        match joined {
            Ok((correlation, response)) => {
                if self.in_flight.remove(&correlation).is_none() {
                    return Ok(());
                }
                if let Some(draining) = &mut self.draining {
                    draining.completed += 1;
                }
                self.reply(correlation, response).await
            }
            // Aborted after a cancel or at the grace deadline: nothing is owed.
            Err(_) => Ok(()),
        }
    }

    async fn on_capacity(&mut self) -> Flow {
        let capacity = *self.capacity_rx.borrow_and_update();
        if capacity == self.capacity {
            return Ok(());
        }
        self.capacity = capacity;
        self.send(Frame::CapacityUpdate(CapacityUpdate {
            max_concurrency: capacity,
        }))
        .await
    }

    async fn on_drain_request(&mut self) -> Flow {
        let Some(grace) = *self.drain_rx.borrow_and_update() else {
            return Ok(());
        };
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        self.begin_drain(DrainOrigin::Handle, grace);
        self.send(Frame::Drain(Drain { grace_ms })).await
    }

    fn begin_drain(&mut self, origin: DrainOrigin, grace: Duration) {
        let now = Instant::now();
        let deadline = now.checked_add(grace).unwrap_or_else(|| far_future(now));
        self.draining = Some(Draining {
            origin,
            deadline,
            completed: 0,
        });
        self.state.send_replace(WorkerState::Draining {
            worker_id: self.worker_id,
        });
    }

    fn abort_in_flight(&mut self) {
        if !self.in_flight.is_empty() {
            tracing::warn!(
                in_flight = self.in_flight.len(),
                "drain grace expired; aborting"
            );
        }
        for (_, task) in self.in_flight.drain() {
            task.abort();
        }
    }

    /// Sends `Drained` and `Goodbye`, closes, and waits (bounded) for the writer to flush.
    async fn finish_drain(self) -> SessionEnd {
        let Some(draining) = self.draining else {
            return SessionEnd::Lost;
        };
        let _ = self
            .outbound
            .send(Frame::Drained(Drained {
                completed: draining.completed,
            }))
            .await;
        self.outbound
            .close_with(Frame::Goodbye(Goodbye {
                reason: "drained".to_owned(),
            }))
            .await;
        let flushed = self.outbound.closed();
        if tokio::time::timeout(GOODBYE_FLUSH_TIMEOUT, flushed)
            .await
            .is_err()
        {
            tracing::warn!("node did not take the goodbye in time");
        }
        match draining.origin {
            DrainOrigin::Node => SessionEnd::NodeDrained,
            DrainOrigin::Handle => SessionEnd::SelfDrained,
        }
    }

    /// Sends the reply, or a failure in its place when it does not fit in a frame.
    async fn reply(&self, correlation: u64, response: DispatchResponse) -> Flow {
        let bound = response_len_bound(&response);
        let frame = Frame::Reply(Reply {
            correlation,
            response,
        });
        let Err(len) = check_frame_len(&frame, bound, self.max_send_len) else {
            return self.send(frame).await;
        };
        let Frame::Reply(mut reply) = frame else {
            return Ok(());
        };
        tracing::warn!(correlation, len, "reply too large for one frame");
        reply.response.outcome = ActivityOutcome::Failure {
            message: format!(
                "result of {len} bytes exceeds the frame limit of {} bytes",
                self.max_send_len
            ),
            retryable: false,
        };
        self.send(Frame::Reply(reply)).await
    }

    async fn send(&self, frame: Frame) -> Flow {
        self.outbound
            .send(frame)
            .await
            .map_err(|_| SessionEnd::Lost)
    }
}

/// Runs the handler, turning a panic into a failure, and tags the response with `correlation`.
async fn run_handler<H: Handler>(
    handler: Arc<H>,
    correlation: u64,
    request: DispatchRequest,
) -> (u64, DispatchResponse) {
    let workflow_id = request.workflow_id.clone();
    let ordinal = request.ordinal;
    let run_id = request.run_id.clone();
    let outcome = AssertUnwindSafe(handler.handle(request))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| ActivityOutcome::Failure {
            message: format!("handler panicked: {}", panic_message(panic.as_ref())),
            retryable: false,
        });
    (
        correlation,
        DispatchResponse {
            workflow_id,
            ordinal,
            run_id,
            outcome,
        },
    )
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

/// Resolves at `deadline`; never without one.
async fn grace_expiry(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// An instant further off than any grace worth waiting for.
fn far_future(now: Instant) -> Instant {
    now.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .unwrap_or(now)
}

/// An overestimate of an encoded `Reply` body.
fn response_len_bound(response: &DispatchResponse) -> usize {
    let outcome = match &response.outcome {
        ActivityOutcome::Success(bytes) => field_bound(bytes.len()),
        ActivityOutcome::Failure { message, .. } => field_bound(message.len()).saturating_add(1),
    };
    [
        // Frame kind, correlation, ordinal, outcome tag.
        4 * (1 + VARINT_MAX),
        field_bound(response.workflow_id.len()),
        1 + field_bound(response.run_id.as_ref().map_or(0, String::len)),
        outcome,
    ]
    .into_iter()
    .fold(0, usize::saturating_add)
}
