//! One dispatch from admission to its outcome, and the one place every dispatch ends.
//!
//! A flight is answered exactly once, by [`Flight::finish`], which counts the outcome and hands
//! it to the caller's source. Once pushed, which of reply, deadline, cancel and link loss ends
//! it is decided by the worker link's table; the flight keeps the worker slot until the worker
//! lets go of the push (replies, even late, or its connection closes, or a grace runs out).
//! A relayed flight holds its charge against the peer until the peer answers or the link dies.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use lintel_wire::{
    ActivityOutcome, DispatchResponse, DispatchResult, ExtrasRef, ResponseRef, ResultRef,
};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::activity::Active;
use super::caller::Caller;
use super::counters::DispatchCounters;
use crate::link::{End, Entry, PeerLink, Release, RemoteSlot, ToWorker, Unanswered, WorkerLink};
use crate::pool_metrics::PoolMeter;
use crate::registry::{Reservation, WorkerId};

/// What a flight holds while it runs: a local worker's slot or a charge against a peer.
#[derive(Debug)]
pub(crate) enum Slot {
    Local(Reservation),
    /// Held for its drop, which takes the charge back.
    Remote(#[allow(dead_code)] RemoteSlot),
}

/// The link a flight's push or relay went out on.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Worker(WorkerLink),
    Peer(PeerLink),
}

impl Target {
    fn end(&self, correlation: u64) -> End {
        match self {
            Target::Worker(link) => link.end(correlation),
            Target::Peer(link) => link.end(correlation),
        }
    }
}

/// Where a flight's push went.
#[derive(Debug, Clone)]
struct PushedTo {
    target: Target,
    correlation: u64,
}

#[derive(Debug, Default)]
struct State {
    /// Taken by the finish; `None` once the outcome went out.
    caller: Option<(Caller, Active)>,
    pushed: Option<PushedTo>,
    /// When the first push or relay went out; the reply budget counts from it.
    first_pushed: Option<Instant>,
    /// The worker slot or peer charge, held from the push until the other side lets go.
    slot: Option<Slot>,
    /// The worker the slot is on.
    worker_id: Option<WorkerId>,
    /// Set while waiting for a worker: firing it ends the wait as cancelled.
    cancel_wait: Option<oneshot::Sender<()>>,
    /// A cancel came while the flight was between a wait and its push.
    cancel_pending: bool,
    /// The reply deadline passed while a relay was being placed again.
    expire_pending: bool,
    /// Fired by the finish, for a task that must stop watching a waiting-path flight.
    done: Option<oneshot::Sender<()>>,
    /// The push's heartbeat timeout and when the worker last said it runs.
    heartbeat: Option<Heartbeat>,
    /// The caller wants the dispatch's progress.
    progress_wanted: bool,
    /// When the current second of passing progress on began, and how many were passed.
    passed: Option<(Instant, u32)>,
    /// Where the outcome is counted per pool: taken from the slot's pool, or claimed for the
    /// request's pool once admitted.
    meter: Option<Arc<PoolMeter>>,
}

#[derive(Debug)]
struct Heartbeat {
    timeout: Duration,
    last: Instant,
    /// Cancelled when the dispatch ends, so its timer task ends with it.
    ended: CancellationToken,
}

/// Most `Progress` of one push passed on to its caller per second; the rest are dropped and
/// counted (each still restarts the heartbeat timer).
pub const PROGRESS_PER_SECOND: u32 = 10;

/// What a dispatch's debug line names beside its outcome: the pool's channel name and the
/// trace id of its `traceparent` header, if it has a valid one.
#[derive(Debug)]
pub(super) struct Logged {
    pub(super) channel: String,
    pub(super) trace_id: Option<String>,
}

/// One dispatch in progress. Shared by its source and, once pushed, by the worker's link.
#[derive(Debug)]
pub(crate) struct Flight {
    counters: Arc<DispatchCounters>,
    /// When the dispatch was admitted.
    started: Instant,
    /// What its debug line names, kept only while debug logging is on.
    logged: Option<Box<Logged>>,
    max_payload: usize,
    reply_timeout: Duration,
    state: Mutex<State>,
}

