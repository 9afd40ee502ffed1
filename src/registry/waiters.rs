//! Dispatches waiting for a worker, first come first served per address.
//!
//! A queue per `(namespace, task queue, activity type)` holds each waiter's node filter and the
//! sender its grant goes to. The registry grants under its own lock, so a slot that frees while
//! a compatible waiter is queued goes to the earliest such waiter, never to a later arrival.

use std::collections::{HashMap, VecDeque};

use lintel_wire::NodeRouting;
use tokio::sync::oneshot;

/// The address a waiter waits at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct WaitKey {
    pub(super) namespace: String,
    pub(super) task_queue: String,
    pub(super) activity_type: String,
}

/// One queued waiter.
#[derive(Debug)]
pub(super) struct Waiter<T> {
    pub(super) id: u64,
    pub(super) routing: NodeRouting,
    /// The request's own node pin.
    pub(super) node: Option<String>,
    /// The lowest protocol version of a worker that can carry its request.
    pub(super) needs_version: u16,
    pub(super) grant: oneshot::Sender<T>,
}

/// FIFO queues of waiters by address; emptied queues are pruned.
#[derive(Debug)]
pub(super) struct Waiters<T> {
    queues: HashMap<WaitKey, VecDeque<Waiter<T>>>,
    next_id: u64,
    count: usize,
}

impl<T> Default for Waiters<T> {
    fn default() -> Self {
        Self {
            queues: HashMap::new(),
            next_id: 0,
            count: 0,
        }
    }
}

impl<T> Waiters<T> {
    /// Queues a waiter at `key`; returns its id and the receiver of its grant.
    pub(super) fn push(
        &mut self,
        key: WaitKey,
        routing: NodeRouting,
        node: Option<String>,
        needs_version: u16,
    ) -> (u64, oneshot::Receiver<T>) {
        self.next_id += 1;
        let id = self.next_id;
        let (grant, granted) = oneshot::channel();
        let waiter = Waiter {
            id,
            routing,
            node,
            needs_version,
            grant,
        };
        self.queues.entry(key).or_default().push_back(waiter);
        self.count += 1;
        (id, granted)
    }

    /// Removes waiter `id` from `key`'s queue; `None` when it is no longer queued.
    pub(super) fn remove(&mut self, key: &WaitKey, id: u64) -> Option<Waiter<T>> {
        let queue = self.queues.get_mut(key)?;
        let at = queue.iter().position(|waiter| waiter.id == id)?;
        let waiter = queue.remove(at)?;
        self.count -= 1;
        if queue.is_empty() {
            self.queues.remove(key);
        }
        Some(waiter)
    }

    /// Waiters queued anywhere.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// Queue lengths by address.
    pub(super) fn counts(&self) -> impl Iterator<Item = (&WaitKey, usize)> {
        self.queues.iter().map(|(key, queue)| (key, queue.len()))
    }

    /// Offers grants to the queues `wants` accepts, earliest waiter first. `offer` is asked per
    /// waiter and returns a grant for it, or `None` to pass it by; `more` says whether any grant
    /// is left to give. A grant whose waiter has gone is handed to `returned`.
    pub(super) fn serve(
        &mut self,
        wants: impl Fn(&WaitKey) -> bool,
        mut more: impl FnMut() -> bool,
        mut offer: impl FnMut(&WaitKey, &Waiter<T>) -> Option<T>,
        mut returned: impl FnMut(T),
    ) {
        let mut emptied = Vec::new();
        for (key, queue) in self.queues.iter_mut().filter(|(key, _)| wants(key)) {
            let mut at = 0;
            while at < queue.len() && more() {
                let grant = queue.get(at).and_then(|waiter| offer(key, waiter));
                let Some(grant) = grant else {
                    at += 1;
                    continue;
                };
                if let Some(waiter) = queue.remove(at) {
                    self.count -= 1;
                    if let Err(grant) = waiter.grant.send(grant) {
                        returned(grant);
                    }
                }
            }
            if queue.is_empty() {
                emptied.push(key.clone());
            }
        }
        for key in emptied {
            self.queues.remove(&key);
        }
    }
}
