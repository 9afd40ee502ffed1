//! What a worker holds across its connections: its handlers' runner, the requests it runs, the
//! results not yet known to have reached the node, and the session that lets a new connection
//! take them back.
//!
//! Owned by the runtime's loop alone (no lock): a connection borrows it while it serves, and it
//! outlives the connection, so handlers, their cancel signals and heartbeats survive a reconnect.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use lintel_wire::ResumeSession;
use tokio::time::Instant;

use super::handler::Answered;
use super::handler::Ticket;
use super::runner::Runner;

/// Requests in flight by the node's correlation id, with the runner's ticket for each. The ids
/// come off the socket, so the map is seeded at random per process and per map: colliding ids
/// cannot be computed ahead.
pub(super) type InFlight = HashMap<u64, Ticket, foldhash::fast::RandomState>;

/// The session a node gave this worker (`Session`), and when its connection was lost.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    pub(super) token: Bytes,
    pub(super) grace: Duration,
    /// When the connection holding the session was lost; `None` while it is up.
    pub(super) lost_at: Option<Instant>,
}

/// Results sent on the current connection that the node may not have read yet, kept until a
/// `Pong` to a later `Ping` proves it read them, at most [`Held::unacked_bound`] of them.
#[derive(Default)]
struct Unacked {
    /// Results in the order they were sent; the first has sequence number `first`.
    sent: VecDeque<Answered>,
    /// The sequence number of the first result in `sent`.
    first: u64,
    /// The ping sent after the results numbered below its second field, awaiting its pong.
    probe: Option<(u64, u64)>,
}

/// The worker's work and session across connections.
pub(super) struct Held {
    /// Where handlers run: the runtime `Worker::spawn` was called on, never the connection's.
    pub(super) runner: Runner,
    /// Requests whose reply is still owed, by correlation id. A cancelled request leaves this
    /// map before its handler is aborted and is answered by the cancel, so an answer that
    /// comes anyway matches no ticket here and sends nothing more.
    pub(super) in_flight: InFlight,
    /// Finished requests whose reply is owed and not sent (or sent on a connection since lost,
    /// maybe unread); at most as many as the requests accepted, so bounded by the capacity.
    pub(super) unsent: HashMap<u64, Answered, foldhash::fast::RandomState>,
    unacked: Unacked,
    pub(super) session: Option<Kept>,
    /// The capacity the node has for this worker, which a resumed session keeps.
    pub(super) node_capacity: u32,
}

impl Held {
    /// Nothing held; handlers will run in `runner`.
    pub(super) fn new(runner: Runner) -> Self {
        Self {
            runner,
            in_flight: InFlight::default(),
            unsent: HashMap::default(),
            unacked: Unacked::default(),
            session: None,
            node_capacity: 0,
        }
    }

    /// Requests held: running, or finished with the reply unsent.
    pub(super) fn len(&self) -> usize {
        self.in_flight.len() + self.unsent.len()
    }

    /// The most results kept after sending until the node proves it read them: the capacity,
    /// at least one.
    pub(super) fn unacked_bound(capacity: u32) -> usize {
        usize::try_from(capacity.max(1)).unwrap_or(usize::MAX)
    }

    /// Remembers results just sent, in the order sent, dropping the oldest beyond `bound`.
    pub(super) fn sent(&mut self, answers: impl IntoIterator<Item = Answered>, bound: usize) {
        let unacked = &mut self.unacked;
        unacked.sent.extend(answers);
        let excess = unacked.sent.len().saturating_sub(bound);
        if excess > 0 {
            unacked.sent.drain(..excess);
            unacked.first += excess as u64;
        }
    }

    /// A `Ping` with `nonce` goes out now: its `Pong` proves every result sent before it read.
    pub(super) fn pinged(&mut self, nonce: u64) {
        let unacked = &mut self.unacked;
        if unacked.probe.is_none() && !unacked.sent.is_empty() {
            unacked.probe = Some((nonce, unacked.first + unacked.sent.len() as u64));
        }
    }

    /// The node answered the `Ping` with `nonce`.
    pub(super) fn ponged(&mut self, nonce: u64) {
        let unacked = &mut self.unacked;
        let Some((probe, upto)) = unacked.probe else {
            return;
        };
        if probe != nonce {
            return;
        }
        unacked.probe = None;
        let read = usize::try_from(upto.saturating_sub(unacked.first))
            .unwrap_or(usize::MAX)
            .min(unacked.sent.len());
        unacked.sent.drain(..read);
        unacked.first += read as u64;
    }

    /// The connection was lost: results it may not have delivered become unsent again, and the
    /// session starts its grace when `resumable`; otherwise everything held is dropped.
    pub(super) fn lost(&mut self, resumable: bool) {
        let unacked = std::mem::take(&mut self.unacked);
        match &mut self.session {
            Some(kept) if resumable => {
                kept.lost_at.get_or_insert_with(Instant::now);
                for answered in unacked.sent {
                    self.unsent.insert(answered.correlation, answered);
                }
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
        let mut holding: Vec<u64> = self
            .in_flight
            .keys()
            .chain(self.unsent.keys())
            .copied()
            .collect();
        if holding.len() > ResumeSession::MAX_HOLDING {
            for dropped in holding.split_off(ResumeSession::MAX_HOLDING) {
                self.forget(dropped);
            }
        }
        holding
    }

    /// Drops the request `correlation`: its handler is aborted, its result forgotten.
    pub(super) fn forget(&mut self, correlation: u64) {
        if let Some(ticket) = self.in_flight.remove(&correlation) {
            self.runner.abort(ticket);
            self.runner.flush();
        }
        self.unsent.remove(&correlation);
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
        self.in_flight.clear();
        self.unsent.clear();
        self.unacked = Unacked::default();
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
    use crate::worker::runner::Runner;

    /// Nothing held, handlers that echo.
    fn held() -> Held {
        let echo =
            handler_fn(|request: Request| async move { ActivityOutcome::Success(request.input) });
        Held::new(Runner::spawn(
            Arc::new(echo),
            tokio::sync::watch::channel(None).1,
        ))
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
