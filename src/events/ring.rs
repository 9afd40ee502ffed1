//! The ring the node's events are published into, and the subscribers that read it.
//!
//! Events are lifecycle, never per dispatch: nothing on the dispatch path publishes. Publishing
//! never waits: it numbers the event under a short lock (so numbers and order agree) and
//! leaves it in one bounded ring that every subscriber reads at its own pace; while nobody
//! subscribes the event is not even built. A subscriber that falls a whole ring behind loses
//! the oldest events and is told how many with a `Missed` before the next one it gets. The ring
//! is the node's only memory for events, whatever the number of subscribers.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use lintel_wire::{EventTopic, NodeEvent};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// Events the ring keeps for subscribers that fall behind.
pub const EVENT_RING: usize = 1024;

/// One published event: its number on this node, when, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// 1 for the node's first event, one more for each after it, of every topic.
    pub seq: u64,
    pub at_unix_ms: u64,
    pub event: NodeEvent,
}

/// The node's event source. Clones publish to the same ring.
#[derive(Debug, Clone)]
pub struct Events {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The last number given; held while an event enters the ring, so numbers follow order.
    seq: Mutex<u64>,
    ring: broadcast::Sender<Arc<Published>>,
}

impl Default for Events {
    fn default() -> Self {
        Self::new(EVENT_RING)
    }
}

impl Events {
    /// A source whose ring keeps the last `capacity` events (at least one).
    pub fn new(capacity: usize) -> Self {
        let (ring, _) = broadcast::channel(capacity.max(1));
        Self {
            inner: Arc::new(Inner {
                seq: Mutex::new(0),
                ring,
            }),
        }
    }

    /// Numbers the event `make` builds and hands it to every subscriber; `make` runs only when
    /// someone subscribes. Never waits on a subscriber.
    pub fn publish(&self, make: impl FnOnce() -> NodeEvent) {
        let mut seq = self.lock();
        *seq += 1;
        if self.inner.ring.receiver_count() == 0 {
            return;
        }
        let published = Published {
            seq: *seq,
            at_unix_ms: now_unix_ms(),
            event: make(),
        };
        let _ = self.inner.ring.send(Arc::new(published));
    }

    /// A subscriber to `topics` (every topic when empty), reading from the next event on.
    pub fn subscribe(&self, topics: &[EventTopic]) -> Subscriber {
        // Taken under the numbering lock: no event is half published when the reader starts.
        let _seq = self.lock();
        Subscriber {
            ring: self.inner.ring.subscribe(),
            topics: topics.to_vec(),
            lost: 0,
            held: None,
        }
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.inner.ring.receiver_count()
    }

