//! What a worker holds across its connections: its handlers' runner, the requests it runs and
//! their results (the [`Ledger`], shared with the runner), and the session that lets a new
//! connection take them back.
//!
//! Owned by the runtime's loop: a connection borrows it while it serves, and it outlives the
//! connection, so handlers, their cancel signals and heartbeats survive a reconnect.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use lintel_transport::Outbound;
use lintel_wire::ResumeSession;
use tokio::time::Instant;

use super::handler::{Answered, Handler};
use super::heartbeat::Link;
use super::ledger::Ledger;
use super::runner::Runner;

/// The session a node gave this worker (`Session`), and when its connection was lost.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    pub(super) token: Bytes,
    pub(super) grace: Duration,
    /// When the connection holding the session was lost; `None` while it is up.
    pub(super) lost_at: Option<Instant>,
}

/// The worker's work and session across connections.
pub(super) struct Held {
    /// Where handlers run: the runtime `Worker::spawn` was called on, never the connection's.
    pub(super) runner: Runner,
    /// The requests held and their results, shared with the runner.
    ledger: Arc<Mutex<Ledger>>,
    pub(super) session: Option<Kept>,
    /// The capacity the node has for this worker, which a resumed session keeps.
    pub(super) node_capacity: u32,
}

impl Held {
    /// Nothing held; `handler` will run requests in a runner started on the current runtime,
    /// its heartbeats going out on the connection `link` holds.
    ///
    /// # Panics
    /// Outside a Tokio runtime, like `tokio::spawn`.
    pub(super) fn new<H: Handler>(handler: Arc<H>, link: Link) -> Self {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        Self {
            runner: Runner::spawn(handler, link, Arc::clone(&ledger)),
            ledger,
            session: None,
            node_capacity: 0,
        }
    }

    /// The requests held and their results, locked; hold it briefly, the runner waits on it.
    pub(super) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // Every update leaves the ledger consistent before anything that could panic.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests held: running, or finished with the reply unsent.
    pub(super) fn len(&self) -> usize {
        self.ledger().len()
    }

    /// The most results kept after sending until the node proves it read them: the capacity,
    /// at least one.
    pub(super) fn unacked_bound(capacity: u32) -> usize {
        usize::try_from(capacity.max(1)).unwrap_or(usize::MAX)
    }

    /// Remembers results just sent, in the order sent, dropping the oldest beyond `bound`.
    pub(super) fn sent(&mut self, answers: impl IntoIterator<Item = Answered>, bound: usize) {
        self.ledger().sent(answers, bound);
    }

    /// A `Ping` with `nonce` goes out now: its `Pong` proves every result sent before it read.
    pub(super) fn pinged(&mut self, nonce: u64) {
        self.ledger().pinged(nonce);
    }

    /// The node answered the `Ping` with `nonce`.
    pub(super) fn ponged(&mut self, nonce: u64) {
        self.ledger().ponged(nonce);
    }

    /// From now on the runner sends results on `outbound` itself, for a worker of `capacity`.
    pub(super) fn send_directly(&self, outbound: Outbound, capacity: u32) {
        self.ledger()
            .send_directly(outbound, Self::unacked_bound(capacity));
    }

    /// From now on results go through the connection's loop.
    pub(super) fn stop_sending_directly(&self) {
        self.ledger().stop_sending_directly();
    }

    /// The connection was lost: results it may not have delivered become unsent again, and the
    /// session starts its grace when `resumable`; otherwise everything held is dropped.
    pub(super) fn lost(&mut self, resumable: bool) {
        match &mut self.session {
            Some(kept) if resumable => {
                kept.lost_at.get_or_insert_with(Instant::now);
                self.ledger().unproved_unsent();
            }
            _ => self.drop_all(),
        }
    }

    /// The session, when it may still be resumed now.
    pub(super) fn resumable(&self) -> Option<&Kept> {
        self.session.as_ref().filter(|kept| {
            kept.lost_at
                .is_none_or(|lost_at| lost_at.elapsed() < kept.grace)
        })
    }

