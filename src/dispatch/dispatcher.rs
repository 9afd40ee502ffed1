//! The one dispatcher behind every source: admission, selection, push, and the wait for a
//! worker, each dispatch ending through [`Flight::finish`].
//!
//! A source (the in-process API, a producer connection, next a peer link) hands in a request
//! with a [`Caller`] saying where the outcome goes, and watches the reply deadline of what was
//! pushed; nothing else differs between sources.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{DispatchRequest, DispatchResult, RefusedDispatch, RefusedReason};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::activity::{Active, Activity};
use super::admission::{validate, DispatchLimits};
use super::caller::{Caller, Oneshot};
use super::counters::DispatchCounters;
use super::flight::Flight;
use crate::link::PushError;
use crate::registry::{normalize_task_queue, Address, Registry, Reservation, Wait};
use lintel_client::DispatchOptions;

/// Most workers one dispatch tries whose links turn out closed before it gives up as lost.
const MAX_CLOSED_LINKS: usize = 8;

/// Selects a worker, pushes, and ends every dispatch in one outcome.
#[derive(Debug)]
pub struct Dispatcher {
    registry: Arc<Registry>,
    counters: Arc<DispatchCounters>,
    limits: DispatchLimits,
    draining: CancellationToken,
    activity: Arc<Activity>,
}

/// How a dispatch handed to [`Dispatcher::start`] goes on.
#[derive(Debug)]
pub(crate) enum Started {
    /// It has its outcome already.
    Ended,
    /// It is on a worker; the source ends it at its reply deadline or on cancel.
    Pushed(Arc<Flight>),
    /// Nobody is free and it may wait: run [`Dispatcher::wait`].
    Waiting(Box<Waiting>),
}

/// A dispatch queued for a worker, with what it needs to push once it gets one.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) flight: Arc<Flight>,
    request: DispatchRequest,
    routing: lintel_wire::NodeRouting,
    wait: Box<Wait>,
    deadline: Instant,
    cancelled: oneshot::Receiver<()>,
    /// Fires when the flight ends, however it ends.
    done: Option<oneshot::Receiver<()>>,
}

impl Dispatcher {
    /// A dispatcher over `registry`.
    pub fn new(registry: Arc<Registry>, limits: DispatchLimits) -> Arc<Self> {
        Arc::new(Self {
            registry,
            counters: Arc::new(DispatchCounters::default()),
            limits,
            draining: CancellationToken::new(),
            activity: Arc::default(),
        })
    }

    /// The registry it selects from.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Dispatch totals.
    pub fn counters(&self) -> &Arc<DispatchCounters> {
        &self.counters
    }

    /// The bounds every dispatch is held to.
    pub fn limits(&self) -> &DispatchLimits {
        &self.limits
    }

    /// Stops taking work: workers leave selection, waiting and new dispatches end as draining.
    pub fn drain(&self) {
        self.registry.drain();
        self.draining.cancel();
    }

    /// True once [`Dispatcher::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Dispatches without an outcome yet.
    pub fn active(&self) -> usize {
        self.activity.count()
    }

    /// Resolves when every dispatch has its outcome.
    pub async fn wait_idle(&self) {
        self.activity.idle().await;
    }

    /// Dispatches `request` in-process. Dropping the future cancels it, on the worker too.
    pub async fn dispatch(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
    ) -> DispatchResult {
        self.dispatch_until(request, options, std::future::pending())
            .await
    }

    /// Dispatches `request`, ending it as cancelled when `cancel` fires.
    pub async fn dispatch_cancellable(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        cancel: &CancellationToken,
    ) -> DispatchResult {
        self.dispatch_until(request, options, cancel.cancelled())
            .await
    }

    /// Dispatches `request`, ending it as cancelled when `cancelled` resolves.
    pub async fn dispatch_until(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        cancelled: impl Future<Output = ()>,
    ) -> DispatchResult {
        let (caller, mut outcome) = Oneshot::caller();
        let mut watch = CancelOnDrop(None);
        tokio::pin!(cancelled);
        let pushed = match self.start(request, options, caller) {
            Started::Ended => None,
            Started::Pushed(flight) => Some(flight),
            Started::Waiting(waiting) => {
                watch.0 = Some(Arc::clone(&waiting.flight));
                let flight = Arc::clone(&waiting.flight);
                tokio::select! {
                    pushed = self.wait(waiting) => pushed,
                    () = &mut cancelled => {
                        flight.cancel();
                        None
                    }
                }
            }
        };
        if let Some(flight) = pushed {
            watch.0 = Some(Arc::clone(&flight));
            let deadline = Instant::now() + flight.reply_timeout();
            // Every branch is cancel-safe; whichever end loses is told "too late" by the link.
            tokio::select! {
                biased;
                result = &mut outcome => {
                    watch.0 = None;
                    return result.unwrap_or(DispatchResult::Cancelled);
                }
                () = &mut cancelled => flight.cancel(),
                () = tokio::time::sleep_until(deadline) => flight.expire(),
            }
        }
        let result = outcome.await;
        watch.0 = None;
        // The flight always finishes before its caller is dropped; this is the belt to that.
        result.unwrap_or(DispatchResult::Cancelled)
    }

