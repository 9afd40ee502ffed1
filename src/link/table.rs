//! A link: an outbound queue plus the table of requests sent on it that the other side has not
//! let go of, the same for a worker link's pushes and a peer link's relays; a [`Kind`] adds
//! whom it sends to, what it sends and what answers it.
//!
//! Each request's fate is decided here, once, under a short mutex never held across an
//! `.await`: whichever of the answer, the request's own end (deadline, cancel) and the link's
//! close takes its entry first wins. An ended request keeps its entry until the other side
//! answers late, the link closes or a grace runs out, so what it holds stays held while it may
//! still run. A link being retired takes no new request while those sent await their answers.
//! A request moves through [`Stage`]s; how the link lets go of one is said to its
//! [`Entry`] by an answer, an [`Unanswered`] or a [`Release`], so a new way for a link to end
//! is a new variant there.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use lintel_transport::Outbound;
use lintel_wire::{Cancel, Frame};

use super::fate::{End, PushError, ReplyFate};
use crate::idmap::IdMap;

/// What sets one kind of link apart: its own fields, and the answer its requests wait for.
pub trait Kind: std::fmt::Debug + Send + Sync + 'static {
    /// The answer a request sent on this kind of link waits for, lent from the frame it
    /// arrived in: an entry that keeps any of it takes a copy.
    type Answer<'a>;
}

/// What a link of kind `K` holds for one request until the other side lets go of it.
pub trait Entry<K: Kind>: Send + Sync {
    /// The answer to a request that had not ended.
    fn answered(&self, answer: K::Answer<'_>);
    /// The link let go of a request that had not ended, without its answer.
    fn unanswered(&self, why: Unanswered);
    /// A request that had already ended is let go.
    fn released(&self, why: Release);
    /// The request now awaits its answer on `to`, under the same correlation.
    fn moved(&self, _to: &Link<K>, _correlation: u64) {}
    /// The other side says a live request still runs, with what it says of it.
    fn progress(&self, _details: &bytes::Bytes) {}
    /// The request's answer now comes on the other side's new connection, as before.
    fn resumed(&self) {}
}

/// Why a link let go of a live request without its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// The link closed: the other side may have run it.
    Lost,
    /// This node shuts down: the other side may have run it.
    Abandoned,
    /// The other side said it answered everything it handled: it never ran this one.
    Unhandled,
}

/// Why a link lets go of a request that ended without its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The answer came after the request ended.
    LateReply,
    /// The link closed.
    LinkClosed,
    /// The grace for a late answer ran out.
    GraceExpired,
    /// The request ended while still held, so it was never sent.
    NeverSent,
}

/// Where one request stands.
enum Stage {
    /// Waiting, unsent, for the link to open.
    Held,
    /// Sent; its answer is awaited.
    Live,
    /// Ended here at this instant; kept until the other side lets go.
    Ended(Instant),
}

struct Record<K: Kind> {
    entry: Arc<dyn Entry<K>>,
    stage: Stage,
}

/// The requests sent without an answer, by correlation id.
struct Table<K: Kind> {
    next_correlation: u64,
    pending: IdMap<u64, Record<K>>,
    /// While the link holds new requests until [`Link::open`], their frames in order.
    held: Option<Vec<(u64, Frame)>>,
    /// Where the link's frames go: under the table's lock, so a worker's resumed session can
    /// move the link to its new connection between two sends.
    outbound: Outbound,
}

pub(super) struct Inner<K: Kind> {
    pub(super) kind: K,
    table: Mutex<Table<K>>,
    /// Shared with the other links to the same peer incarnation, whose correlations continue
    /// one numbering; `None` numbers this link's requests from 1.
    numbering: Option<Arc<AtomicU64>>,
    /// [`OPEN`], [`RETIRING`] or [`CLOSED`], in that order; set under the table's lock and
    /// read without it by [`Link::is_open`].
    state: AtomicU8,
}