impl Flight {
    pub(super) fn new(
        counters: Arc<DispatchCounters>,
        logged: Option<Box<Logged>>,
        caller: Caller,
        active: Active,
        reply_timeout: Duration,
        max_payload: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            counters,
            started: Instant::now(),
            logged,
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
    pub(crate) fn finish(&self, result: ResultRef<'_>) {
        self.finish_served(result, None);
    }

    /// As [`Flight::finish`], naming the peer that served the dispatch.
    pub(super) fn finish_served(&self, result: ResultRef<'_>, served_by: Option<&str>) {
        let (caller, done, meter, first_pushed) = {
            let mut state = self.state();
            if let Some(beat) = state.heartbeat.take() {
                beat.ended.cancel();
            }
            let meter = state.meter.take();
            (
                state.caller.take(),
                state.done.take(),
                meter,
                state.first_pushed,
            )
        };
        let Some((caller, active)) = caller else {
            debug_assert!(false, "a dispatch was finished twice");
            return;
        };
        let class = self.counters.ended(&result);
        let now = Instant::now();
        self.counters
            .took(now.saturating_duration_since(self.started));
        if let Some(meter) = meter {
            meter.ended(class);
            if let (DispatchResult::Completed(_), Some(at)) = (&result, first_pushed) {
                meter.replied(now.saturating_duration_since(at));
            }
        }
        if !matches!(result, DispatchResult::Completed(_)) {
            let logged = self.logged.as_deref();
            tracing::debug!(
                correlation = caller.correlation(),
                channel = logged.map_or("", |logged| logged.channel.as_str()),
                trace_id = logged
                    .and_then(|logged| logged.trace_id.as_deref())
                    .unwrap_or_default(),
                outcome = super::outcome::class(&result),
                served_by = served_by.unwrap_or_default(),
                "dispatch ended"
            );
        }
        caller.deliver(result, served_by);
        drop(active);
        if let Some(done) = done {
            let _ = done.send(());
        }
    }

    /// How long the worker has to reply once the push is queued.
    pub(crate) fn reply_timeout(&self) -> Duration {
        self.reply_timeout
    }

    /// When the dispatch was admitted.
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// What is left of the reply budget, which counts from the first push or relay.
    pub(super) fn budget_left(&self) -> Duration {
        match self.state().first_pushed {
            Some(at) => self.reply_timeout.saturating_sub(at.elapsed()),
            None => self.reply_timeout,
        }
    }

    /// Ends the dispatch as timed out, unless something else ended it first. A relayed flight
    /// hears this only as the origin's backstop: the serving node's timer runs inside it.
    pub(crate) fn expire(&self) {
        let worker_id = {
            let mut state = self.state();
            if state.pushed.is_none() {
                // Between two placements of a relay: the next push applies it.
                if state.first_pushed.is_some() && state.caller.is_some() {
                    state.expire_pending = true;
                }
                return;
            }
            state.worker_id.unwrap_or_default()
        };
        let after_ms = u64::try_from(self.reply_timeout.as_millis()).unwrap_or(u64::MAX);
        self.end(DispatchResult::Timeout {
            worker_id,
            after_ms,
        });
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

    /// Ends the dispatch because the node is shutting down: a pushed one as `ShutDown` (it may
    /// have run), any other as cancelled.
    pub(crate) fn abandon(&self) {
        let after = {
            let state = self.state();
            if state.caller.is_none() {
                return;
            }
            state.pushed.as_ref().and(state.first_pushed)
        };
        match after {
            Some(at) => {
                let after_ms = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.end(DispatchResult::ShutDown { after_ms });
            }
            None => self.cancel(),
        }
    }

    /// Ends a pushed dispatch with `result` if the link decides this end came first.
    fn end(&self, result: ResultRef<'_>) {
        let Some(to) = self.state().pushed.clone() else {
            return;
        };
        match to.target.end(to.correlation) {
            End::Ended | End::Unsent => self.finish(result),
            End::TooLate => {}
        }
    }

    /// Notes what the request's `extras` ask while it runs: its progress passed on when
    /// wanted, and for a push to a worker (`heartbeat`) a heartbeat timer, which ends the
    /// dispatch `HeartbeatTimeout` when no progress came within the request's timeout.
    pub(super) fn watch(self: &Arc<Self>, extras: &ExtrasRef<'_>, heartbeat: bool) {
        if extras.is_none() {
            return;
        }
        let extras = extras.read();
        let timeout = heartbeat
            .then(|| extras.heartbeat_timeout().ok().flatten())
            .flatten();
        let ended = {
            let mut state = self.state();
            if state.caller.is_none() {
                return;
            }
            state.progress_wanted = extras.progress();
            timeout.map(|timeout| {
                let ended = CancellationToken::new();
                state.heartbeat = Some(Heartbeat {
                    timeout,
                    last: Instant::now(),
                    ended: ended.clone(),
                });
                ended
            })
        };
        if let Some(ended) = ended {
            self.spawn_heartbeat(ended);
        }
    }

    /// Runs the heartbeat timer until the dispatch ends (`ended`): it wakes when the latest
    /// progress plus the timeout is due, and holds no strong reference meanwhile.
    fn spawn_heartbeat(self: &Arc<Self>, ended: CancellationToken) {
        let flight = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let due = {
                    let Some(flight) = flight.upgrade() else {
                        return;
                    };
                    let state = flight.state();
                    match (&state.caller, &state.heartbeat) {
                        (Some(_), Some(beat)) => beat.last + beat.timeout,
                        _ => return,
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep_until(due) => {}
                    () = ended.cancelled() => return,
                }
                let Some(flight) = flight.upgrade() else {
                    return;
                };
                if flight.heartbeat_lapsed() {
                    return;
                }
            }
        });
    }

