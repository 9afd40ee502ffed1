//! A node's status as operators read it: the JSON of a version-3 `StatusDocument`, of the
//! admin `/status` and of `lintel status --json`, with the names the text status and
//! `/metrics` use.
//!
//! The wire's status bodies keep their field names (`wire/PROTOCOL.md`); this view renames what
//! people read: counters by outcome class (`timeout`, `peer_lost`), a worker's placement
//! `label`, and adds each worker's `state`. JSON keys are the text's names with `_` for `-`. Keys are only ever added: a reader
//! ignores those it does not know, and a key a node does not send takes its default.

use lintel_wire::{NodeStatus, PeerStatus, WaitingStatus};
use serde::{Deserialize, Serialize};

/// A node, its pools, waiting dispatches, peers and counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The node's id.
    pub node_id: String,
    /// Since the node started, in milliseconds.
    pub uptime_ms: u64,
    /// Connections open: workers, producers, observers and peers.
    pub connections: u32,
    /// The node is draining: it takes no new work.
    pub draining: bool,
    /// Totals since the node started.
    pub counters: Counters,
    /// Each pool of workers and its workers.
    pub pools: Vec<Pool>,
    /// Dispatches waiting for a worker, by pool.
    pub waiting: Vec<WaitingStatus>,
    /// The members this node links to.
    pub peers: Vec<Peer>,
    /// The configured `--peer` addresses and who answered at each; members are in `peers`.
    #[serde(default)]
    pub join_points: Vec<JoinPoint>,
    /// Empty where the status came in a version-2 report, which cannot carry it.
    #[serde(default)]
    pub fairness: Fairness,
    /// Pools with a current deployment set, or cleared, as this node knows them; sorted.
    #[serde(default)]
    pub current_deployments: Vec<CurrentDeployment>,
}

/// A pool's current deployment: required of a dispatch that names none. Set on any node;
/// the latest `(set_at_unix_ms, set_by)` wins on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentDeployment {
    /// The pool's channel name.
    pub channel: String,
    /// `None` once cleared.
    pub deployment: Option<String>,
    /// 0 for a node's config.
    pub set_at_unix_ms: u64,
    /// The node id that set it.
    pub set_by: String,
}

/// Dispatches waiting and served by priority and fairness key (the shared key is `""`), and
/// each capped key's dispatches running on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fairness {
    /// Priorities 1 to 5, in order.
    pub waiting_by_priority: Vec<u64>,
    /// The keys with the most waiting dispatches, most first.
    pub waiting_by_key: Vec<KeyCount>,
    /// Waiting dispatches of every other key.
    pub waiting_other_keys: u64,
    /// Dispatches given a slot on the node's workers since it started; priorities 1 to 5.
    pub served_by_priority: Vec<u64>,
    /// The shared key, the keys of the node's `[[fairness]]` entries and the first others
    /// served.
    pub served_by_key: Vec<KeyCount>,
    /// Dispatches of every other key given a slot.
    pub served_other_keys: u64,
    /// Keys with a cap on the node, and what runs of each.
    pub capped: Vec<CappedKey>,
}

/// A fairness key and a count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCount {
    /// The fairness key.
    pub key: String,
    /// Dispatches of it given a slot.
    pub count: u64,
}

/// A key with a cap on the node, and its dispatches running on the node's workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CappedKey {
    /// The fairness key.
    pub key: String,
    /// Its dispatches running on the node's workers.
    pub in_flight: u32,
    /// Its cap.
    pub max_in_flight: u32,
}

/// Totals since the node started, each outcome under its class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Dispatches submitted.
    pub submitted: u64,
    /// Pushes to workers.
    pub pushed: u64,
    /// Dispatches ended `completed`.
    pub completed: u64,
    /// Dispatches ended `no-worker`.
    pub no_worker: u64,
    /// Dispatches ended `worker-lost`.
    pub worker_lost: u64,
    /// Dispatches ended `timeout`.
    pub timeout: u64,
    /// Dispatches ended `refused`.
    pub refused: u64,
    /// Dispatches ended `cancelled`.
    pub cancelled: u64,
    /// Dispatches ended `draining`.
    pub draining: u64,
    /// Dispatches ended `peer-lost`.
    pub peer_lost: u64,
    /// Replies that came after their dispatch had ended.
    pub late_replies: u64,
    /// Replies dropped: no dispatch waited for them.
    pub dropped_replies: u64,
    /// Worker slots taken back from a push that never answered.
    pub reclaimed_slots: u64,
}

/// One pool and its workers; a pool with an empty namespace marks a report cut to fit a frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// The namespace.
    pub namespace: String,
    /// The task queue; empty is `default`.
    pub task_queue: String,
    /// The pool's channel name.
    pub channel: String,
    /// Its workers.
    pub workers: Vec<Worker>,
}

