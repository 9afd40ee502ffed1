//! The node's status as operators read it ([`Status`], the JSON of the admin `/status`, of
//! `lintel status --json` and of a version-3 `StatusDocument`), built from a status report and
//! what the node knows beyond it: its workers' deployments and states, its peers' announced
//! capacity. A producer connection reads it scoped by its grant ([`scoped_report`],
//! [`scoped_view`]); the admin listener reads it whole.

use lintel_wire::{ClusterStatusReport, NodeStatus};

use crate::auth::Grant;

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

/// `status` as a connection holding `grant` may read it. A grant that sees every namespace
/// reads it whole; any other reads only the pools and waiting entries of the namespaces it
/// sees, and every count of the node's traffic as a whole (connections, counters) as 0.
pub fn scoped_node(mut status: NodeStatus, grant: &Grant) -> NodeStatus {
    if grant.sees_all() {
        return status;
    }
    status.connections = 0;
    status.counters = lintel_wire::Counters::default();
    status.pools.retain(|pool| grant.sees(&pool.namespace));
    status
        .waiting
        .retain(|waiting| grant.sees(&waiting.namespace));
    status
}

/// `report` as a connection holding `grant` may read it: its node status as [`scoped_node`]
/// says, `peer_lost` and each peer's relay counts 0, each peer's pools only those it sees.
pub fn scoped_report(mut report: ClusterStatusReport, grant: &Grant) -> ClusterStatusReport {
    if grant.sees_all() {
        return report;
    }
    report.status = scoped_node(report.status, grant);
    report.peer_lost = 0;
    for peer in &mut report.peers {
        peer.relays_sent = 0;
        peer.relays_received = 0;
        peer.relays_in_flight = 0;
        peer.pools.retain(|channel| grant.sees_channel(channel));
    }
    report
}

/// The view of a [`scoped_report`] as a connection holding `grant` may read it: peers' remote
/// pools and the current deployments only of the namespaces it sees, no join points and no
/// fairness (its keys and counts are every tenant's).
pub fn scoped_view(mut status: Status, grant: &Grant) -> Status {
    if grant.sees_all() {
        return status;
    }
    for peer in &mut status.peers {
        peer.remote_pools
            .retain(|pool| grant.sees_channel(&pool.channel));
    }
    status.join_points.clear();
    status.fairness = Fairness::default();
    status
        .current_deployments
        .retain(|current| grant.sees_channel(&current.channel));
    status
}