    /// Ends the dispatch `HeartbeatTimeout` when no progress came within its heartbeat
    /// timeout; false while one did, and the timer runs on.
    fn heartbeat_lapsed(&self) -> bool {
        let (worker_id, after) = {
            let state = self.state();
            let beat = match (&state.caller, &state.heartbeat) {
                (Some(_), Some(beat)) => beat,
                _ => return true,
            };
            if beat.last + beat.timeout > Instant::now() {
                return false;
            }
            if let Some(PushedTo {
                target: Target::Worker(link),
                ..
            }) = &state.pushed
            {
                if link.is_parked() {
                    // The session waits for a resume, and its heartbeats with it.
                    drop(state);
                    self.beat();
                    return false;
                }
            }
            let after = state.first_pushed.map(|at| at.elapsed());
            (state.worker_id.unwrap_or_default(), after)
        };
        let after_ms = after.map_or(0, |after| {
            u64::try_from(after.as_millis()).unwrap_or(u64::MAX)
        });
        self.end(DispatchResult::HeartbeatTimeout {
            worker_id,
            after_ms,
        });
        true
    }

    /// Restarts the heartbeat timer.
    fn beat(&self) {
        if let Some(beat) = self.state().heartbeat.as_mut() {
            beat.last = Instant::now();
        }
    }

