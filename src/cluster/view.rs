//! What one peer announced about its own pools, and the relays charged against it.
//!
//! A peer is the only authority on its pools; this is its latest word, replaced pool by pool
//! as deltas arrive. Relays sent and not answered are charged per group, so the capacity used
//! here is what the peer announced less what this node already sent it. Charges live beside
//! their group and follow it across deltas; a group the peer stops announcing takes its
//! charges with it, and the peer's authoritative refusal covers the rest.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use lintel_wire::channel::parse_channel_name;
use lintel_wire::{PoolPresence, Presence, PresenceGroup};

use crate::idmap::KeyedMap;
use crate::link::Charge;
use crate::registry::{normalize_task_queue, Address, Bucketed, CensusCount, NodeFilter};

/// Most pools held per peer; a peer announcing more is cut off.
pub const MAX_POOLS_PER_PEER: usize = 16_384;

/// Why a presence frame was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PresenceError {
    #[error("channel {0:?} is not a canonical pool channel name")]
    BadChannel(String),
    #[error("peer announced more than {MAX_POOLS_PER_PEER} pools")]
    TooManyPools,
    #[error("pool {channel} has {groups} groups, more than {max}")]
    TooManyGroups {
        channel: String,
        groups: usize,
        max: usize,
    },
}

#[derive(Debug)]
struct Group {
    announced: PresenceGroup,
    /// Relays sent to this group and not answered; shared with their [`Charge`]s. Raised
    /// only under the view's lock, so a charge never passes what was announced free.
    charged: Arc<AtomicU32>,
}

impl Group {
    fn usable(&self) -> u32 {
        let charged = self.charged.load(Ordering::Acquire);
        self.announced.free.saturating_sub(charged)
    }

    fn is(&self, other: &PresenceGroup) -> bool {
        let announced = &self.announced;
        announced.activity_type == other.activity_type
            && announced.node == other.node
            && announced.deployment == other.deployment
    }
}

#[derive(Debug)]
struct Pool {
    channel: String,
    workers: u32,
    groups: Vec<Group>,
}

/// One peer's announced pools and the relays charged against them.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// namespace -> task queue -> pool.
    pools: KeyedMap<String, KeyedMap<String, Pool>>,
    pool_count: usize,
    pub(crate) synced: bool,
    pub(crate) draining: bool,
}

impl View {
    /// Applies one presence frame; on an error nothing further from this peer is trusted.
    pub(crate) fn apply(
        &mut self,
        presence: Presence,
        max_groups: usize,
    ) -> Result<(), PresenceError> {
        if presence.reset {
            self.pools.clear();
            self.pool_count = 0;
            self.synced = false;
        }
        self.draining = presence.draining;
        for pool in presence.pools {
            self.apply_pool(pool, max_groups)?;
        }
        self.synced |= presence.synced;
        Ok(())
    }

    fn apply_pool(&mut self, pool: PoolPresence, max_groups: usize) -> Result<(), PresenceError> {
        if pool.groups.len() > max_groups {
            return Err(PresenceError::TooManyGroups {
                channel: pool.channel,
                groups: pool.groups.len(),
                max: max_groups,
            });
        }
        let address = parse_channel_name(&pool.channel)
            .ok()
            .filter(|address| address.node.is_none())
            .ok_or_else(|| PresenceError::BadChannel(pool.channel.clone()))?;
        let removed = pool.workers == 0 && pool.groups.is_empty();
        let by_queue = self.pools.entry(address.namespace.clone()).or_default();
        if removed {
            if by_queue.remove(&address.task_queue).is_some() {
                self.pool_count -= 1;
            }
            if by_queue.is_empty() {
                self.pools.remove(&address.namespace);
            }
            return Ok(());
        }
        let before = by_queue.get(&address.task_queue);
        if before.is_none() && self.pool_count >= MAX_POOLS_PER_PEER {
            return Err(PresenceError::TooManyPools);
        }
        let groups = pool
            .groups
            .into_iter()
            .map(|announced| {
                let charged = before
                    .and_then(|before| before.groups.iter().find(|old| old.is(&announced)))
                    .map_or_else(Arc::default, |old| Arc::clone(&old.charged));
                Group { announced, charged }
            })
            .collect();
        let replaced = by_queue.insert(
            address.task_queue,
            Pool {
                channel: pool.channel,
                workers: pool.workers,
                groups,
            },
        );
        if replaced.is_none() {
            self.pool_count += 1;
        }
        Ok(())
    }

