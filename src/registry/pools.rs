//! The registry: pools of connected workers, selection with slot reservation, waiters, census.
//!
//! State has one owner: a `Mutex` with short critical sections, never held across an
//! `.await`. A lock was chosen over an actor because every operation is a few map look-ups, so
//! a channel round trip would cost more than the work. Every change that can make a worker
//! eligible (a registration, a freed slot, more capacity, a restored worker) serves queued
//! waiters in the same critical section, and a waiter that gives up leaves the queue and takes
//! its census in one too, so no wake is lost and a census agrees with the decision it explains.
//! Relays to peers are granted to the waiters that may be relayed in the same order, one pass
//! at a time under the lock ([`Registry::serve_elsewhere`]); a local slot never waits for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

use lintel_client::status::Standing;
use lintel_wire::channel::dispatch_channel_name;
use lintel_wire::{
    Census, DepartureReason, NodeEvent, NodeRouting, PoolPresence, PoolStatus, Refusal,
    RefusalCode, Register, RoutingRef, WaitingStatus, WorkerEvent,
};
use tokio::sync::oneshot;

use super::admission::{normalize_task_queue, validate, validate_capacity, AdmissionLimits};
use super::departures::Departures;
use super::fairness::{
    CapReached, Fairness, FairnessPolicy, FairnessRef, FairnessStatus, Keys, DEFAULT_WEIGHT,
};
use super::presence;
use super::selection::{
    census, compatible, eligible, of_deployment, Address, CensusCount, NodeFilter, Tiers,
};
use super::waiters::{Grantee, Grants, Seat, WaitKey, Waiter, Waiters, Wants};
use super::worker::{Exclusion, WorkerCell, WorkerId};
use crate::epoch::Epoch;
use crate::events::Events;
use crate::idmap::{IdMap, KeyedMap};
use crate::link::{RemoteSlot, WorkerLink};
use crate::pool_metrics::{PoolMeter, PoolMeters, DEFAULT_MAX_POOLS};

#[derive(Debug)]
struct Pool {
    members: Vec<Arc<WorkerCell>>,
    /// Where each activity type's rotation stands, shared by pinned and unpinned lookups.
    cursors: KeyedMap<String, Cursor>,
    /// Where its dispatches are counted: its own meter, or `other`'s past the bound.
    meter: Arc<PoolMeter>,
}

impl Pool {
    fn new(meter: Arc<PoolMeter>) -> Self {
        Self {
            members: Vec::new(),
            cursors: KeyedMap::default(),
            meter,
        }
    }
}

/// One activity's place in its pool's rotation.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    /// Where the next search starts: one past the member picked last.
    next: usize,
    /// The write turn ([`lintel_transport::turn`]) the last pick was made in.
    turn: u64,
}

#[derive(Debug)]
struct State {
    workers: IdMap<WorkerId, Arc<WorkerCell>>,
    /// namespace -> task queue -> pool; nested so look-ups borrow `&str`.
    pools: KeyedMap<String, KeyedMap<String, Pool>>,
    departures: Departures,
    waiters: Waiters<Placed>,
    /// Caps and weights of the listed fairness keys, and what was served by key.
    keys: Keys,
    /// Worker by (deployment, instance id), for the workers that stated an instance id.
    instances: HashMap<(Option<String>, String), WorkerId>,
    /// Workers gone, by the reason recorded for them.
    departed: HashMap<DepartureReason, u64>,
    draining: bool,
}

/// The registry. Share it as `Arc<Registry>`.
#[derive(Debug)]
pub struct Registry {
    state: Mutex<State>,
    next_id: AtomicU64,
    limits: AdmissionLimits,
    /// New workers start in [`Exclusion::Probation`]; a dispatch waits this long at most for
    /// one to end.
    probation: Option<Duration>,
    /// Touched on every change of membership, slots or waiters.
    changes: Epoch,
    /// Where a worker's registration, exclusions, restoration and departure are told, under
    /// the lock that made them, so they are told in the order they happened.
    events: Events,
    /// Touched when a worker joins, leaves, changes capacity or exclusion, or its free slots
    /// go between zero and some: what a peer must hear of at once.
    crossings: Epoch,
    /// Waiters a relay may serve, as of the last change to the queue: read without the lock.
    relayable: AtomicUsize,
    /// Per-pool counts for a bounded set of pools; its lock is taken inside this one's, never
    /// the other way round.
    meters: Arc<PoolMeters>,
}

impl Registry {
    /// An empty registry admitting registrations within `limits`, each selectable at once,
    /// waiters served by priority and fairness key with the default settings.
    pub fn new(limits: AdmissionLimits) -> Arc<Self> {
        Self::admitting(limits, None, &FairnessPolicy::default(), DEFAULT_MAX_POOLS)
    }

    /// An empty registry admitting registrations within `limits`, each in probation: not
    /// selected until its connection clears [`Exclusion::Probation`]. A dispatch finding only
    /// workers in probation waits up to `wait` for them.
    pub fn with_probation(limits: AdmissionLimits, wait: Duration) -> Arc<Self> {
        Self::admitting(
            limits,
            Some(wait),
            &FairnessPolicy::default(),
            DEFAULT_MAX_POOLS,
        )
    }

    /// An empty registry admitting registrations within `limits`, in probation for up to
    /// `probation` when set, sharing full pools as `fairness` says, counting the first
    /// `labelled_pools` pools apart in its [`PoolMeters`].
    pub fn admitting(
        limits: AdmissionLimits,
        probation: Option<Duration>,
        fairness: &FairnessPolicy,
        labelled_pools: usize,
    ) -> Arc<Self> {
        let state = State {
            workers: IdMap::default(),
            pools: KeyedMap::default(),
            departures: Departures::default(),
            waiters: Waiters::new(fairness.aging),
            keys: Keys::new(fairness),
            instances: HashMap::new(),
            departed: HashMap::new(),
            draining: false,
        };
        Arc::new(Self {
            state: Mutex::new(state),
            next_id: AtomicU64::new(1),
            limits,
            probation,
            changes: Epoch::default(),
            events: Events::default(),
            crossings: Epoch::default(),
            relayable: AtomicUsize::new(0),
            meters: PoolMeters::new(labelled_pools),
        })
    }