    /// The worker says the dispatch still runs: restarts its heartbeat timer, and passes
    /// `details` on to a caller that wants them, at most [`PROGRESS_PER_SECOND`] a second.
    /// Passed on under the state's lock, so no progress follows the outcome.
    pub(crate) fn progressed(&self, details: &Bytes) {
        let mut state = self.state();
        if state.caller.is_none() {
            return;
        }
        let now = Instant::now();
        if let Some(beat) = state.heartbeat.as_mut() {
            beat.last = now;
        }
        if !state.progress_wanted {
            return;
        }
        let passed = match state.passed {
            Some((since, passed)) if now.duration_since(since) < Duration::from_secs(1) => {
                (since, passed)
            }
            _ => (now, 0),
        };
        if passed.1 >= PROGRESS_PER_SECOND {
            drop(state);
            self.counters.progress_dropped();
            return;
        }
        state.passed = Some((passed.0, passed.1 + 1));
        if let Some((caller, _)) = state.caller.as_ref() {
            caller.progress(details);
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
    pub(super) fn arm(&self, mut slot: Slot) {
        let mut state = self.state();
        if let Slot::Local(reservation) = &mut slot {
            state.worker_id = Some(reservation.worker_id());
            if state.meter.is_none() {
                state.meter = reservation.take_meter();
            }
        }
        state.slot = Some(slot);
        state.cancel_wait = None;
    }

    /// Counts the outcome in the pool `meter` gives, unless the flight has a pool's meter or
    /// ended already. `meter` runs under the flight's lock; it may take the meters' lock, a leaf.
    pub(super) fn count_in(&self, meter: impl FnOnce() -> Arc<PoolMeter>) {
        let mut state = self.state();
        if state.meter.is_none() && state.caller.is_some() {
            state.meter = Some(meter());
        }
    }

    /// Hands back the slot of a push that never left.
    pub(super) fn disarm(&self) {
        self.free_slot();
    }

    /// Notes where the push went; a cancel or deadline that came meanwhile is applied now.
    pub(super) fn pushed(&self, target: Target, correlation: u64) {
        let (cancel, expire) = {
            let mut state = self.state();
            state.pushed = Some(PushedTo {
                target,
                correlation,
            });
            state.first_pushed.get_or_insert_with(Instant::now);
            (
                std::mem::take(&mut state.cancel_pending),
                std::mem::take(&mut state.expire_pending),
            )
        };
        self.counters.pushed();
        if cancel {
            self.end(DispatchResult::Cancelled);
        } else if expire {
            self.expire();
        }
    }

    /// Notes that the relay now awaits its outcome on `target`, as `correlation`: a link that
    /// replaced a cut one to the same peer took it over.
    pub(super) fn moved(&self, target: Target, correlation: u64) {
        let mut state = self.state();
        if state.pushed.is_some() {
            state.pushed = Some(PushedTo {
                target,
                correlation,
            });
        }
    }

    /// Takes back a relay whose serving node ran nothing, so the dispatch can be placed
    /// again; false when the dispatch already ended.
    pub(super) fn unpush(&self) -> bool {
        let slot = {
            let mut state = self.state();
            if state.caller.is_none() {
                return false;
            }
            state.pushed = None;
            state.slot.take()
        };
        drop(slot);
        true
    }

    /// Ends a relayed dispatch with the serving peer's outcome.
    pub(super) fn relay_answered(&self, result: ResultRef<'_>, peer: Arc<str>) {
        self.free_slot();
        match result {
            DispatchResult::Completed(response) => {
                self.complete(response, Some(&peer));
            }
            other => self.finish_served(other, Some(&peer)),
        }
    }

    /// Ends a relayed dispatch whose peer link died `after` the relay went out; this node
    /// decided the outcome, so it is the one named as serving it.
    pub(super) fn relay_lost(&self, peer: &str, after: Duration) {
        self.free_slot();
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        self.finish(DispatchResult::PeerLost { peer, after_ms });
    }

    /// Ends a relayed dispatch because this node shuts down.
    pub(super) fn relay_abandoned(&self) {
        self.shut_down();
    }

    /// Frees what the flight holds and ends it `ShutDown`, timed from its first push.
    fn shut_down(&self) {
        self.free_slot();
        let after = self.state().first_pushed.map(|at| at.elapsed());
        let after_ms = after.map_or(0, |after| {
            u64::try_from(after.as_millis()).unwrap_or(u64::MAX)
        });
        self.finish(DispatchResult::ShutDown { after_ms });
    }

    /// Lets go of the charge of a relay that had already ended.
    pub(super) fn relay_released(&self) {
        self.free_slot();
    }

    /// True once a cancel is waiting for the push to be applied.
    pub(super) fn cancel_pending(&self) -> bool {
        self.state().cancel_pending
    }

    /// The worker the dispatch was last given to.
    pub(crate) fn worker_id(&self) -> Option<WorkerId> {
        self.state().worker_id
    }

    /// The worker whose slot this flight holds now, if a local one.
    pub(crate) fn holds_slot_on(&self) -> Option<WorkerId> {
        match &self.state().slot {
            Some(Slot::Local(reservation)) => Some(reservation.worker_id()),
            _ => None,
        }
    }

    fn free_slot(&self) {
        let slot = self.state().slot.take();
        drop(slot);
    }

    /// Ends the dispatch with the response a worker or peer sent. One too large to travel on
    /// in an outcome becomes a non-retryable failure, so the producer still gets exactly one
    /// outcome.
    fn complete(&self, response: ResponseRef<'_>, served_by: Option<&str>) {
        let max = self.max_payload;
        let body = match &response.outcome {
            ActivityOutcome::Success(bytes) => bytes.len(),
            ActivityOutcome::Failure { message, .. } => message.len(),
        };
        let carried = body + response.workflow_id.len() + response.run_id.map_or(0, str::len);
        if carried <= max {
            self.finish_served(DispatchResult::Completed(response), served_by);
            return;
        }
        let message = format!("reply of {carried} bytes exceeds the {max} an outcome can carry");
        let failed = DispatchResponse {
            workflow_id: response.workflow_id,
            ordinal: response.ordinal,
            run_id: response.run_id,
            outcome: ActivityOutcome::Failure {
                message: message.as_str(),
                retryable: false,
            },
        };
        self.finish_served(DispatchResult::Completed(failed), served_by);
    }
}

impl Entry<ToWorker> for Flight {
    fn answered(&self, response: ResponseRef<'_>) {
        self.free_slot();
        self.complete(response, None);
    }

    fn unanswered(&self, why: Unanswered) {
        match why {
            // A worker link is never closed as unhandled; were it, the worker may have run it.
            Unanswered::Lost | Unanswered::Unhandled => {
                self.free_slot();
                let worker_id = self.worker_id().unwrap_or_default();
                self.finish(DispatchResult::WorkerLost { worker_id });
            }
            Unanswered::Abandoned => self.shut_down(),
        }
    }

    fn progress(&self, details: &Bytes) {
        self.progressed(details);
    }

    fn resumed(&self) {
        self.beat();
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
