//! A producer connection's submissions in flight, each ending in exactly one outcome frame.
//!
//! A submission a free worker can take is pushed from the producer's reader and finished from
//! the worker's reader, with no task or timer of its own: reply deadlines sit in one heap the
//! connection's timer walks. One that may wait for a worker runs in a task. Whoever removes a
//! submission from the table owes its outcome, so exactly one goes out.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_client::transport::Outbound;
use lintel_client::DispatchOptions;
use lintel_wire::{
    DispatchRequest, DispatchResponse, DispatchResult, Frame, OutcomeFrame, RefusedDispatch,
    RefusedReason, Submit,
};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::activity::{Active, Activity};
use super::dispatcher::{Dispatcher, Reserved, Started};
use super::link::{PushError, WorkerLink};
use crate::registry::{Reservation, WorkerId};

/// Stale deadlines, of submissions already ended, allowed beyond the live ones before the
/// heap is rebuilt.
const STALE_DEADLINE_SLACK: usize = 1024;

/// The submissions of one producer connection.
pub(crate) struct Flights {
    dispatcher: Arc<Dispatcher>,
    outbound: Outbound,
    max_in_flight: usize,
    table: Mutex<Table>,
    /// The producer left: nothing more is sent to it.
    closed: AtomicBool,
    /// Waiting-path tasks that have not yet reported.
    reporting: Arc<Activity>,
}

#[derive(Default)]
struct Table {
    flights: HashMap<u64, Flight>,
    /// `(deadline, correlation, ticket)` of pushed submissions, earliest first; entries of
    /// ended ones are skipped when met.
    deadlines: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    /// Tells a reused producer correlation id from the submission it once named.
    next_ticket: u64,
}

struct Flight {
    ticket: u64,
    state: FlightState,
}

enum FlightState {
    /// On a worker; its reply, timeout, cancel or the worker's loss ends it.
    Pushed {
        link: WorkerLink,
        worker_correlation: u64,
        worker_id: WorkerId,
        deadline: Instant,
        after_ms: u64,
    },
    /// Waiting for a worker in its own task, which reports the outcome.
    Waiting { cancel: Option<oneshot::Sender<()>> },
}