    /// Per-pool counts: the first pools named by a registration or an admitted dispatch, the
    /// rest as `other`.
    pub fn meters(&self) -> &Arc<PoolMeters> {
        &self.meters
    }

    /// How long a dispatch waits at most for a probation to end; `None` when workers start
    /// eligible.
    pub fn probation(&self) -> Option<Duration> {
        self.probation
    }

    /// The node's lifecycle events: the registry tells its workers' there.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// Touched on every change of membership, slots or waiters.
    pub fn changes(&self) -> &Epoch {
        &self.changes
    }

    /// Touched when a worker's free slots go between zero and some, or the membership,
    /// capacity or exclusion of a worker changes.
    pub fn crossings(&self) -> &Epoch {
        &self.crossings
    }

    /// A change a peer must hear of at once.
    fn touched(&self) {
        self.changes.touch();
        self.crossings.touch();
    }

    /// The pools as a peer should see them, sorted by channel: groups per activity type, node
    /// label and deployment, at most `max_groups` a pool (past it merged, deployments lost). Slots that `held` says the peer's own relays
    /// hold count as free, since the peer already counts those relays. Workers in probation
    /// are announced only `with_probation` (a version-2 link has no word for them).
    pub fn presence(
        &self,
        held: &HashMap<WorkerId, u32>,
        with_probation: bool,
        max_groups: usize,
    ) -> Vec<PoolPresence> {
        let state = self.lock();
        let mut pools: Vec<PoolPresence> = state
            .pools
            .iter()
            .flat_map(|(namespace, by_queue)| {
                by_queue.iter().filter_map(move |(task_queue, pool)| {
                    let channel = dispatch_channel_name(namespace, task_queue, None);
                    let members = pool
                        .members
                        .iter()
                        .filter(|worker| with_probation || !worker.in_probation());
                    presence::pool_presence(channel, members, held, max_groups)
                })
            })
            .collect();
        pools.sort_by(|a, b| a.channel.cmp(&b.channel));
        pools
    }

    /// The admission funnel: validates, then inserts `register` for connection `pid`.
    /// Dropping the returned guard deregisters.
    ///
    /// A registration with the (deployment, instance id) of a worker registered here
    /// supersedes it: that worker leaves selection at once (departure reason `Superseded`)
    /// and its link is closed as superseded, so its pushes end `WorkerLost` and its
    /// connection says `Goodbye`.
    ///
    /// # Errors
    /// A [`Refusal`] when validation fails or the registry is draining; nothing is inserted.
    pub fn admit(
        self: &Arc<Self>,
        pid: u64,
        register: &Register,
        link: WorkerLink,
    ) -> Result<RegistrationGuard, Refusal> {
        let registration = validate(register, self.limits)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let probation = self.probation.map(|_| Exclusion::Probation);
        let cell = Arc::new(WorkerCell::new(id, pid, registration, link, probation));
        let mut state = self.lock();
        if state.draining {
            return Err(Refusal {
                code: RefusalCode::Draining,
                reason: "node is draining".into(),
            });
        }

        let task_queue = &cell.registration.task_queue;
        for namespace in &cell.registration.namespaces {
            let by_queue = match state.pools.get_mut(namespace.as_str()) {
                Some(by_queue) => by_queue,
                None => state.pools.entry(namespace.clone()).or_default(),
            };
            let pool = match by_queue.get_mut(task_queue.as_str()) {
                Some(pool) => pool,
                None => by_queue
                    .entry(task_queue.clone())
                    .or_insert_with(|| Pool::new(self.meters.claim(namespace, task_queue))),
            };
            pool.members.push(Arc::clone(&cell));
        }
        let superseded = match &cell.registration.instance_id {
            Some(instance) => {
                let key = (cell.registration.deployment.clone(), instance.clone());
                state.instances.insert(key, id)
            }
            None => None,
        }
        .and_then(|old| self.take_out(&mut state, old, DepartureReason::Superseded));
        state.workers.insert(id, Arc::clone(&cell));
        self.events
            .publish(|| NodeEvent::WorkerRegistered(cell.event()));
        if let Some(exclusion) = probation {
            self.events.publish(|| NodeEvent::WorkerExcluded {
                worker: cell.event(),
                reason: exclusion.reason(),
            });
        }
        self.serve_waiters(&mut state, &cell);
        drop(state);
        if let Some(old) = superseded {
            tracing::info!(
                worker_id = old.id,
                by = id,
                instance = cell.registration.instance_id.as_deref().unwrap_or(""),
                "worker superseded by a registration of its deployment and instance id"
            );
            old.link.supersede();
        }
        self.touched();
        Ok(RegistrationGuard {
            registry: Arc::clone(self),
            id,
            departure: DepartureReason::Disconnected,
        })
    }

    /// Reserves a slot on an eligible worker for `address` (placed as `pick` says), for a
    /// dispatch of `fairness` whose key is below its cap; on a miss, the census taken in the
    /// same critical section.
    ///
    /// # Errors
    /// The [`Census`] explaining the miss.
    pub fn select(
        self: &Arc<Self>,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
        fairness: &FairnessRef<'_>,
    ) -> Result<Reservation, Census> {
        let tiers = Tiers::new(routing, address.node);
        let mut state = self.lock();
        match self.reserve(&mut state, address, tiers, fairness) {
            Some(reservation) => Ok(reservation),
            None => Err(census_of(&state, address, tiers.last).finish()),
        }
    }

