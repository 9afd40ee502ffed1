//! A pool as a peer should see it: its workers grouped by activity type, node label and
//! deployment, within the link's cap on groups.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use lintel_client::status::Standing;
use lintel_wire::{PoolPresence, PresenceGroup};

use super::worker::{WorkerCell, WorkerId};

/// One pool's `members` grouped per (activity type, node label, deployment), sorted, at most
/// `max_groups` groups (see [`capped`]); `None` when there is no member. Slots that `held`
/// says the peer's own relays hold count as free. Each worker counts in one state bucket:
/// unreachable before draining before probation; an excluded worker has no free slot.
pub(super) fn pool_presence<'a>(
    channel: String,
    members: impl Iterator<Item = &'a Arc<WorkerCell>>,
    held: &HashMap<WorkerId, u32>,
    max_groups: usize,
) -> Option<PoolPresence> {
    let mut groups: Vec<PresenceGroup> = Vec::new();
    let mut workers = 0u32;
    for worker in members {
        workers = workers.saturating_add(1);
        let state = worker.state();
        let excluded = state != Standing::Eligible;
        let slots = worker.max_concurrency.load(Ordering::Relaxed);
        let busy = worker.in_flight.load(Ordering::Relaxed);
        let theirs = held.get(&worker.id).copied().unwrap_or(0);
        let free = if excluded {
            0
        } else {
            slots.saturating_sub(busy.saturating_sub(theirs))
        };
        let registration = &worker.registration;
        let (node, deployment) = (&registration.node, &registration.deployment);
        for activity in &registration.activity_types {
            let at = groups.iter().position(|group| {
                &group.activity_type == activity
                    && &group.node == node
                    && &group.deployment == deployment
            });
            let group = match at {
                Some(at) => groups.get_mut(at),
                None => {
                    groups.push(empty(activity, node, deployment));
                    groups.last_mut()
                }
            };
            let Some(group) = group else { continue };
            group.workers = group.workers.saturating_add(1);
            group.slots = group.slots.saturating_add(slots);
            group.free = group.free.saturating_add(free);
            group.full += u32::from(!excluded && free == 0);
            match state {
                Standing::Eligible => {}
                Standing::Draining => group.draining += 1,
                Standing::Probation => group.probation += 1,
                Standing::Unreachable => group.unreachable += 1,
            }
        }
    }
    if workers == 0 {
        return None;
    }
    groups.sort_by(|a, b| order(a).cmp(&order(b)));
    Some(PoolPresence {
        channel,
        workers,
        groups: capped(groups, max_groups),
    })
}

fn empty(activity: &str, node: &Option<String>, deployment: &Option<String>) -> PresenceGroup {
    PresenceGroup {
        activity_type: activity.to_owned(),
        node: node.clone(),
        deployment: deployment.clone(),
        workers: 0,
        slots: 0,
        free: 0,
        full: 0,
        draining: 0,
        probation: 0,
        unreachable: 0,
    }
}

fn order(group: &PresenceGroup) -> (&str, Option<&str>, Option<&str>) {
    (
        &group.activity_type,
        group.node.as_deref(),
        group.deployment.as_deref(),
    )
}

/// Sorted `groups` cut to at most `max` by merging, from the last (activity type, node
/// label) pair backwards, each pair's groups into one of no deployment: the receiver then
/// counts those workers but cannot tell their deployment. Pairs alone past `max` stay.
fn capped(groups: Vec<PresenceGroup>, max: usize) -> Vec<PresenceGroup> {
    if groups.len() <= max {
        return groups;
    }
    let mut excess = groups.len() - max;
    let mut runs = PresenceGroup::runs(groups);
    for run in runs.iter_mut().rev() {
        if excess == 0 {
            break;
        }
        if run.iter().all(|group| group.deployment.is_none()) {
            continue;
        }
        excess = excess.saturating_sub(run.len() - 1);
        if let Some(merged) = PresenceGroup::merge(std::mem::take(run)) {
            run.push(merged);
        }
    }
    runs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(activity: &str, deployment: Option<&str>, free: u32) -> PresenceGroup {
        let mut group = empty(activity, &None, &deployment.map(str::to_owned));
        group.workers = 1;
        group.slots = free;
        group.free = free;
        group
    }

    #[test]
    fn groups_past_the_cap_merge_into_groups_of_no_deployment_from_the_last_pair() {
        let groups = vec![
            group("a", Some("v1"), 1),
            group("a", Some("v2"), 2),
            group("b", None, 1),
            group("b", Some("v1"), 3),
            group("b", Some("v2"), 4),
        ];
        let capped = capped(groups.clone(), 3);
        assert_eq!(capped.len(), 3, "{capped:?}");
        let b = capped.last().expect("b");
        assert_eq!((b.deployment.as_deref(), b.workers, b.free), (None, 3, 8));
        assert_eq!(
            capped.first().and_then(|g| g.deployment.as_deref()),
            Some("v1")
        );
        let all = capped_len(groups.clone(), 2);
        assert_eq!(all, 2, "both pairs merge when one is not enough");
        assert_eq!(capped_len(groups, 5), 5, "within the cap nothing merges");
    }

    fn capped_len(groups: Vec<PresenceGroup>, max: usize) -> usize {
        capped(groups, max).len()
    }
}
