//! A worker's link: its outbound queue plus the table of pushes the worker has not answered.
//!
//! The table is where each push's fate is decided, once, under a short mutex never held across
//! an `.await`: whichever of the reply, the dispatch's own end (deadline or cancel) and the
//! link's close takes the entry first wins. An ended push stays in the table until the worker
//! replies late, the link closes or a grace runs out, so its slot is held while the worker may
//! still run it. A `Cancel` is a control frame and a `Push` bulk, so a `Cancel` may reach the
//! worker before a `Push` still queued: the worker ignores it, and the late reply frees the
//! slot. Inside a batching scope (every connection task) queuing is only a buffer append.

use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::Instant;

use lintel_wire::{Cancel, DispatchRequest, DispatchResponse, Frame, FrameRef, Push};

use lintel_client::transport::Outbound;

use crate::idmap::IdMap;

use super::fate::{End, PushError, ReplyFate};

/// What a link holds for one push until the worker lets go of it.
pub trait PushEntry: Send + Sync {
    /// The worker replied to a push that had not ended.
    fn replied(&self, response: DispatchResponse);
    /// The link closed under a push that had not ended: the worker may have run it.
    fn lost(&self);
    /// The node shut down under a push that had not ended: the worker may have run it.
    fn abandoned(&self);
    /// A push that had already ended is let go, for the reason given.
    fn released(&self, why: Release);
}

/// Why the link lets go of a push that ended without its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The worker replied after the push ended.
    LateReply,
    /// The link closed.
    LinkClosed,
    /// The grace for a late reply ran out.
    GraceExpired,
    /// The push ended while still held, so it was never sent.
    NeverSent,
}

struct Entry {
    push: Arc<dyn PushEntry>,
    /// When the push ended without its reply; `None` while it is live.
    ended_at: Option<Instant>,
}

#[derive(Default)]
struct Table {
    next_correlation: u64,
    pending: IdMap<u64, Entry>,
    /// Pushes held until [`WorkerLink::open`], so they follow the `Registered` frame.
    held: Option<Vec<(u64, Frame)>>,
    closed: bool,
}

struct Inner {
    pid: u64,
    outbound: Outbound,
    table: Mutex<Table>,
}

/// Cloneable handle to one worker connection's push path.
#[derive(Clone)]
pub struct WorkerLink {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WorkerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerLink")
            .field("pid", &self.inner.pid)
            .finish_non_exhaustive()
    }
}

impl WorkerLink {
    /// A link for the connection `pid` whose frames go to `outbound`.
    pub fn new(pid: u64, outbound: Outbound) -> Self {
        Self::with_table(pid, outbound, Table::default())
    }

    /// A link that holds pushes until [`WorkerLink::open`]; a registering connection uses it
    /// so no push overtakes the `Registered` frame.
    pub fn held(pid: u64, outbound: Outbound) -> Self {
        let table = Table {
            held: Some(Vec::new()),
            ..Table::default()
        };
        Self::with_table(pid, outbound, table)
    }

    fn with_table(pid: u64, outbound: Outbound, table: Table) -> Self {
        Self {
            inner: Arc::new(Inner {
                pid,
                outbound,
                table: Mutex::new(table),
            }),
        }
    }

    /// Queues the held pushes in order and sends later pushes directly. Held pushes are owed:
    /// each holds a worker slot, so their number is bounded by the worker's capacity.
    pub fn open(&self) {
        let mut table = self.table();
        for (_, frame) in table.held.take().unwrap_or_default() {
            if self.inner.outbound.send_owed(frame).is_err() {
                break;
            }
        }
    }

    /// The connection this link pushes on.
    pub fn pid(&self) -> u64 {
        self.inner.pid
    }

    /// Queues `request` as a push whose fate `entry` hears; returns its worker correlation id.
    /// The request is encoded where it lies, or copied only while the link holds pushes.
    ///
    /// # Errors
    /// [`PushError::Closed`] when the link is closed, [`PushError::Backpressure`] when its
    /// queue is full; either way nothing was sent and no entry is left.
    pub fn push(
        &self,
        request: &DispatchRequest,
        entry: Arc<dyn PushEntry>,
    ) -> Result<u64, PushError> {
        let mut table = self.table();
        if table.closed {
            return Err(PushError::Closed);
        }
        let correlation = table.next_correlation.wrapping_add(1);
        match table.held.as_mut() {
            Some(held) => held.push((
                correlation,
                Frame::from(Push {
                    correlation,
                    request: request.clone(),
                }),
            )),
            None => {
                let push = FrameRef::Push {
                    correlation,
                    request,
                };
                if let Err(err) = self.inner.outbound.try_send_ref(push) {
                    return Err(PushError::from_send(err));
                }
            }
        }
        table.next_correlation = correlation;
        let entry = Entry {
            push: entry,
            ended_at: None,
        };
        table.pending.insert(correlation, entry);
        Ok(correlation)
    }