    /// Ends a dispatch its source refused before admission (a duplicate id, the source's own
    /// in-flight bound), counting and answering it like any other.
    pub(crate) fn refuse(&self, caller: Caller, refused: RefusedDispatch) {
        self.counters.submitted();
        let flight = self.flight(caller, None, self.activity.enter());
        flight.finish(DispatchResult::Refused(refused));
    }

    /// The one admission: counts the dispatch, validates it, then reserves a worker free now
    /// and pushes, or queues it for one when it may wait, or ends it.
    pub(crate) fn start(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        caller: Caller,
    ) -> Started {
        self.counters.submitted();
        let active = self.activity.enter();
        let crowded = active.count() > self.limits.max_active;
        let flight = self.flight(caller, options.reply_timeout, active);
        if let Err(result) = self.admit(&request, options, crowded) {
            flight.finish(result);
            return Started::Ended;
        }
        let deadline = options.wait_for_worker.map(|wait| Instant::now() + wait);
        let mut request = request;
        for _ in 0..MAX_CLOSED_LINKS {
            let address = address_of(&request);
            let reservation = match deadline {
                None => match self.registry.select(address, &options.routing) {
                    Ok(reservation) => reservation,
                    Err(census) => {
                        flight.finish(DispatchResult::NoWorker(census));
                        return Started::Ended;
                    }
                },
                Some(deadline) => match self.registry.select_or_wait(address, &options.routing) {
                    Ok(reservation) => reservation,
                    Err(wait) => {
                        let cancelled = flight.watch_cancel();
                        let done = Some(flight.done_signal());
                        return Started::Waiting(Box::new(Waiting {
                            flight,
                            request,
                            routing: options.routing.clone(),
                            wait,
                            deadline,
                            cancelled,
                            done,
                        }));
                    }
                },
            };
            match self.push(&flight, request, reservation) {
                Push::Queued => return Started::Pushed(flight),
                Push::Ended => return Started::Ended,
                Push::Unsent(unsent) => request = *unsent,
            }
        }
        self.give_up_on_closed_links(&flight);
        Started::Ended
    }

    /// Waits for a worker for a dispatch [`Dispatcher::start`] queued, then pushes; returns
    /// the flight when pushed, for its source to watch. Cancelled through [`Flight::cancel`];
    /// dropping the future leaves the queue, and a later cancel ends the dispatch.
    pub(crate) async fn wait(&self, waiting: Box<Waiting>) -> Option<Arc<Flight>> {
        let Waiting {
            flight,
            mut request,
            routing,
            wait,
            deadline,
            mut cancelled,
            done: _,
        } = *waiting;
        let mut next: Result<Reservation, Box<Wait>> = Err(wait);
        for _ in 0..MAX_CLOSED_LINKS {
            let reservation = match next {
                Ok(reservation) => reservation,
                // Every branch is cancel-safe: a grant that lands as another branch wins stays
                // in the wait, and `give_up` returns it.
                Err(mut wait) => tokio::select! {
                    biased;
                    cancel = &mut cancelled => {
                        drop(wait);
                        if cancel.is_ok() {
                            flight.finish(DispatchResult::Cancelled);
                        }
                        return None;
                    }
                    () = self.draining.cancelled() => {
                        drop(wait);
                        flight.finish(DispatchResult::Draining);
                        return None;
                    }
                    granted = wait.granted() => match granted {
                        Some(reservation) => reservation,
                        None => {
                            let census = self.registry.census(address_of(&request), &routing);
                            flight.finish(DispatchResult::NoWorker(census));
                            return None;
                        }
                    },
                    () = tokio::time::sleep_until(deadline) => match wait.give_up() {
                        // A slot freed before the wait ran out is this waiter's.
                        Ok(reservation) => reservation,
                        Err(census) => {
                            flight.finish(DispatchResult::NoWorker(census));
                            return None;
                        }
                    },
                },
            };
            if flight.cancel_pending() {
                drop(reservation);
                flight.finish(DispatchResult::Cancelled);
                return None;
            }
            request = match self.push(&flight, request, reservation) {
                Push::Queued => return Some(flight),
                Push::Ended => return None,
                Push::Unsent(unsent) => *unsent,
            };
            // The worker's link closed before the push left: look again, in the same wait.
            cancelled = flight.watch_cancel();
            next = self.registry.select_or_wait(address_of(&request), &routing);
        }
        self.give_up_on_closed_links(&flight);
        None
    }