    /// Reserves a slot on the next eligible worker for `address` within one node tier only;
    /// the cluster's placement walks the tiers itself, local and remote side by side.
    pub(crate) fn select_tier(
        self: &Arc<Self>,
        address: Address<'_>,
        filter: NodeFilter<'_>,
        fairness: &FairnessRef<'_>,
    ) -> Option<Reservation> {
        let mut state = self.lock();
        self.reserve(&mut state, address, Tiers::single(filter), fairness)
    }

    /// The cap of `key` on this node, when its dispatches in flight here are at it.
    pub fn cap_reached(&self, key: &str) -> Option<CapReached> {
        self.lock().keys.room(key).err()
    }

    /// Free slots for `address` within one node tier, for weighing local against remote.
    pub(crate) fn free_slots(&self, address: Address<'_>, filter: NodeFilter<'_>) -> u32 {
        let state = self.lock();
        let Some(pool) = state
            .pools
            .get(address.namespace)
            .and_then(|pools| pools.get(address.task_queue))
        else {
            return 0;
        };
        pool.members
            .iter()
            .filter(|worker| eligible(worker, &address, filter))
            .map(|worker| worker.free_slots())
            .fold(0, u32::saturating_add)
    }

    /// As [`Registry::select`], but on a miss queues the caller in the same critical section,
    /// behind earlier waiters of its address, priority and key (the order is `waiters`'), for
    /// a slot on a worker here.
    ///
    /// # Errors
    /// The [`Wait`] that a freed or new slot is granted to.
    pub fn select_or_wait(
        self: &Arc<Self>,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
        fairness: &FairnessRef<'_>,
    ) -> Result<Reservation, Box<Wait>> {
        self.queue(address, routing, fairness, false)
    }

    /// As [`Registry::select_or_wait`], for a dispatch that a relay to a peer may serve as
    /// well: [`Registry::serve_elsewhere`] grants it one in its turn.
    ///
    /// # Errors
    /// The [`Wait`] that a freed or new slot, or a relay, is granted to.
    pub(crate) fn select_or_wait_relayable(
        self: &Arc<Self>,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
        fairness: &FairnessRef<'_>,
    ) -> Result<Reservation, Box<Wait>> {
        self.queue(address, routing, fairness, true)
    }

    fn queue(
        self: &Arc<Self>,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
        fairness: &FairnessRef<'_>,
        relay: bool,
    ) -> Result<Reservation, Box<Wait>> {
        let tiers = Tiers::new(routing, address.node);
        let mut state = self.lock();
        if let Some(reservation) = self.reserve(&mut state, address, tiers, fairness) {
            return Ok(reservation);
        }
        let key = WaitKey {
            namespace: address.namespace.to_owned(),
            task_queue: address.task_queue.to_owned(),
            activity_type: address.activity_type.to_owned(),
        };
        let wants = Wants {
            node: address.node.map(str::to_owned),
            needs_version: address.needs_version,
            needs_features: address.needs_features,
            deployment: address.deployment.map(str::to_owned),
            relay,
        };
        let fairness = state.keys.weighed(*fairness);
        let (seat, granted) = state.waiters.push(
            key,
            fairness,
            routing.clone().into_owned(),
            wants,
            Instant::now(),
        );
        self.counted(&state);
        self.changes.touch();
        Err(Box::new(Wait {
            registry: Arc::clone(self),
            seat,
            granted,
            queued: true,
        }))
    }

    /// Grants relays that `elsewhere` charges to the waiters a relay may serve, one at a time,
    /// each to the waiter that ranks first, until no waiter left can take one. Cheap while no
    /// such waiter queues.
    pub(crate) fn serve_elsewhere(&self, elsewhere: &impl Elsewhere) {
        if self.relayable.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut state = self.lock();
        let State { waiters, keys, .. } = &mut *state;
        let served = waiters.serve(&mut Relays {
            elsewhere,
            keys,
            missed: Vec::new(),
        });
        if served > 0 {
            self.counted(&state);
            self.changes.touch();
        }
    }

    /// Publishes how many waiters a relay may serve, under the caller's lock.
    fn counted(&self, state: &State) {
        self.relayable
            .store(state.waiters.relayable(), Ordering::Release);
    }

    /// What the registry knows about `address` under `routing`'s widest tier.
    pub fn census(&self, address: Address<'_>, routing: &RoutingRef<'_>) -> Census {
        self.tally(address, routing).finish()
    }

    /// As [`Registry::census`], still open for a peer's workers to be counted into it.
    pub(crate) fn tally(&self, address: Address<'_>, routing: &RoutingRef<'_>) -> CensusCount {
        census_of(
            &self.lock(),
            address,
            Tiers::new(routing, address.node).last,
        )
    }

    /// Sets a worker's capacity; the next selection sees it, and waiters are served.
    ///
    /// # Errors
    /// [`RefusalCode::ZeroCapacity`] for zero, checked where registrations are.
    pub fn set_capacity(
        self: &Arc<Self>,
        id: WorkerId,
        max_concurrency: u32,
    ) -> Result<(), Refusal> {
        let max_concurrency = validate_capacity(max_concurrency)?;
        let mut state = self.lock();
        if let Some(worker) = state.workers.get(&id).cloned() {
            worker
                .max_concurrency
                .store(max_concurrency, Ordering::Relaxed);
            self.serve_waiters(&mut state, &worker);
        }
        self.touched();
        Ok(())
    }

    /// Notes that worker `id`'s session resumed on connection `pid`.
    pub fn moved(&self, id: WorkerId, pid: u64) {
        let state = self.lock();
        if let Some(worker) = state.workers.get(&id) {
            worker.pid.store(pid, Ordering::Relaxed);
        }
    }

