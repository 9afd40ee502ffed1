//! The connected-worker registry: pools, selection with capacity reservation, census, wake-ups.
//!
//! State has one owner: a `Mutex` with short critical sections, never held across an
//! `.await`. A lock was chosen over an actor because every operation is a few map
//! look-ups, so a channel round trip would cost more than the work.
//! Wake-ups are a `watch` epoch: a dispatch subscribes before it looks, so a registration,
//! freed slot or restored worker landing between its miss and its park is never lost.

mod admission;
mod departures;
mod selection;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use lintel_wire::channel::dispatch_channel_name;
use lintel_wire::{
    Census, NodeRouting, PoolStatus, Refusal, RefusalCode, Register, WaitingStatus, WorkerStatus,
};
use tokio::sync::watch;

pub use admission::{
    normalize_node, normalize_task_queue, validate, validate_capacity, AdmissionLimits,
    Registration, DEFAULT_TASK_QUEUE,
};

use crate::dispatch::WorkerLink;
use departures::Departures;
use selection::{census, eligible, NodeFilter, Tiers};

/// A registered worker's id, unique for the registry's lifetime.
pub type WorkerId = u64;

/// Where a dispatch wants to go: a pool and an activity type inside it.
#[derive(Debug, Clone, Copy)]
pub struct Address<'a> {
    pub namespace: &'a str,
    /// Already normalized: empty means `default`.
    pub task_queue: &'a str,
    pub activity_type: &'a str,
    /// The request's own node pin, applied when the routing is `Any`.
    pub node: Option<&'a str>,
}

/// One worker's shared record. Its atomics change only under the registry lock;
/// they are atomics so pools can share the record across namespaces.
#[derive(Debug)]
pub(crate) struct WorkerCell {
    id: WorkerId,
    pid: u64,
    registration: Registration,
    link: WorkerLink,
    max_concurrency: AtomicU32,
    in_flight: AtomicU32,
    excluded: AtomicBool,
}