/// The link takes new requests.
const OPEN: u8 = 0;
/// The link takes no new request; those sent still await their answers.
const RETIRING: u8 = 1;
/// The link let go of every request.
const CLOSED: u8 = 2;

/// Cloneable handle to one connection's path for requests and their answers.
pub struct Link<K: Kind> {
    pub(super) inner: Arc<Inner<K>>,
}

impl<K: Kind> Clone for Link<K> {
    fn clone(&self) -> Self {
        let inner = Arc::clone(&self.inner);
        Self { inner }
    }
}

impl<K: Kind> std::fmt::Debug for Link<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.kind.fmt(f)
    }
}

impl<K: Kind> Link<K> {
    /// A link of `kind` whose frames go to `outbound`; while `holding`, requests wait unsent
    /// until [`Link::open`]. Correlations continue `numbering` when one is given (a gap is
    /// left by a request whose send failed), and count from 1 otherwise.
    pub(super) fn with(
        kind: K,
        outbound: Outbound,
        holding: bool,
        numbering: Option<Arc<AtomicU64>>,
    ) -> Self {
        let pending = IdMap::default();
        let table = Mutex::new(Table {
            next_correlation: 0,
            pending,
            held: holding.then(Vec::new),
            outbound,
        });
        let inner = Inner {
            kind,
            table,
            numbering,
            state: AtomicU8::new(OPEN),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The next correlation id, reserved while the returned guard holds the table.
    ///
    /// # Errors
    /// [`PushError::Closed`] once the link is retiring or closed.
    #[inline]
    pub(super) fn vacant(&self) -> Result<Vacant<'_, K>, PushError> {
        let table = self.table();
        if self.inner.state.load(Ordering::Relaxed) != OPEN {
            return Err(PushError::Closed);
        }
        let correlation = match &self.inner.numbering {
            None => table.next_correlation.wrapping_add(1),
            Some(numbering) => numbering.fetch_add(1, Ordering::AcqRel).wrapping_add(1),
        };
        Ok(Vacant { table, correlation })
    }

    /// Queues the held requests in order and sends later ones directly. Held requests are
    /// owed: each holds what it was admitted against, which bounds them.
    pub fn open(&self) {
        let mut table = self.table();
        let Some(held) = table.held.take() else {
            return;
        };
        for (correlation, _) in &held {
            if let Some(record) = table.pending.get_mut(correlation) {
                record.stage = Stage::Live;
            }
        }
        for (_, frame) in held {
            if table.outbound.send_owed(frame).is_err() {
                break;
            }
        }
    }

    /// Ends request `correlation` for the dispatch's own reason (deadline, cancel), unless its
    /// answer or the link's close decided it first. A sent one is told `Cancel` and keeps its
    /// entry until the other side lets go; a held one is dropped unsent.
    pub fn end(&self, correlation: u64) -> End {
        let mut table = self.table();
        let Some(record) = table.pending.get_mut(&correlation) else {
            return End::TooLate;
        };
        match record.stage {
            Stage::Ended(_) => End::TooLate,
            Stage::Live => {
                record.stage = Stage::Ended(Instant::now());
                // Owed: at most one per request, and requests are bounded by what they hold.
                let cancel = Frame::Cancel(Cancel { correlation });
                let _ = table.outbound.send_owed(cancel);
                End::Ended
            }
            Stage::Held => {
                if let Some(held) = table.held.as_mut() {
                    held.retain(|(held, _)| *held != correlation);
                }
                let record = table.pending.remove(&correlation);
                drop(table);
                if let Some(record) = record {
                    record.entry.released(Release::NeverSent);
                }
                End::Unsent
            }
        }
    }

    /// Hands the other side's answer to its request.
    #[inline]
    pub(super) fn deliver(&self, correlation: u64, answer: K::Answer<'_>) -> ReplyFate {
        let mut table = self.table();
        let Some(record) = table.pending.remove(&correlation) else {
            return ReplyFate::Unknown;
        };
        drop(table);
        match record.stage {
            Stage::Held | Stage::Live => {
                record.entry.answered(answer);
                ReplyFate::Delivered
            }
            Stage::Ended(_) => {
                record.entry.released(Release::LateReply);
                ReplyFate::Late
            }
        }
    }

    /// Hands the other side's progress to live request `correlation`; false when no live
    /// request has it (the progress is dropped).
    pub fn progress(&self, correlation: u64, details: &bytes::Bytes) -> bool {
        let entry = {
            let table = self.table();
            match table.pending.get(&correlation) {
                Some(record) if !matches!(record.stage, Stage::Ended(_)) => {
                    Arc::clone(&record.entry)
                }
                _ => return false,
            }
        };
        entry.progress(details);
        true
    }

    /// Lets go of requests that ended at or before `cutoff` and still have no answer; returns
    /// how many.
    pub fn reclaim(&self, cutoff: Instant) -> usize {
        let mut expired = Vec::new();
        self.table().pending.retain(|_, record| {
            let stale = matches!(record.stage, Stage::Ended(at) if at <= cutoff);
            if stale {
                expired.push(Arc::clone(&record.entry));
            }
            !stale
        });
        for entry in &expired {
            entry.released(Release::GraceExpired);
        }
        expired.len()
    }

    /// Closes the link: later requests fail, live ones are lost and ended ones let go, now.
    pub fn close(&self) {
        self.close_as(Unanswered::Lost);
    }

    /// Closes the link because this node shuts down: live requests are abandoned, not lost.
    pub fn close_abandoning(&self) {
        self.close_as(Unanswered::Abandoned);
    }

    /// Takes no new request from now on; those sent keep waiting for their answers until the
    /// link closes.
    pub fn retire(&self) {
        let _table = self.table();
        let _ =
            self.inner
                .state
                .compare_exchange(OPEN, RETIRING, Ordering::Release, Ordering::Relaxed);
    }

    /// Closes the link because the other side said it answered every request it handled:
    /// each live one still unanswered was never handled there and is told so.
    pub fn close_unhandled(&self) {
        self.close_as(Unanswered::Unhandled);
    }

    fn close_as(&self, why: Unanswered) {
        let pending = {
            let mut table = self.table();
            self.inner.state.store(CLOSED, Ordering::Release);
            table.held = None;
            std::mem::take(&mut table.pending)
        };
        let mut pending: Vec<(u64, Record<K>)> = pending.into_iter().collect();
        // In the order taken, so the outcomes go out in the same order in every run.
        pending.sort_unstable_by_key(|(correlation, _)| *correlation);
        for (_, record) in pending {
            match record.stage {
                Stage::Held | Stage::Live => record.entry.unanswered(why),
                Stage::Ended(_) => record.entry.released(Release::LinkClosed),
            }
        }
    }

    /// False once the link is retiring or closed; read without the table's lock, so a request
    /// may still meet a retirement or close this did not see, and is refused then.
    pub fn is_open(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == OPEN
    }

    /// True once the link let go of every request: closed, not merely retiring.
    pub fn is_closed(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == CLOSED
    }

    /// Requests the other side has not let go of, ended ones included.
    pub fn in_flight(&self) -> usize {
        self.table().pending.len()
    }

    /// The lowest correlation the other side has not let go of, ended ones included.
    pub fn lowest_pending(&self) -> Option<u64> {
        self.table().pending.keys().min().copied()
    }

    /// True when both handles are to the same link.
    pub fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The requests sent and not ended that await their answers, in order.
    pub fn live(&self) -> Vec<u64> {
        let mut live: Vec<u64> = self
            .table()
            .pending
            .iter()
            .filter(|(_, record)| !matches!(record.stage, Stage::Ended(_)))
            .map(|(correlation, _)| *correlation)
            .collect();
        live.sort_unstable();
        live
    }

    /// Lets go of the requests that ended here (their link closed under them); returns them.
    pub fn release_ended(&self) -> Vec<u64> {
        let mut released = Vec::new();
        self.table().pending.retain(|correlation, record| {
            let ended = matches!(record.stage, Stage::Ended(_));
            if ended {
                released.push((*correlation, Arc::clone(&record.entry)));
            }
            !ended
        });
        released.sort_unstable_by_key(|(correlation, _)| *correlation);
        for (_, entry) in &released {
            entry.released(Release::LinkClosed);
        }
        released.into_iter().map(|(c, _)| c).collect()
    }

    /// Takes live request `correlation` out of the table.
    fn take_live(&self, correlation: u64) -> Option<Record<K>> {
        let mut table = self.table();
        match table.pending.get(&correlation) {
            Some(record) if !matches!(record.stage, Stage::Ended(_)) => {
                table.pending.remove(&correlation)
            }
            _ => None,
        }
    }

    /// Lets go of live request `correlation` without its answer, for `why`.
    pub fn let_go(&self, correlation: u64, why: Unanswered) {
        if let Some(record) = self.take_live(correlation) {
            record.entry.unanswered(why);
        }
    }

    /// Lets go of every live request numbered above `mark` without its answer, for `why`.
    pub fn let_go_above(&self, mark: u64, why: Unanswered) {
        for correlation in self.live() {
            if correlation > mark {
                self.let_go(correlation, why);
            }
        }
    }

    /// Moves the link to `outbound`, the other side's new connection, which says it holds
    /// `holding`: a live request listed stays and its answer now comes there; every other live
    /// one is lost and every ended one let go. `answer(&rebound)` is queued there first, before
    /// any frame of the link's. `None`, changing nothing, once the link is closed.
    pub fn rebind(
        &self,
        outbound: Outbound,
        holding: &[u64],
        answer: impl FnOnce(&Rebound) -> Frame,
    ) -> Option<Rebound> {
        let mut rebound = Rebound::default();
        let (lost, released, attached) = {
            let mut table = self.table();
            if self.inner.state.load(Ordering::Acquire) == CLOSED {
                return None;
            }
            let mut listed = std::collections::HashSet::with_capacity(holding.len());
            let mut attached = Vec::new();
            for &correlation in holding {
                if !listed.insert(correlation) {
                    continue;
                }
                match table.pending.get(&correlation) {
                    Some(record) if !matches!(record.stage, Stage::Ended(_)) => {
                        rebound.attached.push(correlation);
                        attached.push(Arc::clone(&record.entry));
                    }
                    _ => rebound.unknown.push(correlation),
                }
            }
            let mut lost = Vec::new();
            let mut released = Vec::new();
            table.pending.retain(|correlation, record| {
                let keep = match record.stage {
                    Stage::Ended(_) => false,
                    Stage::Held | Stage::Live => listed.contains(correlation),
                };
                if !keep {
                    let into = match record.stage {
                        Stage::Ended(_) => &mut released,
                        Stage::Held | Stage::Live => &mut lost,
                    };
                    into.push((*correlation, Arc::clone(&record.entry)));
                }
                keep
            });
            let _ = outbound.send_owed(answer(&rebound));
            table.outbound = outbound;
            (lost, released, attached)
        };
        for entry in attached {
            entry.resumed();
        }
        for (_, entry) in sorted(lost) {
            entry.unanswered(Unanswered::Lost);
        }
        for (_, entry) in sorted(released) {
            entry.released(Release::LinkClosed);
        }
        Some(rebound)
    }

    /// Moves live request `correlation` to `to`, where its answer now comes; one `to` cannot
    /// take (closed) is lost.
    pub fn move_to(&self, correlation: u64, to: &Link<K>) {
        let Some(record) = self.take_live(correlation) else {
            return;
        };
        let entry = Arc::clone(&record.entry);
        let taken = {
            let mut table = to.table();
            if to.inner.state.load(Ordering::Acquire) == CLOSED {
                false
            } else {
                let record = Record {
                    entry: record.entry,
                    stage: Stage::Live,
                };
                table.pending.insert(correlation, record);
                true
            }
        };
        if taken {
            entry.moved(to, correlation);
        } else {
            entry.unanswered(Unanswered::Lost);
        }
    }

    /// The outbound queue the link sends on now.
    pub(super) fn outbound(&self) -> Outbound {
        self.table().outbound.clone()
    }

    fn table(&self) -> MutexGuard<'_, Table<K>> {
        // Every update leaves the table consistent before anything that could panic.
        self.inner
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What [`Link::rebind`] made of the requests the other side said it holds, in its order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rebound {
    /// Live requests whose answers now come on the new connection.
    pub attached: Vec<u64>,
    /// Requests this link does not hold live: their dispatches ended.
    pub unknown: Vec<u64>,
}

/// `entries` by correlation, so their outcomes go out in the same order in every run.
fn sorted<E>(mut entries: Vec<(u64, E)>) -> Vec<(u64, E)> {
    entries.sort_unstable_by_key(|(correlation, _)| *correlation);
    entries
}

/// The next correlation id of an open link, whose table stays locked until the request is
/// taken; dropped untaken (its send failed), it leaves the table as it was.
pub(super) struct Vacant<'a, K: Kind> {
    table: MutexGuard<'a, Table<K>>,
    /// The correlation id the request goes out with.
    pub(super) correlation: u64,
}

impl<K: Kind> Vacant<'_, K> {
    /// The outbound queue to send the request on, under the table's lock.
    pub(super) fn outbound(&self) -> &Outbound {
        &self.table.outbound
    }

