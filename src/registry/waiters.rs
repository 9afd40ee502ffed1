//! Dispatches waiting for a worker, and the order a freed slot serves them in.
//!
//! Per address `(namespace, task queue, activity type)` the waiters sit in a level per
//! priority and, within a level, in a queue per fairness key. A free slot goes to the level that
//! ranks first: each level ranks by its oldest waiter's arrival, made later by `aging` for each
//! priority step below the highest, so a higher priority goes first unless a lower one has
//! waited that much longer (zero `aging`: strict priority). Within the level, key queues take
//! turns by stride scheduling: a grant moves a key queue's pass on by the inverse of its
//! weight, and the key queue with the lowest pass goes next; a new key queue starts level with
//! the last one served. Within a key queue, the earliest waiter the slot suits goes first. A
//! key queue exists only while it has waiters, a level while it has key queues, a queue while
//! it has levels.
//!
//! The registry grants under its own lock, so a slot that frees while a waiter it suits is
//! queued goes to a waiter, never to a later arrival of the same key.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::NodeRouting;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::fairness::{FairnessRef, LOWEST_PRIORITY};
use crate::idmap::KeyedMap;

/// Passes advance by this over a key queue's weight in thousandths: a weight of 1.0 moves 10^9.
const STRIDE: u128 = 1_000_000_000_000;

/// The address a waiter waits at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct WaitKey {
    pub(super) namespace: String,
    pub(super) task_queue: String,
    pub(super) activity_type: String,
}

/// Where one waiter sits, to take it out again.
#[derive(Debug, Clone)]
pub(super) struct Seat {
    pub(super) key: WaitKey,
    priority: u8,
    fairness_key: Arc<str>,
    id: u64,
}

/// One queued waiter.
#[derive(Debug)]
pub(super) struct Waiter<T> {
    id: u64,
    arrived: Instant,
    pub(super) routing: NodeRouting,
    pub(super) wants: Wants,
    pub(super) grant: oneshot::Sender<T>,
}

/// What a waiter's worker must be besides serving its address: on its pinned node, able to
/// carry its request, of its required deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Wants {
    /// The request's own node pin.
    pub(super) node: Option<String>,
    /// The lowest protocol version of a worker that can carry its request.
    pub(super) needs_version: u16,
    /// What a worker must have listed to carry its request.
    pub(super) needs_features: lintel_wire::FeatureSet,
    /// The deployment its worker must be registered with.
    pub(super) deployment: Option<String>,
    /// Whether a relay to a peer may serve it instead of a worker here.
    pub(super) relay: bool,
}

/// What a waiter is offered a grant as: its address, priority and fairness key.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grantee<'a> {
    pub(super) key: &'a WaitKey,
    pub(super) priority: u8,
    pub(super) fairness_key: &'a str,
}

/// Where the grants [`Waiters::serve`] hands out come from.
pub(super) trait Grants<T> {
    /// Whether waiters at `key` may be offered a grant at all.
    fn wants(&self, key: &WaitKey) -> bool;
    /// Whether a grant is left to give.
    fn more(&mut self) -> bool;
    /// Whether the waiters of `fairness_key` must be passed by (the key is at its cap).
    fn blocked(&mut self, fairness_key: &str) -> bool;
    /// A grant for `waiter`, or `None` to pass it by.
    fn offer(&mut self, to: Grantee<'_>, waiter: &Waiter<T>) -> Option<T>;
    /// A grant whose waiter had gone.
    fn returned(&mut self, grant: T);
}

/// Waiters by address, priority and fairness key.
#[derive(Debug)]
pub(super) struct Waiters<T> {
    queues: HashMap<WaitKey, Queue<T>>,
    next_id: u64,
    count: usize,
    /// Waiters a relay may serve.
    relayable: usize,
    aging: Duration,
}

/// The waiters at one address, a level per priority waiting.
#[derive(Debug)]
struct Queue<T> {
    levels: BTreeMap<u8, Level<T>>,
    count: usize,
}

/// The waiters of one priority at one address, a queue per fairness key.
#[derive(Debug)]
struct Level<T> {
    key_queues: KeyedMap<Arc<str>, KeyQueue<T>>,
    /// `(pass, sequence, key)` of every key queue: the first takes the next turn.
    turns: BTreeSet<(u128, u64, Arc<str>)>,
    /// Every waiter's arrival by id, so the oldest is the first.
    arrivals: BTreeMap<u64, Instant>,
    /// The pass of the key queue served last; a new key queue starts here.
    now: u128,
}

/// One key's waiters at one priority and address, first come first served.
#[derive(Debug)]
struct KeyQueue<T> {
    waiters: VecDeque<Waiter<T>>,
    pass: u128,
    /// Breaks ties between equal passes: the id of its head when it last took its turn.
    sequence: u64,
    /// In thousandths; the latest waiter's.
    weight: u32,
}

impl<T> Waiters<T> {
    /// No waiters; a lower priority is raised one level for every `aging` it waits.
    pub(super) fn new(aging: Duration) -> Self {
        Self {
            queues: HashMap::new(),
            next_id: 0,
            count: 0,
            relayable: 0,
            aging,
        }
    }

