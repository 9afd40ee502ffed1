//! When compatible workers last left an address, bounded by a fixed number of records.

use std::collections::HashMap;
use tokio::time::Instant;

use super::selection::NodeFilter;

/// Most departure records kept; the oldest is evicted beyond it.
const MAX_RECORDS: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    task_queue: String,
    activity_type: String,
    node: Option<String>,
}

/// Last departure per (namespace, task queue, activity type, node). Records are only made
/// when a real worker leaves, and never more than [`MAX_RECORDS`].
#[derive(Debug, Default)]
pub(super) struct Departures {
    last: HashMap<Key, Instant>,
}

impl Departures {
    pub(super) fn record(
        &mut self,
        namespace: &str,
        task_queue: &str,
        activity_type: &str,
        node: Option<&str>,
        at: Instant,
    ) {
        let key = Key {
            namespace: namespace.to_owned(),
            task_queue: task_queue.to_owned(),
            activity_type: activity_type.to_owned(),
            node: node.map(str::to_owned),
        };
        if self.last.len() >= MAX_RECORDS && !self.last.contains_key(&key) {
            let oldest = self
                .last
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.last.remove(&oldest);
            }
        }
        self.last.insert(key, at);
    }

    /// Milliseconds since a worker matching the address and `filter` last left.
    pub(super) fn last_ms_ago(
        &self,
        namespace: &str,
        task_queue: &str,
        activity_type: &str,
        filter: NodeFilter<'_>,
    ) -> Option<u64> {
        self.last
            .iter()
            .filter(|(key, _)| {
                key.namespace == namespace
                    && key.task_queue == task_queue
                    && key.activity_type == activity_type
                    && filter.allows(key.node.as_deref())
            })
            .map(|(_, at)| *at)
            .max()
            .map(|at| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn len(&self) -> usize {
        self.last.len()
    }
}