    fn pool(&self, address: Address<'_>) -> Option<&Pool> {
        self.pools
            .get(address.namespace)?
            .get(normalize_task_queue(address.task_queue))
    }

    /// Slots usable for `address` under `filter`: announced free less relays charged.
    pub(crate) fn usable_slots(&self, address: Address<'_>, filter: NodeFilter<'_>) -> u32 {
        if self.draining {
            return 0;
        }
        self.pool(address)
            .map(|pool| pool.groups.as_slice())
            .unwrap_or_default()
            .iter()
            .filter(|group| matches(group, address, filter))
            .map(Group::usable)
            .fold(0, u32::saturating_add)
    }

    /// One step of a weighted choice over slots: when `*at` falls inside this peer's usable
    /// slots, charges the group it falls on; otherwise takes those slots off `*at` and
    /// returns `None`.
    pub(crate) fn charge_at(
        &mut self,
        address: Address<'_>,
        filter: NodeFilter<'_>,
        at: &mut u64,
    ) -> Option<Charge> {
        if self.draining {
            return None;
        }
        let groups = self.pool(address).map(|pool| pool.groups.as_slice());
        charge_in(groups.unwrap_or_default(), address, filter, at)
    }

    /// Charges one relay to a group with a usable slot, chosen weighted by usable slots;
    /// `None` when no group has one.
    pub(crate) fn charge(
        &mut self,
        address: Address<'_>,
        filter: NodeFilter<'_>,
    ) -> Option<Charge> {
        if self.draining {
            return None;
        }
        let groups = self.pool(address).map(|pool| pool.groups.as_slice());
        let groups = groups.unwrap_or_default();
        let total = groups
            .iter()
            .filter(|group| matches(group, address, filter))
            .map(|group| u64::from(group.usable()))
            .sum();
        let mut at = draw(total)?;
        charge_in(groups, address, filter, &mut at)
    }

    /// Adds this peer's workers for `address` under `filter` to `tally`; they are candidates
    /// when the link to the peer can carry the dispatch.
    pub(crate) fn count_into(
        &self,
        tally: &mut CensusCount,
        address: Address<'_>,
        filter: NodeFilter<'_>,
        can_carry: bool,
    ) {
        let Some(pool) = self.pool(address) else {
            return;
        };
        tally.pool(pool.workers);
        for group in pool.groups.iter().map(|group| &group.announced) {
            if group.activity_type != address.activity_type {
                continue;
            }
            tally.serving(group.workers);
            if !filter.allows(group.node.as_deref()) {
                continue;
            }
            tally.compatible(group.workers);
            if !of_deployment(group, address.deployment) {
                continue;
            }
            let bucketed = Bucketed {
                workers: group.workers,
                draining: group.draining,
                probation: group.probation,
                unreachable: group.unreachable,
            };
            tally.deployment(bucketed, group.full, can_carry);
        }
    }

    /// What the peer announced: workers, slots and free slots per pool and activity type,
    /// summed over node labels; sorted.
    pub(crate) fn capacity(&self) -> Vec<PoolCapacity> {
        let mut rows: Vec<PoolCapacity> = Vec::new();
        for pool in self.pools.values().flat_map(KeyedMap::values) {
            for group in pool.groups.iter().map(|group| &group.announced) {
                let at = rows.iter().position(|row| {
                    row.channel == pool.channel && row.activity_type == group.activity_type
                });
                match at.and_then(|at| rows.get_mut(at)) {
                    Some(row) => {
                        row.workers = row.workers.saturating_add(group.workers);
                        row.slots = row.slots.saturating_add(group.slots);
                        row.free = row.free.saturating_add(group.free);
                    }
                    None => rows.push(PoolCapacity {
                        channel: pool.channel.clone(),
                        activity_type: group.activity_type.clone(),
                        workers: group.workers,
                        slots: group.slots,
                        free: group.free,
                    }),
                }
            }
        }
        rows.sort_by(|a, b| (&a.channel, &a.activity_type).cmp(&(&b.channel, &b.activity_type)));
        rows
    }

