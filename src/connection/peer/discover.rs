//! Peers found by name: a configured `--peer` name is resolved now and every
//! `peer_resolve_interval_ms`, and each address it names is a join point of its own while the
//! name names it. An address the name stops naming is no longer dialled; a live link there
//! stays. A failed resolution keeps the addresses resolved last and is a warning, the first at
//! once and then one every [`WARN_EVERY`] while resolutions keep failing.

use std::sync::Arc;
use std::time::Duration;

use lintel_transport::resolve::Resolver;
use tokio::time::Instant;

use crate::logfields::List;
use crate::shared::Shared;

/// While resolutions of one name keep failing, how often that is logged again.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Keeps the join points of `name` what it resolves to, until the node retires its links.
pub(super) async fn discover(shared: Arc<Shared>, name: String, resolver: Resolver) {
    let mesh = Arc::clone(shared.dispatcher.mesh());
    let mut watch = resolver.watch(&name, shared.config.peer_resolve_interval());
    let mut warned: Option<Instant> = None;
    let mut failures: u64 = 0;
    loop {
        let changed = tokio::select! {
            () = shared.retiring.cancelled() => return,
            changed = watch.changed() => changed,
        };
        match changed {
            Ok(change) => {
                if failures > 0 {
                    tracing::info!(peer = %name, failures, "peer name resolves again");
                    (failures, warned) = (0, None);
                }
                if change.is_empty() {
                    continue;
                }
                tracing::info!(
                    peer = %name,
                    added = %List(&change.added),
                    removed = %List(&change.removed),
                    "peer name resolved: its addresses are join points"
                );
                mesh.resolved(&name, watch.addresses());
            }
            Err(error) => {
                failures += 1;
                let now = Instant::now();
                if warned.is_none_or(|at| now.duration_since(at) >= WARN_EVERY) {
                    tracing::warn!(
                        peer = %name, %error, failures, kept = %List(watch.addresses()),
                        "cannot resolve peer name; its addresses resolved last are still dialled"
                    );
                    warned = Some(now);
                } else {
                    tracing::debug!(peer = %name, %error, "cannot resolve peer name");
                }
            }
        }
    }
}
