//! What the connection's thread and the handlers' runner share about the requests a worker
//! holds: which are owed a reply and under which ticket, the results not sent, the results sent
//! and not yet proved read, and the connection a finished handler's result may go out on from
//! the runner's own thread, so the connection's thread is not woken to send it.
//!
//! One lock guards it all: a result is checked as owed, sent and recorded in one step, so a
//! cancel read meanwhile cannot answer the same request twice.

use std::collections::{HashMap, VecDeque};

use lintel_transport::Outbound;
use lintel_wire::{FrameRef, Reply};

use super::handler::{Answered, Ticket};

/// Requests in flight by the node's correlation id, with the runner's ticket for each. The ids
/// come off the socket, so the map is seeded at random per process and per map: colliding ids
/// cannot be computed ahead.
pub(super) type InFlight = HashMap<u64, Ticket, foldhash::fast::RandomState>;

/// Results sent on the current connection that the node may not have read yet, kept until a
/// `Pong` to a later `Ping` proves it read them, at most a bound of them.
#[derive(Default)]
struct Unacked {
    /// Results in the order they were sent; the first has sequence number `first`.
    sent: VecDeque<Answered>,
    /// The sequence number of the first result in `sent`.
    first: u64,
    /// The ping sent after the results numbered below its second field, awaiting its pong.
    probe: Option<(u64, u64)>,
}

/// Where the runner sends results itself: the connection serving, and how many results sent
/// are kept until proved read.
struct Direct {
    outbound: Outbound,
    bound: usize,
}

/// See the module docs.
#[derive(Default)]
pub(super) struct Ledger {
    /// Requests whose reply is still owed, by correlation id. A cancelled request leaves this
    /// map before its handler is aborted and is answered by the cancel, so an answer that
    /// comes anyway matches no ticket here and sends nothing more.
    pub(super) in_flight: InFlight,
    /// Finished requests whose reply is owed and not sent (or sent on a connection since lost,
    /// maybe unread); at most as many as the requests accepted, so bounded by the capacity.
    pub(super) unsent: HashMap<u64, Answered, foldhash::fast::RandomState>,
    unacked: Unacked,
    /// `None` while no connection serves, or while one drains (its loop counts the replies).
    direct: Option<Direct>,
    /// An empty vector whose allocation `send_owed` reuses.
    spare: Vec<Answered>,
}

impl Ledger {
    /// Requests held: running, or finished with the reply unsent.
    pub(super) fn len(&self) -> usize {
        self.in_flight.len() + self.unsent.len()
    }

    /// From now on the runner sends results on `outbound` itself, keeping `bound` of them
    /// until proved read.
    pub(super) fn send_directly(&mut self, outbound: Outbound, bound: usize) {
        self.direct = Some(Direct { outbound, bound });
    }

    /// From now on results go through the connection's loop.
    pub(super) fn stop_sending_directly(&mut self) {
        self.direct = None;
    }

    /// Sends the results of `answers` that are owed and fit in the connection's queue now, and
    /// records them sent; leaves in `answers` those owed that did not (the connection's loop
    /// sends them, waiting for room or replacing one too large), and drops those no longer owed.
    pub(super) fn send_owed(&mut self, answers: &mut Vec<Answered>) {
        let Ledger {
            in_flight,
            unacked,
            direct,
            spare,
            ..
        } = self;
        let Some(direct) = direct else {
            return;
        };
        let mut waiting = std::mem::take(spare);
        for answered in answers.drain(..) {
            if in_flight.get(&answered.correlation) != Some(&answered.ticket) {
                continue;
            }
            let reply = FrameRef::Reply(Reply {
                correlation: answered.correlation,
                response: answered.response(),
            });
            if direct.outbound.try_send_ref(&reply).is_err() {
                waiting.push(answered);
                continue;
            }
            in_flight.remove(&answered.correlation);
            unacked.sent.push_back(answered);
        }
        std::mem::swap(answers, &mut waiting);
        *spare = waiting;
        let bound = direct.bound;
        self.trim_unacked(bound);
    }

    /// Remembers results just sent, in the order sent, dropping the oldest beyond `bound`.
    pub(super) fn sent(&mut self, answers: impl IntoIterator<Item = Answered>, bound: usize) {
        self.unacked.sent.extend(answers);
        self.trim_unacked(bound);
    }

    /// Drops the oldest results sent beyond `bound`.
    fn trim_unacked(&mut self, bound: usize) {
        let unacked = &mut self.unacked;
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

    /// The connection was lost: the results it may not have delivered become unsent again.
    pub(super) fn unproved_unsent(&mut self) {
        self.direct = None;
        for answered in std::mem::take(&mut self.unacked).sent {
            self.unsent.insert(answered.correlation, answered);
        }
    }

    /// Forgets every request and result.
    pub(super) fn clear(&mut self) {
        self.in_flight.clear();
        self.unsent.clear();
        self.unacked = Unacked::default();
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use lintel_wire::{Frame, FrameCodec, DEFAULT_MAX_FRAME_LEN};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::codec::FramedRead;

    use super::Ledger;
    use crate::worker::handler::Answered;

    /// A ledger sending on a real connection, and the other end reading its frames.
    async fn connected() -> (
        Ledger,
        FramedRead<tokio::net::tcp::OwnedReadHalf, FrameCodec>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (_reader, outbound, _writer) =
            lintel_transport::split(client, DEFAULT_MAX_FRAME_LEN, 64);
        let mut ledger = Ledger::default();
        ledger.send_directly(outbound, 8);
        let (read, _write) = server.into_split();
        (
            ledger,
            FramedRead::new(read, FrameCodec::new(DEFAULT_MAX_FRAME_LEN)),
        )
    }

    #[tokio::test]
    async fn a_result_still_owed_is_sent_and_kept_until_proved_read_and_others_are_dropped() {
        let (mut ledger, mut frames) = connected().await;
        ledger.in_flight.insert(1, 0);
        // Correlation 2 was cancelled; 3 went to a later push under another ticket.
        ledger.in_flight.insert(3, 9);
        let mut answers = vec![Answered::echo(1), Answered::echo(2), Answered::echo(3)];
        ledger.send_owed(&mut answers);
        assert!(answers.is_empty(), "nothing left for the connection's loop");
        assert!(!ledger.in_flight.contains_key(&1), "answered");
        assert_eq!(
            ledger.in_flight.get(&3),
            Some(&9),
            "the later push is still owed"
        );
        let Some(Ok(Frame::Reply(reply))) = frames.next().await else {
            panic!("expected the reply");
        };
        assert_eq!(reply.correlation, 1);
        ledger.unproved_unsent();
        assert!(
            ledger.unsent.contains_key(&1),
            "not yet proved read: listed again"
        );
    }

    #[tokio::test]
    async fn without_a_connection_to_send_on_results_go_to_the_connections_loop() {
        let (mut ledger, _frames) = connected().await;
        ledger.stop_sending_directly();
        ledger.in_flight.insert(1, 0);
        let mut answers = vec![Answered::echo(1)];
        ledger.send_owed(&mut answers);
        assert_eq!(answers.len(), 1, "left for the connection's loop");
        assert!(ledger.in_flight.contains_key(&1), "still owed");
    }
}