    /// Channel names of the announced pools, sorted.
    pub(crate) fn channels(&self) -> Vec<String> {
        let mut channels: Vec<String> = self
            .pools
            .values()
            .flat_map(KeyedMap::values)
            .map(|pool| pool.channel.clone())
            .collect();
        channels.sort();
        channels
    }

    /// Pools held, for checking the bound.
    #[cfg(test)]
    pub(crate) fn pool_count(&self) -> usize {
        self.pool_count
    }
}

/// One activity type of one pool as a peer announced it, for status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolCapacity {
    /// The pool's channel name.
    pub channel: String,
    pub activity_type: String,
    /// Workers serving it.
    pub workers: u32,
    /// Their slots.
    pub slots: u32,
    /// Their free slots as announced, before this node's relays are charged.
    pub free: u32,
}

/// Charges the group among `groups` that `*at` falls on, weighing each by its usable slots;
/// otherwise takes all their usable slots off `*at`.
fn charge_in(
    groups: &[Group],
    address: Address<'_>,
    filter: NodeFilter<'_>,
    at: &mut u64,
) -> Option<Charge> {
    for group in groups {
        if !matches(group, address, filter) {
            continue;
        }
        let usable = u64::from(group.usable());
        if *at < usable {
            return Some(Charge::new(&group.charged, group.announced.node.clone()));
        }
        *at -= usable;
    }
    None
}

fn matches(group: &Group, address: Address<'_>, filter: NodeFilter<'_>) -> bool {
    group.announced.activity_type == address.activity_type
        && filter.allows(group.announced.node.as_deref())
        && of_deployment(&group.announced, address.deployment)
}

/// Announced with `deployment`, or any group when none is required. A group the peer merged
/// past its cap has no deployment, so a dispatch requiring one never uses it.
fn of_deployment(group: &PresenceGroup, deployment: Option<&str>) -> bool {
    deployment.is_none_or(|want| group.deployment.as_deref() == Some(want))
}

/// A point drawn uniformly from `0..total`, for a weighted choice; `None` when `total` is 0.
pub(crate) fn draw(total: u64) -> Option<u64> {
    (total > 0).then(|| fastrand::u64(0..total))
}

#[cfg(test)]
mod tests {
    use lintel_wire::channel::dispatch_channel_name;

    use super::*;

    fn group(activity: &str, node: Option<&str>, free: u32) -> PresenceGroup {
        PresenceGroup {
            activity_type: activity.into(),
            node: node.map(str::to_owned),
            deployment: None,
            workers: 1,
            slots: 4,
            free,
            full: u32::from(free == 0),
            draining: 0,
            probation: 0,
            unreachable: 0,
        }
    }

    fn pool(groups: Vec<PresenceGroup>) -> PoolPresence {
        PoolPresence {
            channel: dispatch_channel_name("ns", "default", None),
            workers: 2,
            groups,
        }
    }

    fn presence(reset: bool, pools: Vec<PoolPresence>) -> Presence {
        Presence {
            reset,
            synced: true,
            draining: false,
            pools,
            extensions: Vec::new(),
        }
    }

