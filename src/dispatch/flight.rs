//! One dispatch from admission to its outcome, and the one place every dispatch ends.
//!
//! A flight is answered exactly once, by [`Flight::finish`], which counts the outcome and hands
//! it to the caller's source. Once pushed, which of reply, deadline, cancel and link loss ends
//! it is decided by the worker link's table; the flight keeps the worker slot until the worker
//! lets go of the push (replies, even late, or its connection closes, or a grace runs out).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lintel_wire::{ActivityOutcome, DispatchResponse, DispatchResult};
use tokio::sync::oneshot;

use super::activity::Active;
use super::caller::Caller;
use super::counters::DispatchCounters;
use crate::link::{End, PushEntry, Release, WorkerLink};
use crate::registry::{Reservation, WorkerId};

/// Where a flight's push went.
#[derive(Debug, Clone)]
struct PushedTo {
    link: WorkerLink,
    correlation: u64,
}

#[derive(Debug, Default)]
struct State {
    /// Taken by the finish; `None` once the outcome went out.
    caller: Option<(Caller, Active)>,
    pushed: Option<PushedTo>,
    /// The worker slot, held from the push until the worker lets go of it.
    slot: Option<Reservation>,
    /// The worker the slot is on.
    worker_id: Option<WorkerId>,
    /// Set while waiting for a worker: firing it ends the wait as cancelled.
    cancel_wait: Option<oneshot::Sender<()>>,
    /// A cancel came while the flight was between a wait and its push.
    cancel_pending: bool,
    /// Fired by the finish, for a task that must stop watching a waiting-path flight.
    done: Option<oneshot::Sender<()>>,
}

/// One dispatch in progress. Shared by its source and, once pushed, by the worker's link.
#[derive(Debug)]
pub(crate) struct Flight {
    counters: Arc<DispatchCounters>,
    max_payload: usize,
    reply_timeout: Duration,
    state: Mutex<State>,
}

impl Flight {
    pub(super) fn new(
        counters: Arc<DispatchCounters>,
        caller: Caller,
        active: Active,
        reply_timeout: Duration,
        max_payload: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            counters,
            max_payload,
            reply_timeout,
            state: Mutex::new(State {
                caller: Some((caller, active)),
                ..State::default()
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before anything that could panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ends the dispatch with `result`: counts it and delivers it. The only place a dispatch
    /// ends; a second call is a no-op.
    pub(crate) fn finish(&self, result: DispatchResult) {
        let (caller, done) = {
            let mut state = self.state();
            (state.caller.take(), state.done.take())
        };
        let Some((caller, active)) = caller else {
            debug_assert!(false, "a dispatch was finished twice");
            return;
        };
        self.counters.ended(&result);
        caller.deliver(result);
        drop(active);
        if let Some(done) = done {
            let _ = done.send(());
        }
    }

    /// How long the worker has to reply once the push is queued.
    pub(crate) fn reply_timeout(&self) -> Duration {
        self.reply_timeout
    }

    /// Ends the dispatch as timed out, unless something else ended it first.
    pub(crate) fn expire(&self) {
        let worker_id = {
            let state = self.state();
            state.pushed.as_ref().and(state.worker_id)
        };
        if let Some(worker_id) = worker_id {
            let after_ms = u64::try_from(self.reply_timeout.as_millis()).unwrap_or(u64::MAX);
            self.end(DispatchResult::Timeout {
                worker_id,
                after_ms,
            });
        }
    }

    /// Ends the dispatch as cancelled, wherever it is, unless something else ended it first.
    pub(crate) fn cancel(&self) {
        let trigger = {
            let mut state = self.state();
            if state.caller.is_none() {
                return;
            }
            if state.pushed.is_none() {
                match state.cancel_wait.take() {
                    Some(trigger) => Some(trigger),
                    None => {
                        // Between a wait and its push: the push applies it.
                        state.cancel_pending = true;
                        return;
                    }
                }
            } else {
                None
            }
        };
        match trigger {
            // Nobody waits any more: the waiting future is gone, so end it here.
            Some(trigger) => {
                if trigger.send(()).is_err() {
                    self.finish(DispatchResult::Cancelled);
                }
            }
            None => self.end(DispatchResult::Cancelled),
        }
    }

    /// Ends a pushed dispatch with `result` if the link decides this end came first.
    fn end(&self, result: DispatchResult) {
        let Some(to) = self.state().pushed.clone() else {
            return;
        };
        match to.link.end(to.correlation) {
            End::Ended | End::Unsent => self.finish(result),
            End::TooLate => {}
        }
    }

    /// Arms the trigger that cancels a wait.
    pub(super) fn watch_cancel(&self) -> oneshot::Receiver<()> {
        let (cancel, cancelled) = oneshot::channel();
        self.state().cancel_wait = Some(cancel);
        cancelled
    }

    /// A signal that fires when the flight ends, for a task watching it from a wait.
    pub(super) fn done_signal(&self) -> oneshot::Receiver<()> {
        let (done_tx, done) = oneshot::channel();
        self.state().done = Some(done_tx);
        done
    }

    /// Takes the slot a push is about to use, before the push can be answered; a wait can no
    /// longer be cancelled through its trigger, so a cancel from now on waits for the push.
    pub(super) fn arm(&self, slot: Reservation) {
        let mut state = self.state();
        state.worker_id = Some(slot.worker_id());
        state.slot = Some(slot);
        state.cancel_wait = None;
    }

    /// Hands back the slot of a push that never left.
    pub(super) fn disarm(&self) {
        self.free_slot();
    }

    /// Notes where the push went; a cancel that came meanwhile is applied now.
    pub(super) fn pushed(&self, link: WorkerLink, correlation: u64) {
        let cancel = {
            let mut state = self.state();
            state.pushed = Some(PushedTo { link, correlation });
            std::mem::take(&mut state.cancel_pending)
        };
        self.counters.pushed();
        if cancel {
            self.end(DispatchResult::Cancelled);
        }
    }

    /// True once a cancel is waiting for the push to be applied.
    pub(super) fn cancel_pending(&self) -> bool {
        self.state().cancel_pending
    }

    /// The worker the dispatch was last given to.
    pub(crate) fn worker_id(&self) -> Option<WorkerId> {
        self.state().worker_id
    }

    fn free_slot(&self) {
        let slot = self.state().slot.take();
        drop(slot);
    }

    /// A result too large to travel on in an outcome becomes a non-retryable failure, so the
    /// producer still gets exactly one outcome.
    fn fit(&self, mut response: DispatchResponse) -> DispatchResponse {
        let max = self.max_payload;
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

impl PushEntry for Flight {
    fn replied(&self, response: DispatchResponse) {
        self.free_slot();
        let response = self.fit(response);
        self.finish(DispatchResult::Completed(response));
    }

    fn lost(&self) {
        self.free_slot();
        let worker_id = self.worker_id().unwrap_or_default();
        self.finish(DispatchResult::WorkerLost { worker_id });
    }

    fn released(&self, why: Release) {
        self.free_slot();
        match why {
            Release::LateReply => self.counters.late_reply(),
            Release::GraceExpired => self.counters.slot_reclaimed(),
            Release::LinkClosed | Release::NeverSent => {}
        }
    }
}
