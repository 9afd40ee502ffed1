//! A producer connection's dispatches in flight: the producer's correlation ids, their reply
//! deadlines, and the outcome frames owed.
//!
//! A submission a free worker can take is pushed from the producer's reader and answered from
//! the worker's reader, with no task or timer of its own: reply deadlines sit in one heap the
//! connection's timer walks. One that waits for a worker runs in a task until it is pushed and
//! answered. Outcomes come back through [`Sink::deliver`], once per submission.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_wire::{DispatchResult, Frame, OutcomeFrame, RefusedDispatch, RefusedReason, Submit};
use tokio::time::Instant;

use crate::dispatch::{Caller, DispatchOptions, Dispatcher, Flight, Sink, Started, Tag};
use lintel_client::transport::Outbound;

/// Stale deadlines, of submissions already ended, allowed beyond the live ones before the
/// heap is rebuilt.
const STALE_DEADLINE_SLACK: usize = 1024;

/// The submissions of one producer connection.
pub(super) struct Flights {
    dispatcher: Arc<Dispatcher>,
    outbound: Outbound,
    max_in_flight: usize,
    table: Mutex<Table>,
    /// The producer left: nothing more is sent to it.
    closed: AtomicBool,
    /// Waiting-path tasks still running.
    tasks: tokio_util::task::TaskTracker,
}

#[derive(Default)]
struct Table {
    flights: HashMap<u64, Tracked>,
    /// `(deadline, correlation, ticket)` of pushed submissions, earliest first; entries of
    /// ended ones are skipped when met.
    deadlines: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    next_ticket: u64,
}

struct Tracked {
    ticket: u64,
    /// The reply deadline of a submission pushed from the reader.
    deadline: Option<Instant>,
    /// `None` only while [`Flights::submit`] is starting it.
    flight: Option<Arc<Flight>>,
}

impl Flights {
    /// Submissions answered on `outbound`, at most `max_in_flight` at once.
    pub(super) fn new(
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
            tasks: tokio_util::task::TaskTracker::new(),
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
    pub(super) fn submit(self: &Arc<Self>, submit: Submit) -> Option<Instant> {
        let correlation = submit.correlation;
        let admitted = {
            let mut table = self.table();
            if table.flights.contains_key(&correlation) {
                Err((
                    RefusedReason::DuplicateCorrelation,
                    format!("correlation {correlation} is already in flight"),
                ))
            } else if table.flights.len() >= self.max_in_flight {
                Err((
                    RefusedReason::TooManyInFlight,
                    format!("{} submissions already in flight", self.max_in_flight),
                ))
            } else {
                table.next_ticket += 1;
                let ticket = table.next_ticket;
                table.flights.insert(
                    correlation,
                    Tracked {
                        ticket,
                        deadline: None,
                        flight: None,
                    },
                );
                Ok(ticket)
            }
        };
        let ticket = match admitted {
            Ok(ticket) => ticket,
            Err((reason, detail)) => {
                // Ticket 0 names no tracked submission, so the outcome removes nothing.
                let caller = self.caller(correlation, 0);
                self.dispatcher
                    .refuse(caller, RefusedDispatch { reason, detail });
                return None;
            }
        };
        let options = DispatchOptions::from_wire(
            submit.routing,
            submit.wait_for_worker_ms,
            submit.reply_timeout_ms,
        );
        let caller = self.caller(correlation, ticket);
        match self.dispatcher.start(submit.request, &options, caller) {
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

    /// The producer left: every submission is cancelled, on its worker too, and nothing more
    /// is sent.
    pub(super) fn close(&self) {
        let flights = {
            let mut table = self.table();
            self.closed.store(true, Ordering::Release);
            table.deadlines.clear();
            std::mem::take(&mut table.flights)
        };
        for tracked in flights.into_values() {
            if let Some(flight) = tracked.flight {
                flight.cancel();
            }
        }
        self.tasks.close();
    }

    /// Resolves once every waiting-path task has ended.
    pub(super) async fn settled(&self) {
        self.tasks.wait().await;
    }
}

impl Sink for Flights {
    /// Forgets the submission and queues its outcome. What is queued stays bounded because the
    /// connection reads no more submissions while its queue is full.
    fn deliver(&self, tag: Tag, result: DispatchResult) {
        {
            let mut table = self.table();
            let ours = table
                .flights
                .get(&tag.correlation)
                .is_some_and(|tracked| tracked.ticket == tag.ticket);
            if ours {
                table.flights.remove(&tag.correlation);
            }
        }
        if !self.closed.load(Ordering::Acquire) {
            let frame = Frame::Outcome(OutcomeFrame {
                correlation: tag.correlation,
                result,
            });
            let _ = self.outbound.send_owed(frame);
        }
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
