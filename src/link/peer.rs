//! A peer's link: relays to another node, answered by its outcomes.
//!
//! A relay ended here keeps its entry until the peer's outcome for it arrives or the link
//! closes, so the capacity it was charged against stays charged while it may still run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{ExtrasRef, FeatureSet, FrameRef, Relay, RequestRef, ResultRef, RoutingRef};

use lintel_transport::Outbound;

use super::fate::{PushError, ReplyFate};
use super::table::{Entry, Kind, Link};

/// What a peer link holds for one relay until the peer lets go of it.
pub type RelayEntry = dyn Entry<ToPeer>;

/// A link to another node.
pub type PeerLink = Link<ToPeer>;

/// What a peer link knows of its peer: its node id, the protocol version the link speaks,
/// and how many relays went to it.
#[derive(Debug)]
pub struct ToPeer {
    node_id: Arc<str>,
    version: u16,
    /// What the peer's hello listed.
    listed: FeatureSet,
    sent: AtomicU64,
}

impl Kind for ToPeer {
    type Answer<'a> = ResultRef<'a>;
}

impl Link<ToPeer> {
    /// A link to the peer `node_id`, speaking protocol `version`, whose frames go to
    /// `outbound`; its relays continue `numbering`, the peer incarnation's.
    pub fn new(
        node_id: Arc<str>,
        version: u16,
        outbound: Outbound,
        numbering: Arc<AtomicU64>,
    ) -> Self {
        let sent = AtomicU64::new(0);
        let kind = ToPeer {
            node_id,
            version,
            listed: outbound.listed(),
            sent,
        };
        Link::with(kind, outbound, false, Some(numbering))
    }

    /// The peer's node id.
    pub fn node_id(&self) -> &Arc<str> {
        &self.inner.kind.node_id
    }

    /// Whether the link can carry a relay that needs protocol `version` and the listed
    /// `features`.
    pub fn carries(&self, version: u16, features: FeatureSet) -> bool {
        self.inner.kind.version >= version && self.inner.kind.listed.contains(features)
    }

    /// The protocol version the link speaks: from 3 relays may carry headers and a required
    /// deployment.
    pub fn version(&self) -> u16 {
        self.inner.kind.version
    }

    /// Queues `request` with its `extras` as a relay with `budget` left for the reply, encoded
    /// where it lies as the link's version carries it (a version-2 link leaves the extras'
    /// priority and fairness behind). Once it is queued, `entry` builds what hears the relay's
    /// fate. Returns the relay's correlation id, unique among the relays to the peer's
    /// incarnation. Placement never relays over a
    /// version-2 link a request with headers or a required deployment.
    ///
    /// # Errors
    /// [`PushError::Closed`] when the link is closed, [`PushError::Backpressure`] when its
    /// queue is full; either way nothing was sent.
    pub fn relay(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        routing: &RoutingRef<'_>,
        budget: Duration,
        entry: impl FnOnce() -> Arc<RelayEntry>,
    ) -> Result<u64, PushError> {
        let vacant = self.vacant()?;
        let correlation = vacant.correlation;
        let reply_timeout_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
        let relay = FrameRef::Relay(Relay {
            correlation,
            request: request.reborrow(),
            extras: extras.reborrow(),
            routing: routing.reborrow(),
            reply_timeout_ms,
        });
        let sent = vacant.outbound().try_send_ref(&relay);
        if let Err(err) = sent {
            return Err(PushError::from_send(err));
        }
        vacant.insert(entry());
        self.inner.kind.sent.fetch_add(1, Ordering::Relaxed);
        Ok(correlation)
    }

    /// Hands the peer's outcome, where it lies, to its relay.
    pub fn answer(&self, correlation: u64, result: ResultRef<'_>) -> ReplyFate {
        self.deliver(correlation, result)
    }

    /// True while the link's outbound queue is at its bound: the peer is alive but reading
    /// slowly, so placement skips it instead of queuing more relays behind its backlog.
    pub fn is_busy(&self) -> bool {
        !self.outbound().has_room()
    }

    /// Relays sent on this link.
    pub fn sent(&self) -> u64 {
        self.inner.kind.sent.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{outbound, request, Heard};
    use super::super::pair::{Pair, Retention};
    use super::*;

    #[tokio::test]
    async fn a_relay_is_counted_once_sent_and_a_closed_link_sends_nothing() {
        let (outbound, _peer) = outbound().await;
        let pair = Pair::new(1, &Retention::new(1));
        let link = PeerLink::new("b".into(), 3, outbound, pair.numbering());
        let heard: Arc<RelayEntry> = Arc::new(Heard::default());
        let budget = Duration::from_secs(1);
        let (request, routing) = (request(), lintel_wire::NodeRouting::Any);
        let none = ExtrasRef::NONE;
        let id = link.relay(&request.view(), &none, &routing.view(), budget, || heard);
        assert_eq!((id, link.sent(), link.in_flight()), (Ok(1), 1, 1));
        link.close();
        let refused = link.relay(
            &request.view(),
            &none,
            &routing.view(),
            budget,
            || unreachable!(),
        );
        assert_eq!(refused, Err(PushError::Closed));
        assert_eq!(link.sent(), 1);
    }

    #[tokio::test]
    async fn a_new_link_to_the_same_incarnation_continues_the_numbering() {
        let pair = Pair::new(1, &Retention::new(1));
        let (request, routing) = (request(), lintel_wire::NodeRouting::Any);
        let budget = Duration::from_secs(1);
        let mut ids = Vec::new();
        for _ in 0..2 {
            let (outbound, _peer) = outbound().await;
            let link = PeerLink::new("b".into(), 3, outbound, pair.numbering());
            for _ in 0..2 {
                let heard: Arc<RelayEntry> = Arc::new(Heard::default());
                let sent = link.relay(
                    &request.view(),
                    &ExtrasRef::NONE,
                    &routing.view(),
                    budget,
                    || heard,
                );
                ids.push(sent.unwrap());
            }
            link.close();
        }
        assert_eq!(ids, [1, 2, 3, 4]);
        assert_eq!(pair.last_numbered(), 4);
        let other = Pair::new(2, &Retention::new(1));
        let (outbound, _peer) = outbound().await;
        let fresh = PeerLink::new("b".into(), 3, outbound, other.numbering());
        let heard: Arc<RelayEntry> = Arc::new(Heard::default());
        let first = fresh.relay(
            &request.view(),
            &ExtrasRef::NONE,
            &routing.view(),
            budget,
            || heard,
        );
        assert_eq!(first, Ok(1), "a new incarnation starts again");
    }
}