    /// Sets or clears one of a worker's exclusions; true when that changed it. A worker none
    /// holds any more is selectable again, and waiters are served from it as from a freed slot.
    pub fn set_excluded(
        self: &Arc<Self>,
        id: WorkerId,
        exclusion: Exclusion,
        excluded: bool,
    ) -> bool {
        let mut state = self.lock();
        let Some(worker) = state.workers.get(&id).cloned() else {
            return false;
        };
        if !worker.set_excluded(exclusion, excluded) {
            return false;
        }
        if excluded {
            self.events.publish(|| NodeEvent::WorkerExcluded {
                worker: worker.event(),
                reason: exclusion.reason(),
            });
        } else {
            if !worker.is_excluded() {
                self.events
                    .publish(|| NodeEvent::WorkerRestored(worker.event()));
            }
            self.serve_waiters(&mut state, &worker);
        }
        self.touched();
        true
    }

    /// Takes every worker out of selection and refuses new registrations.
    pub fn drain(&self) {
        let mut state = self.lock();
        state.draining = true;
        let mut workers: Vec<&Arc<WorkerCell>> = state.workers.values().collect();
        workers.sort_unstable_by_key(|worker| worker.id);
        for worker in workers {
            if worker.set_excluded(Exclusion::Draining, true) {
                self.events.publish(|| NodeEvent::WorkerExcluded {
                    worker: worker.event(),
                    reason: Exclusion::Draining.reason(),
                });
            }
        }
        self.touched();
    }

    /// Registered workers.
    pub fn worker_count(&self) -> usize {
        self.lock().workers.len()
    }

    /// Reserved slots across all registered workers.
    pub fn reserved_slots(&self) -> u64 {
        self.lock()
            .workers
            .values()
            .map(|worker| u64::from(worker.in_flight.load(Ordering::Relaxed)))
            .sum()
    }

    /// Dispatches queued for a worker.
    pub fn waiting(&self) -> usize {
        self.lock().waiters.len()
    }

    /// Dispatches queued for a worker by the label their pool is counted under (its channel
    /// name or `other`): how many, and when the oldest arrived.
    pub fn waiting_by_pool(&self) -> HashMap<String, (usize, Instant)> {
        let mut by_label: HashMap<String, (usize, Instant)> = HashMap::new();
        let state = self.lock();
        for (key, count, oldest) in state.waiters.oldest_by_address() {
            let label = self.meters.label_of(&key.namespace, &key.task_queue);
            let (n, at) = by_label.entry(label).or_insert((0, oldest));
            *n += count;
            *at = (*at).min(oldest);
        }
        by_label
    }

    /// Waiters by priority and key, what was served by priority and key, and the capped keys.
    pub fn fairness(&self) -> FairnessStatus {
        let state = self.lock();
        FairnessStatus::new(state.waiters.key_queues(), &state.keys)
    }

    /// Fairness keys with waiters, summed over addresses and priorities, for checking that a
    /// key's state lives only while it has waiters.
    pub fn waiting_key_queues(&self) -> usize {
        self.lock().waiters.key_queues().count()
    }

    /// Rotation cursors and departure records held, for checking they stay bounded.
    pub fn keyed_state_len(&self) -> (usize, usize) {
        let state = self.lock();
        let cursors = state
            .pools
            .values()
            .flat_map(KeyedMap::values)
            .map(|pool| pool.cursors.len())
            .sum();
        (cursors, state.departures.len())
    }

    /// Each registered worker's standing, sorted by id.
    pub fn states(&self) -> Vec<(WorkerId, Standing)> {
        let state = self.lock();
        let mut states: Vec<(WorkerId, Standing)> = state
            .workers
            .values()
            .map(|worker| (worker.id, worker.state()))
            .collect();
        states.sort_unstable_by_key(|(id, _)| *id);
        states
    }

    /// Pools with their workers, and addresses with queued dispatches.
    pub fn snapshot(&self) -> (Vec<PoolStatus>, Vec<WaitingStatus>) {
        let state = self.lock();
        let mut pools: Vec<PoolStatus> = state
            .pools
            .iter()
            .flat_map(|(namespace, by_queue)| {
                by_queue.iter().map(move |(task_queue, pool)| PoolStatus {
                    namespace: namespace.clone(),
                    task_queue: task_queue.clone(),
                    channel: dispatch_channel_name(namespace, task_queue, None),
                    workers: pool.members.iter().map(|w| w.status()).collect(),
                })
            })
            .collect();
        pools.sort_by(|a, b| a.channel.cmp(&b.channel));
        let mut waiting: Vec<WaitingStatus> = state
            .waiters
            .counts()
            .map(|(key, count)| WaitingStatus {
                namespace: key.namespace.clone(),
                task_queue: key.task_queue.clone(),
                activity_type: key.activity_type.clone(),
                waiting: u32::try_from(count).unwrap_or(u32::MAX),
                census: census_of(&state, key_address(key, &Wants::default()), NodeFilter::Any)
                    .finish(),
            })
            .collect();
        waiting.sort_by(|a, b| {
            (&a.namespace, &a.task_queue, &a.activity_type).cmp(&(
                &b.namespace,
                &b.task_queue,
                &b.activity_type,
            ))
        });
        (pools, waiting)
    }

    /// Reserves a slot for `address` tier by tier, under the caller's lock, unless the
    /// dispatch's key is at its cap.
    fn reserve(
        self: &Arc<Self>,
        state: &mut State,
        address: Address<'_>,
        tiers: Tiers<'_>,
        fairness: &FairnessRef<'_>,
    ) -> Option<Reservation> {
        let capped = state.keys.room(fairness.key).ok()?;
        let pool = state
            .pools
            .get_mut(address.namespace)?
            .get_mut(address.task_queue)?;
        let worker = tiers
            .iter()
            .find_map(|filter| pick(pool, &address, filter))?;
        let meter = Arc::clone(&pool.meter);
        Some(self.take_slot(&mut state.keys, (worker, meter), fairness, capped))
    }

