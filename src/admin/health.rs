//! `/ready` and `/linked`: why the node should get no traffic yet, or is not yet linked to the
//! whole cluster.

use crate::shared::Shared;

/// Why the node should get no traffic yet, if it should not: draining, or a linked peer's
/// presence still arriving. A peer not linked yet never holds it back, so nodes that name each
/// other as peers can start one after another, each waiting for the last to be ready.
pub(super) fn not_ready(shared: &Shared) -> Option<&'static str> {
    if shared.dispatcher.is_draining() {
        return Some("draining");
    }
    if !shared.dispatcher.mesh().synced() {
        return Some("a peer's presence is still arriving");
    }
    None
}

/// Why the node is not yet linked to the whole cluster, if it is not: not ready; with peers
/// configured, none linked (unless each join point is this node itself); or a member it knows
/// without a link or whose presence is still arriving. What a rolling restart waits for before
/// it drains the next node.
pub(super) fn not_linked(shared: &Shared) -> Option<String> {
    if let Some(why) = not_ready(shared) {
        return Some(why.to_owned());
    }
    let mesh = shared.dispatcher.mesh();
    let join_points = mesh.join_points();
    let only_itself = !join_points.is_empty() && join_points.iter().all(|point| point.myself);
    let alone = !shared.config.peers.is_empty() && mesh.is_empty() && !only_itself;
    if alone {
        return Some("no peer linked yet".to_owned());
    }
    let member = mesh.unlinked_member()?;
    Some(format!("not linked and synced to member {member} yet"))
}
