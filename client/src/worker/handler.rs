//! What runs a pushed request: the [`Handler`] trait, closures as handlers, and the panic guard.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use lintel_wire::{ActivityOutcome, DispatchRequest, DispatchResponse, Push};

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

/// Runs the handler on the pushed request, turning a panic into a failure, and tags the
/// response with the push's correlation.
///
/// Takes the push boxed, as it was decoded: a future's arguments live in it beside its later
/// state, so a request passed unboxed would be held twice.
pub(super) async fn run_handler<H: Handler>(
    handler: Arc<H>,
    push: Box<Push>,
) -> (u64, DispatchResponse) {
    let Push {
        correlation,
        request,
    } = *push;
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
