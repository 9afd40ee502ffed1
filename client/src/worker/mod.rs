//! The worker SDK: connect, register, run pushed requests through a [`Handler`], reconnect.
//!
//! At most `max_concurrency` handlers run at once whatever the node sends; a cancelled push is
//! aborted and answered at once with a failure, so the node frees its slot; pings are answered
//! by the runtime, never by handler code. Only a final refusal, a failure retrying cannot fix
//! (TLS, another protocol, a version), a self-drain or a shutdown stops the reconnect loop;
//! each failed attempt is logged, rate-limited.
//!
//! The connection (socket, reader, writer, pings and pongs) runs on a thread of its own with a
//! current-thread Tokio runtime, unless configured to share the handlers' runtime
//! ([`ConnectionThread`]); handlers run on the caller's runtime, brief ones included, so
//! a handler that blocks its thread cannot starve the connection. Requests cross to the
//! handlers' runtime, and answers back, in batches: one wake-up each way per burst, not per
//! request. A lost connection's session is resumed within its grace, handlers running on
//! through it.
//!
//! - `config`: [`WorkerConfig`] and [`Backoff`]; `state`: [`WorkerState`] and how a connection
//!   ended; `handler`: what runs a request; `runtime`: the connect, register (or resume) and
//!   reconnect loop; `retries`: what it logs while the node cannot be reached;
//!   `runner`: the task on the caller's runtime that runs handlers, fed through a `mailbox`;
//!   `held`: the requests, results and session kept across connections;
//!   `session`: one registered connection, its capacity and drain.
//! - This file: the public [`Worker`] entry point and its [`WorkerHandle`].

mod cancel;
mod config;
mod handler;
mod heartbeat;
mod held;
mod ledger;
mod mailbox;
mod retries;
mod runner;
mod runtime;
mod session;
mod state;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::Refusal;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use cancel::CancelSignal;
pub use config::{Backoff, ConnectionThread, WorkerConfig, WorkerConfigBuilder, WorkerConfigError};
pub use handler::{
    handler_fn, handler_fn_with, Extras, FnHandler, FnHandlerWith, Handler, Request,
};
pub use heartbeat::{Heartbeat, HeartbeatError};
use held::Held;
use runtime::Runtime;
pub use state::{Fatal, WorkerState};

