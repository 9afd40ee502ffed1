//! What this node keeps for one incarnation of a peer across the links to it: the numbering
//! of the relays it sends there, and, serving that peer, the highest relay it read and each
//! outcome the peer has not acknowledged, so a relink can resume what a cut link left open.
//!
//! Outcomes are kept under one node-wide byte bound ([`Retention`]); past it a pair drops its
//! oldest, whose relays then answer "unknown" to a resumption. A short mutex per pair guards
//! the kept outcomes, never held across an `.await`.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_transport::{Outbound, SendError};
use lintel_wire::{
    DispatchResult, FrameKind, FrameRef, RelayOutcome, RelayOutcomeRef, ResultRef, PROTOCOL_VERSION,
};

use super::peer::PeerLink;

/// Bytes a kept outcome costs beyond its encoded frame: its map entry and allocation.
const ENTRY_OVERHEAD: usize = 64;

/// The node-wide bound on kept outcomes, and what it cost.
#[derive(Debug)]
pub struct Retention {
    max_bytes: usize,
    bytes: AtomicUsize,
    dropped: AtomicU64,
}

impl Retention {
    /// Keeps at most `max_bytes` of outcomes across every pair.
    pub fn new(max_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            max_bytes,
            bytes: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Bytes of outcomes kept now.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Outcomes dropped unacknowledged to stay within the bound.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// One peer incarnation's numbering and kept outcomes; shared by every link to it.
#[derive(Debug)]
pub struct Pair {
    incarnation: u64,
    /// The last correlation given to a relay sent to this incarnation.
    numbering: Arc<AtomicU64>,
    /// The highest correlation of a relay read from this incarnation.
    handled_up_to: AtomicU64,
    kept: Mutex<Kept>,
    retention: Arc<Retention>,
    /// Links to this incarnation that may still hold relays without an outcome.
    links: AtomicUsize,
    /// What runs here for the peer while no link to it is up, for the next link to take.
    parked: Mutex<Option<(u64, Arc<dyn Any + Send + Sync>)>>,
    /// Cut links to the peer whose relays wait for a relink, each counted among `links`.
    cut: Mutex<Vec<(u64, PeerLink, CountedLink)>>,
    /// Numbers each parking, so a grace that ran out takes only what it was started for.
    parkings: AtomicU64,
}

#[derive(Debug, Default)]
struct Kept {
    /// By correlation: the outcome and what it counts against the retention.
    outcomes: BTreeMap<u64, (DispatchResult, usize)>,
    bytes: usize,
}

impl Pair {
    /// A pair with peer incarnation `incarnation`, its outcomes kept within `retention`.
    pub fn new(incarnation: u64, retention: &Arc<Retention>) -> Arc<Self> {
        Arc::new(Self {
            incarnation,
            numbering: Arc::new(AtomicU64::new(0)),
            handled_up_to: AtomicU64::new(0),
            kept: Mutex::new(Kept::default()),
            retention: Arc::clone(retention),
            links: AtomicUsize::new(0),
            parked: Mutex::new(None),
            cut: Mutex::new(Vec::new()),
            parkings: AtomicU64::new(0),
        })
    }

    /// The peer's incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The counter every link to this incarnation numbers its relays from.
    pub fn numbering(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.numbering)
    }

    /// The last correlation given to a relay to this incarnation.
    pub fn last_numbered(&self) -> u64 {
        self.numbering.load(Ordering::Acquire)
    }

    /// Counts a link to this incarnation until the returned guard drops (once the link no
    /// longer holds relays).
    pub fn link_up(self: &Arc<Self>) -> CountedLink {
        self.links.fetch_add(1, Ordering::AcqRel);
        CountedLink(Arc::clone(self))
    }

    /// The `below` of a `RelayAck` sent on a link whose lowest relay without an outcome is
    /// `lowest()` (`None`: it holds none): every relay to this incarnation numbered below it
    /// has its outcome here or was let go of. While another link to this incarnation may hold
    /// relays, it is 0, and only the listed outcomes are acknowledged.
    pub fn below(&self, lowest: impl FnOnce() -> Option<u64>) -> u64 {
        if self.links.load(Ordering::Acquire) != 1 {
            return 0;
        }
        // Read first: a relay numbered after it is above it, and one numbered before it is
        // pending on the link by the time `lowest` reads its table (the table is held from a
        // relay's number until the relay is taken), or was never sent.
        let next = self.last_numbered().wrapping_add(1);
        lowest().map_or(next, |lowest| lowest.min(next))
    }

    /// Notes that the relay `correlation` was read from the peer.
    #[inline]
    pub fn handled(&self, correlation: u64) {
        self.handled_up_to.fetch_max(correlation, Ordering::AcqRel);
    }

    /// The highest correlation of a relay read from the peer.
    pub fn handled_up_to(&self) -> u64 {
        self.handled_up_to.load(Ordering::Acquire)
    }

    /// Keeps the outcome of relay `correlation` until the peer acknowledges it; past the
    /// node-wide bound, drops this pair's oldest outcomes (the one just kept included).
    pub fn keep(&self, correlation: u64, result: &ResultRef<'_>) {
        let frame = RelayOutcomeRef {
            correlation,
            result: result.reborrow(),
        };
        // Reckoned as the latest version writes it, the largest of them.
        let cost =
            frame.encoded_len(FrameKind::RelayOutcome, PROTOCOL_VERSION.into()) + ENTRY_OVERHEAD;
        let owned = result.reborrow().into_owned();
        let mut kept = self.kept();
        if let Some((_, old)) = kept.outcomes.insert(correlation, (owned, cost)) {
            kept.bytes -= old;
            self.retention.bytes.fetch_sub(old, Ordering::Relaxed);
        }
        kept.bytes += cost;
        let mut total = self.retention.bytes.fetch_add(cost, Ordering::Relaxed) + cost;
        while total > self.retention.max_bytes {
            let Some((_, (_, cost))) = kept.outcomes.pop_first() else {
                break;
            };
            kept.bytes -= cost;
            total = self.retention.bytes.fetch_sub(cost, Ordering::Relaxed) - cost;
            self.retention.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Keeps the outcome of relay `correlation` (as [`Pair::keep`]) and sends it on `to`, the
    /// link the dispatch answers on now.
    ///
    /// # Errors
    /// As [`Outbound::send_owed_ref`]; the outcome is kept all the same.
    pub fn answer(
        &self,
        correlation: u64,
        result: ResultRef<'_>,
        to: &Outbound,
    ) -> Result<(), SendError> {
        self.keep(correlation, &result);
        to.send_owed_ref(&FrameRef::RelayOutcome(RelayOutcome {
            correlation,
            result,
        }))
    }

    /// Leaves what runs here for the peer, and cut links with relays without outcomes, to the
    /// next link, replacing what runs that was left before; returns the parking's number.
    pub fn park(
        &self,
        served: Option<Arc<dyn Any + Send + Sync>>,
        links: Vec<(PeerLink, CountedLink)>,
    ) -> u64 {
        let parking = self.parkings.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(served) = served {
            *lock(&self.parked) = Some((parking, served));
        }
        let mut cut = lock(&self.cut);
        cut.extend(
            links
                .into_iter()
                .map(|(link, linked)| (parking, link, linked)),
        );
        parking
    }

    /// True while a cut link's relays, or what ran here for the peer, wait for a relink.
    pub fn holds_cut(&self) -> bool {
        !lock(&self.cut).is_empty() || lock(&self.parked).is_some()
    }

    /// Takes what was left running here: what any parking left, or only parking `which`'s.
    pub fn unpark(&self, which: Option<u64>) -> Option<Arc<dyn Any + Send + Sync>> {
        let mut parked = lock(&self.parked);
        match (which, parked.as_ref()) {
            (Some(which), Some((parking, _))) if *parking != which => None,
            _ => parked.take().map(|(_, served)| served),
        }
    }

    /// Takes the cut links left for a resumption: every one, or only parking `which`'s.
    pub fn unpark_cut(&self, which: Option<u64>) -> Vec<(PeerLink, CountedLink)> {
        let (taken, left) = std::mem::take(&mut *lock(&self.cut))
            .into_iter()
            .partition(|(parking, _, _)| which.is_none_or(|which| *parking == which));
        *lock(&self.cut) = left;
        taken
            .into_iter()
            .map(|(_, link, linked)| (link, linked))
            .collect()
    }

    /// The peer holds the outcomes of every relay below `below` and of each in `also`: they
    /// are let go.
    pub fn acknowledged(&self, below: u64, also: &[u64]) {
        let mut kept = self.kept();
        let kept = &mut *kept;
        let mut freed = 0;
        if kept
            .outcomes
            .first_key_value()
            .is_some_and(|(&c, _)| c < below)
        {
            let above = kept.outcomes.split_off(&below);
            freed += kept.outcomes.values().map(|(_, cost)| cost).sum::<usize>();
            kept.outcomes = above;
        }
        for correlation in also {
            if let Some((_, cost)) = kept.outcomes.remove(correlation) {
                freed += cost;
            }
        }
        kept.bytes -= freed;
        self.retention.bytes.fetch_sub(freed, Ordering::Relaxed);
    }

    /// The outcome kept for relay `correlation`, as a frame to send again.
    pub fn kept_outcome(&self, correlation: u64) -> Option<RelayOutcome> {
        let kept = self.kept();
        let (result, _) = kept.outcomes.get(&correlation)?;
        Some(RelayOutcome {
            correlation,
            result: result.clone(),
        })
    }

    /// Outcomes kept now, and their bytes.
    pub fn kept_len(&self) -> (usize, usize) {
        let kept = self.kept();
        (kept.outcomes.len(), kept.bytes)
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        lock(&self.kept)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves what it guards consistent before it could panic.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A link counted among its pair's until dropped.
#[derive(Debug)]
pub struct CountedLink(Arc<Pair>);

impl Drop for CountedLink {
    fn drop(&mut self) {
        self.0.links.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let bytes = self.kept().bytes;
        self.retention.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancelled() -> ResultRef<'static> {
        DispatchResult::Cancelled
    }

    #[test]
    fn acknowledged_outcomes_are_let_go_below_the_mark_and_by_name() {
        let retention = Retention::new(1 << 20);
        let pair = Pair::new(7, &retention);
        for correlation in 1..=6 {
            pair.keep(correlation, &cancelled());
        }
        pair.acknowledged(3, &[5, 9]);
        assert!(pair.kept_outcome(2).is_none() && pair.kept_outcome(5).is_none());
        for correlation in [3, 4, 6] {
            assert_eq!(
                pair.kept_outcome(correlation).unwrap().correlation,
                correlation
            );
        }
        let (len, bytes) = pair.kept_len();
        assert_eq!((len, bytes), (3, retention.bytes()));
        drop(pair);
        assert_eq!(retention.bytes(), 0, "a pair let go gives its bytes back");
    }

    #[test]
    fn past_the_bound_the_oldest_outcomes_are_dropped_and_counted() {
        let one = RelayOutcomeRef {
            correlation: 1,
            result: cancelled(),
        }
        .encoded_len(FrameKind::RelayOutcome, PROTOCOL_VERSION.into())
            + ENTRY_OVERHEAD;
        let retention = Retention::new(3 * one);
        let pair = Pair::new(7, &retention);
        for correlation in 1..=5 {
            pair.keep(correlation, &cancelled());
        }
        assert!(retention.bytes() <= 3 * one);
        assert_eq!(retention.dropped(), 2);
        assert!(pair.kept_outcome(2).is_none());
        assert!(pair.kept_outcome(3).is_some() && pair.kept_outcome(5).is_some());
    }

    #[test]
    fn the_mark_is_the_highest_relay_read() {
        let pair = Pair::new(7, &Retention::new(1));
        for correlation in [3, 9, 4] {
            pair.handled(correlation);
        }
        assert_eq!(pair.handled_up_to(), 9);
    }
}