    /// Events published since the node started.
    pub fn published(&self) -> u64 {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        // A counter is never left half updated.
        self.inner
            .seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The topic `event` belongs to; `None` for `Missed`, which is every subscriber's own.
pub fn topic_of(event: &NodeEvent) -> Option<EventTopic> {
    match event {
        NodeEvent::WorkerRegistered(_)
        | NodeEvent::WorkerExcluded { .. }
        | NodeEvent::WorkerRestored(_)
        | NodeEvent::WorkerDeparted { .. } => Some(EventTopic::Workers),
        NodeEvent::PeerUp { .. } | NodeEvent::PeerDown { .. } => Some(EventTopic::Peers),
        NodeEvent::Missed { .. } => None,
    }
}

/// What a subscriber reads next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// An event of its topics.
    Event(Arc<Published>),
    /// `count` events were lost for it; `seq` is one less than the next event's.
    Missed { seq: u64, count: u64 },
}

impl Delivery {
    /// The event as a subscriber receives it: its number, when, and what.
    pub fn parts(&self) -> (u64, u64, NodeEvent) {
        match self {
            Delivery::Event(published) => {
                (published.seq, published.at_unix_ms, published.event.clone())
            }
            Delivery::Missed { seq, count } => {
                (*seq, now_unix_ms(), NodeEvent::Missed { count: *count })
            }
        }
    }
}

/// One subscription's reader of the ring.
#[derive(Debug)]
pub struct Subscriber {
    ring: broadcast::Receiver<Arc<Published>>,
    topics: Vec<EventTopic>,
    /// Events lost since the last delivery: overtaken in the ring, or not sent.
    lost: u64,
    /// The event read behind a `Missed`, delivered next.
    held: Option<Arc<Published>>,
}

impl Subscriber {
    /// The next delivery: a `Missed` first when events were lost, then the next event of its
    /// topics. `None` once the source is gone. Cancel-safe: an event read is held, not lost.
    pub async fn next(&mut self) -> Option<Delivery> {
        loop {
            if let Some(delivery) = self.ready() {
                return Some(delivery);
            }
            match self.ring.recv().await {
                Ok(published) => self.held = Some(published),
                Err(RecvError::Lagged(count)) => self.lost = self.lost.saturating_add(count),
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// As [`Subscriber::next`], without waiting: `None` when nothing is ready now.
    pub fn try_next(&mut self) -> Option<Delivery> {
        loop {
            if let Some(delivery) = self.ready() {
                return Some(delivery);
            }
            match self.ring.try_recv() {
                Ok(published) => self.held = Some(published),
                Err(TryRecvError::Lagged(count)) => self.lost = self.lost.saturating_add(count),
                Err(TryRecvError::Empty | TryRecvError::Closed) => return None,
            }
        }
    }

    /// What the event read last makes ready: a `Missed` before it when events were lost, then
    /// it, if it is of the subscriber's topics.
    fn ready(&mut self) -> Option<Delivery> {
        let held = self.held.take()?;
        if self.lost > 0 {
            let count = std::mem::take(&mut self.lost);
            let seq = held.seq.saturating_sub(1);
            self.held = Some(held);
            return Some(Delivery::Missed { seq, count });
        }
        self.wants(&held).then_some(Delivery::Event(held))
    }

    /// `delivery` was read but could not be sent: what it stood for counts as lost, told in
    /// the next `Missed`.
    pub fn lost(&mut self, delivery: &Delivery) {
        let count = match delivery {
            Delivery::Event(_) => 1,
            Delivery::Missed { count, .. } => *count,
        };
        self.lost = self.lost.saturating_add(count);
    }

    fn wants(&self, published: &Published) -> bool {
        self.topics.is_empty()
            || topic_of(&published.event).is_some_and(|topic| self.topics.contains(&topic))
    }
}

fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer_up(n: u64) -> NodeEvent {
        NodeEvent::PeerUp {
            node_id: format!("n{n}"),
            incarnation: n,
            address: String::new(),
        }
    }

    fn worker_gone(n: u64) -> NodeEvent {
        NodeEvent::WorkerRestored(lintel_wire::WorkerEvent {
            worker_id: n,
            identity: String::new(),
            deployment: None,
            instance_id: None,
            channels: Vec::new(),
        })
    }

    async fn seq_of(subscriber: &mut Subscriber) -> (u64, Option<u64>) {
        match subscriber.next().await {
            Some(Delivery::Event(published)) => (published.seq, None),
            Some(Delivery::Missed { seq, count }) => (seq, Some(count)),
            None => panic!("the source is gone"),
        }
    }

    #[test]
    fn nothing_is_built_while_nobody_subscribes_yet_every_event_is_numbered() {
        let events = Events::new(4);
        events.publish(|| unreachable!("built with no subscriber"));
        events.publish(|| unreachable!("built with no subscriber"));
        assert_eq!(events.published(), 2);
    }

    #[tokio::test]
    async fn a_subscriber_reads_its_topics_in_order_with_the_node_numbers() {
        let events = Events::new(8);
        let mut peers = events.subscribe(&[EventTopic::Peers]);
        let mut all = events.subscribe(&[]);
        events.publish(|| peer_up(1));
        events.publish(|| worker_gone(2));
        events.publish(|| peer_up(3));
        assert_eq!(seq_of(&mut peers).await, (1, None));
        assert_eq!(seq_of(&mut peers).await, (3, None));
        for seq in 1..=3 {
            assert_eq!(seq_of(&mut all).await, (seq, None));
        }
    }

    #[tokio::test]
    async fn a_subscriber_a_whole_ring_behind_is_told_what_it_missed_before_the_next_event() {
        let events = Events::new(4);
        let mut slow = events.subscribe(&[]);
        for n in 1..=10 {
            events.publish(|| peer_up(n));
        }
        // Events 1 to 6 were overwritten; 7 to 10 are still in the ring.
        assert_eq!(seq_of(&mut slow).await, (6, Some(6)));
        for seq in 7..=10 {
            assert_eq!(seq_of(&mut slow).await, (seq, None));
        }
    }

    #[tokio::test]
    async fn a_delivery_that_could_not_be_sent_is_counted_in_the_next_missed() {
        let events = Events::new(8);
        let mut subscriber = events.subscribe(&[]);
        events.publish(|| peer_up(1));
        events.publish(|| peer_up(2));
        let first = subscriber.next().await.expect("an event");
        subscriber.lost(&first);
        assert_eq!(seq_of(&mut subscriber).await, (1, Some(1)));
        assert_eq!(seq_of(&mut subscriber).await, (2, None));
    }
}
