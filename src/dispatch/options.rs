//! A dispatch's options as the dispatcher reads them: lent from a submission where it lies,
//! or from an in-process caller's [`DispatchOptions`].

use std::time::Duration;

use lintel_client::DispatchOptions;
use lintel_wire::RoutingRef;

/// Routing and waits of one dispatch, borrowed.
#[derive(Debug, Clone)]
pub(crate) struct Options<'a> {
    pub(crate) routing: RoutingRef<'a>,
    /// How long to wait for an eligible worker; `None` fails at once with no-worker.
    pub(crate) wait_for_worker: Option<Duration>,
    /// How long to wait for the reply once pushed; `None` takes the node's default.
    pub(crate) reply_timeout: Option<Duration>,
}

impl<'a> Options<'a> {
    /// The options an in-process caller gave.
    pub(crate) fn of(options: &'a DispatchOptions) -> Self {
        Self {
            routing: options.routing.view(),
            wait_for_worker: options.wait_for_worker,
            reply_timeout: options.reply_timeout,
        }
    }

    /// The options of a wire submission's fields.
    pub(crate) fn from_wire(
        routing: RoutingRef<'a>,
        wait_for_worker_ms: Option<u64>,
        reply_timeout_ms: Option<u64>,
    ) -> Self {
        Self {
            routing,
            wait_for_worker: wait_for_worker_ms.map(Duration::from_millis),
            reply_timeout: reply_timeout_ms.map(Duration::from_millis),
        }
    }
}