impl Flights {
    /// Submissions answered on `outbound`, at most `max_in_flight` at once.
    pub(crate) fn new(
        dispatcher: Arc<Dispatcher>,
        outbound: Outbound,
        max_in_flight: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            dispatcher,
            outbound,
            max_in_flight,
            table: Mutex::new(Table::default()),
            closed: AtomicBool::new(false),
            reporting: Arc::default(),
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
    pub(crate) fn submit(self: &Arc<Self>, submit: Submit) -> Option<Instant> {
        let correlation = submit.correlation;
        let refusal = {
            let table = self.table();
            if table.flights.contains_key(&correlation) {
                Some((
                    RefusedReason::DuplicateCorrelation,
                    format!("correlation {correlation} is already in flight"),
                ))
            } else if table.flights.len() >= self.max_in_flight {
                Some((
                    RefusedReason::TooManyInFlight,
                    format!("{} submissions already in flight", self.max_in_flight),
                ))
            } else {
                None
            }
        };
        if let Some((reason, detail)) = refusal {
            let result = DispatchResult::Refused(RefusedDispatch { reason, detail });
            self.answer(correlation, result);
            return None;
        }
        let options = DispatchOptions::from_wire(
            submit.routing,
            submit.wait_for_worker_ms,
            submit.reply_timeout_ms,
        );
        match self.dispatcher.start(submit.request, &options) {
            Started::Reserved(reserved) => match self.push(correlation, reserved) {
                Ok(deadline) => Some(deadline),
                Err(result) => {
                    self.dispatcher.counters().ended(&result);
                    self.answer(correlation, result);
                    None
                }
            },
            Started::Ended(result) => {
                self.answer(correlation, result);
                None
            }
            Started::MustWait(request) => {
                self.wait(correlation, request, options);
                None
            }
        }
    }

    /// Pushes a reserved submission and records it; the table stays locked until it is
    /// recorded, so its reply cannot be looked for before.
    fn push(
        self: &Arc<Self>,
        correlation: u64,
        reserved: Reserved,
    ) -> Result<Instant, DispatchResult> {
        let Reserved {
            request,
            reservation,
            active,
            reply_timeout,
        } = reserved;
        let link = reservation.link().clone();
        let worker_id = reservation.worker_id();
        let deadline = Instant::now() + reply_timeout;
        let after_ms = u64::try_from(reply_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut table = self.table();
        table.next_ticket += 1;
        let ticket = table.next_ticket;
        let submission = Submission {
            flights: Arc::clone(self),
            correlation,
            ticket,
            worker_id,
            _reservation: reservation,
            _active: active,
            settled: false,
        };
        let worker_correlation = match link.push_submission(request, submission) {
            Ok(worker_correlation) => worker_correlation,
            Err(PushError::Backpressure) => {
                return Err(DispatchResult::Refused(RefusedDispatch {
                    reason: RefusedReason::WorkerBackpressure,
                    detail: format!("worker {worker_id} outbound queue is full"),
                }));
            }
            Err(PushError::Closed) => return Err(DispatchResult::WorkerLost { worker_id }),
        };
        let state = FlightState::Pushed {
            link,
            worker_correlation,
            worker_id,
            deadline,
            after_ms,
        };
        table.flights.insert(correlation, Flight { ticket, state });
        table
            .deadlines
            .push(Reverse((deadline, correlation, ticket)));
        if table.deadlines.len() > 2 * table.flights.len() + STALE_DEADLINE_SLACK {
            table.rebuild_deadlines();
        }
        Ok(deadline)
    }

    /// Runs a submission that may wait for a worker in its own task.
    fn wait(
        self: &Arc<Self>,
        correlation: u64,
        request: DispatchRequest,
        options: DispatchOptions,
    ) {
        let (trigger, cancelled) = oneshot::channel::<()>();
        let ticket = {
            let mut table = self.table();
            table.next_ticket += 1;
            let ticket = table.next_ticket;
            let state = FlightState::Waiting {
                cancel: Some(trigger),
            };
            table.flights.insert(correlation, Flight { ticket, state });
            ticket
        };
        let flights = Arc::clone(self);
        let reporting = self.reporting.enter();
        tokio::spawn(async move {
            // A dropped trigger means the submission ended first; only a sent one cancels.
            let cancelled = async {
                if cancelled.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let result = flights
                .dispatcher
                .dispatch_until(request, &options, cancelled)
                .await;
            flights.finish(correlation, ticket, result);
            drop(reporting);
        });
    }

    /// Ends submission `correlation` as cancelled, telling its worker to abandon it.
    pub(crate) fn cancel(&self, correlation: u64) {
        let pushed = {
            let mut table = self.table();
            match table
                .flights
                .get_mut(&correlation)
                .map(|flight| &mut flight.state)
            {
                None => return,
                Some(FlightState::Waiting { cancel }) => {
                    if let Some(trigger) = cancel.take() {
                        let _ = trigger.send(());
                    }
                    return;
                }
                Some(FlightState::Pushed { .. }) => table.flights.remove(&correlation),
            }
        };
        if let Some(flight) = pushed {
            self.end_pushed(correlation, flight, DispatchResult::Cancelled);
        }
    }

    /// Ends every pushed submission whose deadline is past `now` as timed out; returns the
    /// next deadline to wake at.
    pub(crate) fn expire(&self, now: Instant) -> Option<Instant> {
        let mut expired = Vec::new();
        let next = {
            let mut table = self.table();
            while let Some(&Reverse((deadline, correlation, ticket))) = table.deadlines.peek() {
                let live = table
                    .flights
                    .get(&correlation)
                    .is_some_and(|flight| flight.ticket == ticket);
                if live && deadline > now {
                    break;
                }
                table.deadlines.pop();
                if live {
                    if let Some(flight) = table.flights.remove(&correlation) {
                        expired.push((correlation, flight));
                    }
                }
            }
            table
                .deadlines
                .peek()
                .map(|Reverse((deadline, ..))| *deadline)
        };
        for (correlation, flight) in expired {
            if let FlightState::Pushed {
                worker_id,
                after_ms,
                ..
            } = &flight.state
            {
                let result = DispatchResult::Timeout {
                    worker_id: *worker_id,
                    after_ms: *after_ms,
                };
                self.end_pushed(correlation, flight, result);
            }
        }
        next
    }

    /// The producer left: pushed submissions end as cancelled on their workers, waiting ones
    /// are cancelled, and nothing more is sent.
    pub(crate) fn close(&self) {
        let flights = {
            let mut table = self.table();
            self.closed.store(true, Ordering::Release);
            table.deadlines.clear();
            std::mem::take(&mut table.flights)
        };
        for (correlation, flight) in flights {
            match flight.state {
                FlightState::Pushed { .. } => {
                    self.end_pushed(correlation, flight, DispatchResult::Cancelled);
                }
                FlightState::Waiting { cancel } => {
                    if let Some(trigger) = cancel {
                        let _ = trigger.send(());
                    }
                }
            }
        }
    }

    /// Resolves once every waiting-path task has reported.
    pub(crate) async fn settled(&self) {
        self.reporting.idle().await;
    }

    /// Counts and answers a pushed submission already removed from the table, then tells its
    /// worker to abandon it. The outcome is queued first, so a drain that waits for the
    /// dispatch to leave finds it queued.
    fn end_pushed(&self, correlation: u64, flight: Flight, result: DispatchResult) {
        self.dispatcher.counters().ended(&result);
        self.answer(correlation, result);
        if let FlightState::Pushed {
            link,
            worker_correlation,
            ..
        } = flight.state
        {
            link.abandon(worker_correlation);
        }
    }

    /// Ends submission `correlation` with `result` unless something else ended it first.
    fn finish(&self, correlation: u64, ticket: u64, result: DispatchResult) {
        let flight = {
            let mut table = self.table();
            match table.flights.get(&correlation) {
                Some(flight) if flight.ticket == ticket => table.flights.remove(&correlation),
                _ => None,
            }
        };
        let Some(flight) = flight else {
            return;
        };
        // A waiting-path task was counted by the dispatcher; a pushed one is counted here.
        if matches!(flight.state, FlightState::Pushed { .. }) {
            self.dispatcher.counters().ended(&result);
        }
        self.answer(correlation, result);
    }

    /// Queues the outcome the producer is owed. What is queued stays bounded because the
    /// connection reads no more submissions while its queue is full.
    fn answer(&self, correlation: u64, result: DispatchResult) {
        if !self.closed.load(Ordering::Acquire) {
            let _ = self.outbound.send_owed(outcome(correlation, result));
        }
    }
}

impl Table {
    fn rebuild_deadlines(&mut self) {
        let live = self
            .flights
            .iter()
            .filter_map(|(correlation, flight)| match flight.state {
                FlightState::Pushed { deadline, .. } => {
                    Some(Reverse((deadline, *correlation, flight.ticket)))
                }
                FlightState::Waiting { .. } => None,
            });
        self.deadlines = live.collect();
    }
}

/// A pushed submission as its worker's link holds it. Dropped unanswered, it reports the
/// worker lost; it holds the worker slot and the node's active count until then.
pub(crate) struct Submission {
    flights: Arc<Flights>,
    correlation: u64,
    ticket: u64,
    worker_id: WorkerId,
    _reservation: Reservation,
    _active: Active,
    settled: bool,
}

impl Submission {
    /// Ends the submission with the worker's reply.
    pub(crate) fn complete(mut self, response: DispatchResponse) {
        self.settled = true;
        let response = self.flights.dispatcher.fit(response);
        self.flights.finish(
            self.correlation,
            self.ticket,
            DispatchResult::Completed(response),
        );
    }

    /// Lets go without reporting: the push never left, and its caller answers.
    pub(crate) fn settle(mut self) {
        self.settled = true;
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        if !self.settled {
            let result = DispatchResult::WorkerLost {
                worker_id: self.worker_id,
            };
            self.flights.finish(self.correlation, self.ticket, result);
        }
    }
}

impl fmt::Debug for Submission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submission")
            .field("correlation", &self.correlation)
            .field("worker_id", &self.worker_id)
            .finish_non_exhaustive()
    }
}

fn outcome(correlation: u64, result: DispatchResult) -> Frame {
    Frame::Outcome(OutcomeFrame {
        correlation,
        result,
    })
}
