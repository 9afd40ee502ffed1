//! A connection's dispatches in flight, a producer's submissions or a peer's relays: their
//! correlation ids, their reply deadlines, and the outcome frames owed.
//!
//! A dispatch a free worker can take is pushed from the connection's reader and answered from
//! the worker's reader, with no task or timer of its own: reply deadlines sit in one heap the
//! connection's timer walks. One that waits for a worker runs in a task until it is pushed and
//! answered. Outcomes come back through [`Sink::deliver`], once per dispatch.
//!
//! Each dispatch started here holds a token of [`Flights::settled`] from its start until its
//! outcome is queued, not merely decided: an outcome decided on another task cannot be
//! overtaken by a last frame sent once `settled` resolves.

use std::cmp::Reverse;
use std::collections::{hash_map, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lintel_wire::{
    DispatchResult, ExtrasRef, Frame, FrameRef, OutcomeFrame, Progress, RefusedDispatch,
    RefusedReason, RelayOutcome, RelayRef, RequestRef, ResultRef, RoutingRef, ServedOutcome,
    SubmitRef,
};
use tokio::time::Instant;
use tokio_util::task::task_tracker::{TaskTracker, TaskTrackerToken};

use crate::auth::Grant;
use crate::dispatch::{asked, Caller, Dispatcher, Flight, Options, Sink, Started, Tag};
use crate::idmap::KeyedMap;
use crate::link::Pair;
use crate::registry::{FairnessRef, WorkerId};
use lintel_transport::{Outbound, SendError};

/// Longest a serving node's reply timer runs inside a relay's budget, so that its `Timeout`
/// reaches the origin before the origin's own backstop fires.
const RELAY_MARGIN: Duration = Duration::from_millis(50);

/// Who the outcomes go to, which fixes their frame.
#[derive(Debug, Clone)]
pub(super) enum Recipient {
    /// A producer that negotiated `version`; `node_id` names this node in served outcomes.
    Producer { version: u16, node_id: Arc<str> },
    /// A peer that relayed its dispatches here; each outcome is kept in `kept` until the peer
    /// acknowledges it, and sent on the link that took these dispatches over last (see
    /// [`Flights::take_over`]), when links resume.
    Peer { kept: Option<Arc<Pair>> },
}

/// Where a [`Flights`]' outcomes go.
enum Route {
    /// A producer's connection, for as long as it lives.
    Connection(Outbound),
    /// A peer's: the link that took these dispatches over last (see [`Flights::take_over`]);
    /// a link given up is not held.
    LatestLink(Mutex<Outbound>),
}

/// Stale deadlines, of submissions already ended, allowed beyond the live ones before the
/// heap is rebuilt.
const STALE_DEADLINE_SLACK: usize = 1024;

/// The submissions of one producer connection.
pub(super) struct Flights {
    dispatcher: Arc<Dispatcher>,
    /// Where outcomes go.
    route: Route,
    answer: Recipient,
    /// The namespaces these dispatches may use.
    grant: Grant,
    max_in_flight: usize,
    table: Mutex<Table>,
    /// The producer left: nothing more is sent to it.
    closed: AtomicBool,
    /// Input bytes of the dispatches in flight, held until each one's outcome: the
    /// connection reads no more while these plus its queue are over its byte budget.
    held_input: AtomicUsize,
    /// Wakes the connection when an outcome let go of input bytes.
    relieved: tokio::sync::Notify,
    /// Waiting-path tasks still running, and a token per dispatch whose outcome is not queued.
    tasks: TaskTracker,
}

#[derive(Default)]
struct Table {
    /// Keyed by the producer's own correlation ids.
    flights: KeyedMap<u64, Tracked>,
    /// `(deadline, correlation, ticket)` of pushed submissions, earliest first; entries of
    /// ended ones are skipped when met.
    deadlines: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    next_ticket: u64,
}

struct Tracked {
    ticket: u64,
    /// Input bytes counted in [`Flights::held_input`] until the outcome.
    input: usize,
    /// The reply deadline of a submission pushed from the reader.
    deadline: Option<Instant>,
    /// `None` only while [`Flights::submit`] is starting it.
    flight: Option<Arc<Flight>>,
    /// Held until the outcome is queued, so [`Flights::settled`] waits for it.
    _owed: TaskTrackerToken,
}

impl Flights {
    /// Dispatches answered on `outbound` as `answer` says, at most `max_in_flight` at once.
    pub(super) fn new(
        dispatcher: Arc<Dispatcher>,
        outbound: Outbound,
        max_in_flight: usize,
        answer: Recipient,
        grant: Grant,
    ) -> Arc<Self> {
        Arc::new(Self {
            dispatcher,
            route: match answer {
                Recipient::Producer { .. } => Route::Connection(outbound),
                Recipient::Peer { .. } => Route::LatestLink(Mutex::new(outbound)),
            },
            answer,
            grant,
            max_in_flight,
            table: Mutex::new(Table::default()),
            closed: AtomicBool::new(false),
            held_input: AtomicUsize::new(0),
            relieved: tokio::sync::Notify::new(),
            tasks: TaskTracker::new(),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every update leaves the table consistent before it could panic.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts `submit`; returns the reply deadline it set, for the connection's timer.
    ///
    /// Never waits: outcomes are queued past the connection's bound, so the connection must
    /// stop reading while its queue is full.
    pub(super) fn submit(self: &Arc<Self>, submit: &SubmitRef<'_>) -> Option<Instant> {
        let options = Options::from_wire(
            submit.routing.reborrow(),
            submit.wait_for_worker_ms,
            submit.reply_timeout_ms,
            self.grant.fairness(asked(&submit.extras.read())),
        );
        let request = (&submit.request, &submit.extras);
        self.run(submit.correlation, request, &options, false)
    }

    /// Starts a dispatch a peer relayed here: this node's workers only, no waiting, and a
    /// reply timer running slightly inside the budget the origin sent. The origin decided the
    /// fairness a relay carries.
    pub(super) fn relay(self: &Arc<Self>, relay: &RelayRef<'_>) -> Option<Instant> {
        let options = relayed_options(
            relay.routing.reborrow(),
            relay.reply_timeout_ms,
            asked(&relay.extras.read()),
        );
        let request = (&relay.request, &relay.extras);
        self.run(relay.correlation, request, &options, true)
    }

    /// Starts a dispatch whose request and extras are lent from the frame they arrived in.
    #[inline]
    fn run(
        self: &Arc<Self>,
        correlation: u64,
        (request, extras): (&RequestRef<'_>, &ExtrasRef<'_>),
        options: &Options<'_>,
        relayed: bool,
    ) -> Option<Instant> {
        let admitted = {
            let mut table = self.table();
            if !self.grant.allows(request.namespace) {
                Err((
                    self.grant.refused_reason(),
                    self.grant.refusal(request.namespace),
                ))
            } else {
                // One look-up: the correlation is hashed once to check and insert.
                let full = table.flights.len() >= self.max_in_flight;
                let ticket = table.next_ticket + 1;
                let input = request.input.len();
                let admitted = match table.flights.entry(correlation) {
                    hash_map::Entry::Occupied(_) => Err((
                        RefusedReason::DuplicateCorrelation,
                        format!("correlation {correlation} is already in flight"),
                    )),
                    hash_map::Entry::Vacant(_) if full => Err((
                        RefusedReason::TooManyInFlight,
                        format!("{} submissions already in flight", self.max_in_flight),
                    )),
                    hash_map::Entry::Vacant(slot) => {
                        slot.insert(Tracked {
                            ticket,
                            input,
                            deadline: None,
                            flight: None,
                            _owed: self.tasks.token(),
                        });
                        Ok(ticket)
                    }
                };
                if admitted.is_ok() {
                    table.next_ticket = ticket;
                    self.held_input.fetch_add(input, Ordering::Relaxed);
                }
                admitted
            }
        };
        let ticket = match admitted {
            Ok(ticket) => ticket,
            Err((reason, detail)) => {
                // Ticket 0 names no tracked submission, so the outcome removes nothing.
                let caller = self.caller(correlation, 0);
                let detail = detail.as_str();
                self.dispatcher
                    .refuse(caller, RefusedDispatch { reason, detail });
                return None;
            }
        };
        let caller = self.caller(correlation, ticket);
        let started = if relayed {
            self.dispatcher
                .start_relayed(request, extras, options, caller)
        } else {
            self.dispatcher.start(request, extras, options, caller)
        };
        match started {
            Started::Ended => None,
            Started::Pushed(flight) => self.track(correlation, ticket, flight),
            Started::Waiting(waiting) => {
                self.track_waiting(correlation, ticket, &waiting.flight);
                let dispatcher = Arc::clone(&self.dispatcher);
                self.tasks
                    .spawn(async move { dispatcher.wait_and_watch(waiting).await });
                None
            }
        }
    }

    /// Answers a relay without running it, because what this connection is owed is over its
    /// byte budget: `Refused{WorkerBackpressure}`, which the origin places again elsewhere.
    pub(super) fn turn_away(self: &Arc<Self>, correlation: u64) {
        // Ticket 0 names no tracked dispatch, so the outcome removes nothing.
        self.dispatcher.refuse(
            self.caller(correlation, 0),
            RefusedDispatch {
                reason: RefusedReason::WorkerBackpressure,
                detail: "the link back to the origin is over its byte budget",
            },
        );
    }

    fn caller(self: &Arc<Self>, correlation: u64, ticket: u64) -> Caller {
        Caller::new(
            Arc::clone(self) as Arc<dyn Sink>,
            Tag {
                correlation,
                ticket,
            },
        )
    }

    /// Records a pushed submission's flight and deadline, unless it already ended.
    fn track(&self, correlation: u64, ticket: u64, flight: Arc<Flight>) -> Option<Instant> {
        let deadline = Instant::now() + flight.reply_timeout();
        let mut table = self.table();
        let tracked = table
            .flights
            .get_mut(&correlation)
            .filter(|tracked| tracked.ticket == ticket)?;
        tracked.flight = Some(flight);
        tracked.deadline = Some(deadline);
        table
            .deadlines
            .push(Reverse((deadline, correlation, ticket)));
        if table.deadlines.len() > 2 * table.flights.len() + STALE_DEADLINE_SLACK {
            table.rebuild_deadlines();
        }
        Some(deadline)
    }

    fn track_waiting(&self, correlation: u64, ticket: u64, flight: &Arc<Flight>) {
        let mut table = self.table();
        if let Some(tracked) = table
            .flights
            .get_mut(&correlation)
            .filter(|tracked| tracked.ticket == ticket)
        {
            tracked.flight = Some(Arc::clone(flight));
        }
    }

    /// A new link to the same peer takes these dispatches over: their outcomes go out on
    /// `outbound` from now on.
    pub(super) fn take_over(&self, outbound: Outbound) {
        match &self.route {
            Route::LatestLink(latest) => *lock(latest) = outbound,
            Route::Connection(_) => debug_assert!(false, "a producer's dispatches taken over"),
        }
    }

    /// Runs `send` on where outcomes go now.
    fn to_outbound<R>(&self, send: impl FnOnce(&Outbound) -> R) -> R {
        match &self.route {
            Route::Connection(outbound) => send(outbound),
            Route::LatestLink(latest) => send(&lock(latest)),
        }
    }

    /// True while dispatch `correlation` runs here, its outcome not yet queued.
    pub(super) fn is_running(&self, correlation: u64) -> bool {
        self.table().flights.contains_key(&correlation)
    }

    /// Cancels submission `correlation`, on its worker too.
    pub(super) fn cancel(&self, correlation: u64) {
        let flight = self
            .table()
            .flights
            .get(&correlation)
            .and_then(|tracked| tracked.flight.clone());
        if let Some(flight) = flight {
            flight.cancel();
        }
    }

    /// Ends every pushed submission whose deadline is past `now` as timed out; returns the
    /// next deadline to wake at.
    pub(super) fn expire(&self, now: Instant) -> Option<Instant> {
        let mut expired = Vec::new();
        let next = {
            let mut table = self.table();
            while let Some(&Reverse((deadline, correlation, ticket))) = table.deadlines.peek() {
                let live = table
                    .flights
                    .get(&correlation)
                    .filter(|tracked| tracked.ticket == ticket)
                    .and_then(|tracked| tracked.flight.clone());
                if live.is_some() && deadline > now {
                    break;
                }
                table.deadlines.pop();
                expired.extend(live);
            }
            table
                .deadlines
                .peek()
                .map(|Reverse((deadline, ..))| *deadline)
        };
        for flight in expired {
            flight.expire();
        }
        next
    }

    /// The node is shutting down: every dispatch still running here ends `ShutDown` now, its
    /// outcome queued before the connection's last frame.
    pub(super) fn shut_down(&self) {
        let mut flights: Vec<(u64, Arc<Flight>)> = self
            .table()
            .flights
            .iter()
            .filter_map(|(correlation, tracked)| Some((*correlation, tracked.flight.clone()?)))
            .collect();
        // In correlation order, the same in every run.
        flights.sort_unstable_by_key(|(correlation, _)| *correlation);
        for (_, flight) in flights {
            flight.abandon();
        }
    }

    /// The producer left: every submission is cancelled, on its worker too, and nothing more
    /// is sent.
    pub(super) fn close(&self) {
        let flights = {
            let mut table = self.table();
            self.closed.store(true, Ordering::Release);
            table.deadlines.clear();
            std::mem::take(&mut table.flights)
        };
        let mut flights: Vec<(u64, Tracked)> = flights.into_iter().collect();
        // In correlation order, so the cancels go out in the same order in every run.
        flights.sort_unstable_by_key(|(correlation, _)| *correlation);
        for (_, tracked) in flights {
            if let Some(flight) = tracked.flight {
                flight.cancel();
            }
        }
        self.tasks.close();
    }

    /// Slots held on each worker by these dispatches, for what a peer is told is free.
    pub(super) fn held_slots(&self) -> HashMap<WorkerId, u32> {
        let mut held: HashMap<WorkerId, u32> = HashMap::new();
        for tracked in self.table().flights.values() {
            if let Some(worker) = tracked.flight.as_ref().and_then(|f| f.holds_slot_on()) {
                *held.entry(worker).or_default() += 1;
            }
        }
        held
    }

    /// Input bytes of the dispatches in flight.
    pub(super) fn held_input(&self) -> usize {
        self.held_input.load(Ordering::Relaxed)
    }

    /// Resolves after an outcome let go of input bytes (or at once if one did since the last
    /// call); cancel-safe.
    pub(super) async fn relieved(&self) {
        self.relieved.notified().await;
    }

    /// Resolves once every dispatch started here has its outcome queued (or was let go by
    /// [`Flights::close`]) and every waiting-path task has ended. New dispatches started
    /// meanwhile are waited for too.
    pub(super) async fn settled(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

impl Sink for Flights {
    /// Forgets the submission and queues its outcome. What is queued stays bounded because the
    /// connection reads no more submissions while its queue is full. The submission's token
    /// is let go only once its outcome is queued.
    fn deliver(&self, tag: Tag, result: ResultRef<'_>, served_by: Option<&str>) {
        if let Recipient::Peer { kept: Some(pair) } = &self.answer {
            // Kept, and sent on the link to the peer now, before it stops counting as running
            // here: a resumption finds each relay running or its outcome kept.
            if !self.closed.load(Ordering::Acquire) {
                let _ = self.to_outbound(|to| pair.answer(tag.correlation, result, to));
            }
            drop(self.forget(tag));
            return;
        }
        let released = self.forget(tag);
        if !self.closed.load(Ordering::Acquire) {
            let sent =
                self.to_outbound(|to| self.answer.send(to, tag.correlation, result, served_by));
            match sent {
                // The connection closes as a slow consumer, which its owner hears from the
                // queue; the outcome goes with the connection.
                Ok(()) | Err(SendError::Closed | SendError::Overflow) => {}
                Err(
                    err @ (SendError::TooLarge { .. }
                    | SendError::Unencodable { .. }
                    | SendError::Unsupported { .. }),
                ) => {
                    // The dispatch layer fits results to the frame limit and every outcome
                    // reads in every version, so this is a bug; the producer still hears one.
                    tracing::error!(error = %err, "an outcome could not be encoded");
                    let detail = format!("the outcome could not be sent: {err}");
                    let refused = DispatchResult::Refused(RefusedDispatch {
                        reason: RefusedReason::InvalidRequest,
                        detail: detail.as_str(),
                    });
                    let _ =
                        self.to_outbound(|to| self.answer.send(to, tag.correlation, refused, None));
                }
                Err(SendError::Full) => {}
            }
        }
        drop(released);
    }

    /// Sends a worker's progress of dispatch `tag`: a producer's submission or a peer's relay,
    /// as its correlation. Not owed: dropped when the queue is full, or when the reader did
    /// not list `progress` (the writer refuses it then).
    fn progress(&self, tag: Tag, details: &bytes::Bytes) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let progress = Frame::from(Progress {
            correlation: tag.correlation,
            details: details.clone(),
        });
        let _ = self.to_outbound(|to| to.try_send(progress));
    }
}

impl Flights {
    /// Forgets dispatch `tag` and lets go of its input bytes; the token it holds goes with the
    /// returned entry, dropped once its outcome is queued.
    fn forget(&self, tag: Tag) -> Option<Tracked> {
        let released = {
            let mut table = self.table();
            match table.flights.entry(tag.correlation) {
                hash_map::Entry::Occupied(tracked) if tracked.get().ticket == tag.ticket => {
                    Some(tracked.remove())
                }
                _ => None,
            }
        };
        if let Some(tracked) = &released {
            self.held_input.fetch_sub(tracked.input, Ordering::Relaxed);
            self.relieved.notify_one();
        }
        released
    }
}

impl Recipient {
    /// Queues, as owed, the frame that carries an outcome to this connection; encoded from
    /// the borrowed outcome where the frame allows, as the connection's version reads it.
    fn send(
        &self,
        outbound: &Outbound,
        correlation: u64,
        result: ResultRef<'_>,
        served_by: Option<&str>,
    ) -> Result<(), SendError> {
        match self {
            Recipient::Producer { version, node_id } if *version >= 2 => {
                outbound.send_owed_ref(&FrameRef::ServedOutcome(ServedOutcome {
                    correlation,
                    served_by: served_by.unwrap_or(node_id),
                    result: result.reborrow(),
                }))
            }
            Recipient::Producer { .. } => {
                outbound.send_owed_ref(&FrameRef::Outcome(OutcomeFrame {
                    correlation,
                    result,
                }))
            }
            Recipient::Peer { .. } => {
                outbound.send_owed_ref(&FrameRef::RelayOutcome(RelayOutcome {
                    correlation,
                    result,
                }))
            }
        }
    }
}

/// The options of a relayed dispatch: this node's workers only, no waiting, and a reply timer
/// slightly inside the `reply_timeout_ms` the origin has left.
fn relayed_options<'a>(
    routing: RoutingRef<'a>,
    reply_timeout_ms: u64,
    fairness: FairnessRef<'a>,
) -> Options<'a> {
    let budget = Duration::from_millis(reply_timeout_ms);
    let margin = (budget / 10).min(RELAY_MARGIN);
    Options {
        routing,
        wait_for_worker: None,
        reply_timeout: Some(budget.saturating_sub(margin).max(Duration::from_millis(1))),
        fairness,
    }
}

impl Table {
    fn rebuild_deadlines(&mut self) {
        let live = self.flights.iter().filter_map(|(correlation, tracked)| {
            let deadline = tracked.deadline?;
            Some(Reverse((deadline, *correlation, tracked.ticket)))
        });
        self.deadlines = live.collect();
    }
}

/// When the connection next looks for expired replies.
#[derive(Debug, Default)]
pub(super) struct ReplyTimer {
    pub(super) armed: Option<Instant>,
}

impl ReplyTimer {
    /// Wakes at `deadline` if that is sooner than the wake already set.
    pub(super) fn arm(
        &mut self,
        deadline: Option<Instant>,
        sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    ) {
        let Some(deadline) = deadline else {
            return;
        };
        if self.armed.is_none_or(|armed| deadline < armed) {
            self.armed = Some(deadline);
            sleep.reset(deadline);
        }
    }
}

/// Ends a connection's dispatches however the connection ends, so none outlives it, unless
/// they are handed on.
pub(super) struct CloseOnDrop(pub(super) Option<Arc<Flights>>);

impl CloseOnDrop {
    /// Hands the dispatches on instead: they keep running.
    pub(super) fn hand_on(mut self) -> Option<Arc<Flights>> {
        self.0.take()
    }
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(flights) = &self.0 {
            flights.close();
        }
    }
}

/// `mutex` locked; its value is only ever replaced whole, so a panic elsewhere leaves it sound.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
