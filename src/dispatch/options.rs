//! A dispatch's options as the dispatcher reads them: lent from a submission where it lies,
//! or from an in-process caller's [`DispatchOptions`]; and the fairness a request's extras
//! ask for or carry.

use std::time::Duration;

use lintel_client::DispatchOptions;
use lintel_wire::{ExtrasView, RoutingRef};

use crate::registry::fairness::{DEFAULT_PRIORITY, DEFAULT_WEIGHT, SHARED_KEY};
use crate::registry::{Fairness, FairnessRef};

/// Routing, waits and fairness of one dispatch, borrowed.
#[derive(Debug, Clone)]
pub(crate) struct Options<'a> {
    pub(crate) routing: RoutingRef<'a>,
    /// How long to wait for an eligible worker; `None` fails at once with no-worker.
    pub(crate) wait_for_worker: Option<Duration>,
    /// How long to wait for the reply once pushed; `None` takes the node's default.
    pub(crate) reply_timeout: Option<Duration>,
    /// Its priority, key and weight, once the node decided whose they are.
    pub(crate) fairness: FairnessRef<'a>,
}

impl<'a> Options<'a> {
    /// The options an in-process caller gave, its fairness as it asked.
    pub(crate) fn of(options: &'a DispatchOptions) -> Self {
        Self {
            routing: options.wire_routing().view(),
            wait_for_worker: options.wait_for_worker,
            reply_timeout: options.reply_timeout,
            fairness: asked(&options.wire_extras().view()),
        }
    }

    /// Only what placing needs, for a dispatch placed again: its routing and fairness.
    pub(crate) fn placing(routing: RoutingRef<'a>, fairness: FairnessRef<'a>) -> Self {
        Self {
            routing,
            wait_for_worker: None,
            reply_timeout: None,
            fairness,
        }
    }

    /// The options of a wire submission's fields, with the fairness `fairness` the node
    /// decided for it.
    pub(crate) fn from_wire(
        routing: RoutingRef<'a>,
        wait_for_worker_ms: Option<u64>,
        reply_timeout_ms: Option<u64>,
        fairness: FairnessRef<'a>,
    ) -> Self {
        Self {
            routing,
            wait_for_worker: wait_for_worker_ms.map(Duration::from_millis),
            reply_timeout: reply_timeout_ms.map(Duration::from_millis),
            fairness,
        }
    }
}

/// The fairness a request's `extras` ask for: each field absent is its default.
pub(crate) fn asked<'a>(extras: &ExtrasView<'a>) -> FairnessRef<'a> {
    Fairness {
        priority: extras.priority.unwrap_or(DEFAULT_PRIORITY),
        key: extras.fairness_key.unwrap_or(SHARED_KEY),
        weight: extras.fairness_weight.unwrap_or(DEFAULT_WEIGHT),
    }
}

/// `extras` carrying `fairness` in place of the fairness they asked for, each default field
/// left absent, so a relay tells the serving node what this node decided.
pub(crate) fn carrying<'a, 'e: 'a>(
    extras: &ExtrasView<'e>,
    fairness: &FairnessRef<'a>,
) -> ExtrasView<'a> {
    ExtrasView {
        priority: (fairness.priority != DEFAULT_PRIORITY).then_some(fairness.priority),
        fairness_key: (!fairness.key.is_empty()).then_some(fairness.key),
        fairness_weight: (fairness.weight != DEFAULT_WEIGHT).then_some(fairness.weight),
        ..extras.reborrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lintel_wire::RequestExtras;

    #[test]
    fn a_relay_carries_the_fairness_decided_and_nothing_for_the_defaults() {
        let request = RequestExtras {
            priority: Some(2),
            fairness_key: Some("asked".into()),
            fairness_weight: Some(5_000),
            deployment: Some("v1".into()),
            ..RequestExtras::default()
        };
        let request = request.view();
        let decided = Fairness {
            priority: 2,
            key: "grant-1",
            weight: DEFAULT_WEIGHT,
        };
        let carried = carrying(&request, &decided);
        assert_eq!(
            (
                carried.priority,
                carried.fairness_key,
                carried.fairness_weight
            ),
            (Some(2), Some("grant-1"), None)
        );
        assert_eq!(carried.deployment, Some("v1"), "the rest is the request's");
        let plain = carrying(&ExtrasView::NONE, &FairnessRef::default());
        assert!(plain.is_none(), "the defaults add nothing to a relay");
        assert_eq!(asked(&ExtrasView::NONE), FairnessRef::default());
    }
}
