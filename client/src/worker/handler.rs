//! What runs a pushed request: the [`Handler`] trait, closures as handlers, and the panic guard.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::FutureExt;
use lintel_wire::{
    ActivityOutcome, Compact, CompactString, DispatchRequest, Push, RequestExtras, ResponseRef,
};
use tokio_util::sync::CancellationToken;

use super::cancel::CancelSignal;
use super::heartbeat::{Heartbeat, HeartbeatError};

/// A pushed request as a handler gets it: its names are [`CompactString`]s (read as `str`;
/// up to 24 bytes held inline, not allocated), its input a [`Bytes`], and a
/// [`CancelSignal`] for work the handler hands elsewhere.
///
/// # Examples
/// Blocking work that stops when the push is cancelled or its deadline passes:
/// ```
/// use std::time::SystemTime;
///
/// use lintel_client::{handler_fn, ActivityOutcome, Handler, Request};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let crunch = handler_fn(|request: Request| async move {
///     let signal = request.cancel_signal();
///     let rounds = tokio::task::spawn_blocking(move || {
///         let mut rounds = 0u64;
///         while !signal.is_cancelled() && rounds < 1_000_000_000 {
///             rounds += 1; // a slice of the real work
///         }
///         rounds
///     })
///     .await;
///     match rounds {
///         Ok(rounds) => ActivityOutcome::Success(rounds.to_string().into()),
///         Err(err) => ActivityOutcome::Failure { message: err.to_string(), retryable: true },
///     }
/// });
/// // Its deadline already passed: the blocking loop stops at once.
/// let request = Request::new("demo", "crunch", "").with_deadline(SystemTime::now());
/// assert_eq!(crunch.handle(request).await, ActivityOutcome::Success("0".into()));
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Request {
    /// The namespace it was dispatched in.
    pub namespace: CompactString,
    /// The task queue; empty means `default`.
    pub task_queue: CompactString,
    /// What to run.
    pub activity_type: CompactString,
    /// The node the producer required, if any.
    pub node: Option<CompactString>,
    /// The producer's id for the work it belongs to; echoed in the reply.
    pub workflow_id: CompactString,
    /// The producer's step number within `workflow_id`; echoed in the reply.
    pub ordinal: u64,
    /// The producer's run id, if any; echoed in the reply.
    pub run_id: Option<CompactString>,
    /// The producer's one-based attempt number.
    pub attempt: u32,
    /// The input, opaque to the node.
    pub input: Bytes,
    /// The producer's wall-clock deadline, milliseconds since the Unix epoch.
    pub deadline_unix_ms: Option<u64>,
    cancel: CancelSignal,
    heartbeat: Heartbeat,
}

impl Request {
    /// A request for `activity_type` in `namespace` with `input`, the other fields empty: for
    /// calling a handler outside a worker, in tests.
    pub fn new(
        namespace: impl Into<CompactString>,
        activity_type: impl Into<CompactString>,
        input: impl Into<Bytes>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            task_queue: CompactString::default(),
            activity_type: activity_type.into(),
            node: None,
            workflow_id: CompactString::default(),
            ordinal: 0,
            run_id: None,
            attempt: 1,
            input: input.into(),
            deadline_unix_ms: None,
            cancel: CancelSignal::default(),
            heartbeat: Heartbeat::default(),
        }
    }

    /// This request with a deadline at `at`, which its [`CancelSignal`] fires at.
    pub fn with_deadline(mut self, at: std::time::SystemTime) -> Self {
        let ms = at.duration_since(std::time::UNIX_EPOCH).map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
        self.deadline_unix_ms = Some(ms);
        self.cancel = CancelSignal::new(CancellationToken::new(), Some(ms));
        self
    }

    /// The signal that fires when the node cancels this push, its deadline passes, or the
    /// handler has answered or been dropped; clone it into spawned or blocking work.
    pub fn cancel_signal(&self) -> CancelSignal {
        self.cancel.clone()
    }

    /// Tells the node the request still runs, with `details` for its producer (at most 4096
    /// bytes; empty is a heartbeat alone). A request with a heartbeat timeout
    /// ([`Extras::heartbeat_timeout`]) needs one at least that often, or it ends
    /// `HeartbeatTimeout`. Never waits: a heartbeat the connection cannot take now is dropped.
    ///
    /// # Errors
    /// [`HeartbeatError`] says why nothing was sent; the request still runs.
    pub fn heartbeat(&self, details: impl Into<Bytes>) -> Result<(), HeartbeatError> {
        self.heartbeat.beat(details)
    }

    /// What sends this request's heartbeats, for spawned or blocking work.
    pub fn heartbeater(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    /// The request as pushed, with its signal and its heartbeat.
    fn pushed(
        request: DispatchRequest<Compact>,
        cancel: CancelSignal,
        heartbeat: Heartbeat,
    ) -> Self {
        let DispatchRequest {
            namespace,
            task_queue,
            activity_type,
            node,
            workflow_id,
            ordinal,
            run_id,
            attempt,
            input,
            deadline_unix_ms,
        } = request;
        Self {
            namespace,
            task_queue,
            activity_type,
            node,
            workflow_id,
            ordinal,
            run_id,
            attempt,
            input,
            deadline_unix_ms,
            cancel,
            heartbeat,
        }
    }
}

/// What a pushed request carries beside it (version 3): its headers, in order, and its
/// scheduling fields, names held as in a [`Request`]. Empty from a version-2 node.
pub type Extras = RequestExtras<Compact>;

