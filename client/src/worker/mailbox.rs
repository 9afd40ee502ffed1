//! A queue between two tasks that may run on different threads, handed over in batches: a
//! sender puts a whole batch under one lock, and only a put onto an empty queue wakes the
//! receiver, which takes everything queued at once.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// A batch queue with one receiver; see the module docs. Unbounded itself: its users bound
/// what they put (requests within the worker's capacity, one answer each).
#[derive(Debug)]
pub(super) struct Mailbox<T> {
    items: Mutex<Vec<T>>,
    /// Notified once per put onto an empty queue; a notification nobody waits for is kept for
    /// the next wait, so none is lost between a take and the next wait.
    filled: Notify,
}

impl<T> Default for Mailbox<T> {
    fn default() -> Self {
        Self {
            items: Mutex::new(Vec::new()),
            filled: Notify::new(),
        }
    }
}

impl<T> Mailbox<T> {
    fn items(&self) -> MutexGuard<'_, Vec<T>> {
        // A push or a swap cannot leave the vector half-changed.
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves every item of `batch` to the queue, leaving `batch` empty (with its allocation
    /// when it had to be copied, or the queue's spare one), and wakes the receiver if the
    /// queue was empty.
    pub(super) fn put(&self, batch: &mut Vec<T>) {
        if batch.is_empty() {
            return;
        }
        let mut items = self.items();
        let was_empty = items.is_empty();
        if was_empty {
            std::mem::swap(&mut *items, batch);
        } else {
            items.append(batch);
        }
        drop(items);
        if was_empty {
            self.filled.notify_one();
        }
    }

    /// Moves everything queued to `into`, which should be empty: it becomes the queue's spare
    /// allocation.
    pub(super) fn take(&self, into: &mut Vec<T>) {
        let mut items = self.items();
        if into.is_empty() {
            std::mem::swap(&mut *items, into);
        } else {
            into.append(&mut items);
        }
    }

    /// Resolves when something was put since the last take, or spuriously. Cancel-safe: a
    /// notification that reached a dropped wait passes to the next one.
    pub(super) async fn filled(&self) {
        self.filled.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Mailbox;

    #[tokio::test]
    async fn a_batch_put_from_another_thread_wakes_the_receiver_and_arrives_whole_in_order() {
        let mailbox = Arc::new(Mailbox::default());
        let sender = Arc::clone(&mailbox);
        let thread = std::thread::spawn(move || {
            for batch in 0..50u32 {
                let mut items: Vec<u32> = (batch * 10..batch * 10 + 10).collect();
                sender.put(&mut items);
                assert!(items.is_empty());
            }
        });
        let mut received = Vec::new();
        let mut taken = Vec::new();
        while received.len() < 500 {
            tokio::time::timeout(Duration::from_secs(10), mailbox.filled())
                .await
                .expect("a put wakes the receiver");
            mailbox.take(&mut taken);
            received.append(&mut taken);
        }
        thread.join().unwrap();
        assert_eq!(received, (0..500).collect::<Vec<u32>>());
    }
}