/// Why a [`WorkerHandle`] call could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The node refused the handshake or the registration for good.
    #[error("refused ({:?}): {}", .0.code, .0.reason)]
    Refused(Refusal),
    /// The node cannot be used as configured; retrying cannot help.
    #[error("{0}")]
    Failed(Fatal),
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
    /// Starts the worker: its handlers on the current Tokio runtime, its connection on a thread
    /// of its own (named `lintel-worker`, with a current-thread Tokio runtime) or, with
    /// [`ConnectionThread::Shared`], beside them. It stops when that runtime shuts down, or its
    /// handle is dropped.
    ///
    /// # Examples
    /// A worker serving `upper` in namespace `demo`, four requests at a time, then draining:
    /// ```
    /// use std::time::Duration;
    ///
    /// use lintel_client::{handler_fn, ActivityOutcome, Request, Worker, WorkerConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let addr = node().await?;
    /// let config = WorkerConfig::builder()
    ///     .node(addr)
    ///     .namespace("demo")
    ///     .activity("upper")
    ///     .identity("upper-worker")
    ///     .concurrency(4)
    ///     .build()?;
    /// let upper = handler_fn(|request: Request| async move {
    ///     ActivityOutcome::Success(request.input.to_ascii_uppercase().into())
    /// });
    /// let worker = Worker::spawn(config, upper);
    /// let worker_id = worker.wait_registered(Duration::from_secs(5)).await?;
    /// println!("registered as worker {worker_id}");
    /// // Later: finish what runs (at most 10 s more) and leave.
    /// worker.drain(Duration::from_secs(10)).await;
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
    /// # Lost connections
    /// Its handlers run on through a lost connection. Reconnected within the session grace a
    /// version-4 node gave it, it resumes the session and delivers their results there; it
    /// keeps at most its concurrency of results unsent, and at most as many sent but not yet
    /// proved read (a `Pong` to a later `Ping` proves it), the oldest dropped beyond that.
    /// Refused, or past the grace, it registers anew and drops them.
    ///
    /// # Panics
    /// Outside a Tokio runtime, like `tokio::spawn`. A thread or runtime that cannot be made
    /// is not a panic: the worker stops in [`WorkerState::Failed`].
    pub fn spawn<H: Handler>(config: WorkerConfig, handler: H) -> WorkerHandle {
        let (state_tx, state_rx) = watch::channel(WorkerState::Connecting);
        let (capacity_tx, capacity_rx) = watch::channel(config.registration.max_concurrency);
        let (drain_tx, drain_rx) = watch::channel(None);
        let shutdown = CancellationToken::new();
        let finished = CancellationToken::new();
        let (link_tx, link_rx) = watch::channel(None);
        let runtime = Runtime {
            config,
            state: state_tx,
            capacity: capacity_rx,
            drain: drain_rx,
            held: Held::new(Arc::new(handler), link_rx),
            link: link_tx,
        };
        let link = runtime.link.subscribe();
        let stop = shutdown.clone();
        let done = finished.clone();
        let (failed, thread_failed) = (runtime.state.clone(), runtime.state.clone());
        let connection_thread = runtime.config.connection_thread;
        let serve = async move {
            let state = runtime.state.clone();
            // Cancel-safe: dropping `run` drops the connection and aborts every handler task.
            let last = tokio::select! {
                () = stop.cancelled() => None,
                last = runtime.run() => Some(last),
            };
            let last = match last {
                Some(last) => last,
                None => {
                    say_goodbye(link).await;
                    WorkerState::Stopped
                }
            };
            state.send_replace(last);
        };
        match connection_thread {
            ConnectionThread::Shared => {
                tokio::spawn(async move {
                    let _done = done.drop_guard();
                    serve.await;
                });
            }
            ConnectionThread::Own => {
                let spawned = std::thread::Builder::new()
                    .name("lintel-worker".into())
                    .spawn(move || {
                        let _done = done.drop_guard();
                        match tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                        {
                            Ok(connection) => connection.block_on(serve),
                            Err(err) => {
                                drop(serve);
                                failed.send_replace(WorkerState::Failed(Fatal::new(err.into())));
                            }
                        }
                    });
                if let Err(err) = spawned {
                    thread_failed.send_replace(WorkerState::Failed(Fatal::new(err.into())));
                    finished.cancel();
                }
            }
        }
        // The worker stops with the runtime its handlers run on, as a task of it would.
        let (stop, done) = (shutdown.clone(), finished.clone());
        tokio::spawn(async move {
            let _stop = stop.drop_guard();
            done.cancelled().await;
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

/// How long a shutdown waits for its `Goodbye` to be written.
const GOODBYE_TIMEOUT: Duration = Duration::from_secs(1);

/// Says `Goodbye` on the current connection, if any, and waits (at most [`GOODBYE_TIMEOUT`])
/// for it to be written: the node then ends the worker's pushes at once instead of keeping its
/// session for a resume that will not come.
async fn say_goodbye(link: watch::Receiver<Option<lintel_transport::Outbound>>) {
    // Cloned so the watch's read lock is not held across the wait.
    let Some(outbound) = link.borrow().clone() else {
        return;
    };
    let goodbye = lintel_wire::Frame::Goodbye(lintel_wire::Goodbye {
        reason: "worker shutting down".to_owned(),
    });
    let _ = tokio::time::timeout(GOODBYE_TIMEOUT, async {
        outbound.close_with(goodbye).await;
        outbound.closed().await;
    })
    .await;
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
    /// [`WorkerError::Refused`] after a final refusal, [`WorkerError::Failed`] after a failure
    /// retrying cannot fix, [`WorkerError::Stopped`] when the runtime
    /// stopped, [`WorkerError::Timeout`] when `timeout` passes first.
    pub async fn wait_registered(&self, timeout: Duration) -> Result<u64, WorkerError> {
        let mut state = self.state.clone();
        let settled = state.wait_for(|state| {
            matches!(
                state,
                WorkerState::Registered { .. }
                    | WorkerState::Refused(_)
                    | WorkerState::Failed(_)
                    | WorkerState::Stopped
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
            WorkerState::Failed(fatal) => Err(WorkerError::Failed(fatal)),
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

    /// Stops at once: aborts every handler, says `Goodbye` (waiting at most 1 s for it to be
    /// written, so the node ends what it pushed at once, keeping no session) and closes.
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
