//! The node's status as operators read it ([`Status`], the JSON of the admin `/status`, of
//! `lintel status --json` and of a version-3 `StatusDocument`), built from a status report and
//! what the node knows beyond it: its workers' deployments and states, its peers' announced
//! capacity.

use lintel_wire::ClusterStatusReport;

use crate::dispatch::Dispatcher;
use crate::registry::fairness::FairnessStatus;
pub use lintel_client::status::{
    CappedKey, Counters, CurrentDeployment, Fairness, JoinPoint, JoinState, KeyCount, Peer, Pool,
    RemotePool, Standing, Status, Worker,
};

/// The view of `report` (whole, or cut to fit a frame), with what `dispatcher` knows of its
/// workers' deployments, its peers' capacity and links, and its join points.
pub fn view(report: ClusterStatusReport, dispatcher: &Dispatcher) -> Status {
    let mesh = dispatcher.mesh();
    let links = mesh
        .tallies()
        .into_iter()
        .map(|member| (member.node_id, member.tally.ups, member.tally.downs));
    let remote = mesh
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
        .with_states(&dispatcher.registry().states())
        .with_remote_pools(remote)
        .with_link_counts(links)
        .with_join_points(mesh.join_points())
        .with_fairness(fairness(dispatcher.registry().fairness()))
        .with_current_deployments(
            dispatcher
                .settings()
                .since(0)
                .0
                .iter()
                .map(current_deployment)
                .collect(),
        )
}

/// A pool setting as a status shows it.
pub fn current_deployment(setting: &lintel_wire::PoolSetting) -> CurrentDeployment {
    CurrentDeployment {
        channel: setting.channel.clone(),
        deployment: setting.current_deployment.clone(),
        set_at_unix_ms: setting.set_at_unix_ms,
        set_by: setting.set_by.clone(),
    }
}

/// The fairness a status shows, from the registry's.
fn fairness(status: FairnessStatus) -> Fairness {
    let counts = |pairs: Vec<(String, u64)>| {
        pairs
            .into_iter()
            .map(|(key, count)| KeyCount { key, count })
            .collect()
    };
    Fairness {
        waiting_by_priority: status.waiting_by_priority.to_vec(),
        waiting_by_key: counts(status.waiting_by_key),
        waiting_other_keys: status.waiting_other,
        served_by_priority: status.served.by_priority.to_vec(),
        served_by_key: counts(status.served.by_key),
        served_other_keys: status.served.other,
        capped: status
            .capped
            .into_iter()
            .map(|(key, in_flight, max_in_flight)| CappedKey {
                key,
                in_flight,
                max_in_flight,
            })
            .collect(),
    }
}