    /// True while the link holds new requests until it opens: take them with
    /// [`Vacant::hold`], not [`Vacant::insert`].
    pub(super) fn holding(&self) -> bool {
        self.table.held.is_some()
    }

    /// Takes a request that was sent; returns its correlation id.
    #[inline]
    pub(super) fn insert(self, entry: Arc<dyn Entry<K>>) -> u64 {
        self.take(entry, Stage::Live)
    }

    /// Takes a request to send as `frame` when the link opens; returns its correlation id.
    pub(super) fn hold(mut self, entry: Arc<dyn Entry<K>>, frame: Frame) -> u64 {
        if let Some(held) = self.table.held.as_mut() {
            held.push((self.correlation, frame));
        }
        self.take(entry, Stage::Held)
    }

    #[inline]
    fn take(mut self, entry: Arc<dyn Entry<K>>, stage: Stage) -> u64 {
        let correlation = self.correlation;
        self.table.next_correlation = correlation;
        self.table
            .pending
            .insert(correlation, Record { entry, stage });
        correlation
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lintel_wire::DispatchResult::{Cancelled, Draining};
    use lintel_wire::Ping;

    use super::super::fixtures::{next_frame, outbound, Heard, Peer};
    use super::*;

    #[derive(Debug)]
    struct Tested;

    impl Kind for Tested {
        type Answer<'a> = lintel_wire::ResultRef<'a>;
    }

    async fn link(holding: bool) -> (Link<Tested>, Peer) {
        let (outbound, peer) = outbound().await;
        (Link::with(Tested, outbound, holding, None), peer)
    }

    fn take(link: &Link<Tested>, heard: &Arc<Heard>) -> u64 {
        link.vacant().unwrap().insert(heard.clone())
    }

    fn held(link: &Link<Tested>, heard: &Arc<Heard>) -> u64 {
        let vacant = link.vacant().unwrap();
        let nonce = vacant.correlation;
        vacant.hold(heard.clone(), Frame::Ping(Ping { nonce }))
    }

    #[tokio::test]
    async fn an_answer_answers_only_its_own_request_once_and_makes_its_end_too_late() {
        let (link, _peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        let first = take(&link, &heard);
        let _second = take(&link, &heard);
        assert_eq!(link.deliver(999, Cancelled), ReplyFate::Unknown);
        assert_eq!(link.deliver(first, Draining), ReplyFate::Delivered);
        assert_eq!(link.deliver(first, Cancelled), ReplyFate::Unknown);
        assert_eq!(link.end(first), End::TooLate, "the answer came first");
        assert_eq!(link.in_flight(), 1);
        assert_eq!(heard.all(), ["answered Draining"]);
    }

    #[tokio::test]
    async fn correlations_increase_and_one_whose_send_failed_is_not_used_up() {
        let (link, _peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        assert_eq!(take(&link, &heard), 1);
        assert_eq!(link.vacant().unwrap().correlation, 2, "dropped untaken");
        assert_eq!(take(&link, &heard), 2);
        assert_eq!(link.in_flight(), 2);
    }

    #[tokio::test]
    async fn an_ended_request_is_cancelled_and_holds_its_entry_until_the_late_answer() {
        let (link, mut peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        let id = take(&link, &heard);
        assert_eq!(link.end(id), End::Ended);
        assert_eq!(link.end(id), End::TooLate, "an end is decided once");
        let cancel = Frame::Cancel(Cancel { correlation: id });
        assert_eq!(next_frame(&mut peer).await, cancel);
        assert_eq!(link.in_flight(), 1, "held while the other side may run it");
        assert_eq!(link.deliver(id, Cancelled), ReplyFate::Late);
        assert_eq!(link.in_flight(), 0);
        assert_eq!(heard.all(), ["LateReply"]);
    }

    #[tokio::test]
    async fn held_requests_go_out_in_order_when_the_link_opens() {
        let (link, mut peer) = link(true).await;
        let heard = Arc::new(Heard::default());
        let ids: Vec<u64> = (0..5).map(|_| held(&link, &heard)).collect();
        link.open();
        for nonce in ids {
            assert_eq!(next_frame(&mut peer).await, Frame::Ping(Ping { nonce }));
        }
        assert!(!link.vacant().unwrap().holding(), "later ones go directly");
        assert_eq!(link.deliver(1, Draining), ReplyFate::Delivered);
        assert_eq!(heard.all(), ["answered Draining"]);
    }

    #[tokio::test]
    async fn ending_a_held_request_drops_it_unsent() {
        let (link, _peer) = link(true).await;
        let heard = Arc::new(Heard::default());
        let id = held(&link, &heard);
        assert_eq!(link.end(id), End::Unsent);
        assert_eq!(link.in_flight(), 0);
        assert_eq!(heard.all(), ["NeverSent"]);
    }

    #[tokio::test]
    async fn closing_lets_go_of_live_requests_releases_ended_ones_and_refuses_new_ones() {
        for why in [
            Unanswered::Lost,
            Unanswered::Abandoned,
            Unanswered::Unhandled,
        ] {
            let (link, _peer) = link(false).await;
            let (live, ended) = (Arc::new(Heard::default()), Arc::new(Heard::default()));
            take(&link, &live);
            let id = take(&link, &ended);
            assert_eq!(link.end(id), End::Ended);
            assert!(link.is_open());
            match why {
                Unanswered::Lost => link.close(),
                Unanswered::Abandoned => link.close_abandoning(),
                Unanswered::Unhandled => link.close_unhandled(),
            }
            assert!(!link.is_open() && link.is_closed());
            assert_eq!(live.all(), [format!("{why:?}")]);
            assert_eq!(ended.all(), ["LinkClosed"]);
            assert_eq!(link.vacant().err(), Some(PushError::Closed));
        }
    }

    #[tokio::test]
    async fn a_retiring_link_refuses_new_requests_and_still_takes_answers_to_sent_ones() {
        let (link, _peer) = link(false).await;
        let heard = Arc::new(Heard::default());
        let (first, second) = (take(&link, &heard), take(&link, &heard));
        link.retire();
        assert!(!link.is_open() && !link.is_closed());
        assert_eq!(link.vacant().err(), Some(PushError::Closed));
        assert_eq!(link.deliver(first, Draining), ReplyFate::Delivered);
        link.close_unhandled();
        assert_eq!(link.deliver(second, Cancelled), ReplyFate::Unknown);
        assert_eq!(heard.all(), ["answered Draining", "Unhandled"]);
    }

    #[tokio::test]
    async fn a_retired_links_requests_move_to_another_are_let_go_above_a_mark_or_released() {
        let (cut, _peer) = link(false).await;
        let (next, _next_peer) = link(false).await;
        let heard: Vec<Arc<Heard>> = (0..4).map(|_| Arc::new(Heard::default())).collect();
        let ids: Vec<u64> = heard.iter().map(|heard| take(&cut, heard)).collect();
        assert_eq!(cut.end(ids[3]), End::Ended);
        cut.retire();
        assert_eq!(cut.live(), ids[..3]);
        assert_eq!(cut.release_ended(), [ids[3]]);
        cut.move_to(ids[0], &next);
        cut.let_go_above(ids[1], Unanswered::Unhandled);
        cut.let_go(ids[1], Unanswered::Lost);
        assert_eq!((cut.in_flight(), next.in_flight()), (0, 1));
        assert_eq!(next.deliver(ids[0], Draining), ReplyFate::Delivered);
        let all: Vec<Vec<String>> = heard.iter().map(|heard| heard.all()).collect();
        assert_eq!(
            all,
            [
                vec!["answered Draining"],
                vec!["Lost"],
                vec!["Unhandled"],
                vec!["LinkClosed"]
            ]
        );
    }

    #[tokio::test]
    async fn rebinding_keeps_listed_live_requests_loses_the_rest_and_answers_first_there() {
        let (link, _cut) = link(false).await;
        let heard: Vec<Arc<Heard>> = (0..3).map(|_| Arc::new(Heard::default())).collect();
        let ids: Vec<u64> = heard.iter().map(|heard| take(&link, heard)).collect();
        assert_eq!(link.end(ids[2]), End::Ended);
        let (next, mut peer) = outbound().await;
        let rebound = link
            .rebind(next, &[ids[0], ids[2], 99, ids[0]], |rebound| {
                Frame::Ping(Ping {
                    nonce: rebound.attached.len() as u64,
                })
            })
            .unwrap();
        assert_eq!(rebound.attached, [ids[0]]);
        assert_eq!(rebound.unknown, [ids[2], 99]);
        assert_eq!(next_frame(&mut peer).await, Frame::Ping(Ping { nonce: 1 }));
        assert_eq!(link.end(ids[0]), End::Ended);
        let cancel = Frame::Cancel(Cancel {
            correlation: ids[0],
        });
        assert_eq!(
            next_frame(&mut peer).await,
            cancel,
            "sent on the new connection"
        );
        let all: Vec<Vec<String>> = heard.iter().map(|heard| heard.all()).collect();
        assert_eq!(all, [vec![], vec!["Lost"], vec!["LinkClosed"]]);
        link.close();
        let (outbound, _peer) = outbound().await;
        assert!(link
            .rebind(outbound, &[], |_| Frame::Ping(Ping { nonce: 0 }))
            .is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn reclaiming_lets_go_only_of_ended_requests_past_the_cutoff() {
        let (link, _peer) = link(false).await;
        let (live, ended) = (Arc::new(Heard::default()), Arc::new(Heard::default()));
        take(&link, &live);
        let id = take(&link, &ended);
        let before = Instant::now();
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(link.end(id), End::Ended);
        assert_eq!(link.reclaim(before), 0, "it ended after the cutoff");
        assert_eq!(link.reclaim(Instant::now()), 1);
        assert_eq!(ended.all(), ["GraceExpired"]);
        assert!(live.all().is_empty());
        assert_eq!(link.in_flight(), 1);
    }
}
