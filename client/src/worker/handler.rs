//! What runs a pushed request: the [`Handler`] trait, closures as handlers, and the panic guard.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use lintel_wire::{
    ActivityOutcome, Compact, CompactString, DispatchRequest, Push, RequestExtras, ResponseRef,
};

/// A pushed request as a handler gets it: its names are [`CompactString`]s (read as `str`;
/// up to 24 bytes held inline, not allocated), its input a [`bytes::Bytes`].
pub type Request = DispatchRequest<Compact>;

/// What a pushed request carries beside it (version 3): its headers, in order, and its
/// scheduling fields, names held as in a [`Request`]. Empty from a version-2 node.
pub type Extras = RequestExtras<Compact>;

/// Executes pushed requests. The runtime runs each request on a task of its own (or, for a
/// handler that [`runs_briefly`](Handler::runs_briefly), first on the connection's task) and drops
/// it when the node cancels the request, so a handler must tolerate being dropped at any `.await`.
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

/// What a handler answered to one push, with the identity its reply echoes.
pub(super) struct Answered {
    pub(super) correlation: u64,
    workflow_id: CompactString,
    ordinal: u64,
    run_id: Option<CompactString>,
    outcome: ActivityOutcome,
}

impl Answered {
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
/// answer with the push's correlation. A version-2 push comes with no extras.
///
/// Takes the push boxed, as it was decoded: a future's arguments live in it beside its later
/// state, so a request passed unboxed would be held twice.
pub(super) async fn run_handler<H: Handler>(handler: Arc<H>, push: Box<Push<Compact>>) -> Answered {
    let Push {
        correlation,
        request,
        extras,
    } = *push;
    let workflow_id = request.workflow_id.clone();
    let ordinal = request.ordinal;
    let run_id = request.run_id.clone();
    let outcome = AssertUnwindSafe(handler.handle_with(request, extras))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| ActivityOutcome::Failure {
            message: format!("handler panicked: {}", panic_message(panic.as_ref())),
            retryable: false,
        });
    Answered {
        correlation,
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