    // Always inlined: it is the hot path's, and its two callers are small.
    #[inline(always)]
    fn take_slot(
        self: &Arc<Self>,
        keys: &mut Keys,
        (worker, meter): (Arc<WorkerCell>, Arc<PoolMeter>),
        fairness: &FairnessRef<'_>,
        capped: Option<u32>,
    ) -> Reservation {
        let before = worker.in_flight.fetch_add(1, Ordering::Relaxed);
        let filled = before.saturating_add(1) >= worker.max_concurrency.load(Ordering::Relaxed);
        keys.took(fairness, capped);
        self.changes.touch();
        if filled {
            self.crossings.touch();
        }
        Reservation {
            held: Some(Held {
                registry: Arc::clone(self),
                worker,
                capped,
            }),
            meter: Some(meter),
        }
    }

    /// Grants `worker`'s free slots to the waiters that rank first, under the caller's lock.
    fn serve_waiters(self: &Arc<Self>, state: &mut State, worker: &Arc<WorkerCell>) {
        if state.waiters.len() == 0 || !worker.has_free_slot() {
            return;
        }
        let State {
            waiters,
            keys,
            pools,
            ..
        } = &mut *state;
        let served = waiters.serve(&mut FreeSlots {
            registry: self,
            worker,
            keys,
            pools,
        });
        if served > 0 {
            self.counted(state);
        }
    }

