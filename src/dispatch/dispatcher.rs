//! The one dispatcher behind the in-process API and producers' submissions.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lintel_client::DispatchOptions;
use lintel_wire::{
    ActivityOutcome, DispatchRequest, DispatchResponse, DispatchResult, RefusedDispatch,
    RefusedReason,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::activity::{Active, Activity};
use super::counters::DispatchCounters;
use super::link::{LinkClosed, PushError};
use crate::registry::{normalize_task_queue, Address, Registry, Reservation, Selection};

/// Bytes a push or outcome frame may add around its input or result; names are bounded,
/// so this covers the envelope with room to spare.
const FRAME_OVERHEAD: usize = 16 * 1024;

/// Bounds the dispatcher applies to every request.
#[derive(Debug, Clone, Copy)]
pub struct DispatchLimits {
    /// Reply timeout when a dispatch states none.
    pub default_reply_timeout: Duration,
    /// Longest namespace, task queue, activity type or node, in bytes.
    pub max_name_len: usize,
    /// Largest frame the node sends; a request must fit a push frame.
    pub max_frame_len: usize,
    /// Most dispatches running at once; more are refused with `TooManyInFlight`.
    pub max_active: usize,
}

/// Selects a worker, pushes, awaits the correlated reply; every dispatch ends in one result.
#[derive(Debug)]
pub struct Dispatcher {
    registry: Arc<Registry>,
    counters: Arc<DispatchCounters>,
    limits: DispatchLimits,
    draining: CancellationToken,
    activity: Arc<Activity>,
}

/// How a submission started by [`Dispatcher::start`] goes on.
#[derive(Debug)]
pub(crate) enum Started {
    /// A worker slot is reserved: push the request on its link.
    Reserved(Reserved),
    /// It ended before reaching a worker; already counted.
    Ended(DispatchResult),
    /// Nobody is free and it may wait: run it with [`Dispatcher::dispatch_until`].
    MustWait(DispatchRequest),
}

/// A submission holding a worker slot, not yet pushed.
#[derive(Debug)]
pub(crate) struct Reserved {
    pub(crate) request: DispatchRequest,
    pub(crate) reservation: Reservation,
    pub(crate) active: Active,
    pub(crate) reply_timeout: Duration,
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

    /// Outcome totals.
    pub fn counters(&self) -> &Arc<DispatchCounters> {
        &self.counters
    }

    /// Dispatches `request`. Dropping the future abandons it and cancels it on the worker.
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

    /// Stops taking work: workers leave selection, waiting and new dispatches end as draining.
    pub fn drain(&self) {
        self.registry.drain();
        self.draining.cancel();
    }

    /// True once [`Dispatcher::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Dispatches not yet ended.
    pub fn active(&self) -> usize {
        self.activity.count()
    }

    /// Resolves when no dispatch is active.
    pub async fn wait_idle(&self) {
        self.activity.idle().await;
    }

    /// Dispatches `request`, ending it as cancelled when `cancelled` resolves.
    pub async fn dispatch_until(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        cancelled: impl Future<Output = ()>,
    ) -> DispatchResult {
        let active = self.activity.enter();
        self.counters.started();
        let result = if active.count() > self.limits.max_active {
            self.too_busy()
        } else {
            self.select_and_push(request, options, cancelled).await
        };
        self.counters.ended(&result);
        result
    }

    async fn select_and_push(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        cancelled: impl Future<Output = ()>,
    ) -> DispatchResult {
        tokio::pin!(cancelled);
        if let Err(result) = self.admit(&request) {
            return result;
        }
        let address = address_of(&request);
        let deadline = options.wait_for_worker.map(|wait| Instant::now() + wait);
        // Subscribe before looking, so a wake between the miss and the park is kept.
        let mut wake = deadline.map(|_| self.registry.subscribe());
        let mut park = None;
        let reservation = loop {
            let want_park = wake.is_some() && park.is_none();
            match self.registry.select(address, &options.routing, want_park) {
                Selection::Reserved(reservation) => break reservation,
                Selection::Miss {
                    census,
                    park: parked,
                } => {
                    park = park.or(parked);
                    let (Some(deadline), Some(wake)) = (deadline, wake.as_mut()) else {
                        return DispatchResult::NoWorker(census);
                    };
                    // All branches are cancel-safe: `changed` only marks the epoch seen.
                    tokio::select! {
                        biased;
                        () = &mut cancelled => return DispatchResult::Cancelled,
                        () = self.draining.cancelled() => return DispatchResult::Draining,
                        changed = wake.changed() => if changed.is_err() {
                            return DispatchResult::NoWorker(census);
                        },
                        () = tokio::time::sleep_until(deadline) => {
                            return DispatchResult::NoWorker(
                                self.registry.census(address, &options.routing),
                            );
                        }
                    }
                }
            }
        };
        drop(park);
        let worker_id = reservation.worker_id();
        let mut pending = match reservation.link().push(request) {
            Ok(pending) => pending,
            Err(PushError::Backpressure) => {
                return refused(
                    RefusedReason::WorkerBackpressure,
                    format!("worker {worker_id} outbound queue is full"),
                );
            }
            Err(PushError::Closed) => return DispatchResult::WorkerLost { worker_id },
        };
        let timeout = self.reply_timeout(options);
        // `recv` is cancel-safe; losing the race drops `pending`, which cancels on the worker.
        tokio::select! {
            biased;
            reply = pending.recv() => match reply {
                Ok(response) => DispatchResult::Completed(self.fit(response)),
                Err(LinkClosed) => DispatchResult::WorkerLost { worker_id },
            },
            () = &mut cancelled => DispatchResult::Cancelled,
            () = tokio::time::sleep(timeout) => DispatchResult::Timeout {
                worker_id,
                after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            },
        }
    }

    /// Starts a submission without waiting: reserves a worker free now, or ends it at once.
    /// Counts it, except when handed back to wait, where [`Dispatcher::dispatch_until`] does.
    pub(crate) fn start(&self, request: DispatchRequest, options: &DispatchOptions) -> Started {
        let active = self.activity.enter();
        let ended = |result: DispatchResult| {
            self.counters.started();
            self.counters.ended(&result);
            Started::Ended(result)
        };
        if active.count() > self.limits.max_active {
            return ended(self.too_busy());
        }
        if let Err(result) = self.admit(&request) {
            return ended(result);
        }
        match self
            .registry
            .select(address_of(&request), &options.routing, false)
        {
            Selection::Reserved(reservation) => {
                self.counters.started();
                Started::Reserved(Reserved {
                    request,
                    reservation,
                    active,
                    reply_timeout: self.reply_timeout(options),
                })
            }
            Selection::Miss { .. } if options.wait_for_worker.is_some() => {
                Started::MustWait(request)
            }
            Selection::Miss { census, .. } => ended(DispatchResult::NoWorker(census)),
        }
    }

    /// The reply timeout `options` ask for, or the node's default.
    fn reply_timeout(&self, options: &DispatchOptions) -> Duration {
        options
            .reply_timeout
            .unwrap_or(self.limits.default_reply_timeout)
    }

    fn too_busy(&self) -> DispatchResult {
        refused(
            RefusedReason::TooManyInFlight,
            format!(
                "the node runs at most {} dispatches at once",
                self.limits.max_active
            ),
        )
    }

    /// Ends a request that is malformed or arrives while draining.
    fn admit(&self, request: &DispatchRequest) -> Result<(), DispatchResult> {
        if let Err(detail) = self.check(request) {
            return Err(refused(RefusedReason::InvalidRequest, detail));
        }
        if self.is_draining() {
            return Err(DispatchResult::Draining);
        }
        Ok(())
    }

    fn check(&self, request: &DispatchRequest) -> Result<(), String> {
        let max = self.limits.max_name_len;
        if request.namespace.is_empty() {
            return Err("empty namespace".into());
        }
        if request.activity_type.is_empty() {
            return Err("empty activity type".into());
        }
        let bounded = [
            ("namespace", request.namespace.as_str()),
            ("task queue", request.task_queue.as_str()),
            ("activity type", request.activity_type.as_str()),
            ("node", request.node.as_deref().unwrap_or_default()),
        ];
        for (what, value) in bounded {
            if value.len() > max {
                return Err(format!("{what} is longer than {max} bytes"));
            }
        }
        let max = self.max_payload();
        let carried = request.input.len()
            + request.workflow_id.len()
            + request.run_id.as_deref().map_or(0, str::len);
        if carried > max {
            return Err(format!(
                "input and ids of {carried} bytes exceed the {max} a push can carry"
            ));
        }
        Ok(())
    }
}

impl Dispatcher {
    /// Largest input or result a frame carries with room for its envelope.
    fn max_payload(&self) -> usize {
        self.limits.max_frame_len.saturating_sub(FRAME_OVERHEAD)
    }

    /// A result too large to travel on in an outcome becomes a non-retryable failure,
    /// so the producer still gets exactly one outcome.
    pub(crate) fn fit(&self, mut response: DispatchResponse) -> DispatchResponse {
        let max = self.max_payload();
        let body = match &response.outcome {
            ActivityOutcome::Success(bytes) => bytes.len(),
            ActivityOutcome::Failure { message, .. } => message.len(),
        };
        let carried =
            body + response.workflow_id.len() + response.run_id.as_deref().map_or(0, str::len);
        if carried > max {
            let message =
                format!("reply of {carried} bytes exceeds the {max} an outcome can carry");
            response.outcome = ActivityOutcome::Failure {
                message,
                retryable: false,
            };
        }
        response
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
