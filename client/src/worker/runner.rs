//! Where handlers run: one task on the runtime [`Worker::spawn`](super::Worker::spawn) was
//! called on, never on the connection's thread, so a handler that blocks its thread cannot
//! hold up pings, pongs or the socket.
//!
//! The connection hands it requests in batches through a [`Mailbox`]: a burst of pushes costs
//! one wake-up of this task. It sends the answers itself on the connection the [`Ledger`]
//! names, each batch in one write from this thread, so the connection's thread is not woken for
//! them; an answer the connection cannot take now (its queue full, a result too large for a
//! frame, no connection, a drain counting replies) goes back through a second mailbox to the
//! connection's loop. A handler that
//! [runs briefly](super::Handler::runs_briefly) is polled once in this task and answered at
//! once when it is done; any other handler, or a brief one that must wait, runs in a task of
//! its own on the same runtime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::FutureExt;
use lintel_transport::batched;
use lintel_wire::{Compact, Push};
use tokio::task::{AbortHandle, JoinSet};

use super::handler::{run_handler, Answered, Handler, Ticket};
use super::heartbeat::{Heartbeat, Link};
use super::ledger::Ledger;
use super::mailbox::Mailbox;

/// What the connection asks of the runner, in the order asked.
enum Order {
    /// Run this request; answer it with `Ticket`.
    Run(Ticket, Box<Push<Compact>>),
    /// Drop the request's handler, if it still runs; its answer is not wanted.
    Abort(Ticket),
    /// Drop every handler.
    AbortAll,
}

/// The connection's side of the runner: it queues orders, sends them in one batch on
/// [`Runner::flush`], and takes the answers. Dropping it stops the runner and every handler.
pub(super) struct Runner {
    orders: Arc<Mailbox<Order>>,
    answers: Arc<Mailbox<Answered>>,
    /// Orders not yet handed over.
    queued: Vec<Order>,
    next_ticket: Ticket,
    task: AbortHandle,
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Runner {
    /// Starts the runner on the current Tokio runtime: `handler` runs each request, its
    /// heartbeats going out on the connection `link` holds, its answers sent as `ledger` says.
    ///
    /// # Panics
    /// Outside a Tokio runtime, like `tokio::spawn`.
    pub(super) fn spawn<H: Handler>(
        handler: Arc<H>,
        link: Link,
        ledger: Arc<Mutex<Ledger>>,
    ) -> Self {
        let orders = Arc::new(Mailbox::default());
        let answers = Arc::new(Mailbox::default());
        let task = tokio::spawn(serve(
            handler,
            link,
            ledger,
            Arc::clone(&orders),
            Arc::clone(&answers),
        ))
        .abort_handle();
        Self {
            orders,
            answers,
            queued: Vec::new(),
            next_ticket: 0,
            task,
        }
    }

    /// Queues `push` to run; its answer will carry the ticket returned.
    pub(super) fn run(&mut self, push: Box<Push<Compact>>) -> Ticket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queued.push(Order::Run(ticket, push));
        ticket
    }

    /// Queues the abort of the request `ticket`.
    pub(super) fn abort(&mut self, ticket: Ticket) {
        self.queued.push(Order::Abort(ticket));
    }

    /// Queues the abort of every request given so far.
    pub(super) fn abort_all(&mut self) {
        self.queued.push(Order::AbortAll);
    }

    /// Hands the queued orders over, waking the runner once.
    pub(super) fn flush(&mut self) {
        self.orders.put(&mut self.queued);
    }

    /// Resolves when answers the runner could not send may be waiting for
    /// [`Runner::take_answers`]. Cancel-safe.
    pub(super) async fn answered(&self) {
        self.answers.filled().await;
    }

    /// Moves the answers waiting to `into`.
    pub(super) fn take_answers(&self, into: &mut Vec<Answered>) {
        self.answers.take(into);
    }
}

/// The runner task: runs what `orders` brings, sends answers as `ledger` says and puts those
/// it cannot send in `answers`. Stopped by aborting it, which aborts every handler task with
/// its `JoinSet`.
async fn serve<H: Handler>(
    handler: Arc<H>,
    link: Link,
    ledger: Arc<Mutex<Ledger>>,
    orders: Arc<Mailbox<Order>>,
    answers: Arc<Mailbox<Answered>>,
) {
    let brief = handler.runs_briefly();
    let mut tasks = JoinSet::new();
    // Bounded by the requests the connection let run, which its capacity bounds.
    let mut running: HashMap<Ticket, AbortHandle, foldhash::fast::RandomState> = HashMap::default();
    let mut batch = Vec::new();
    let mut done = Vec::new();
    loop {
        // Both branches are cancel-safe: a mailbox wait loses no notification, and
        // `join_next` loses no task.
        tokio::select! {
            () = orders.filled() => {
                orders.take(&mut batch);
                for order in batch.drain(..) {
                    match order {
                        Order::Run(ticket, push) => {
                            let heartbeat = Heartbeat::new(link.clone(), push.correlation);
                            let handler = Arc::clone(&handler);
                            // Built in the call that boxes or spawns it: the future is the
                            // handler's whole state, large to move.
                            if brief {
                                let mut run =
                                    Box::pin(run_handler(handler, ticket, push, heartbeat));
                                // A handler that must wait is polled again, with its own waker,
                                // in its task.
                                match (&mut run).now_or_never() {
                                    Some(answered) => done.push(answered),
                                    None => {
                                        running.insert(ticket, tasks.spawn(run));
                                    }
                                }
                            } else {
                                let run = run_handler(handler, ticket, push, heartbeat);
                                running.insert(ticket, tasks.spawn(run));
                            }
                        }
                        Order::Abort(ticket) => {
                            if let Some(task) = running.remove(&ticket) {
                                task.abort();
                            }
                        }
                        Order::AbortAll => {
                            tasks.abort_all();
                            running.clear();
                        }
                    }
                }
            }
            Some(joined) = tasks.join_next() => {
                let mut joined = Some(joined);
                while let Some(result) = joined {
                    // Aborted after a cancel, a drop or a drain's grace: nothing is owed.
                    if let Ok(answered) = result {
                        running.remove(&answered.ticket);
                        done.push(answered);
                    }
                    joined = tasks.try_join_next();
                }
            }
        }
        if !done.is_empty() {
            // One write for the batch, from this thread, before any handler runs again: a
            // connection held across a handler blocking this thread would hold its pongs too.
            batched(|| {
                ledger
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .send_owed(&mut done);
            });
        }
        answers.put(&mut done);
    }
}