    /// Runs a queued dispatch to its end in a source's task: waits, pushes, then ends it at
    /// its reply deadline unless something ends it first.
    pub(crate) async fn wait_and_watch(&self, mut waiting: Box<Waiting>) {
        let done = waiting.done.take();
        let Some(flight) = self.wait(waiting).await else {
            return;
        };
        let deadline = Instant::now() + flight.reply_timeout();
        let Some(done) = done else {
            return;
        };
        tokio::select! {
            _ = done => {}
            () = tokio::time::sleep_until(deadline) => flight.expire(),
        }
    }

    /// Pushes on the reserved worker. A push that could not leave hands the request back,
    /// and its slot is freed; a full queue ends the dispatch as refused.
    fn push(
        &self,
        flight: &Arc<Flight>,
        request: DispatchRequest,
        reservation: Reservation,
    ) -> Push {
        let worker_id = reservation.worker_id();
        let Some(link) = reservation.link().cloned() else {
            return Push::Unsent(Box::new(request));
        };
        flight.arm(reservation);
        match link.push(request, Arc::clone(flight) as _) {
            Ok(correlation) => {
                flight.pushed(link, correlation);
                Push::Queued
            }
            Err((PushError::Closed, request)) => {
                flight.disarm();
                Push::Unsent(request)
            }
            Err((PushError::Backpressure, _)) => {
                flight.disarm();
                flight.finish(refused(
                    RefusedReason::WorkerBackpressure,
                    format!("worker {worker_id} outbound queue is full"),
                ));
                Push::Ended
            }
        }
    }

    fn give_up_on_closed_links(&self, flight: &Flight) {
        flight.finish(DispatchResult::WorkerLost {
            worker_id: flight.worker_id().unwrap_or_default(),
        });
    }

    fn flight(
        &self,
        caller: Caller,
        reply_timeout: Option<Duration>,
        active: Active,
    ) -> Arc<Flight> {
        let reply_timeout = reply_timeout.unwrap_or(self.limits.default_reply_timeout);
        Flight::new(
            Arc::clone(&self.counters),
            caller,
            active,
            reply_timeout,
            self.limits.max_payload(),
        )
    }

    /// Refuses a request that breaks a bound, or ends it when the node is draining.
    fn admit(
        &self,
        request: &DispatchRequest,
        options: &DispatchOptions,
        crowded: bool,
    ) -> Result<(), DispatchResult> {
        validate(request, options, &self.limits).map_err(DispatchResult::Refused)?;
        if self.is_draining() {
            return Err(DispatchResult::Draining);
        }
        if crowded {
            return Err(refused(
                RefusedReason::TooManyInFlight,
                format!(
                    "the node runs at most {} dispatches at once",
                    self.limits.max_active
                ),
            ));
        }
        Ok(())
    }
}

/// What became of one push attempt.
enum Push {
    /// On the worker's queue; its source now watches the reply deadline.
    Queued,
    /// The dispatch ended instead (the worker's queue was full).
    Ended,
    /// The worker's link closed before the push left: nothing reached it.
    Unsent(Box<DispatchRequest>),
}

/// Cancels a flight whose in-process caller went away before its outcome.
struct CancelOnDrop(Option<Arc<Flight>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flight) = self.0.take() {
            flight.cancel();
        }
    }
}

fn refused(reason: RefusedReason, detail: String) -> DispatchResult {
    DispatchResult::Refused(RefusedDispatch { reason, detail })
}

fn address_of(request: &DispatchRequest) -> Address<'_> {
    Address {
        namespace: &request.namespace,
        task_queue: normalize_task_queue(&request.task_queue),
        activity_type: &request.activity_type,
        node: request.node.as_deref(),
    }
}
