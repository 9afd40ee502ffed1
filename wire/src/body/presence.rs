//! `Presence` (kind 21) and `Presence3` (kind 31, the message's own serde form): the one
//! [`Presence`](crate::message::Presence). A version-2 link is told each (activity type, node label)
//! pair's groups merged into one, every excluded worker counted as draining (PROTOCOL.md
//! section 9); what it tells is read as groups of no deployment.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::Chooses;
use crate::lower::Lower;

/// The body of kind `Presence`, version 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presence {
    pub reset: bool,
    pub synced: bool,
    pub draining: bool,
    pub pools: Vec<PoolPresence>,
}

/// A pool in a version-2 `Presence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPresence {
    pub channel: String,
    pub workers: u32,
    pub groups: Vec<PresenceGroup>,
}

/// A group in a version-2 `Presence`: one (activity type, node label) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceGroup {
    pub activity_type: String,
    pub node: Option<String>,
    pub workers: u32,
    pub slots: u32,
    pub free: u32,
    pub full: u32,
    /// Every excluded worker: draining or unreachable (a worker in probation is not
    /// announced to a version-2 link).
    pub draining: u32,
}

impl crate::message::PresenceGroup {
    /// True when both groups are of the same activity type and node label.
    pub fn same_pair(&self, other: &Self) -> bool {
        self.activity_type == other.activity_type && self.node == other.node
    }

    /// Every group of one (activity type, node label) pair as one group of no deployment;
    /// `None` for no group.
    pub fn merge(run: Vec<Self>) -> Option<Self> {
        let mut run = run.into_iter();
        let mut merged = run.next()?;
        merged.deployment = None;
        for group in run {
            let add = |to: &mut u32, more: u32| *to = to.saturating_add(more);
            add(&mut merged.workers, group.workers);
            add(&mut merged.slots, group.slots);
            add(&mut merged.free, group.free);
            add(&mut merged.full, group.full);
            add(&mut merged.draining, group.draining);
            add(&mut merged.probation, group.probation);
            add(&mut merged.unreachable, group.unreachable);
        }
        Some(merged)
    }

    /// `groups` cut into runs of one (activity type, node label) pair each, in order.
    pub fn runs(groups: impl IntoIterator<Item = Self>) -> Vec<Vec<Self>> {
        let mut runs: Vec<Vec<Self>> = Vec::new();
        for group in groups {
            match runs.last_mut() {
                Some(run) if run.first().is_some_and(|first| first.same_pair(&group)) => {
                    run.push(group);
                }
                _ => runs.push(vec![group]),
            }
        }
        runs
    }
}

impl Chooses for crate::message::Presence {
    fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        if version >= 3 {
            return Ok(FrameKind::Presence3);
        }
        if !self.extensions.is_empty() {
            return Err(EncodeError::Unsupported {
                kind: FrameKind::Presence,
                field: "extensions",
                version,
            });
        }
        crate::lower::in_version(FrameKind::Presence, version)
    }
}

impl Lower<crate::message::Presence> for Presence {
    fn lower(presence: &crate::message::Presence) -> Cow<'_, Self> {
        let group = |group: crate::message::PresenceGroup| PresenceGroup {
            activity_type: group.activity_type,
            node: group.node,
            workers: group.workers,
            slots: group.slots,
            free: group.free,
            full: group.full,
            draining: group
                .draining
                .saturating_add(group.probation)
                .saturating_add(group.unreachable),
        };
        let pool = |pool: &crate::message::PoolPresence| PoolPresence {
            channel: pool.channel.clone(),
            workers: pool.workers,
            groups: crate::message::PresenceGroup::runs(pool.groups.iter().cloned())
                .into_iter()
                .filter_map(crate::message::PresenceGroup::merge)
                .map(group)
                .collect(),
        };
        Cow::Owned(Presence {
            reset: presence.reset,
            synced: presence.synced,
            draining: presence.draining,
            pools: presence.pools.iter().map(pool).collect(),
        })
    }
}

impl From<Presence> for crate::message::Presence {
    fn from(presence: Presence) -> Self {
        let group = |group: PresenceGroup| crate::message::PresenceGroup {
            activity_type: group.activity_type,
            node: group.node,
            deployment: None,
            workers: group.workers,
            slots: group.slots,
            free: group.free,
            full: group.full,
            draining: group.draining,
            probation: 0,
            unreachable: 0,
        };
        let pool = |pool: PoolPresence| crate::message::PoolPresence {
            channel: pool.channel,
            workers: pool.workers,
            groups: pool.groups.into_iter().map(group).collect(),
        };
        crate::message::Presence {
            reset: presence.reset,
            synced: presence.synced,
            draining: presence.draining,
            pools: presence.pools.into_iter().map(pool).collect(),
            extensions: Vec::new(),
        }
    }
}
