//! A peer's link: its outbound queue plus the table of relays sent to it without an outcome.
//!
//! Like a worker link, the table decides each relay's fate once: the serving node's outcome,
//! the dispatch's own end (deadline or cancel) or the link's close, whichever comes first. A
//! relay ended here keeps its entry until the peer's outcome for it arrives or the link
//! closes, so the capacity it was charged against stays charged while it may still run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use lintel_wire::{Cancel, DispatchRequest, DispatchResult, Frame, FrameRef, NodeRouting};

use lintel_client::transport::Outbound;

use crate::idmap::IdMap;

use super::fate::{End, PushError, ReplyFate};

/// What a peer link holds for one relay until the peer lets go of it.
pub trait RelayEntry: Send + Sync {
    /// The peer's outcome for a relay that had not ended.
    fn answered(&self, result: DispatchResult);
    /// The link closed under a relay that had not ended, `after` it was sent: it may have run.
    fn lost(&self, after: Duration);
    /// This node shut down under a relay that had not ended: it may have run.
    fn abandoned(&self);
    /// A relay that had already ended is let go (its outcome came, or the link closed).
    fn released(&self);
}

struct Entry {
    relay: Arc<dyn RelayEntry>,
    sent_at: Instant,
    ended: bool,
}

#[derive(Default)]
struct Table {
    next_correlation: u64,
    pending: IdMap<u64, Entry>,
    closed: bool,
}

struct Inner {
    node_id: Arc<str>,
    outbound: Outbound,
    table: Mutex<Table>,
    /// Mirrors `Table::closed` for placement, which reads it without the table's lock.
    closed: AtomicBool,
    sent: AtomicU64,
}

/// Cloneable handle to one peer link's relay path.
#[derive(Clone)]
pub struct PeerLink {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PeerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerLink")
            .field("node_id", &self.inner.node_id)
            .finish_non_exhaustive()
    }
}

impl PeerLink {
    /// A link to the peer `node_id` whose frames go to `outbound`.
    pub fn new(node_id: Arc<str>, outbound: Outbound) -> Self {
        Self {
            inner: Arc::new(Inner {
                node_id,
                outbound,
                table: Mutex::new(Table::default()),
                closed: AtomicBool::new(false),
                sent: AtomicU64::new(0),
            }),
        }
    }

    /// The peer's node id.
    pub fn node_id(&self) -> &Arc<str> {
        &self.inner.node_id
    }

    /// Queues `request` as a relay with `budget` left for the reply; once it is queued, the
    /// request is handed to `entry` to build what hears the relay's fate. Returns the relay's
    /// correlation id on this link.
    ///
    /// # Errors
    /// [`PushError::Closed`] when the link is closed, [`PushError::Backpressure`] when its
    /// queue is full; either way nothing was sent and the request is handed back.
    pub fn relay(
        &self,
        request: DispatchRequest,
        routing: NodeRouting,
        budget: Duration,
        entry: impl FnOnce(DispatchRequest) -> Arc<dyn RelayEntry>,
    ) -> Result<u64, (PushError, Box<DispatchRequest>)> {
        let mut table = self.table();
        if table.closed {
            return Err((PushError::Closed, Box::new(request)));
        }
        let correlation = table.next_correlation.wrapping_add(1);
        let sent = self.inner.outbound.try_send_ref(FrameRef::Relay {
            correlation,
            request: &request,
            routing: &routing,
            reply_timeout_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
        });
        if let Err(err) = sent {
            return Err((PushError::from_send(err), Box::new(request)));
        }
        table.next_correlation = correlation;
        // Encoded already: the request goes on to the entry, which keeps it for a retry.
        table.pending.insert(
            correlation,
            Entry {
                relay: entry(request),
                sent_at: Instant::now(),
                ended: false,
            },
        );
        self.inner.sent.fetch_add(1, Ordering::Relaxed);
        Ok(correlation)
    }

    /// Ends relay `correlation` for the dispatch's own reason, unless its outcome or the
    /// link's close decided it first; the peer is sent `Cancel` and the entry stays until the
    /// peer's outcome for it arrives.
    pub fn end(&self, correlation: u64) -> End {
        let mut table = self.table();
        match table.pending.get_mut(&correlation) {
            Some(entry) if !entry.ended => entry.ended = true,
            _ => return End::TooLate,
        }
        // Owed: at most one per relay, and relays are bounded by the capacity charged.
        let _ = self
            .inner
            .outbound
            .send_owed(Frame::Cancel(Cancel { correlation }));
        End::Ended
    }

    /// Hands the peer's outcome to its relay.
    pub fn answer(&self, correlation: u64, result: DispatchResult) -> ReplyFate {
        let entry = self.table().pending.remove(&correlation);
        match entry {
            Some(entry) if !entry.ended => {
                entry.relay.answered(result);
                ReplyFate::Delivered
            }
            Some(entry) => {
                entry.relay.released();
                ReplyFate::Late
            }
            None => ReplyFate::Unknown,
        }
    }

    /// Closes the link: later relays fail, live ones are lost and ended ones let go, now.
    pub fn close(&self) {
        for (entry, ended) in self.take_all() {
            if ended {
                entry.relay.released();
            } else {
                entry.relay.lost(entry.sent_at.elapsed());
            }
        }
    }