    /// Ends push `correlation` for the dispatch's own reason (deadline, cancel), unless the
    /// reply or the link's close decided it first. An ended push keeps its entry, and so its
    /// slot, until the worker lets go; a held one is dropped unsent.
    pub fn end(&self, correlation: u64) -> End {
        let mut table = self.table();
        let live = table
            .pending
            .get(&correlation)
            .is_some_and(|entry| entry.ended_at.is_none());
        if !live {
            return End::TooLate;
        }
        let unsent = table.held.as_mut().and_then(|held| {
            let at = held.iter().position(|(held, _)| *held == correlation)?;
            Some(held.remove(at))
        });
        if unsent.is_some() {
            let entry = table.pending.remove(&correlation);
            drop(table);
            if let Some(entry) = entry {
                entry.push.released(Release::NeverSent);
            }
            return End::Unsent;
        }
        if let Some(entry) = table.pending.get_mut(&correlation) {
            entry.ended_at = Some(Instant::now());
        }
        // Owed: at most one per push, and pushes are bounded by the worker's capacity.
        let _ = self
            .inner
            .outbound
            .send_owed(Frame::Cancel(Cancel { correlation }));
        End::Ended
    }

    /// Hands a worker's reply to its push.
    pub fn reply(&self, correlation: u64, response: DispatchResponse) -> ReplyFate {
        let entry = self.table().pending.remove(&correlation);
        match entry {
            Some(Entry {
                push,
                ended_at: None,
            }) => {
                push.replied(response);
                ReplyFate::Delivered
            }
            Some(Entry { push, .. }) => {
                push.released(Release::LateReply);
                ReplyFate::Late
            }
            None => ReplyFate::Unknown,
        }
    }

    /// Lets go of pushes that ended at or before `cutoff` and still have no reply; returns
    /// how many.
    pub fn reclaim(&self, cutoff: Instant) -> usize {
        let expired: Vec<Entry> = {
            let mut table = self.table();
            let stale: Vec<u64> = table
                .pending
                .iter()
                .filter(|(_, entry)| entry.ended_at.is_some_and(|at| at <= cutoff))
                .map(|(correlation, _)| *correlation)
                .collect();
            stale
                .iter()
                .filter_map(|correlation| table.pending.remove(correlation))
                .collect()
        };
        for entry in &expired {
            entry.push.released(Release::GraceExpired);
        }
        expired.len()
    }

    /// Closes the link: later pushes fail, live pushes are lost and ended ones let go, now.
    pub fn close(&self) {
        self.close_as(|entry| entry.lost());
    }

    /// Closes the link because the node shuts down: live pushes are abandoned, not lost.
    pub fn close_abandoning(&self) {
        self.close_as(|entry| entry.abandoned());
    }

    fn close_as(&self, live: fn(&dyn PushEntry)) {
        let pending = {
            let mut table = self.table();
            table.closed = true;
            table.held = None;
            std::mem::take(&mut table.pending)
        };
        let mut pending: Vec<(u64, Entry)> = pending.into_iter().collect();
        // In the order pushed, so the outcomes go out in the same order in every run.
        pending.sort_unstable_by_key(|(correlation, _)| *correlation);
        for (_, entry) in pending {
            match entry.ended_at {
                None => live(&*entry.push),
                Some(_) => entry.push.released(Release::LinkClosed),
            }
        }
    }