#[derive(Debug, Default)]
struct Pool {
    members: Vec<Arc<WorkerCell>>,
    /// Round-robin position per activity type, shared by pinned and unpinned lookups.
    cursors: HashMap<String, usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WaitKey {
    namespace: String,
    task_queue: String,
    activity_type: String,
}

#[derive(Debug, Default)]
struct State {
    workers: HashMap<WorkerId, Arc<WorkerCell>>,
    /// namespace -> task queue -> pool; nested so look-ups borrow `&str`.
    pools: HashMap<String, HashMap<String, Pool>>,
    departures: Departures,
    /// Dispatches parked per address, pruned at zero.
    waiting: HashMap<WaitKey, u32>,
    parked: u32,
    draining: bool,
}

/// The registry. Share it as `Arc<Registry>`.
#[derive(Debug)]
pub struct Registry {
    state: Mutex<State>,
    wake: watch::Sender<u64>,
    next_id: AtomicU64,
    limits: AdmissionLimits,
}

/// What one selection attempt found.
#[derive(Debug)]
pub enum Selection {
    /// A slot on a worker, held until the reservation drops.
    Reserved(Reservation),
    /// Nobody eligible; `park` is set when the caller asked to be counted as waiting.
    Miss { census: Census, park: Option<Park> },
}

impl Registry {
    /// An empty registry admitting registrations within `limits`.
    pub fn new(limits: AdmissionLimits) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            wake: watch::Sender::new(0),
            next_id: AtomicU64::new(1),
            limits,
        })
    }

    /// The admission funnel: validates, then inserts `register` for connection `pid`.
    /// Dropping the returned guard deregisters.
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
        let cell = Arc::new(WorkerCell {
            id,
            pid,
            max_concurrency: AtomicU32::new(registration.max_concurrency),
            in_flight: AtomicU32::new(0),
            excluded: AtomicBool::new(false),
            registration,
            link,
        });
        {
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
                    None => by_queue.entry(task_queue.clone()).or_default(),
                };
                pool.members.push(Arc::clone(&cell));
            }
            state.workers.insert(id, cell);
        }
        self.wake_all();
        Ok(RegistrationGuard {
            registry: Arc::clone(self),
            id,
        })
    }

    /// A subscription to "a worker may have become eligible". Take it before looking.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    /// Reserves a slot on the next eligible worker for `address`, rotating per activity.
    /// On a miss with `park`, the caller is counted as waiting in the same critical section.
    pub fn select(
        self: &Arc<Self>,
        address: Address<'_>,
        routing: &NodeRouting,
        park: bool,
    ) -> Selection {
        let tiers = Tiers::new(routing, address.node);
        let mut state = self.lock();
        let state = &mut *state;
        if let Some(pool) = state
            .pools
            .get_mut(address.namespace)
            .and_then(|pools| pool_mut(pools, address.task_queue))
        {
            for filter in tiers.iter() {
                if let Some(worker) = pick(pool, address.activity_type, filter) {
                    worker.in_flight.fetch_add(1, Ordering::Relaxed);
                    return Selection::Reserved(Reservation {
                        registry: Arc::clone(self),
                        worker,
                    });
                }
            }
        }
        let census = census_of(state, address, tiers.last);
        let park = park.then(|| {
            let key = WaitKey {
                namespace: address.namespace.to_owned(),
                task_queue: address.task_queue.to_owned(),
                activity_type: address.activity_type.to_owned(),
            };
            *state.waiting.entry(key.clone()).or_insert(0) += 1;
            state.parked += 1;
            Park {
                registry: Arc::clone(self),
                key,
            }
        });
        Selection::Miss { census, park }
    }

    /// What the registry knows about `address` under `routing`'s widest tier.
    pub fn census(&self, address: Address<'_>, routing: &NodeRouting) -> Census {
        census_of(
            &self.lock(),
            address,
            Tiers::new(routing, address.node).last,
        )
    }

    /// Sets a worker's capacity; the next selection sees it.
    ///
    /// # Errors
    /// [`RefusalCode::ZeroCapacity`] for zero, checked where registrations are.
    pub fn set_capacity(&self, id: WorkerId, max_concurrency: u32) -> Result<(), Refusal> {
        let max_concurrency = validate_capacity(max_concurrency)?;
        if let Some(worker) = self.lock().workers.get(&id) {
            worker
                .max_concurrency
                .store(max_concurrency, Ordering::Relaxed);
        }
        self.wake_all();
        Ok(())
    }

    /// Takes a worker out of selection, or restores it.
    pub fn set_excluded(&self, id: WorkerId, excluded: bool) {
        if let Some(worker) = self.lock().workers.get(&id) {
            worker.excluded.store(excluded, Ordering::Relaxed);
        }
        self.wake_all();
    }

    /// Takes every worker out of selection and refuses new registrations.
    pub fn drain(&self) {
        {
            let mut state = self.lock();
            state.draining = true;
            for worker in state.workers.values() {
                worker.excluded.store(true, Ordering::Relaxed);
            }
        }
        self.wake_all();
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

    /// Rotation cursors and departure records held, for checking they stay bounded.
    pub fn keyed_state_len(&self) -> (usize, usize) {
        let state = self.lock();
        let cursors = state
            .pools
            .values()
            .flat_map(HashMap::values)
            .map(|pool| pool.cursors.len())
            .sum();
        (cursors, state.departures.len())
    }

    /// Pools with their workers, and addresses with parked dispatches.
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
                    workers: pool.members.iter().map(|w| worker_status(w)).collect(),
                })
            })
            .collect();
        pools.sort_by(|a, b| a.channel.cmp(&b.channel));
        let mut waiting: Vec<WaitingStatus> = state
            .waiting
            .iter()
            .map(|(key, count)| {
                let address = Address {
                    namespace: &key.namespace,
                    task_queue: &key.task_queue,
                    activity_type: &key.activity_type,
                    node: None,
                };
                WaitingStatus {
                    namespace: key.namespace.clone(),
                    task_queue: key.task_queue.clone(),
                    activity_type: key.activity_type.clone(),
                    waiting: *count,
                    census: census_of(&state, address, NodeFilter::Any),
                }
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

    fn remove(&self, id: WorkerId) {
        let mut state = self.lock();
        let Some(cell) = state.workers.remove(&id) else {
            return;
        };
        let registration = &cell.registration;
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
    }

    fn release(&self, worker: &WorkerCell) {
        let parked = {
            let state = self.lock();
            let _ = worker
                .in_flight
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            state.parked
        };
        if parked > 0 {
            self.bump();
        }
    }

    fn unpark(&self, key: &WaitKey) {
        let mut state = self.lock();
        state.parked = state.parked.saturating_sub(1);
        if let Some(count) = state.waiting.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.waiting.remove(key);
            }
        }
    }

    fn wake_all(&self) {
        if self.lock().parked > 0 {
            self.bump();
        }
    }

    fn bump(&self) {
        self.wake
            .send_modify(|epoch| *epoch = epoch.wrapping_add(1));
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before it can panic, so poison is ignorable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn pool_mut<'a>(pools: &'a mut HashMap<String, Pool>, task_queue: &str) -> Option<&'a mut Pool> {
    pools.get_mut(task_queue)
}