    /// Closes the link because this node shuts down: live relays are abandoned, not lost.
    pub fn close_abandoning(&self) {
        for (entry, ended) in self.take_all() {
            if ended {
                entry.relay.released();
            } else {
                entry.relay.abandoned();
            }
        }
    }

    fn take_all(&self) -> Vec<(Entry, bool)> {
        let mut table = self.table();
        table.closed = true;
        self.inner.closed.store(true, Ordering::Release);
        let mut pending: Vec<(u64, Entry)> =
            std::mem::take(&mut table.pending).into_iter().collect();
        // In the order sent, so the outcomes go out in the same order in every run.
        pending.sort_unstable_by_key(|(correlation, _)| *correlation);
        pending
            .into_iter()
            .map(|(_, entry)| {
                let ended = entry.ended;
                (entry, ended)
            })
            .collect()
    }

    /// True while the link's outbound queue is at its bound: the peer is alive but reading
    /// slowly, so placement skips it instead of queuing more relays behind its backlog.
    pub fn is_busy(&self) -> bool {
        !self.inner.outbound.has_room()
    }

    /// False once [`PeerLink::close`] ran; read without the table's lock, so a relay may still
    /// meet a close this did not see, and is refused then.
    pub fn is_open(&self) -> bool {
        !self.inner.closed.load(Ordering::Acquire)
    }

    /// Relays without an outcome yet, ended ones included.
    pub fn in_flight(&self) -> usize {
        self.table().pending.len()
    }

    /// Relays sent on this link.
    pub fn sent(&self) -> u64 {
        self.inner.sent.load(Ordering::Relaxed)
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every update leaves the table consistent before anything that could panic.
        self.inner
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> DispatchRequest {
        DispatchRequest {
            namespace: "ns".into(),
            task_queue: "tq".into(),
            activity_type: "echo".into(),
            node: None,
            workflow_id: "wf".into(),
            ordinal: 1,
            run_id: None,
            attempt: 1,
            input: bytes::Bytes::new(),
            deadline_unix_ms: None,
        }
    }

    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl Heard {
        fn all(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl RelayEntry for Heard {
        fn answered(&self, result: DispatchResult) {
            self.0.lock().unwrap().push(format!("answered {result:?}"));
        }
        fn lost(&self, _: Duration) {
            self.0.lock().unwrap().push("lost".into());
        }
        fn abandoned(&self) {
            self.0.lock().unwrap().push("abandoned".into());
        }
        fn released(&self) {
            self.0.lock().unwrap().push("released".into());
        }
    }

    async fn link() -> (PeerLink, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_reader, outbound, _writer) =
            lintel_client::transport::split(accepted.unwrap().0, 1 << 20, 8);
        (PeerLink::new("b".into(), outbound), client.unwrap())
    }

    fn relay(link: &PeerLink, heard: &Arc<Heard>) -> u64 {
        let heard: Arc<dyn RelayEntry> = heard.clone();
        link.relay(request(), NodeRouting::Any, Duration::from_secs(1), |_| {
            heard
        })
        .unwrap()
    }

    #[tokio::test]
    async fn an_outcome_answers_only_its_own_relay_and_only_once() {
        let (link, _peer) = link().await;
        let heard = Arc::new(Heard::default());
        let first = relay(&link, &heard);
        let _second = relay(&link, &heard);
        assert_eq!(
            link.answer(99, DispatchResult::Cancelled),
            ReplyFate::Unknown
        );
        assert_eq!(
            link.answer(first, DispatchResult::Draining),
            ReplyFate::Delivered
        );
        assert_eq!(
            link.answer(first, DispatchResult::Draining),
            ReplyFate::Unknown
        );
        assert_eq!(link.in_flight(), 1);
        assert_eq!(link.sent(), 2);
        assert_eq!(heard.all(), ["answered Draining"]);
    }

    #[tokio::test]
    async fn an_ended_relay_is_held_until_its_outcome_arrives() {
        let (link, _peer) = link().await;
        let heard = Arc::new(Heard::default());
        let id = relay(&link, &heard);
        assert_eq!(link.end(id), End::Ended);
        assert_eq!(link.end(id), End::TooLate, "an end is decided once");
        assert_eq!(link.in_flight(), 1);
        assert_eq!(link.answer(id, DispatchResult::Cancelled), ReplyFate::Late);
        assert_eq!(link.in_flight(), 0);
        assert_eq!(heard.all(), ["released"]);
    }

    #[tokio::test]
    async fn closing_loses_live_relays_releases_ended_ones_and_refuses_new_ones() {
        let (link, _peer) = link().await;
        let live = Arc::new(Heard::default());
        let ended = Arc::new(Heard::default());
        relay(&link, &live);
        let id = relay(&link, &ended);
        assert_eq!(link.end(id), End::Ended);
        link.close();
        assert_eq!(live.all(), ["lost"]);
        assert_eq!(ended.all(), ["released"]);
        let refused = link.relay(request(), NodeRouting::Any, Duration::from_secs(1), |_| {
            Arc::new(Heard::default())
        });
        assert_eq!(refused.map_err(|(err, _)| err), Err(PushError::Closed));
    }
}