    /// Serves the waiters of `key`, whose cap just gave a slot back, from every worker with a
    /// free slot at an address where they wait.
    fn serve_key(self: &Arc<Self>, state: &mut State, key: &str) {
        for address in state.waiters.addresses_of(key) {
            let free: Vec<Arc<WorkerCell>> = state
                .pools
                .get(address.namespace.as_str())
                .and_then(|pools| pools.get(address.task_queue.as_str()))
                .map(|pool| {
                    pool.members
                        .iter()
                        .filter(|worker| {
                            worker.has_free_slot()
                                && worker
                                    .registration
                                    .activity_types
                                    .contains(&address.activity_type)
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            for worker in free {
                self.serve_waiters(state, &worker);
            }
        }
    }

    /// Tells that a registration was refused, naming the worker as far as its registration
    /// can be trusted: names past the admission limits are left out.
    pub fn refused(&self, register: &Register) {
        let AdmissionLimits {
            max_name_len,
            max_set_len,
        } = self.limits;
        let fits = |name: &&String| !name.is_empty() && name.len() <= max_name_len;
        let task_queue = normalize_task_queue(&register.task_queue);
        let channels = if task_queue.len() <= max_name_len {
            register
                .namespaces
                .iter()
                .filter(fits)
                .take(max_set_len)
                .map(|namespace| dispatch_channel_name(namespace, task_queue, None))
                .collect()
        } else {
            Vec::new()
        };
        let identity = register
            .identity
            .char_indices()
            .take_while(|(at, c)| at + c.len_utf8() <= max_name_len)
            .map(|(_, c)| c)
            .collect();
        self.events.publish(|| NodeEvent::WorkerDeparted {
            worker: WorkerEvent {
                worker_id: 0,
                identity,
                deployment: register.deployment.as_ref().filter(fits).cloned(),
                instance_id: register.instance_id.as_ref().filter(fits).cloned(),
                channels,
            },
            reason: DepartureReason::RefusedAtRegistration,
        });
    }

    /// Takes worker `id` out for `reason` under the caller's lock, and tells its departure.
    fn take_out(
        &self,
        state: &mut State,
        id: WorkerId,
        reason: DepartureReason,
    ) -> Option<Arc<WorkerCell>> {
        let cell = take_out_of(state, id, reason)?;
        self.events.publish(|| NodeEvent::WorkerDeparted {
            worker: cell.event(),
            reason,
        });
        Some(cell)
    }

    fn remove(&self, id: WorkerId, reason: DepartureReason) {
        let mut state = self.lock();
        let gone = self.take_out(&mut state, id, reason);
        drop(state);
        if gone.is_some() {
            self.touched();
        }
    }

    /// Workers gone for `reason` since the registry started.
    pub fn departed(&self, reason: DepartureReason) -> u64 {
        self.lock().departed.get(&reason).copied().unwrap_or(0)
    }

    fn release(self: &Arc<Self>, worker: &Arc<WorkerCell>, capped: Option<u32>) {
        let mut state = self.lock();
        let was_full = worker.is_full();
        let _ = worker
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        let uncapped = capped.and_then(|at| state.keys.gave_back(at));
        self.changes.touch();
        if was_full {
            self.crossings.touch();
        }
        // A worker that left is no longer in any pool, so nobody is served from it.
        if state.workers.contains_key(&worker.id) {
            self.serve_waiters(&mut state, worker);
        }
        if let Some(key) = uncapped {
            self.serve_key(&mut state, &key);
        }
    }

    /// Takes the waiter at `seat` out of its queue; `None` when it was granted a slot first,
    /// otherwise the census of its address under its routing, taken in the same critical
    /// section.
    fn leave(&self, seat: &Seat) -> Option<CensusCount> {
        let mut state = self.lock();
        let waiter = state.waiters.remove(seat)?;
        self.counted(&state);
        let filter = Tiers::new(&waiter.routing.view(), waiter.wants.node.as_deref()).last;
        let address = key_address(&seat.key, &waiter.wants);
        Some(census_of(&state, address, filter))
    }

    /// The deployment and instance id of every worker that registered one, by worker id.
    pub fn deployments(&self) -> Vec<(WorkerId, Option<String>, Option<String>)> {
        let state = self.lock();
        let mut identified: Vec<(WorkerId, Option<String>, Option<String>)> = state
            .workers
            .values()
            .filter(|worker| {
                worker.registration.deployment.is_some()
                    || worker.registration.instance_id.is_some()
            })
            .map(|worker| {
                let registration = &worker.registration;
                (
                    worker.id,
                    registration.deployment.clone(),
                    registration.instance_id.clone(),
                )
            })
            .collect();
        identified.sort_unstable_by_key(|(id, ..)| *id);
        identified
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before it can panic, so poison is ignorable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn key_address<'a>(key: &'a WaitKey, wants: &'a Wants) -> Address<'a> {
    Address {
        namespace: &key.namespace,
        task_queue: &key.task_queue,
        activity_type: &key.activity_type,
        node: wants.node.as_deref(),
        needs_version: wants.needs_version,
        needs_features: wants.needs_features,
        deployment: wants.deployment.as_deref(),
    }
}

/// Picks a member for `address`: within one write turn the member picked last while it stays
/// eligible, so pushes placed together go out together, one write and one wake-up per
/// worker; otherwise the next eligible member from the activity's cursor, rotating.
fn pick(pool: &mut Pool, address: &Address<'_>, filter: NodeFilter<'_>) -> Option<Arc<WorkerCell>> {
    let activity = address.activity_type;
    let len = pool.members.len();
    if len == 0 {
        return None;
    }
    let turn = lintel_transport::turn();
    let members = &pool.members;
    let is_eligible = |index: usize| {
        members
            .get(index)
            .is_some_and(|w| eligible(w, address, filter))
    };
    // One look-up of the cursor: the activity name is hashed once per pick.
    let cursor = pool.cursors.get_mut(activity);
    let next = cursor.as_deref().map_or(0, |cursor| cursor.next);
    if let Some(last) = cursor.as_deref().and_then(|cursor| {
        let same_turn = turn != 0 && cursor.turn == turn;
        same_turn.then(|| next.checked_sub(1)).flatten()
    }) {
        if is_eligible(last) {
            return members.get(last).cloned();
        }
    }
    let start = next % len;
    let found = (0..len)
        .map(|step| (start + step) % len)
        .find(|&index| is_eligible(index))?;
    let worker = members.get(found).cloned()?;
    let moved = Cursor {
        next: found + 1,
        turn,
    };
    match cursor {
        Some(cursor) => *cursor = moved,
        None => {
            pool.cursors.insert(activity.to_owned(), moved);
        }
    }
    Some(worker)
}

/// Takes worker `id` out of the state for `reason`: out of its pools, its instance id free
/// again, its departure recorded; `None` when it already left.
fn take_out_of(
    state: &mut State,
    id: WorkerId,
    reason: DepartureReason,
) -> Option<Arc<WorkerCell>> {
    let cell = state.workers.remove(&id)?;
    let registration = &cell.registration;
    if let Some(instance) = &registration.instance_id {
        let key = (registration.deployment.clone(), instance.clone());
        if state.instances.get(&key) == Some(&id) {
            state.instances.remove(&key);
        }
    }
    let now = Instant::now();
    for namespace in &registration.namespaces {
        let Some(by_queue) = state.pools.get_mut(namespace.as_str()) else {
            continue;
        };
        if let Some(pool) = by_queue.get_mut(registration.task_queue.as_str()) {
            pool.members.retain(|member| !Arc::ptr_eq(member, &cell));
            let members = &pool.members;
            pool.cursors.retain(|activity, _| {
                members
                    .iter()
                    .any(|member| member.registration.activity_types.contains(activity))
            });
            if pool.members.is_empty() {
                by_queue.remove(registration.task_queue.as_str());
            }
        }
        if by_queue.is_empty() {
            state.pools.remove(namespace.as_str());
        }
        for activity in &registration.activity_types {
            state.departures.record(
                namespace,
                &registration.task_queue,
                activity,
                registration.node.as_deref(),
                now,
            );
        }
    }
    *state.departed.entry(reason).or_default() += 1;
    tracing::debug!(worker_id = id, ?reason, "worker departed");
    Some(cell)
}

fn census_of(state: &State, address: Address<'_>, filter: NodeFilter<'_>) -> CensusCount {
    let members = state
        .pools
        .get(address.namespace)
        .and_then(|pools| pools.get(address.task_queue))
        .map(|pool| pool.members.as_slice())
        .unwrap_or_default();
    let last_departure = state.departures.last_ms_ago(
        address.namespace,
        address.task_queue,
        address.activity_type,
        filter,
    );
    census(
        members.iter().map(|w| &**w),
        &address,
        filter,
        last_departure,
    )
}

/// Owns a registry entry: dropping it deregisters the worker, telling its departure with the
/// reason set last ([`DepartureReason::Disconnected`] unless set).
#[derive(Debug)]
pub struct RegistrationGuard {
    registry: Arc<Registry>,
    id: WorkerId,
    departure: DepartureReason,
}

impl RegistrationGuard {
    /// The registered worker's id.
    pub fn worker_id(&self) -> WorkerId {
        self.id
    }

    /// Sets why the worker leaves when the guard drops.
    pub fn departing(&mut self, reason: DepartureReason) {
        self.departure = reason;
    }
}

impl Drop for RegistrationGuard {
    fn drop(&mut self) {
        self.registry.remove(self.id, self.departure);
    }
}

/// A reserved slot on a worker; dropping it frees the slot exactly once and serves waiters.
#[derive(Debug)]
pub struct Reservation {
    held: Option<Held>,
    /// The meter of the pool the slot was reserved in, until the dispatch takes it.
    meter: Option<Arc<PoolMeter>>,
}

#[derive(Debug)]
struct Held {
    registry: Arc<Registry>,
    worker: Arc<WorkerCell>,
    /// The capped key the slot counts against.
    capped: Option<u32>,
}

impl Reservation {
    /// The worker holding the slot.
    pub fn worker_id(&self) -> WorkerId {
        self.held.as_ref().map_or(0, |held| held.worker.id)
    }

    /// The link to push on.
    pub fn link(&self) -> Option<&WorkerLink> {
        self.held.as_ref().map(|held| &held.worker.link)
    }

    /// Takes the meter of the pool the slot was reserved in, for the dispatch to count its
    /// outcome in; `None` once taken.
    pub fn take_meter(&mut self) -> Option<Arc<PoolMeter>> {
        self.meter.take()
    }

    /// Gives up the slot without freeing it through the registry; the caller undoes it.
    fn disarm(mut self) -> Option<Held> {
        self.held.take()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            held.registry.release(&held.worker, held.capped);
        }
    }
}

/// A worker's free slots, handed to waiters under the registry's lock.
struct FreeSlots<'a> {
    registry: &'a Arc<Registry>,
    worker: &'a Arc<WorkerCell>,
    keys: &'a mut Keys,
    /// For the meter of the pool a slot is granted in.
    pools: &'a KeyedMap<String, KeyedMap<String, Pool>>,
}

impl Grants<Placed> for FreeSlots<'_> {
    fn wants(&self, key: &WaitKey) -> bool {
        self.worker
            .serves(&key.namespace, &key.task_queue, &key.activity_type)
    }

    fn more(&mut self) -> bool {
        self.worker.has_free_slot()
    }

    fn blocked(&mut self, fairness_key: &str) -> bool {
        self.keys.room(fairness_key).is_err()
    }

    fn offer(&mut self, to: Grantee<'_>, waiter: &Waiter<Placed>) -> Option<Placed> {
        let wants = &waiter.wants;
        let tiers = Tiers::new(&waiter.routing.view(), wants.node.as_deref());
        let wanted = self
            .worker
            .link
            .carries(wants.needs_version, wants.needs_features)
            && compatible(self.worker, &to.key.activity_type, tiers.last)
            && of_deployment(self.worker, wants.deployment.as_deref());
        if !wanted {
            return None;
        }
        // The worker serves the waiter's address, so the pool is there.
        let meter = self
            .pools
            .get(to.key.namespace.as_str())
            .and_then(|queues| queues.get(to.key.task_queue.as_str()))
            .map(|pool| Arc::clone(&pool.meter))?;
        let capped = self.keys.room(to.fairness_key).ok()?;
        let fairness = Fairness {
            priority: to.priority,
            key: to.fairness_key,
            weight: DEFAULT_WEIGHT,
        };
        let worker = Arc::clone(self.worker);
        let reservation = self
            .registry
            .take_slot(self.keys, (worker, meter), &fairness, capped);
        Some(Placed::Local(reservation))
    }

    fn returned(&mut self, unclaimed: Placed) {
        take_back(self.keys, unclaimed);
    }
}

/// Relays a waiter may take instead of a slot here: the cluster's remote half of placement.
pub(crate) trait Elsewhere {
    /// A relay charged for a dispatch to `address` routed by `routing`, with the routing it
    /// carries; `None` when no peer has a slot it may use.
    fn relay_slot(
        &self,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
    ) -> Option<(RemoteSlot, NodeRouting)>;
}

/// Relays charged by an [`Elsewhere`], handed to waiters under the registry's lock.
struct Relays<'a, E> {
    elsewhere: &'a E,
    keys: &'a mut Keys,
    /// What found no relay in this pass (address, wants, routing): their like are passed by.
    missed: Vec<(WaitKey, Wants, NodeRouting)>,
}

impl<E: Elsewhere> Grants<Placed> for Relays<'_, E> {
    fn wants(&self, _: &WaitKey) -> bool {
        true
    }

    fn more(&mut self) -> bool {
        true
    }

    fn blocked(&mut self, _: &str) -> bool {
        // A key's cap holds on the node whose workers run it, which the relay carries it to.
        false
    }

    fn offer(&mut self, to: Grantee<'_>, waiter: &Waiter<Placed>) -> Option<Placed> {
        let (wants, routing) = (&waiter.wants, &waiter.routing);
        let missed = |(key, was, how): &(WaitKey, Wants, NodeRouting)| {
            key == to.key && was == wants && how == routing
        };
        if !wants.relay || self.missed.iter().any(missed) {
            return None;
        }
        let address = key_address(to.key, wants);
        match self.elsewhere.relay_slot(address, &routing.view()) {
            Some((slot, routing)) => Some(Placed::Remote(slot, routing)),
            None => {
                // Nothing frees within a pass: a relay taken back touches the mesh, which
                // runs another.
                self.missed
                    .push((to.key.clone(), wants.clone(), routing.clone()));
                None
            }
        }
    }

    fn returned(&mut self, unclaimed: Placed) {
        take_back(self.keys, unclaimed);
    }
}

/// Takes back a grant whose waiter left between being offered it and taking it, under the
/// registry's lock: a local slot is undone here (freeing it would take the lock again), a
/// relay's charge goes back as it drops.
fn take_back(keys: &mut Keys, unclaimed: Placed) {
    let Placed::Local(reservation) = unclaimed else {
        return;
    };
    if let Some(held) = reservation.disarm() {
        let _ = held
            .worker
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if let Some(at) = held.capped {
            let _ = keys.gave_back(at);
        }
    }
}

/// Where a dispatch was placed, or what a waiter was granted: a slot on a worker here, or a
/// relay charged to a peer with the routing it carries. Dropping it gives the slot back.
#[derive(Debug)]
pub enum Placed {
    /// A slot reserved on a worker of this node.
    Local(Reservation),
    /// A relay charged to a peer, and the routing the relay carries.
    Remote(RemoteSlot, NodeRouting),
}

/// A dispatch queued for a worker at one address. Dropping it leaves the queue.
#[derive(Debug)]
pub struct Wait {
    registry: Arc<Registry>,
    seat: Seat,
    granted: oneshot::Receiver<Placed>,
    queued: bool,
}

impl Wait {
    /// Resolves with the slot granted to this waiter. Cancel-safe: a grant that arrives while
    /// nobody polls stays for [`Wait::give_up`] or the next call.
    pub async fn granted(&mut self) -> Option<Placed> {
        let granted = (&mut self.granted).await.ok();
        self.queued = false;
        granted
    }