/// One registered worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worker {
    /// The node's id for the worker.
    pub worker_id: u64,
    /// The node's id for the worker's connection.
    pub pid: u64,
    /// The identity it registered with.
    pub identity: String,
    /// The placement label dispatches may pin, prefer or require.
    pub label: Option<String>,
    /// The activity types it serves.
    pub activity_types: Vec<String>,
    /// Requests it runs at once, at most.
    pub max_concurrency: u32,
    /// Requests it runs now.
    pub in_flight: u32,
    /// Excluded from selection, whatever why: draining, in probation or unreachable.
    pub draining: bool,
    /// Why it is excluded, or eligible. A version-2 status report says only whether a worker
    /// is excluded, so an excluded worker's state read from one is unknown (absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Standing>,
    /// The deployment it registered with (version 3); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
    /// Its instance id (version 3); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
}

/// A worker's standing with its node, the `state` of status: the exclusion that counts most
/// (unreachable before draining before probation), or eligible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Standing {
    /// Newly registered, not selected until it answers its opening pings.
    Probation,
    /// Selected whenever it has a free slot.
    Eligible,
    /// Still connected but not answering pings: not selected until it answers one.
    Unreachable,
    /// Finishing what it holds; never selected again.
    Draining,
}

impl Standing {
    /// Every standing, in the order status and metrics list them.
    pub const ALL: [Standing; 4] = [
        Standing::Probation,
        Standing::Eligible,
        Standing::Unreachable,
        Standing::Draining,
    ];

    /// Its name in status and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Probation => "probation",
            Standing::Eligible => "eligible",
            Standing::Unreachable => "unreachable",
            Standing::Draining => "draining",
        }
    }
}

/// One member as the reporting node sees it: its link's figures as a version-2 status report
/// carries them (the same JSON keys), and what the status adds beyond that report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    /// The link's figures.
    #[serde(flatten)]
    pub link: PeerStatus,
    /// The capacity it announced, per pool and activity type.
    #[serde(default)]
    pub remote_pools: Vec<RemotePool>,
    /// Links to it that came up (both sides kept them, its presence arrived) since this
    /// node started.
    #[serde(default)]
    pub link_ups: u64,
    /// Of those, links that went down again.
    #[serde(default)]
    pub link_downs: u64,
}

/// One join point (a configured `--peer` address, or an address a `--peer` name resolved to),
/// who answered there and how dialling it goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinPoint {
    /// The address dialled.
    pub address: String,
    /// The member that answered there last, if one said who it is.
    pub node_id: Option<String>,
    /// True when this node itself answered there.
    pub myself: bool,
    /// The `--peer` it comes from: the address itself, or a name that resolved to it.
    #[serde(default)]
    pub peer: String,
    /// How dialling it goes.
    #[serde(default)]
    pub state: JoinState,
    /// Since when the last dial there has come to what `state` says (for `connecting`: since
    /// the join point was added).
    #[serde(default)]
    pub since_unix_ms: u64,
    /// Why the last failed dial there failed, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When that dial failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_unix_ms: Option<u64>,
    /// Dials there that failed since the join point was added.
    #[serde(default)]
    pub dial_failures: u64,
}

/// How a join point stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JoinState {
    /// Not dialled to an end yet.
    #[default]
    Connecting,
    /// A member answered at the last dial, and a link to it is up.
    Linked,
    /// A member answered at the last dial, and no link to it is up now.
    Unlinked,
    /// The last dial failed.
    Failing,
    /// This node itself answered there.
    Myself,
}

impl JoinState {
    /// Its name in status and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            JoinState::Connecting => "connecting",
            JoinState::Linked => "linked",
            JoinState::Unlinked => "unlinked",
            JoinState::Failing => "failing",
            JoinState::Myself => "myself",
        }
    }

    /// True when nothing is amiss there: linked, or this node itself.
    pub fn is_up(self) -> bool {
        matches!(self, JoinState::Linked | JoinState::Myself)
    }
}

/// One activity type of a pool as a peer announced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePool {
    /// The pool's channel name.
    pub channel: String,
    /// The activity type.
    pub activity_type: String,
    /// Workers serving it there.
    pub workers: u32,
    /// Their slots.
    pub slots: u32,
    /// Their free slots, as last announced.
    pub free: u32,
}

impl Status {
    /// The view of a node's status, its peers and its `PeerLost` count.
    pub fn new(status: NodeStatus, peers: Vec<PeerStatus>, peer_lost: u64) -> Self {
        let c = status.counters;
        Self {
            node_id: status.node_id,
            uptime_ms: status.uptime_ms,
            connections: status.connections,
            draining: status.draining,
            counters: Counters {
                submitted: c.submitted,
                pushed: c.pushed,
                completed: c.completed,
                no_worker: c.no_worker,
                worker_lost: c.worker_lost,
                timeout: c.timed_out,
                refused: c.refused,
                cancelled: c.cancelled,
                draining: c.draining,
                peer_lost,
                late_replies: c.late_replies,
                dropped_replies: c.dropped_replies,
                reclaimed_slots: c.reclaimed_slots,
            },
            pools: status
                .pools
                .into_iter()
                .map(|pool| Pool {
                    namespace: pool.namespace,
                    task_queue: pool.task_queue,
                    channel: pool.channel,
                    workers: pool
                        .workers
                        .into_iter()
                        .map(|w| Worker {
                            worker_id: w.worker_id,
                            pid: w.pid,
                            identity: w.identity,
                            label: w.node,
                            activity_types: w.activity_types,
                            max_concurrency: w.max_concurrency,
                            in_flight: w.in_flight,
                            draining: w.draining,
                            state: (!w.draining).then_some(Standing::Eligible),
                            deployment: None,
                            instance_id: None,
                        })
                        .collect(),
                })
                .collect(),
            waiting: status.waiting,
            peers: peers
                .into_iter()
                .map(|link| Peer {
                    link,
                    remote_pools: Vec::new(),
                    link_ups: 0,
                    link_downs: 0,
                })
                .collect(),
            join_points: Vec::new(),
            fairness: Fairness::default(),
            current_deployments: Vec::new(),
        }
    }