    /// Queues a waiter at `key` as `fairness` says; returns its seat and the receiver of its
    /// grant.
    pub(super) fn push(
        &mut self,
        key: WaitKey,
        fairness: FairnessRef<'_>,
        routing: NodeRouting,
        wants: Wants,
        now: Instant,
    ) -> (Seat, oneshot::Receiver<T>) {
        self.next_id += 1;
        let id = self.next_id;
        self.relayable += usize::from(wants.relay);
        let (grant, granted) = oneshot::channel();
        let waiter = Waiter {
            id,
            arrived: now,
            routing,
            wants,
            grant,
        };
        let priority = fairness.priority.clamp(1, LOWEST_PRIORITY);
        let queue = self.queues.entry(key.clone()).or_insert_with(|| Queue {
            levels: BTreeMap::new(),
            count: 0,
        });
        let level = queue.levels.entry(priority).or_default();
        let fairness_key = level.push(fairness.key, fairness.weight, waiter);
        queue.count += 1;
        self.count += 1;
        let seat = Seat {
            key,
            priority,
            fairness_key,
            id,
        };
        (seat, granted)
    }

    /// Takes the waiter at `seat` out; `None` when it is no longer queued.
    pub(super) fn remove(&mut self, seat: &Seat) -> Option<Waiter<T>> {
        let queue = self.queues.get_mut(&seat.key)?;
        let level = queue.levels.get_mut(&seat.priority)?;
        let waiter = level.remove(&seat.fairness_key, seat.id)?;
        if level.key_queues.is_empty() {
            queue.levels.remove(&seat.priority);
        }
        queue.count -= 1;
        self.count -= 1;
        self.relayable -= usize::from(waiter.wants.relay);
        if queue.count == 0 {
            self.queues.remove(&seat.key);
        }
        Some(waiter)
    }

    /// Waiters queued anywhere.
    pub(super) fn len(&self) -> usize {
        self.count
    }

    /// Waiters queued anywhere that a relay may serve.
    pub(super) fn relayable(&self) -> usize {
        self.relayable
    }

    /// Queue lengths by address.
    pub(super) fn counts(&self) -> impl Iterator<Item = (&WaitKey, usize)> {
        self.queues.iter().map(|(key, queue)| (key, queue.count))
    }

    /// Queue lengths by address, with the arrival of each address's oldest waiter.
    pub(super) fn oldest_by_address(&self) -> impl Iterator<Item = (&WaitKey, usize, Instant)> {
        self.queues.iter().filter_map(|(key, queue)| {
            let oldest = queue.levels.values().filter_map(Level::oldest).min()?;
            Some((key, queue.count, oldest))
        })
    }

    /// Waiters by priority and fairness key, over every address.
    pub(super) fn key_queues(&self) -> impl Iterator<Item = (u8, &str, usize)> {
        self.queues.values().flat_map(|queue| {
            queue.levels.iter().flat_map(|(priority, level)| {
                level
                    .key_queues
                    .iter()
                    .map(move |(key, key_queue)| (*priority, key.as_ref(), key_queue.waiters.len()))
            })
        })
    }