    /// Stops waiting: a slot granted before this call is returned, otherwise the census of
    /// the address, taken as the waiter left the queue.
    ///
    /// # Errors
    /// The [`Census`] when no slot was granted.
    pub fn give_up(self) -> Result<Placed, Census> {
        self.give_up_counting().map_err(CensusCount::finish)
    }

    /// As [`Wait::give_up`], the census still open for a peer's workers to be counted in.
    pub(crate) fn give_up_counting(mut self) -> Result<Placed, CensusCount> {
        if self.queued {
            self.queued = false;
            if let Some(tally) = self.registry.leave(&self.seat) {
                return Err(tally);
            }
        }
        match self.granted.try_recv() {
            Ok(grant) => Ok(grant),
            // Not reachable while the registry lives: a waiter leaves the queue only here or
            // when granted. Report what the registry knows now.
            Err(_) => Err(self.registry.tally(
                key_address(&self.seat.key, &Wants::default()),
                &NodeRouting::Any,
            )),
        }
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        if self.queued {
            let _ = self.registry.leave(&self.seat);
        }
        // A grant still in `granted` drops with it, freeing its slot outside the lock.
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use lintel_wire::NodeRouting;

    use super::*;
    use crate::link::{Charge, PeerLink};

    /// A peer with `free` slots, charging every relay to one counter.
    struct Peer {
        link: PeerLink,
        charged: Arc<AtomicU32>,
        free: u32,
        changes: Arc<Epoch>,
    }

    impl Peer {
        async fn with(free: u32) -> Self {
            // Nothing is written: a relay charged is never sent here.
            let (outbound, _peer) = crate::link::fixtures::outbound().await;
            let numbering = Arc::new(AtomicU64::new(0));
            Self {
                link: PeerLink::new("peer".into(), 3, outbound, numbering),
                charged: Arc::default(),
                free,
                changes: Arc::default(),
            }
        }

        fn charged(&self) -> u32 {
            self.charged.load(Ordering::Acquire)
        }
    }

    impl Elsewhere for Peer {
        fn relay_slot(
            &self,
            _: Address<'_>,
            _: &RoutingRef<'_>,
        ) -> Option<(RemoteSlot, NodeRouting)> {
            if self.charged() >= self.free {
                return None;
            }
            let charge = Charge::new(&self.charged, None);
            let slot = RemoteSlot::new(self.link.clone(), charge, Arc::clone(&self.changes));
            Some((slot, NodeRouting::Any))
        }
    }

    const ADDRESS: Address<'static> = Address {
        namespace: "ns",
        task_queue: "default",
        activity_type: "act",
        node: None,
        needs_version: 1,
        needs_features: lintel_wire::FeatureSet::NONE,
        deployment: None,
    };