    /// Sets the waiting and served by priority and key, which only the node itself can tell.
    pub fn with_fairness(mut self, fairness: Fairness) -> Self {
        self.fairness = fairness;
        self
    }

    /// Adds the pools' current deployments.
    pub fn with_current_deployments(mut self, current: Vec<CurrentDeployment>) -> Self {
        self.current_deployments = current;
        self
    }

    /// Gives each worker the deployment identity `rows` state for it, as
    /// `(worker id, deployment, instance id)`.
    pub fn with_deployments(mut self, rows: &[(u64, Option<String>, Option<String>)]) -> Self {
        for worker in self
            .pools
            .iter_mut()
            .flat_map(|pool| pool.workers.iter_mut())
        {
            if let Some((_, deployment, instance_id)) =
                rows.iter().find(|(id, ..)| *id == worker.worker_id)
            {
                worker.deployment.clone_from(deployment);
                worker.instance_id.clone_from(instance_id);
            }
        }
        self
    }

    /// Gives each worker its standing, from `(worker_id, standing)` rows sorted by id; a
    /// worker with no row keeps what it had.
    pub fn with_states(mut self, rows: &[(u64, Standing)]) -> Self {
        for worker in self
            .pools
            .iter_mut()
            .flat_map(|pool| pool.workers.iter_mut())
        {
            if let Ok(at) = rows.binary_search_by_key(&worker.worker_id, |(id, _)| *id) {
                worker.state = rows.get(at).map(|(_, standing)| *standing);
            }
        }
        self
    }

    /// Gives each peer the capacity it announced, by node id.
    pub fn with_remote_pools(mut self, remote: Vec<(String, Vec<RemotePool>)>) -> Self {
        for (node_id, pools) in remote {
            if let Some(peer) = self.peer_mut(&node_id) {
                peer.remote_pools = pools;
            }
        }
        self
    }

    /// Gives each peer its links' ups and downs, as `(node id, ups, downs)`.
    pub fn with_link_counts(
        mut self,
        counts: impl IntoIterator<Item = (String, u64, u64)>,
    ) -> Self {
        for (node_id, ups, downs) in counts {
            if let Some(peer) = self.peer_mut(&node_id) {
                (peer.link_ups, peer.link_downs) = (ups, downs);
            }
        }
        self
    }

    /// Sets the join points.
    pub fn with_join_points(mut self, join_points: Vec<JoinPoint>) -> Self {
        self.join_points = join_points;
        self
    }

    fn peer_mut(&mut self, node_id: &str) -> Option<&mut Peer> {
        self.peers
            .iter_mut()
            .find(|peer| peer.link.node_id == node_id)
    }

    /// The status as pretty JSON.
    ///
    /// # Errors
    /// What `serde_json` reports, which for these types is nothing.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The status a `StatusDocument` holds.
    ///
    /// # Errors
    /// When `json` is not a JSON object of this shape.
    pub fn from_json(json: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(json)
    }
}

impl Counters {
    /// Every counter with the name the text status and `/metrics` give it, in order: the
    /// outcome classes first.
    pub fn named(&self) -> [(&'static str, u64); 13] {
        [
            ("submitted", self.submitted),
            ("pushed", self.pushed),
            ("completed", self.completed),
            ("no-worker", self.no_worker),
            ("worker-lost", self.worker_lost),
            ("timeout", self.timeout),
            ("refused", self.refused),
            ("cancelled", self.cancelled),
            ("draining", self.draining),
            ("peer-lost", self.peer_lost),
            ("late-replies", self.late_replies),
            ("dropped-replies", self.dropped_replies),
            ("reclaimed-slots", self.reclaimed_slots),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_keys_are_the_text_names() {
        let counters = Counters::default();
        let json = serde_json::to_value(&counters).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut named: Vec<String> = counters
            .named()
            .iter()
            .map(|(name, _)| name.replace('-', "_"))
            .collect();
        named.sort_unstable();
        let mut keys: Vec<String> = keys.into_iter().map(str::to_owned).collect();
        keys.sort_unstable();
        assert_eq!(keys, named);
    }
}
