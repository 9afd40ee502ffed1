//! What the node counts about its connections for operators: the open ones by role with their
//! outbound queues, and the refusals and protocol errors it sent, by code.
//!
//! Keys are frame codes, so every map here is bounded by the protocol's code lists.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use lintel_transport::Outbound;
use lintel_wire::Role;

/// Connections, refusals and errors, shared by every connection task.
#[derive(Debug, Default)]
pub(crate) struct ConnectionCounts {
    /// By pid: ordered, so a crashed node in a simulation drops their queues in the same order.
    open: Mutex<BTreeMap<u64, (Role, Outbound)>>,
    /// `(where, code)`: `hello` or `register`, and the refusal code.
    refusals: Mutex<BTreeMap<(&'static str, String), u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

/// The open connections of one role and what their outbound queues hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RoleLoad {
    pub(crate) connections: u64,
    pub(crate) queued_frames: u64,
    pub(crate) queued_bytes: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update leaves the maps consistent before anything that could panic.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ConnectionCounts {
    /// Connection `pid` took `role`; it counts until [`ConnectionCounts::closed`].
    pub(crate) fn opened(&self, pid: u64, role: Role, outbound: &Outbound) {
        lock(&self.open).insert(pid, (role, outbound.clone()));
    }

    /// Connection `pid` closed.
    pub(crate) fn closed(&self, pid: u64) {
        let gone = lock(&self.open).remove(&pid);
        drop(gone);
    }

    /// A refusal was sent at `stage` with `code`.
    pub(crate) fn refused(&self, stage: &'static str, code: impl std::fmt::Debug) {
        *lock(&self.refusals)
            .entry((stage, format!("{code:?}")))
            .or_default() += 1;
    }

    /// An `Error` frame with `code` was sent before a close.
    pub(crate) fn error(&self, code: impl std::fmt::Debug) {
        *lock(&self.errors).entry(format!("{code:?}")).or_default() += 1;
    }

    /// Open connections and their queues, by role.
    pub(crate) fn by_role(&self) -> Vec<(Role, RoleLoad)> {
        let mut loads: Vec<(Role, RoleLoad)> = [Role::Worker, Role::Producer, Role::Peer]
            .into_iter()
            .map(|role| (role, RoleLoad::default()))
            .collect();
        for (role, outbound) in lock(&self.open).values() {
            let (frames, bytes) = outbound.queued();
            if let Some((_, load)) = loads.iter_mut().find(|(r, _)| r == role) {
                load.connections += 1;
                load.queued_frames += frames as u64;
                load.queued_bytes += bytes as u64;
            }
        }
        loads
    }

    /// Refusals sent, by stage and code.
    pub(crate) fn refusals(&self) -> Vec<((&'static str, String), u64)> {
        lock(&self.refusals)
            .iter()
            .map(|(key, count)| (key.clone(), *count))
            .collect()
    }

    /// Errors sent, by code.
    pub(crate) fn errors(&self) -> Vec<(String, u64)> {
        lock(&self.errors)
            .iter()
            .map(|(code, count)| (code.clone(), *count))
            .collect()
    }
}