    /// The correlations to list in `ResumeSession`: at most [`ResumeSession::MAX_HOLDING`];
    /// what is held beyond them is dropped.
    pub(super) fn holding(&mut self) -> Vec<u64> {
        let mut holding: Vec<u64> = {
            let ledger = self.ledger();
            ledger
                .in_flight
                .keys()
                .chain(ledger.unsent.keys())
                .copied()
                .collect()
        };
        if holding.len() > ResumeSession::MAX_HOLDING {
            for dropped in holding.split_off(ResumeSession::MAX_HOLDING) {
                self.forget(dropped);
            }
        }
        holding
    }

    /// Drops the request `correlation`: its handler is aborted, its result forgotten.
    pub(super) fn forget(&mut self, correlation: u64) {
        let ticket = {
            let mut ledger = self.ledger();
            ledger.unsent.remove(&correlation);
            ledger.in_flight.remove(&correlation)
        };
        if let Some(ticket) = ticket {
            self.runner.abort(ticket);
            self.runner.flush();
        }
    }

    /// Aborts every handler, forgets every result and the session.
    pub(super) fn drop_all(&mut self) {
        if self.len() > 0 {
            tracing::warn!(
                held = self.len(),
                "dropping the requests held: the node ends them worker-lost"
            );
        }
        self.runner.abort_all();
        self.runner.flush();
        self.ledger().clear();
        self.session = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use lintel_wire::ActivityOutcome;

    use super::{Held, Kept};
    use crate::worker::handler::{handler_fn, Answered, Request};

    /// Nothing held, handlers that echo.
    fn held() -> Held {
        let echo =
            handler_fn(|request: Request| async move { ActivityOutcome::Success(request.input) });
        Held::new(Arc::new(echo), tokio::sync::watch::channel(None).1)
    }

    fn with_session(grace: Duration) -> Held {
        let mut held = held();
        held.session = Some(Kept {
            token: bytes::Bytes::from_static(&[7; 32]),
            grace,
            lost_at: None,
        });
        held
    }

    fn sorted(mut correlations: Vec<u64>) -> Vec<u64> {
        correlations.sort_unstable();
        correlations
    }

    #[tokio::test]
    async fn results_sent_are_kept_up_to_the_bound_and_listed_when_the_connection_is_lost() {
        let mut held = with_session(Duration::from_secs(10));
        for correlation in 1..=5 {
            held.sent([Answered::echo(correlation)], 3);
        }
        held.lost(true);
        assert_eq!(
            sorted(held.holding()),
            [3, 4, 5],
            "the oldest beyond the bound dropped"
        );
        assert!(held.resumable().is_some());
    }

    #[tokio::test]
    async fn a_pong_to_a_ping_sent_after_results_proves_them_read() {
        let mut held = with_session(Duration::from_secs(10));
        held.sent([Answered::echo(1)], 8);
        held.sent([Answered::echo(2)], 8);
        held.pinged(40);
        held.sent([Answered::echo(3)], 8);
        held.ponged(41);
        held.ponged(40);
        held.lost(true);
        assert_eq!(
            held.holding(),
            [3],
            "only what was sent after the ping is in doubt"
        );
    }

    #[tokio::test]
    async fn a_loss_without_a_session_or_past_its_grace_keeps_nothing() {
        let mut held = held();
        held.sent([Answered::echo(1)], 8);
        held.lost(true);
        assert!(held.holding().is_empty());
        assert!(held.session.is_none());

        let mut held = with_session(Duration::ZERO);
        held.sent([Answered::echo(1)], 8);
        held.lost(true);
        assert!(held.resumable().is_none(), "past a grace of zero at once");

        let mut held = with_session(Duration::from_secs(10));
        held.sent([Answered::echo(1)], 8);
        held.lost(false);
        assert!(held.holding().is_empty() && held.session.is_none());
    }
}
