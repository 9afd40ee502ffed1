//! The node's status as operators read it ([`Status`], the JSON of the admin `/status`, of
//! `lintel status --json` and of a version-3 `StatusDocument`), built from a status report and
//! what the node knows beyond it: its workers' deployments, its peers' announced capacity.

use lintel_wire::ClusterStatusReport;

use crate::dispatch::Dispatcher;
pub use lintel_client::status::{Counters, Peer, Pool, RemotePool, Status, Worker};

/// The view of `report` (whole, or cut to fit a frame), with what `dispatcher` knows of its
/// workers' deployments and its peers' capacity.
pub fn view(report: ClusterStatusReport, dispatcher: &Dispatcher) -> Status {
    let remote = dispatcher
        .mesh()
        .capacity()
        .into_iter()
        .map(|(node_id, pools)| {
            let pools = pools
                .into_iter()
                .map(|pool| RemotePool {
                    channel: pool.channel,
                    activity_type: pool.activity_type,
                    workers: pool.workers,
                    slots: pool.slots,
                    free: pool.free,
                })
                .collect();
            (node_id, pools)
        })
        .collect();
    Status::new(report.status, report.peers, report.peer_lost)
        .with_deployments(&dispatcher.registry().deployments())
        .with_remote_pools(remote)
}
