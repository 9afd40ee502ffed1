//! A peer's link: relays to another node, answered by its outcomes.
//!
//! A relay ended here keeps its entry until the peer's outcome for it arrives or the link
//! closes, so the capacity it was charged against stays charged while it may still run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{FrameRef, Relay, RequestRef, ResultRef, RoutingRef};

use lintel_client::transport::Outbound;

use super::fate::{PushError, ReplyFate};
use super::table::{Entry, Kind, Link};

/// What a peer link holds for one relay until the peer lets go of it.
pub type RelayEntry = dyn Entry<ToPeer>;

/// A link to another node.
pub type PeerLink = Link<ToPeer>;

/// What a peer link knows of its peer: its node id, and how many relays went to it.
#[derive(Debug)]
pub struct ToPeer {
    node_id: Arc<str>,
    sent: AtomicU64,
}

impl Kind for ToPeer {
    type Answer<'a> = ResultRef<'a>;
}

impl Link<ToPeer> {
    /// A link to the peer `node_id` whose frames go to `outbound`.
    pub fn new(node_id: Arc<str>, outbound: Outbound) -> Self {
        let sent = AtomicU64::new(0);
        Link::with(ToPeer { node_id, sent }, outbound, false)
    }

    /// The peer's node id.
    pub fn node_id(&self) -> &Arc<str> {
        &self.inner.kind.node_id
    }

    /// Queues `request` as a relay with `budget` left for the reply, encoded where it lies;
    /// once it is queued, `entry` builds what hears the relay's fate. Returns the relay's
    /// correlation id on this link.
    ///
    /// # Errors
    /// [`PushError::Closed`] when the link is closed, [`PushError::Backpressure`] when its
    /// queue is full; either way nothing was sent.
    pub fn relay(
        &self,
        request: &RequestRef<'_>,
        routing: &RoutingRef<'_>,
        budget: Duration,
        entry: impl FnOnce() -> Arc<RelayEntry>,
    ) -> Result<u64, PushError> {
        let vacant = self.vacant()?;
        let correlation = vacant.correlation;
        let sent = self.inner.outbound.try_send_ref(FrameRef::Relay(Relay {
            correlation,
            request: request.reborrow(),
            routing: routing.reborrow(),
            reply_timeout_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
        }));
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
        !self.inner.outbound.has_room()
    }

    /// Relays sent on this link.
    pub fn sent(&self) -> u64 {
        self.inner.kind.sent.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{outbound, request, Heard};
    use super::*;

    #[tokio::test]
    async fn a_relay_is_counted_once_sent_and_a_closed_link_sends_nothing() {
        let (outbound, _peer) = outbound().await;
        let link = PeerLink::new("b".into(), outbound);
        let heard: Arc<RelayEntry> = Arc::new(Heard::default());
        let budget = Duration::from_secs(1);
        let (request, routing) = (request(), lintel_wire::NodeRouting::Any);
        let id = link.relay(&request.view(), &routing.view(), budget, || heard);
        assert_eq!((id, link.sent(), link.in_flight()), (Ok(1), 1, 1));
        link.close();
        let refused = link.relay(&request.view(), &routing.view(), budget, || unreachable!());
        assert_eq!(refused, Err(PushError::Closed));
        assert_eq!(link.sent(), 1);
    }
}