    /// Pushes the worker has not let go of, ended ones included.
    pub fn in_flight(&self) -> usize {
        self.table().pending.len()
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
    use std::sync::Mutex;

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

    fn response() -> DispatchResponse {
        DispatchResponse {
            workflow_id: "wf".into(),
            ordinal: 1,
            run_id: None,
            outcome: lintel_wire::ActivityOutcome::Success(bytes::Bytes::new()),
        }
    }

    /// Records what the link told it.
    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl Heard {
        fn all(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl PushEntry for Heard {
        fn replied(&self, _: DispatchResponse) {
            self.0.lock().unwrap().push("replied".into());
        }
        fn lost(&self) {
            self.0.lock().unwrap().push("lost".into());
        }
        fn abandoned(&self) {
            self.0.lock().unwrap().push("abandoned".into());
        }
        fn released(&self, why: Release) {
            self.0.lock().unwrap().push(format!("{why:?}"));
        }
    }

    async fn link(held: bool) -> (WorkerLink, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (_reader, outbound, _writer) =
            lintel_client::transport::split(accepted.unwrap().0, 1 << 20, 8);
        let link = if held {
            WorkerLink::held(1, outbound)
        } else {
            WorkerLink::new(1, outbound)
        };
        (link, client.unwrap())
    }

    #[tokio::test]
    async fn a_reply_answers_only_its_own_push_and_only_once() {
        let (link, _peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        let first = link.push(&request(), heard.clone()).unwrap();
        let _second = link.push(&request(), heard.clone()).unwrap();
        assert_eq!(link.reply(999, response()), ReplyFate::Unknown);
        assert_eq!(link.reply(first, response()), ReplyFate::Delivered);
        assert_eq!(link.reply(first, response()), ReplyFate::Unknown);
        assert_eq!(link.in_flight(), 1);
        assert_eq!(heard.all(), ["replied"]);
    }

    #[tokio::test]
    async fn an_ended_push_holds_its_entry_until_the_late_reply() {
        let (link, _peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        let id = link.push(&request(), heard.clone()).unwrap();
        assert_eq!(link.end(id), End::Ended);
        assert_eq!(link.end(id), End::TooLate, "an end is decided once");
        assert_eq!(
            link.in_flight(),
            1,
            "the slot is held while the worker may run it"
        );
        assert_eq!(link.reply(id, response()), ReplyFate::Late);
        assert_eq!(link.in_flight(), 0);
        assert_eq!(heard.all(), ["LateReply"]);
    }

    #[tokio::test]
    async fn a_reply_that_came_first_makes_the_end_too_late() {
        let (link, _peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        let id = link.push(&request(), heard.clone()).unwrap();
        assert_eq!(link.reply(id, response()), ReplyFate::Delivered);
        assert_eq!(link.end(id), End::TooLate);
        assert_eq!(heard.all(), ["replied"]);
    }

    #[tokio::test]
    async fn ending_a_held_push_drops_it_unsent() {
        let (link, _peer) = link(true).await;
        let heard = Arc::new(Heard::default());
        let id = link.push(&request(), heard.clone()).unwrap();
        assert_eq!(link.end(id), End::Unsent);
        assert_eq!(link.in_flight(), 0);
        assert_eq!(heard.all(), ["NeverSent"]);
    }

    #[tokio::test]
    async fn closing_loses_live_pushes_releases_ended_ones_and_refuses_new_ones() {
        let (link, _peer) = link(false).await;
        let live = Arc::new(Heard::default());
        let ended = Arc::new(Heard::default());
        link.push(&request(), live.clone()).unwrap();
        let id = link.push(&request(), ended.clone()).unwrap();
        assert_eq!(link.end(id), End::Ended);
        link.close();
        assert_eq!(live.all(), ["lost"]);
        assert_eq!(ended.all(), ["LinkClosed"]);
        let refused = link.push(&request(), Arc::new(Heard::default()));
        assert_eq!(refused, Err(PushError::Closed));
    }

    #[tokio::test]
    async fn reclaiming_lets_go_only_of_ended_pushes_past_the_cutoff() {
        let (link, _peer) = link(false).await;
        let live = Arc::new(Heard::default());
        let ended = Arc::new(Heard::default());
        link.push(&request(), live.clone()).unwrap();
        let id = link.push(&request(), ended.clone()).unwrap();
        let before = Instant::now();
        assert_eq!(link.end(id), End::Ended);
        assert_eq!(link.reclaim(before), 0, "it ended after the cutoff");
        assert_eq!(link.reclaim(Instant::now()), 1);
        assert_eq!(ended.all(), ["GraceExpired"]);
        assert!(live.all().is_empty());
        assert_eq!(link.in_flight(), 1);
    }
}
