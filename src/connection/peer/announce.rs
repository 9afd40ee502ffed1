//! What this node last told one peer about its pools, and the delta owed since.
//!
//! A snapshot goes out when the link comes up; afterwards only pools that changed, coalesced
//! to one flush per [`FLUSH_INTERVAL`] unless a group's free slots crossed zero, which goes
//! out at once. An unchanged pool is never resent.

use std::collections::HashMap;
use std::time::Duration;

use lintel_wire::{PoolPresence, Presence, PresenceGroup};

/// Longest a change of free capacity waits to be flushed.
pub(super) const FLUSH_INTERVAL: Duration = Duration::from_millis(25);

/// Shortest time between two looks at the registry, however often it changes.
pub(super) const MIN_LOOK_INTERVAL: Duration = Duration::from_millis(1);

/// Pools per presence frame, so a large node's snapshot fits the frame limit.
const POOLS_PER_FRAME: usize = 256;

/// What one peer was last told.
#[derive(Debug, Default)]
pub(super) struct Announcer {
    sent: HashMap<String, PoolPresence>,
    draining: bool,
}

/// The frames owed to bring a peer up to date, and whether they should go at once.
#[derive(Debug)]
pub(super) struct Delta {
    pub(super) frames: Vec<Presence>,
    pub(super) urgent: bool,
    current: HashMap<String, PoolPresence>,
    draining: bool,
}

impl Announcer {
    /// The whole state as a snapshot; the peer is then up to date.
    pub(super) fn snapshot(&mut self, pools: Vec<PoolPresence>, draining: bool) -> Vec<Presence> {
        let frames = frames(pools.clone(), true, draining);
        self.sent = pools.into_iter().map(|p| (p.channel.clone(), p)).collect();
        self.draining = draining;
        frames
    }

    /// What changed since the peer was last told; nothing is recorded until [`Announcer::commit`].
    pub(super) fn delta(&self, pools: Vec<PoolPresence>, draining: bool) -> Delta {
        let current: HashMap<String, PoolPresence> =
            pools.into_iter().map(|p| (p.channel.clone(), p)).collect();
        let mut changed: Vec<PoolPresence> = Vec::new();
        let mut urgent = draining != self.draining;
        for (channel, pool) in &current {
            let before = self.sent.get(channel);
            if before != Some(pool) {
                urgent |= crosses_zero(before, Some(pool));
                changed.push(pool.clone());
            }
        }
        for (channel, before) in &self.sent {
            if !current.contains_key(channel) {
                urgent |= crosses_zero(Some(before), None);
                changed.push(PoolPresence {
                    channel: channel.clone(),
                    workers: 0,
                    groups: Vec::new(),
                });
            }
        }
        changed.sort_by(|a, b| a.channel.cmp(&b.channel));
        let frames = if changed.is_empty() && draining == self.draining {
            Vec::new()
        } else {
            frames(changed, false, draining)
        };
        Delta {
            frames,
            urgent,
            current,
            draining,
        }
    }

    /// Records that `delta` was sent.
    pub(super) fn commit(&mut self, delta: Delta) {
        self.sent = delta.current;
        self.draining = delta.draining;
    }
}

/// True when some group's free slots went from zero to some or back, or a group with free
/// slots appeared or went away.
fn crosses_zero(before: Option<&PoolPresence>, after: Option<&PoolPresence>) -> bool {
    let has_free = |pool: Option<&PoolPresence>, like: &PresenceGroup| {
        pool.and_then(|pool| {
            pool.groups.iter().find(|g| {
                g.activity_type == like.activity_type
                    && g.node == like.node
                    && g.deployment == like.deployment
            })
        })
        .is_some_and(|group| group.free > 0)
    };
    let groups = before
        .into_iter()
        .chain(after)
        .flat_map(|pool| pool.groups.iter());
    for group in groups {
        let was = has_free(before, group);
        let is = has_free(after, group);
        if was != is {
            return true;
        }
    }
    false
}

/// Splits pools into frames; a snapshot's first frame resets and every frame of it but the
/// last leaves the receiver unsynced.
fn frames(pools: Vec<PoolPresence>, snapshot: bool, draining: bool) -> Vec<Presence> {
    if pools.is_empty() {
        return vec![Presence {
            reset: snapshot,
            synced: true,
            draining,
            pools,
            extensions: Vec::new(),
        }];
    }
    let count = pools.len().div_ceil(POOLS_PER_FRAME);
    let mut pools = pools.into_iter();
    (0..count)
        .map(|index| Presence {
            reset: snapshot && index == 0,
            synced: !snapshot || index + 1 == count,
            draining,
            pools: pools.by_ref().take(POOLS_PER_FRAME).collect(),
            extensions: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(channel: &str, free: u32) -> PoolPresence {
        PoolPresence {
            channel: channel.into(),
            workers: 1,
            groups: vec![PresenceGroup {
                activity_type: "echo".into(),
                node: None,
                deployment: None,
                workers: 1,
                slots: 4,
                free,
                full: u32::from(free == 0),
                draining: 0,
                probation: 0,
                unreachable: 0,
            }],
        }
    }

    #[test]
    fn a_snapshot_resets_first_and_syncs_last() {
        let mut announcer = Announcer::default();
        let pools: Vec<_> = (0..600).map(|i| pool(&format!("c{i:04}"), 1)).collect();
        let frames = announcer.snapshot(pools, false);
        assert_eq!(frames.len(), 3);
        assert!(frames[0].reset && !frames[0].synced);
        assert!(!frames[1].reset && !frames[1].synced);
        assert!(!frames[2].reset && frames[2].synced);
        let empty = Announcer::default().snapshot(Vec::new(), false);
        assert_eq!(empty.len(), 1);
        assert!(empty[0].reset && empty[0].synced);
    }

    #[test]
    fn an_unchanged_pool_is_never_resent() {
        let mut announcer = Announcer::default();
        announcer.snapshot(vec![pool("a", 2), pool("b", 2)], false);
        let delta = announcer.delta(vec![pool("a", 2), pool("b", 1)], false);
        assert_eq!(delta.frames.len(), 1);
        assert_eq!(delta.frames[0].pools, vec![pool("b", 1)]);
        assert!(!delta.urgent, "2 to 1 free slots may wait for the flush");
        announcer.commit(delta);
        let delta = announcer.delta(vec![pool("a", 2), pool("b", 1)], false);
        assert!(delta.frames.is_empty());
    }

    #[test]
    fn crossing_zero_or_a_pool_leaving_is_urgent() {
        let mut announcer = Announcer::default();
        announcer.snapshot(vec![pool("a", 1), pool("b", 1)], false);
        assert!(
            announcer
                .delta(vec![pool("a", 0), pool("b", 1)], false)
                .urgent
        );
        let gone = announcer.delta(vec![pool("a", 1)], false);
        assert!(gone.urgent);
        assert_eq!(gone.frames[0].pools[0].workers, 0);
        assert!(gone.frames[0].pools[0].groups.is_empty());
        assert!(
            announcer
                .delta(vec![pool("a", 1), pool("b", 1)], true)
                .urgent
        );
    }
}
