//! A dispatch relayed to a peer: its entry on the peer link, and another placement when the
//! serving node ran nothing or said farewell without answering it.

use std::sync::{Arc, Weak};

use lintel_wire::{
    DispatchRequest, DispatchResult, ExtrasRef, NodeRouting, RefusedReason, RequestExtras,
    RequestRef, ResultRef,
};
use tokio::time::Instant;

use super::flight::{Flight, Target};
use super::options::Options;
use crate::link::{Entry, Link, Release, ToPeer, Unanswered};
use crate::registry::Fairness;

/// Which placement of a dispatch this is, and until when it may wait for a worker.
#[derive(Debug, Clone, Copy)]
pub(super) struct Attempt {
    pub(super) number: u32,
    pub(super) wait_until: Option<Instant>,
}

/// Places a dispatch again after the node it was relayed to ran nothing.
pub(super) trait PlaceAgain: Send + Sync {
    /// Places `flight` again as its routing and fairness say, or ends it with `last` (the
    /// serving node's outcome and id).
    fn place_again(
        &self,
        flight: &Arc<Flight>,
        request: (&RequestRef<'_>, &ExtrasRef<'_>),
        options: &Options<'_>,
        attempt: Attempt,
        last: (ResultRef<'_>, Arc<str>),
    );
}

/// Most placements in a row one dispatch gets when serving nodes answer that nothing ran;
/// past them it ends, or goes back to waiting while its wait for a worker lasts.
pub(super) const MAX_RELAY_ATTEMPTS: u32 = 3;

/// What a peer link holds for one relay: owned copies of what it needs, since it outlives
/// the frame the dispatch arrived in.
pub(super) struct Relayed {
    pub(super) dispatcher: Weak<dyn PlaceAgain>,
    pub(super) flight: Arc<Flight>,
    /// Kept to place the dispatch again if the serving node runs nothing.
    pub(super) request: DispatchRequest,
    pub(super) extras: RequestExtras,
    pub(super) routing: NodeRouting,
    pub(super) fairness: Fairness,
    pub(super) attempt: Attempt,
    pub(super) peer: Arc<str>,
    /// When the relay went out, for how long it ran before a lost link.
    pub(super) sent_at: Instant,
}

/// True for outcomes that say the serving node ran nothing, so another node may.
fn nothing_ran(result: &ResultRef<'_>) -> bool {
    match result {
        DispatchResult::NoWorker(_) | DispatchResult::Draining => true,
        DispatchResult::Refused(refused) => matches!(
            refused.reason,
            RefusedReason::WorkerBackpressure
                | RefusedReason::TooManyInFlight
                | RefusedReason::FairnessCapReached
        ),
        _ => false,
    }
}

impl Relayed {
    /// Places the dispatch again as `attempt`, ending it with `last` if it cannot be placed;
    /// false when this node's dispatcher is gone and nothing was done.
    fn place_again(&self, last: ResultRef<'_>, attempt: Attempt) -> bool {
        let Some(dispatcher) = self.dispatcher.upgrade() else {
            return false;
        };
        if self.flight.unpush() {
            dispatcher.place_again(
                &self.flight,
                (&self.request.view(), &self.extras.lend()),
                &Options::placing(self.routing.view(), self.fairness.view()),
                attempt,
                (last, Arc::clone(&self.peer)),
            );
        }
        true
    }
}

impl Entry<ToPeer> for Relayed {
    fn progress(&self, details: &bytes::Bytes) {
        self.flight.progressed(details);
    }

    fn answered(&self, result: ResultRef<'_>) {
        // The clock is read only for an outcome that may be placed again.
        let may_wait = || {
            self.attempt
                .wait_until
                .is_some_and(|until| until > Instant::now())
        };
        if nothing_ran(&result) && (self.attempt.number < MAX_RELAY_ATTEMPTS || may_wait()) {
            let next = Attempt {
                number: self.attempt.number + 1,
                ..self.attempt
            };
            if self.place_again(result.reborrow(), next) {
                return;
            }
        }
        self.flight.relay_answered(result, Arc::clone(&self.peer));
    }

    fn unanswered(&self, why: Unanswered) {
        match why {
            Unanswered::Lost => self.flight.relay_lost(&self.peer, self.sent_at.elapsed()),
            Unanswered::Abandoned => self.flight.relay_abandoned(),
            // The serving node said farewell without answering it, so it never ran there: it
            // is placed again, not counted as another attempt, and ends `Draining` if it
            // cannot be.
            Unanswered::Unhandled => {
                if !self.place_again(DispatchResult::Draining, self.attempt) {
                    self.flight
                        .relay_answered(DispatchResult::Draining, Arc::clone(&self.peer));
                }
            }
        }
    }

    fn released(&self, _: Release) {
        self.flight.relay_released();
    }

    fn moved(&self, to: &Link<ToPeer>, correlation: u64) {
        self.flight.moved(Target::Peer(to.clone()), correlation);
    }
}