    /// The addresses where fairness key `fairness_key` has waiters.
    pub(super) fn addresses_of(&self, fairness_key: &str) -> Vec<WaitKey> {
        self.queues
            .iter()
            .filter(|(_, queue)| {
                queue
                    .levels
                    .values()
                    .any(|level| level.key_queues.contains_key(fairness_key))
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Hands out what `grants` has to give, one grant at a time, each to the waiter that ranks
    /// first among the queues `grants` wants (see the module's doc); returns how many it gave.
    pub(super) fn serve(&mut self, grants: &mut impl Grants<T>) -> usize {
        let aging = self.aging;
        let mut queues: Vec<(&WaitKey, &mut Queue<T>)> = self
            .queues
            .iter_mut()
            .filter(|(key, _)| grants.wants(key))
            .collect();
        // Levels found with nothing this giver can use, by (queue, priority).
        let mut passed: Vec<(usize, u8)> = Vec::new();
        let (mut served, mut relayed) = (0, 0);
        while grants.more() {
            let best = queues
                .iter()
                .enumerate()
                .flat_map(|(at, (_, queue))| {
                    queue
                        .ranks(aging)
                        .map(move |(priority, rank)| (rank, at, priority))
                })
                .filter(|(_, at, priority)| !passed.contains(&(*at, *priority)))
                .min_by_key(|(rank, ..)| *rank);
            let Some((_, at, priority)) = best else {
                break;
            };
            let Some((key, queue)) = queues.get_mut(at) else {
                break;
            };
            let Some(granted) = queue.grant(priority, key, grants) else {
                passed.push((at, priority));
                continue;
            };
            served += 1;
            relayed += usize::from(granted.relay);
            if let Err(grant) = granted.grant.send(granted.payload) {
                grants.returned(grant);
            }
        }
        if served > 0 {
            self.count -= served;
            self.relayable -= relayed;
            self.queues.retain(|_, queue| queue.count > 0);
        }
        served
    }
}

/// A waiter taken from its key queue with the grant it was offered.
struct Granted<T> {
    grant: oneshot::Sender<T>,
    payload: T,
    /// Whether a relay could have served the waiter.
    relay: bool,
}

/// How a level ranks for the next grant: lowest first. With aging, by the oldest waiter's
/// arrival moved later by `aging` per step below priority 1, then by priority; without, by
/// priority, then arrival.
type Rank = (u8, Instant, u8);

impl<T> Queue<T> {
    /// Each priority waiting with its level's rank.
    fn ranks(&self, aging: Duration) -> impl Iterator<Item = (u8, Rank)> + '_ {
        self.levels.iter().filter_map(move |(&priority, level)| {
            let oldest = level.oldest()?;
            let rank = if aging.is_zero() {
                (priority, oldest, priority)
            } else {
                let steps = u32::from(priority.saturating_sub(1));
                let due = oldest
                    .checked_add(aging.saturating_mul(steps))
                    .unwrap_or(oldest);
                (0, due, priority)
            };
            Some((priority, rank))
        })
    }

    /// Grants a slot to a waiter of `priority`, if one can take it.
    fn grant(
        &mut self,
        priority: u8,
        key: &WaitKey,
        grants: &mut impl Grants<T>,
    ) -> Option<Granted<T>> {
        let level = self.levels.get_mut(&priority)?;
        let granted = level.grant(key, priority, grants)?;
        if level.key_queues.is_empty() {
            self.levels.remove(&priority);
        }
        self.count -= 1;
        Some(granted)
    }
}

impl<T> Default for Level<T> {
    fn default() -> Self {
        Self {
            key_queues: KeyedMap::default(),
            turns: BTreeSet::new(),
            arrivals: BTreeMap::new(),
            now: 0,
        }
    }
}

impl<T> Level<T> {
    /// Queues `waiter` in the key queue of `key`; returns the key.
    fn push(&mut self, key: &str, weight: u32, waiter: Waiter<T>) -> Arc<str> {
        self.arrivals.insert(waiter.id, waiter.arrived);
        let known = self
            .key_queues
            .get_key_value(key)
            .map(|(key, _)| Arc::clone(key));
        if let Some(key_queue) = known.as_ref().and_then(|key| self.key_queues.get_mut(key)) {
            key_queue.weight = weight;
            key_queue.waiters.push_back(waiter);
            return known.unwrap_or_else(|| Arc::from(key));
        }
        let key: Arc<str> = Arc::from(key);
        let sequence = waiter.id;
        // Most keys wait with one dispatch: room for exactly one to start.
        let mut waiters = VecDeque::with_capacity(1);
        waiters.push_back(waiter);
        self.turns.insert((self.now, sequence, Arc::clone(&key)));
        self.key_queues.insert(
            Arc::clone(&key),
            KeyQueue {
                waiters,
                pass: self.now,
                sequence,
                weight,
            },
        );
        key
    }

    /// Takes waiter `id` out of key queue `key`.
    fn remove(&mut self, key: &str, id: u64) -> Option<Waiter<T>> {
        let key_queue = self.key_queues.get_mut(key)?;
        let at = key_queue
            .waiters
            .iter()
            .position(|waiter| waiter.id == id)?;
        let waiter = key_queue.waiters.remove(at)?;
        self.arrivals.remove(&id);
        if key_queue.waiters.is_empty() {
            let turn = (key_queue.pass, key_queue.sequence);
            if let Some((key, _)) = self.key_queues.remove_entry(key) {
                self.turns.remove(&(turn.0, turn.1, key));
            }
        }
        Some(waiter)
    }

    fn oldest(&self) -> Option<Instant> {
        self.arrivals.first_key_value().map(|(_, at)| *at)
    }

    /// Offers a grant key queue by key queue in turn order, and within a key queue waiter by
    /// waiter; the key queue served moves its pass on.
    fn grant(
        &mut self,
        key: &WaitKey,
        priority: u8,
        grants: &mut impl Grants<T>,
    ) -> Option<Granted<T>> {
        let mut found = None;
        for turn in &self.turns {
            let fairness_key = &turn.2;
            if grants.blocked(fairness_key) {
                continue;
            }
            let Some(key_queue) = self.key_queues.get(fairness_key) else {
                continue;
            };
            let to = Grantee {
                key,
                priority,
                fairness_key,
            };
            let offered = key_queue
                .waiters
                .iter()
                .enumerate()
                .find_map(|(at, waiter)| Some((at, grants.offer(to, waiter)?)));
            if let Some((at, payload)) = offered {
                found = Some((turn.clone(), at, payload));
                break;
            }
        }
        let (turn, at, payload) = found?;
        self.turns.remove(&turn);
        let (pass, _, fairness_key) = turn;
        let key_queue = self.key_queues.get_mut(&fairness_key)?;
        let waiter = key_queue.waiters.remove(at)?;
        self.arrivals.remove(&waiter.id);
        self.now = self.now.max(pass);
        key_queue.pass = pass + STRIDE / u128::from(key_queue.weight.max(1));
        match key_queue.waiters.front() {
            Some(head) => {
                key_queue.sequence = head.id;
                self.turns
                    .insert((key_queue.pass, key_queue.sequence, fairness_key));
            }
            None => {
                self.key_queues.remove(&fairness_key);
            }
        }
        Some(Granted {
            grant: waiter.grant,
            payload,
            relay: waiter.wants.relay,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::registry::fairness::{Fairness, DEFAULT_WEIGHT};

    /// Gives `slots` grants to whoever ranks first, recording who got them; keys listed in
    /// `capped` are passed by.
    struct Slots {
        slots: usize,
        capped: Vec<&'static str>,
        /// Waiters this giver does not suit, by the node they are pinned to.
        unsuited: Option<&'static str>,
        given: Vec<(u8, String)>,
    }

    impl Slots {
        fn new(slots: usize) -> Self {
            Self {
                slots,
                capped: Vec::new(),
                unsuited: None,
                given: Vec::new(),
            }
        }
    }

    impl Grants<u64> for Slots {
        fn wants(&self, _: &WaitKey) -> bool {
            true
        }
        fn more(&mut self) -> bool {
            self.slots > 0
        }
        fn blocked(&mut self, fairness_key: &str) -> bool {
            self.capped.contains(&fairness_key)
        }
        fn offer(&mut self, to: Grantee<'_>, waiter: &Waiter<u64>) -> Option<u64> {
            if self.unsuited.is_some() && waiter.wants.node.as_deref() == self.unsuited {
                return None;
            }
            self.slots -= 1;
            self.given.push((to.priority, to.fairness_key.to_owned()));
            Some(waiter.id)
        }
        fn returned(&mut self, _: u64) {}
    }

    fn address() -> WaitKey {
        WaitKey {
            namespace: "ns".into(),
            task_queue: "default".into(),
            activity_type: "act".into(),
        }
    }

    struct Queued {
        waiters: Waiters<u64>,
        /// Receivers kept, so grants land.
        receivers: Vec<oneshot::Receiver<u64>>,
        seats: Vec<Seat>,
        start: Instant,
    }

    impl Queued {
        fn new(aging: Duration) -> Self {
            Self {
                waiters: Waiters::new(aging),
                receivers: Vec::new(),
                seats: Vec::new(),
                start: Instant::now(),
            }
        }

        /// Queues `n` waiters of `key` at `priority` and `weight`, arriving `at` after the start.
        fn push(&mut self, n: usize, priority: u8, key: &str, weight: u32, at: Duration) {
            for _ in 0..n {
                let fairness = Fairness {
                    priority,
                    key,
                    weight,
                };
                let (seat, receiver) = self.waiters.push(
                    address(),
                    fairness,
                    NodeRouting::Any,
                    Wants::default(),
                    self.start + at,
                );
                self.receivers.push(receiver);
                self.seats.push(seat);
            }
        }

        /// Serves `slots` grants; returns who got them.
        fn serve(&mut self, slots: usize) -> Vec<(u8, String)> {
            let mut giver = Slots::new(slots);
            self.waiters.serve(&mut giver);
            giver.given
        }
    }

    fn keys(given: &[(u8, String)]) -> String {
        given.iter().map(|(_, key)| key.as_str()).collect()
    }

    const NOW: Duration = Duration::ZERO;

    #[test]
    fn within_one_key_and_priority_waiters_are_served_first_come_first_served() {
        let mut q = Queued::new(Duration::ZERO);
        q.push(3, 3, "", DEFAULT_WEIGHT, NOW);
        let mut giver = Slots::new(3);
        q.waiters.serve(&mut giver);
        let granted: Vec<u64> = q
            .receivers
            .iter_mut()
            .map(|receiver| receiver.try_recv().expect("granted"))
            .collect();
        assert_eq!(granted, [1, 2, 3]);
        assert_eq!(q.waiters.len(), 0);
        assert_eq!(q.waiters.counts().count(), 0, "an emptied queue is pruned");
    }

    #[test]
    fn a_higher_priority_goes_first_however_many_lower_ones_wait() {
        let mut q = Queued::new(DEFAULT_AGING_FOR_TESTS);
        q.push(100, 3, "", DEFAULT_WEIGHT, NOW);
        q.push(1, 1, "", DEFAULT_WEIGHT, NOW);
        q.push(1, 5, "", DEFAULT_WEIGHT, NOW);
        let given = q.serve(2);
        assert_eq!(given.first().map(|(p, _)| *p), Some(1));
        assert_eq!(given.get(1).map(|(p, _)| *p), Some(3));
    }

    const DEFAULT_AGING_FOR_TESTS: Duration = Duration::from_secs(10);

    #[test]
    fn a_new_key_takes_turns_with_a_key_that_queued_long_before() {
        let mut q = Queued::new(Duration::ZERO);
        q.push(200, 3, "a", DEFAULT_WEIGHT, NOW);
        assert_eq!(keys(&q.serve(5)), "aaaaa");
        q.push(10, 3, "b", DEFAULT_WEIGHT, NOW);
        let given = q.serve(20);
        assert_eq!(keys(&given), "babababababababababa");
    }

    #[test]
    fn keys_share_slots_in_proportion_to_their_weights() {
        let mut q = Queued::new(Duration::ZERO);
        q.push(1_000, 3, "heavy", 3_000, NOW);
        q.push(1_000, 3, "light", 1_000, NOW);
        q.push(1_000, 3, "tenth", 100, NOW);
        let given = q.serve(1_230);
        let count = |key: &str| given.iter().filter(|(_, k)| k == key).count();
        // 3 : 1 : 0.1 of 1,230 grants is 900 : 300 : 30 (within a grant of rounding).
        assert!((899..=901).contains(&count("heavy")), "{}", count("heavy"));
        assert!((299..=301).contains(&count("light")), "{}", count("light"));
        assert!((29..=31).contains(&count("tenth")), "{}", count("tenth"));
    }

    #[test]
    fn a_lower_priority_that_waited_long_enough_goes_before_a_newer_higher_one() {
        let aging = Duration::from_millis(100);
        let mut q = Queued::new(aging);
        q.push(1, 5, "", DEFAULT_WEIGHT, NOW);
        // Priority 5 ranks 400 ms after its arrival: a priority-1 waiter that arrived within
        // 400 ms of it goes first, one that arrived later goes after it.
        q.push(1, 1, "", DEFAULT_WEIGHT, Duration::from_millis(399));
        q.push(1, 1, "", DEFAULT_WEIGHT, Duration::from_millis(401));
        let given = q.serve(3);
        let priorities: Vec<u8> = given.iter().map(|(p, _)| *p).collect();
        assert_eq!(priorities, [1, 5, 1]);
    }

    #[test]
    fn without_aging_priority_is_strict() {
        let mut q = Queued::new(Duration::ZERO);
        q.push(1, 5, "", DEFAULT_WEIGHT, NOW);
        q.push(3, 1, "", DEFAULT_WEIGHT, Duration::from_secs(3_600));
        let given = q.serve(4);
        let priorities: Vec<u8> = given.iter().map(|(p, _)| *p).collect();
        assert_eq!(priorities, [1, 1, 1, 5]);
    }

    #[test]
    fn a_capped_key_is_passed_by_and_others_are_served() {
        let mut q = Queued::new(Duration::ZERO);
        q.push(3, 1, "capped", DEFAULT_WEIGHT, NOW);
        q.push(3, 3, "free", DEFAULT_WEIGHT, NOW);
        let mut giver = Slots::new(4);
        giver.capped.push("capped");
        q.waiters.serve(&mut giver);
        assert_eq!(keys(&giver.given), "freefreefree");
        assert_eq!(q.waiters.len(), 3);
        assert_eq!(keys(&q.serve(1)), "capped");
    }

    #[test]
    fn a_waiter_the_slot_does_not_suit_is_passed_by_and_keeps_its_place() {
        let mut q = Queued::new(Duration::ZERO);
        let (seat, _pinned) = q.waiters.push(
            address(),
            FairnessRef::default(),
            NodeRouting::Any,
            Wants {
                node: Some("elsewhere".into()),
                ..Wants::default()
            },
            q.start,
        );
        q.push(1, 3, "", DEFAULT_WEIGHT, NOW);
        let mut giver = Slots::new(1);
        giver.unsuited = Some("elsewhere");
        q.waiters.serve(&mut giver);
        assert_eq!(giver.given.len(), 1);
        assert_eq!(q.waiters.len(), 1);
        assert!(
            q.waiters.remove(&seat).is_some(),
            "the pinned waiter still waits"
        );
    }

    #[test]
    fn leaving_removes_every_trace_of_a_key() {
        let mut q = Queued::new(Duration::ZERO);
        for n in 0..100 {
            q.push(1, 1 + (n % 5) as u8, &format!("k{n}"), DEFAULT_WEIGHT, NOW);
        }
        assert_eq!(q.waiters.key_queues().count(), 100);
        for seat in std::mem::take(&mut q.seats) {
            assert!(q.waiters.remove(&seat).is_some());
            assert!(q.waiters.remove(&seat).is_none(), "removed once");
        }
        assert_eq!(q.waiters.len(), 0);
        assert_eq!(q.waiters.key_queues().count(), 0);
        assert!(q.waiters.queues.is_empty());
    }

    #[test]
    fn waiters_are_counted_by_priority_and_key() {
        let mut q = Queued::new(Duration::ZERO);
        q.push(2, 1, "a", DEFAULT_WEIGHT, NOW);
        q.push(3, 4, "b", DEFAULT_WEIGHT, NOW);
        let mut key_queues: Vec<(u8, String, usize)> = q
            .waiters
            .key_queues()
            .map(|(p, k, n)| (p, k.to_owned(), n))
            .collect();
        key_queues.sort();
        assert_eq!(key_queues, [(1, "a".to_owned(), 2), (4, "b".to_owned(), 3)]);
        assert_eq!(q.waiters.addresses_of("b"), [address()]);
        assert!(q.waiters.addresses_of("c").is_empty());
    }
}