    fn queue(registry: &Arc<Registry>, priority: u8, relayable: bool) -> Box<Wait> {
        let fairness = FairnessRef {
            priority,
            ..FairnessRef::default()
        };
        let routing = NodeRouting::Any.view();
        let queued = if relayable {
            registry.select_or_wait_relayable(ADDRESS, &routing, &fairness)
        } else {
            registry.select_or_wait(ADDRESS, &routing, &fairness)
        };
        queued.expect_err("no worker here")
    }

    /// The relay granted to `wait` by now, if any; dropping it gives it back.
    fn relay(wait: &mut Wait) -> Option<Placed> {
        let grant = wait.granted.try_recv().ok()?;
        assert!(matches!(grant, Placed::Remote(..)), "no worker here");
        Some(grant)
    }

    #[tokio::test]
    async fn relays_go_to_the_waiters_that_may_be_relayed_in_their_order() {
        let registry = Registry::new(AdmissionLimits::default());
        let peer = Peer::with(1).await;
        let mut local_only = queue(&registry, 1, false);
        let mut later = queue(&registry, 3, true);
        let mut urgent = queue(&registry, 1, true);
        registry.serve_elsewhere(&peer);
        let first = relay(&mut urgent).expect("the first in rank takes the relay");
        assert!(relay(&mut later).is_none() && relay(&mut local_only).is_none());
        assert_eq!((peer.charged(), registry.waiting()), (1, 2));
        let peer = Peer { free: 2, ..peer };
        registry.serve_elsewhere(&peer);
        let second = relay(&mut later).expect("the next in rank");
        assert!(
            relay(&mut local_only).is_none(),
            "it waits for a worker here"
        );
        assert_eq!((peer.charged(), registry.waiting()), (2, 1));
        drop((first, second));
        assert_eq!(peer.charged(), 0);
    }

    #[tokio::test]
    async fn a_relay_granted_to_a_waiter_that_goes_is_taken_back_once() {
        let registry = Registry::new(AdmissionLimits::default());
        let peer = Peer::with(1).await;
        let gone = queue(&registry, 3, true);
        let mut next = queue(&registry, 3, true);
        registry.serve_elsewhere(&peer);
        assert_eq!(peer.charged(), 1, "granted to the first, in transit");
        let seen = peer.changes.epoch();
        drop(gone);
        assert_eq!(peer.charged(), 0, "the waiter's going took the relay back");
        assert!(
            peer.changes.epoch() > seen,
            "and told the mesh, for another pass"
        );
        registry.serve_elsewhere(&peer);
        let granted = relay(&mut next).expect("the relay given back goes to the next");
        assert_eq!((peer.charged(), registry.waiting()), (1, 0));
        drop((granted, next));
        assert_eq!(peer.charged(), 0, "taken back once");
    }
}