/// Finds the next eligible member from the activity's cursor and advances the cursor past it.
fn pick(pool: &mut Pool, activity: &str, filter: NodeFilter<'_>) -> Option<Arc<WorkerCell>> {
    let len = pool.members.len();
    if len == 0 {
        return None;
    }
    let start = pool.cursors.get(activity).copied().unwrap_or(0) % len;
    let found = (0..len).map(|step| (start + step) % len).find(|&index| {
        pool.members
            .get(index)
            .is_some_and(|w| eligible(w, activity, filter))
    })?;
    let worker = pool.members.get(found).cloned()?;
    if let Some(cursor) = pool.cursors.get_mut(activity) {
        *cursor = found + 1;
    } else {
        pool.cursors.insert(activity.to_owned(), found + 1);
    }
    Some(worker)
}

fn census_of(state: &State, address: Address<'_>, filter: NodeFilter<'_>) -> Census {
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
        address.activity_type,
        filter,
        last_departure,
    )
}

fn worker_status(worker: &WorkerCell) -> WorkerStatus {
    WorkerStatus {
        worker_id: worker.id,
        pid: worker.pid,
        identity: worker.registration.identity.clone(),
        node: worker.registration.node.clone(),
        activity_types: worker.registration.activity_types.iter().cloned().collect(),
        max_concurrency: worker.max_concurrency.load(Ordering::Relaxed),
        in_flight: worker.in_flight.load(Ordering::Relaxed),
        draining: worker.excluded.load(Ordering::Relaxed),
    }
}

/// Owns a registry entry: dropping it deregisters the worker.
#[derive(Debug)]
pub struct RegistrationGuard {
    registry: Arc<Registry>,
    id: WorkerId,
}

impl RegistrationGuard {
    /// The registered worker's id.
    pub fn worker_id(&self) -> WorkerId {
        self.id
    }
}

impl Drop for RegistrationGuard {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

/// A reserved slot on a worker; dropping it frees the slot exactly once and wakes waiters.
#[derive(Debug)]
pub struct Reservation {
    registry: Arc<Registry>,
    worker: Arc<WorkerCell>,
}

impl Reservation {
    /// The worker holding the slot.
    pub fn worker_id(&self) -> WorkerId {
        self.worker.id
    }

    /// The link to push on.
    pub fn link(&self) -> &WorkerLink {
        &self.worker.link
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.registry.release(&self.worker);
    }
}

/// A dispatch counted as waiting at an address; dropping it stops counting.
#[derive(Debug)]
pub struct Park {
    registry: Arc<Registry>,
    key: WaitKey,
}

impl Drop for Park {
    fn drop(&mut self) {
        self.registry.unpark(&self.key);
    }
}