/// Executes pushed requests. The runtime runs each request on the Tokio runtime
/// [`Worker::spawn`](super::Worker::spawn) was called on, never on the connection's thread,
/// and drops it when the node cancels the request, so a handler must tolerate being dropped
/// at any `.await`. A handler that blocks its thread delays other handlers, not pings.
pub trait Handler: Send + Sync + 'static {
    /// Runs one request to its outcome. A panic becomes a non-retryable failure.
    fn handle(&self, request: Request) -> impl Future<Output = ActivityOutcome> + Send;

    /// Runs one request with what it carries beside it: its headers (a trace context, say)
    /// and scheduling fields, which a version-3 node pushes; from an earlier node they are
    /// empty. The runtime calls this; by default it leaves the extras and calls
    /// [`Handler::handle`], so a handler that reads headers overrides this one.
    fn handle_with(
        &self,
        request: Request,
        extras: Extras,
    ) -> impl Future<Output = ActivityOutcome> + Send {
        let _ = extras;
        self.handle(request)
    }

    /// True when `handle` either finishes within microseconds or soon awaits. Such a request
    /// is polled first in the task that starts handlers, saving a task of its own unless it
    /// must wait; that task is on the caller's runtime too, so a handler that blocks after all
    /// delays other handlers, never pings or the socket. Otherwise each request gets a task.
    fn runs_briefly(&self) -> bool {
        false
    }
}

/// A [`Handler`] made from a closure; see [`handler_fn`].
#[derive(Debug, Clone)]
pub struct FnHandler<F>(F);

/// A [`Handler`] made from a closure that reads a request's extras; see [`handler_fn_with`].
#[derive(Debug, Clone)]
pub struct FnHandlerWith<F>(F);

/// Wraps `f`, which takes each request with its extras (headers...), as a [`Handler`].
pub fn handler_fn_with<F, Fut>(f: F) -> FnHandlerWith<F>
where
    F: Fn(Request, Extras) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ActivityOutcome> + Send + 'static,
{
    FnHandlerWith(f)
}

impl<F, Fut> Handler for FnHandlerWith<F>
where
    F: Fn(Request, Extras) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ActivityOutcome> + Send + 'static,
{
    fn handle(&self, request: Request) -> impl Future<Output = ActivityOutcome> + Send {
        (self.0)(request, Extras::default())
    }

    fn handle_with(
        &self,
        request: Request,
        extras: Extras,
    ) -> impl Future<Output = ActivityOutcome> + Send {
        (self.0)(request, extras)
    }
}

/// Wraps `f` as a [`Handler`].
pub fn handler_fn<F, Fut>(f: F) -> FnHandler<F>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ActivityOutcome> + Send + 'static,
{
    FnHandler(f)
}

impl<F, Fut> Handler for FnHandler<F>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ActivityOutcome> + Send + 'static,
{
    fn handle(&self, request: Request) -> impl Future<Output = ActivityOutcome> + Send {
        (self.0)(request)
    }
}

/// The runner's number for a request it was given: unique for the worker's life, so an answer
/// to a request since dropped (cancelled, or of an ended session) is never taken for the
/// answer to a later push that reuses its correlation id.
pub(super) type Ticket = u64;

/// What a handler answered to one push, with the identity its reply echoes.
pub(super) struct Answered {
    pub(super) correlation: u64,
    /// The runner's number for the request, unique for the worker's life.
    pub(super) ticket: Ticket,
    workflow_id: CompactString,
    ordinal: u64,
    run_id: Option<CompactString>,
    outcome: ActivityOutcome,
}

impl Answered {
    /// A success echoing `correlation`, for tests of what holds answers.
    #[cfg(test)]
    pub(super) fn echo(correlation: u64) -> Self {
        Self {
            correlation,
            ticket: 0,
            workflow_id: CompactString::default(),
            ordinal: 0,
            run_id: None,
            outcome: ActivityOutcome::Success(correlation.to_string().into()),
        }
    }

    /// The reply's response, lent.
    pub(super) fn response(&self) -> ResponseRef<'_> {
        ResponseRef {
            workflow_id: &self.workflow_id,
            ordinal: self.ordinal,
            run_id: self.run_id.as_deref(),
            outcome: self.outcome.view(),
        }
    }
}

/// Runs the handler on the pushed request, turning a panic into a failure, and tags the
/// answer with the push's correlation and the runner's `ticket`. A version-2 push comes with
/// no extras.
///
/// Takes the push boxed, as it was decoded: a future's arguments live in it beside its later
/// state, so a request passed unboxed would be held twice.
pub(super) async fn run_handler<H: Handler>(
    handler: Arc<H>,
    ticket: Ticket,
    push: Box<Push<Compact>>,
    heartbeat: Heartbeat,
) -> Answered {
    let Push {
        correlation,
        request,
        extras,
    } = *push;
    let workflow_id = request.workflow_id.clone();
    let ordinal = request.ordinal;
    let run_id = request.run_id.clone();
    // Fires the request's signal when this future ends: answered, or dropped by a cancel or
    // the drain's grace.
    let token = CancellationToken::new();
    let _fire = token.clone().drop_guard();
    let cancel = CancelSignal::new(token, request.deadline_unix_ms);
    let request = Request::pushed(request, cancel, heartbeat);
    let outcome = AssertUnwindSafe(handler.handle_with(request, extras))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| ActivityOutcome::Failure {
            message: format!("handler panicked: {}", panic_message(panic.as_ref())),
            retryable: false,
        });
    Answered {
        correlation,
        ticket,
        workflow_id,
        ordinal,
        run_id,
        outcome,
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}