    fn address(activity: &str) -> Address<'_> {
        Address {
            namespace: "ns",
            task_queue: "",
            activity_type: activity,
            node: None,
            needs_version: 1,
            needs_features: lintel_wire::FeatureSet::NONE,
            deployment: None,
        }
    }

    #[test]
    fn charges_never_exceed_the_announced_free_slots() {
        let mut view = View::default();
        let groups = vec![group("echo", Some("a"), 2), group("echo", Some("b"), 1)];
        view.apply(presence(true, vec![pool(groups)]), 64).unwrap();
        assert_eq!(view.usable_slots(address("echo"), NodeFilter::Any), 3);
        let keys: Vec<_> = (0..3)
            .map(|_| view.charge(address("echo"), NodeFilter::Any).unwrap())
            .collect();
        assert!(view.charge(address("echo"), NodeFilter::Any).is_none());
        assert_eq!(view.usable_slots(address("echo"), NodeFilter::Any), 0);
        keys[0].release();
        assert_eq!(view.usable_slots(address("echo"), NodeFilter::Any), 1);
    }

    #[test]
    fn a_filter_counts_only_allowed_node_labels() {
        let mut view = View::default();
        let groups = vec![group("echo", Some("a"), 2), group("echo", Some("b"), 1)];
        view.apply(presence(true, vec![pool(groups)]), 64).unwrap();
        assert_eq!(view.usable_slots(address("echo"), NodeFilter::One("b")), 1);
        let key = view.charge(address("echo"), NodeFilter::One("b")).unwrap();
        assert_eq!(key.node(), Some("b"));
        assert_eq!(view.usable_slots(address("other"), NodeFilter::Any), 0);
    }

    #[test]
    fn an_empty_pool_entry_removes_the_pool_and_a_reset_forgets_everything() {
        let mut view = View::default();
        view.apply(presence(true, vec![pool(vec![group("echo", None, 1)])]), 64)
            .unwrap();
        assert_eq!(view.pool_count(), 1);
        let gone = PoolPresence {
            channel: dispatch_channel_name("ns", "default", None),
            workers: 0,
            groups: vec![],
        };
        view.apply(presence(false, vec![gone]), 64).unwrap();
        assert_eq!(view.pool_count(), 0);
        view.apply(presence(true, vec![pool(vec![group("echo", None, 1)])]), 64)
            .unwrap();
        view.apply(presence(true, vec![]), 64).unwrap();
        assert_eq!(view.pool_count(), 0);
    }

    #[test]
    fn hostile_presence_is_refused() {
        let mut view = View::default();
        let bad = PoolPresence {
            channel: "not.a.channel".into(),
            workers: 1,
            groups: vec![],
        };
        assert!(matches!(
            view.apply(presence(false, vec![bad]), 64),
            Err(PresenceError::BadChannel(_))
        ));
        let wide = pool((0..3).map(|_| group("echo", None, 1)).collect());
        assert!(matches!(
            view.apply(presence(false, vec![wide]), 2),
            Err(PresenceError::TooManyGroups { .. })
        ));
    }

    #[test]
    fn a_required_deployment_uses_and_counts_only_its_groups() {
        let mut view = View::default();
        let of = |deployment: Option<&str>, free| PresenceGroup {
            deployment: deployment.map(str::to_owned),
            ..group("echo", None, free)
        };
        let groups = vec![of(None, 5), of(Some("v1"), 1), of(Some("v2"), 2)];
        view.apply(presence(true, vec![pool(groups)]), 64).unwrap();
        let v2 = Address {
            deployment: Some("v2"),
            ..address("echo")
        };
        assert_eq!(view.usable_slots(v2, NodeFilter::Any), 2);
        assert_eq!(view.usable_slots(address("echo"), NodeFilter::Any), 8);
        let v3 = Address {
            deployment: Some("v3"),
            ..address("echo")
        };
        assert!(view.charge(v3, NodeFilter::Any).is_none());
        let mut tally = CensusCount::new(None);
        view.count_into(&mut tally, v3, NodeFilter::Any, true);
        let census = tally.finish();
        assert_eq!(
            (
                census.compatible_workers,
                census.deployment_workers,
                census.reason
            ),
            (3, 0, lintel_wire::NoWorkerReason::DeploymentMatchedNobody)
        );
    }

    #[test]
    fn a_census_counts_remote_workers() {
        let mut view = View::default();
        let groups = vec![group("echo", Some("a"), 0), group("echo", Some("b"), 1)];
        view.apply(presence(true, vec![pool(groups)]), 64).unwrap();
        let mut tally = CensusCount::new(None);
        view.count_into(&mut tally, address("echo"), NodeFilter::One("a"), true);
        let census = tally.finish();
        assert_eq!(
            (
                census.pool_workers,
                census.serving_activity,
                census.compatible_workers,
                census.at_capacity
            ),
            (2, 2, 1, 1)
        );
    }
}
