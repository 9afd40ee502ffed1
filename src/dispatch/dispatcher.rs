//! The one dispatcher behind every source: admission, selection, push, and the wait for a
//! worker, each dispatch ending through [`Flight::finish`].
//!
//! A source (the in-process API, a producer connection, a peer link) hands in a request with
//! a [`Caller`] saying where the outcome goes, and watches the reply deadline of what was
//! pushed; nothing else differs between sources.
//!
//! Placement walks the request's node tiers across the cluster: in each tier a local worker
//! with a free slot first (or local and remote weighed by free slots), then a peer with a
//! usable slot, which the dispatch is relayed to. A relayed dispatch is served locally only.
//! A dispatch that waits is granted a local slot or a relay in its turn: relays go to this
//! node's waiters in the registry's order, once per mesh change, before a new dispatch.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::BytesMut;
use lintel_wire::{
    Census, DispatchRequest, DispatchResult, ExtrasRef, ExtrasView, NodeRouting, RefusedDispatch,
    RefusedReason, RequestExtras, RequestRef, ResultRef, RoutingRef,
};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::activity::{Active, Activity};
use super::admission::{validate, DispatchLimits};
use super::caller::{Caller, Oneshot};
use super::counters::DispatchCounters;
use super::flight::{Flight, Logged, Slot, Target};
use super::options::{carrying, Options};
use super::relayed::{Attempt, PlaceAgain, Relayed};
use crate::cluster::{Mesh, Settings};
use crate::link::{PushError, RelayEntry, RemoteSlot};
use crate::registry::{
    normalize_task_queue, Address, CensusCount, Fairness, NodeFilter, Placed, Registry,
    Reservation, Tiers, Wait,
};
use lintel_client::trace::{TraceParent, TRACEPARENT};
use lintel_client::DispatchOptions;

/// How placement weighs this node's workers against its peers'.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// A local worker with a free slot first; peers only when none is free here.
    #[default]
    LocalFirst,
    /// Local and remote free slots alike, chosen at random weighted by free slots.
    Weighted,
}

/// Whether a dispatch may be relayed to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Anywhere in the cluster: it entered at this node.
    Cluster,
    /// This node's workers only: it was relayed here.
    Local,
}

/// Most workers one dispatch tries whose links turn out closed before it gives up as lost.
const MAX_CLOSED_LINKS: usize = 8;

/// Selects a worker, pushes, and ends every dispatch in one outcome.
#[derive(Debug)]
pub struct Dispatcher {
    registry: Arc<Registry>,
    mesh: Arc<Mesh>,
    placement: Placement,
    counters: Arc<DispatchCounters>,
    limits: DispatchLimits,
    /// Set by [`Dispatcher::drain`]; admission reads it as a plain flag.
    drained: AtomicBool,
    /// Cancelled by [`Dispatcher::drain`], for dispatches waiting for a worker.
    draining: CancellationToken,
    activity: Arc<Activity>,
    /// Each pool's current deployment, required of a dispatch that names none.
    settings: Arc<Settings>,
    /// Itself, for relays that place their dispatch again.
    me: Weak<Dispatcher>,
    /// The latest mesh epoch a waiter woke at to grant relays to every waiter: one pass per
    /// change, not one per waiter.
    relays_served: AtomicU64,
}

/// How a dispatch handed to [`Dispatcher::start`] goes on.
#[derive(Debug)]
pub(crate) enum Started {
    /// It has its outcome already.
    Ended,
    /// It is on a worker; the source ends it at its reply deadline or on cancel.
    Pushed(Arc<Flight>),
    /// Nobody is free and it may wait: run [`Dispatcher::wait`].
    Waiting(Box<Waiting>),
}

/// A dispatch queued for a worker, with what it needs to push once it gets one: owned copies,
/// since it outlives the frame it arrived in.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) flight: Arc<Flight>,
    request: DispatchRequest,
    extras: RequestExtras,
    routing: NodeRouting,
    /// Its fairness once the node decided whose it is (a grant's key, say).
    fairness: Fairness,
    wait: Box<Wait>,
    deadline: Instant,
    cancelled: oneshot::Receiver<()>,
    /// Fires when the flight ends, however it ends.
    done: Option<oneshot::Receiver<()>>,
    /// The mesh's change epoch noted before the last look, when the dispatch may be relayed.
    changes: Option<u64>,
    scope: Scope,
}

impl Waiting {
    /// `flight` queued by `wait` until `deadline`, with owned copies of what it pushes; its
    /// `done` is left for the source that watches its reply deadline to take.
    fn new(
        flight: Arc<Flight>,
        (request, extras): (&RequestRef<'_>, &ExtrasRef<'_>),
        options: &Options<'_>,
        (wait, deadline): (Box<Wait>, Instant),
        (changes, scope): (Option<u64>, Scope),
    ) -> Box<Self> {
        let cancelled = flight.watch_cancel();
        Box::new(Self {
            flight,
            request: request.clone().into_owned(),
            extras: extras.reborrow().into_owned(),
            routing: options.routing.clone().into_owned(),
            fairness: options.fairness.into_owned(),
            wait,
            deadline,
            cancelled,
            done: None,
            changes,
            scope,
        })
    }
}

impl Dispatcher {
    /// A dispatcher over `registry` alone, with no peers.
    pub fn new(registry: Arc<Registry>, limits: DispatchLimits) -> Arc<Self> {
        let mesh = Mesh::new(limits.max_set_len);
        Self::clustered(registry, mesh, limits, Placement::LocalFirst)
    }

    /// A dispatcher over `registry` and the peers in `mesh`.
    pub fn clustered(
        registry: Arc<Registry>,
        mesh: Arc<Mesh>,
        limits: DispatchLimits,
        placement: Placement,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            registry,
            mesh,
            placement,
            counters: Arc::new(DispatchCounters::default()),
            limits,
            drained: AtomicBool::new(false),
            draining: CancellationToken::new(),
            activity: Arc::default(),
            settings: Settings::new(limits.max_name_len),
            me: me.clone(),
            relays_served: AtomicU64::new(0),
        })
    }

    /// The peers it may relay to.
    pub fn mesh(&self) -> &Arc<Mesh> {
        &self.mesh
    }

    /// Each pool's current deployment, as this node knows it.
    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// The registry it selects from.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Dispatch totals.
    pub fn counters(&self) -> &Arc<DispatchCounters> {
        &self.counters
    }

    /// The bounds every dispatch is held to.
    pub fn limits(&self) -> &DispatchLimits {
        &self.limits
    }

    /// Stops taking work: workers leave selection, waiting and new dispatches end as draining.
    pub fn drain(&self) {
        self.registry.drain();
        self.drained.store(true, Ordering::Release);
        self.draining.cancel();
    }

    /// True once [`Dispatcher::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.drained.load(Ordering::Acquire)
    }

    /// Dispatches without an outcome yet.
    pub fn active(&self) -> usize {
        self.activity.count()
    }

    /// Resolves when every dispatch has its outcome.
    pub async fn wait_idle(&self) {
        self.activity.idle().await;
    }

    /// Dispatches `request` in-process. Dropping the future cancels it, on the worker too.
    pub async fn dispatch(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
    ) -> DispatchResult {
        self.dispatch_until(request, options, std::future::pending())
            .await
    }

    /// Dispatches `request`, ending it as cancelled when `cancel` fires.
    pub async fn dispatch_cancellable(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        cancel: &CancellationToken,
    ) -> DispatchResult {
        self.dispatch_until(request, options, cancel.cancelled())
            .await
    }

    /// Dispatches `request`, ending it as cancelled when `cancelled` resolves.
    pub async fn dispatch_until(
        &self,
        request: DispatchRequest,
        options: &DispatchOptions,
        cancelled: impl Future<Output = ()>,
    ) -> DispatchResult {
        let (caller, mut outcome) = Oneshot::caller();
        let mut watch = CancelOnDrop(None);
        tokio::pin!(cancelled);
        let extras = options.wire_extras().lend();
        let pushed = match self.start(&request.view(), &extras, &Options::of(options), caller) {
            Started::Ended => None,
            Started::Pushed(flight) => Some(flight),
            Started::Waiting(waiting) => {
                watch.0 = Some(Arc::clone(&waiting.flight));
                let flight = Arc::clone(&waiting.flight);
                tokio::select! {
                    biased;
                    pushed = self.wait(waiting) => pushed,
                    () = &mut cancelled => {
                        flight.cancel();
                        None
                    }
                }
            }
        };
        if let Some(flight) = pushed {
            watch.0 = Some(Arc::clone(&flight));
            let deadline = Instant::now() + flight.reply_timeout();
            // Every branch is cancel-safe; whichever end loses is told "too late" by the link.
            tokio::select! {
                biased;
                result = &mut outcome => {
                    watch.0 = None;
                    return result.unwrap_or(DispatchResult::Cancelled);
                }
                () = &mut cancelled => flight.cancel(),
                () = tokio::time::sleep_until(deadline) => flight.expire(),
            }
        }
        let result = outcome.await;
        watch.0 = None;
        // The flight always finishes before its caller is dropped; this is the belt to that.
        result.unwrap_or(DispatchResult::Cancelled)
    }

    /// Ends a dispatch its source refused before admission (a duplicate id, the source's own
    /// in-flight bound), counting and answering it like any other.
    pub(crate) fn refuse(&self, caller: Caller, refused: RefusedDispatch<&str>) {
        self.counters.submitted();
        let flight = self.flight(caller, None, self.activity.enter(), None);
        flight.finish(DispatchResult::Refused(refused));
    }

    /// The one admission: counts the dispatch, validates it, then places it on a worker or
    /// peer free now, or queues it for one when it may wait, or ends it. `extras` are a
    /// version-3 request's (`ExtrasRef::NONE` for any other).
    pub(crate) fn start(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        options: &Options<'_>,
        caller: Caller,
    ) -> Started {
        self.start_in(request, extras, options, caller, Scope::Cluster)
    }

    /// As [`Dispatcher::start`] for a dispatch a peer relayed here: this node's workers only.
    pub(crate) fn start_relayed(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        options: &Options<'_>,
        caller: Caller,
    ) -> Started {
        self.start_in(request, extras, options, caller, Scope::Local)
    }

    /// The request, extras and options are lent: a dispatch placed at once copies no name,
    /// and only one that must wait or is relayed takes copies of them.
    fn start_in(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        options: &Options<'_>,
        caller: Caller,
        scope: Scope,
    ) -> Started {
        self.counters.submitted();
        let active = self.activity.enter();
        let crowded = active.count() > self.limits.max_active;
        let flight = self.flight(
            caller,
            options.reply_timeout,
            active,
            Some((request, extras)),
        );
        if let Err(result) = self.admit(request, extras, options, crowded) {
            flight.finish(result.view());
            return Started::Ended;
        }
        // A dispatch naming no deployment requires its pool's current one, if it has one.
        let current = extras
            .deployment()
            .is_none()
            .then(|| self.settings.current(request.namespace, request.task_queue))
            .flatten();
        match current.as_deref() {
            None => self.place_admitted(request, extras, options, flight, scope),
            Some(deployment) => {
                let view = extras.read();
                let view = ExtrasView {
                    deployment: Some(deployment),
                    ..view.reborrow()
                };
                let mut encoded = BytesMut::new();
                let extras = view.lend_in(&mut encoded);
                self.place_admitted(request, &extras, options, flight, scope)
            }
        }
    }

    /// Places an admitted dispatch, or queues it, or ends it.
    fn place_admitted(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        options: &Options<'_>,
        flight: Arc<Flight>,
        scope: Scope,
    ) -> Started {
        let deadline = options.wait_for_worker.map(|wait| flight.started() + wait);
        // Subscribed before looking, so a remote slot announced meanwhile is not missed: by a
        // dispatch that may wait, or that may wait for a probation (a peer's workers too).
        let may_wait = deadline.is_some() || self.registry.probation().is_some();
        let mut changes =
            (may_wait && scope == Scope::Cluster).then(|| self.mesh.changes().epoch());
        for _ in 0..MAX_CLOSED_LINKS {
            let address = address_of(request, extras);
            let placed = match self.place(address, options, scope) {
                // A local slot brings its pool's meter; any other way claims it here.
                Ok(placed @ Placed::Local(_)) => placed,
                Ok(placed) => {
                    self.meter(&flight, address);
                    placed
                }
                Err(census) => match self.wait_until(deadline, &census, &flight, scope) {
                    None => {
                        self.meter(&flight, address);
                        flight.finish(self.missed(census, options.fairness.key).view());
                        return Started::Ended;
                    }
                    Some(deadline) => match self.select_or_wait(address, options, scope) {
                        Ok(reservation) => Placed::Local(reservation),
                        Err(wait) => {
                            self.meter(&flight, address);
                            let lent = (request, extras);
                            let mut waiting = Waiting::new(
                                flight,
                                lent,
                                options,
                                (wait, deadline),
                                (changes.take(), scope),
                            );
                            waiting.done = Some(waiting.flight.done_signal());
                            return Started::Waiting(waiting);
                        }
                    },
                },
            };
            let attempt = Attempt {
                number: 1,
                wait_until: deadline,
            };
            match self.send(&flight, request, extras, placed, options, attempt) {
                Sent::Queued => return Started::Pushed(flight),
                Sent::Ended => return Started::Ended,
                Sent::Unsent => {}
            }
        }
        self.give_up_on_closed_links(&flight);
        Started::Ended
    }

    /// Gives `flight` the meter of `address`'s pool, unless a local slot gave it one.
    fn meter(&self, flight: &Flight, address: Address<'_>) {
        let meters = self.registry.meters();
        flight.count_in(|| meters.claim(address.namespace, address.task_queue));
    }

    /// Per-pool counts now: each labelled pool's outcomes by class and push-to-reply latency,
    /// then `other`'s; `/metrics` reads them, and a reader of rates subtracts two readings.
    pub(crate) fn pool_snapshots(&self) -> Vec<crate::pool_metrics::PoolSnapshot> {
        self.registry.meters().snapshots()
    }

    /// Until when a dispatch that found no free worker waits: its own deadline, or longer when
    /// a compatible worker (here or a peer's) is in probation, whose end it waits for (bounded by the time a
    /// probation may take) even if it asked not to wait, so a worker that registered just
    /// before the dispatch serves it. A relayed dispatch waits for nothing.
    fn wait_until(
        &self,
        deadline: Option<Instant>,
        census: &Census,
        flight: &Flight,
        scope: Scope,
    ) -> Option<Instant> {
        let probation = self
            .registry
            .probation()
            .filter(|_| census.probation.unwrap_or(0) > 0 && scope == Scope::Cluster)
            .map(|bound| flight.started() + bound);
        deadline.max(probation)
    }

    /// A slot free now, unless the dispatch already had its attempts in a row.
    fn place_now(
        &self,
        address: Address<'_>,
        options: &Options<'_>,
        attempt: Attempt,
    ) -> Option<Placed> {
        if attempt.number > super::relayed::MAX_RELAY_ATTEMPTS {
            return None;
        }
        self.place(address, options, Scope::Cluster).ok()
    }

    /// Finds a slot for `address` as `options` route it: tier by tier, a local worker then a
    /// peer (or both weighed by free slots); a dispatch relayed here looks locally only. A key
    /// at its cap here takes no local slot.
    fn place(
        &self,
        address: Address<'_>,
        options: &Options<'_>,
        scope: Scope,
    ) -> Result<Placed, Census> {
        let (routing, fairness) = (&options.routing, &options.fairness);
        if scope == Scope::Local || self.mesh.is_empty() {
            return self
                .registry
                .select(address, routing, fairness)
                .map(Placed::Local);
        }
        // Relays go to the waiters here first, in their order: a new dispatch takes what they
        // leave.
        self.registry.serve_elsewhere(&*self.mesh);
        for filter in Tiers::new(routing, address.node).iter() {
            if self.placement == Placement::Weighted {
                let local = self.registry.free_slots(address, filter);
                let remote = self.mesh.usable_slots(address, filter);
                let total = local.saturating_add(remote);
                if total > 0 && fastrand::u32(0..total) >= local {
                    if let Some(placed) = self.reserve_remote(address, filter) {
                        return Ok(placed);
                    }
                }
            }
            if let Some(reservation) = self.registry.select_tier(address, filter, fairness) {
                return Ok(Placed::Local(reservation));
            }
            if let Some(placed) = self.reserve_remote(address, filter) {
                return Ok(placed);
            }
        }
        Err(self.census(address, routing, scope))
    }

    fn reserve_remote(&self, address: Address<'_>, filter: NodeFilter<'_>) -> Option<Placed> {
        let (slot, routing) = self.mesh.reserve(address, filter)?;
        Some(Placed::Remote(slot, routing))
    }

    /// Queues a dispatch that found no slot, unless a local one freed meanwhile; one that may
    /// be relayed waits for a relay as well.
    fn select_or_wait(
        &self,
        address: Address<'_>,
        options: &Options<'_>,
        scope: Scope,
    ) -> Result<Reservation, Box<Wait>> {
        let (routing, fairness) = (&options.routing, &options.fairness);
        match scope {
            Scope::Cluster => self
                .registry
                .select_or_wait_relayable(address, routing, fairness),
            Scope::Local => self.registry.select_or_wait(address, routing, fairness),
        }
    }

    /// Grants the relays usable now to the waiters that may be relayed, in their order, once
    /// per mesh change at `epoch`: the first waiter to wake for it runs the pass, unless
    /// `fresh` (queued since its last look, so an earlier pass did not see it).
    fn serve_relays(&self, epoch: u64, fresh: bool) {
        if fresh || self.relays_served.fetch_max(epoch, Ordering::AcqRel) < epoch {
            self.registry.serve_elsewhere(&*self.mesh);
        }
    }

    /// The outcome of a dispatch that found no slot it may take: refused when its fairness
    /// key is at its cap on this node (`FairnessCapReached`, which a version-2 producer reads
    /// as `TooManyInFlight`), otherwise no worker, as `census` says.
    fn missed(&self, census: Census, key: &str) -> DispatchResult {
        match self.registry.cap_reached(key) {
            Some(cap) => DispatchResult::Refused(RefusedDispatch {
                reason: RefusedReason::FairnessCapReached,
                detail: format!(
                    "fairness key {key:?} is at its cap: {} dispatches running on this node",
                    cap.max_in_flight
                ),
            }),
            None => DispatchResult::NoWorker(census),
        }
    }

    /// What the node knows about `address`: its own workers, and its peers' when the
    /// dispatch could have been relayed.
    fn census(&self, address: Address<'_>, routing: &RoutingRef<'_>, scope: Scope) -> Census {
        let tally = self.registry.tally(address, routing);
        self.with_remote(tally, address, routing, scope)
    }

    fn with_remote(
        &self,
        mut tally: CensusCount,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
        scope: Scope,
    ) -> Census {
        if scope == Scope::Cluster && !self.mesh.is_empty() {
            let filter = Tiers::new(routing, address.node).last;
            self.mesh.count_into(&mut tally, address, filter);
        }
        tally.finish()
    }

    /// Waits for a worker for a dispatch [`Dispatcher::start`] queued, then pushes; returns
    /// the flight when pushed, for its source to watch. Cancelled through [`Flight::cancel`];
    /// dropping the future leaves the queue, and a later cancel ends the dispatch.
    pub(crate) async fn wait(&self, waiting: Box<Waiting>) -> Option<Arc<Flight>> {
        let Waiting {
            flight,
            request,
            extras,
            routing,
            fairness,
            wait,
            deadline,
            mut cancelled,
            done: _,
            mut changes,
            scope,
        } = *waiting;
        let (request, extras) = (request.view(), extras.lend());
        let options = Options::placing(routing.view(), fairness.view());
        let mut next: Result<Placed, Box<Wait>> = Err(wait);
        for _ in 0..MAX_CLOSED_LINKS {
            let placed = match next {
                Ok(placed) => placed,
                Err(wait) => {
                    let slot = self.await_slot(
                        &flight,
                        address_of(&request, &extras),
                        &options,
                        (wait, deadline),
                        &mut cancelled,
                        changes.as_mut(),
                        scope,
                    );
                    match slot.await {
                        Some(placed) => placed,
                        None => return None,
                    }
                }
            };
            if flight.cancel_pending() {
                drop(placed);
                flight.finish(DispatchResult::Cancelled);
                return None;
            }
            // Each placement from the wait was woken by a change, so it starts a new series.
            let attempt = Attempt {
                number: 1,
                wait_until: Some(deadline),
            };
            match self.send(&flight, &request, &extras, placed, &options, attempt) {
                Sent::Queued => return Some(flight),
                Sent::Ended => return None,
                Sent::Unsent => {}
            }
            // The link closed before the push left: look again, in the same wait.
            cancelled = flight.watch_cancel();
            if scope == Scope::Cluster {
                changes = Some(self.mesh.changes().epoch());
            }
            let address = address_of(&request, &extras);
            next = match self.place(address, &options, scope) {
                Ok(placed) => Ok(placed),
                Err(_) => self
                    .select_or_wait(address, &options, scope)
                    .map(Placed::Local),
            };
        }
        self.give_up_on_closed_links(&flight);
        None
    }

    /// Waits in the queue for a local slot, or for a relay in its turn, until the deadline;
    /// `None` once the dispatch ended here (cancelled, draining, nobody left). Each mesh change
    /// wakes it to make sure a pass grants the relays it made usable.
    #[allow(clippy::too_many_arguments)]
    async fn await_slot(
        &self,
        flight: &Flight,
        address: Address<'_>,
        options: &Options<'_>,
        (mut wait, deadline): (Box<Wait>, Instant),
        cancelled: &mut oneshot::Receiver<()>,
        mut changes: Option<&mut u64>,
        scope: Scope,
    ) -> Option<Placed> {
        let routing = &options.routing;
        let mut fresh = true;
        loop {
            let changed = async {
                match changes.as_deref_mut() {
                    Some(seen) => self.mesh.changes().changed(seen).await,
                    None => std::future::pending::<()>().await,
                }
            };
            // Every branch is cancel-safe: a grant that lands as another branch wins stays in
            // the wait, and `give_up` returns it.
            tokio::select! {
                biased;
                cancel = &mut *cancelled => {
                    drop(wait);
                    if cancel.is_ok() {
                        flight.finish(DispatchResult::Cancelled);
                    }
                    return None;
                }
                () = self.draining.cancelled() => {
                    drop(wait);
                    flight.finish(DispatchResult::Draining);
                    return None;
                }
                granted = wait.granted() => match granted {
                    Some(grant) => return Some(grant),
                    None => {
                        let census = self.census(address, routing, scope);
                        flight.finish(DispatchResult::NoWorker(census));
                        return None;
                    }
                },
                () = changed => {
                    let epoch = changes.as_deref().copied().unwrap_or_default();
                    self.serve_relays(epoch, std::mem::take(&mut fresh));
                }
                () = tokio::time::sleep_until(deadline) => match wait.give_up_counting() {
                    // A slot or relay granted before the wait ran out is this waiter's.
                    Ok(grant) => return Some(grant),
                    Err(tally) => {
                        let census = self.with_remote(tally, address, routing, scope);
                        flight.finish(self.missed(census, options.fairness.key).view());
                        return None;
                    }
                },
            }
        }
    }

    /// Runs a queued dispatch to its end in a source's task: waits, pushes, then ends it at
    /// its reply deadline unless something ends it first.
    pub(crate) async fn wait_and_watch(&self, mut waiting: Box<Waiting>) {
        let done = waiting.done.take();
        let Some(flight) = self.wait(waiting).await else {
            return;
        };
        let deadline = Instant::now() + flight.reply_timeout();
        let Some(done) = done else {
            return;
        };
        tokio::select! {
            biased;
            _ = done => {}
            () = tokio::time::sleep_until(deadline) => flight.expire(),
        }
    }

    /// Sends the dispatch where it was placed, to a local worker or a peer; a relay keeps
    /// the routing and fairness of `options` to place it again.
    #[inline]
    fn send(
        &self,
        flight: &Arc<Flight>,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        placed: Placed,
        options: &Options<'_>,
        attempt: Attempt,
    ) -> Sent {
        match placed {
            Placed::Local(reservation) => self.push(flight, request, extras, reservation),
            Placed::Remote(slot, peer_routing) => {
                let routings = (&peer_routing, options);
                self.relay(flight, request, extras, slot, routings, attempt)
            }
        }
    }

    /// Relays to the peer charged, the request carrying the fairness this node decided (a
    /// producer's grant names its key here, not its request); the link's entry keeps owned
    /// copies of the request, its routing and fairness, to place it again if the peer runs
    /// nothing. A relay that could not leave (the link closed, or its queue is full: a busy
    /// peer is skipped) gives the charge back.
    fn relay(
        &self,
        flight: &Arc<Flight>,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        slot: RemoteSlot,
        (peer_routing, options): (&NodeRouting, &Options<'_>),
        attempt: Attempt,
    ) -> Sent {
        let link = slot.link().clone();
        let budget = flight.budget_left();
        flight.arm(Slot::Remote(slot));
        let entry = || -> Arc<RelayEntry> {
            Arc::new(Relayed {
                dispatcher: self.me.clone() as Weak<dyn PlaceAgain>,
                flight: Arc::clone(flight),
                request: request.clone().into_owned(),
                extras: extras.reborrow().into_owned(),
                routing: options.routing.clone().into_owned(),
                fairness: options.fairness.into_owned(),
                attempt,
                peer: Arc::clone(link.node_id()),
                sent_at: Instant::now(),
            })
        };
        // Made of the request's extras only when the fairness decided differs from theirs.
        let carried = carrying(&extras.read(), &options.fairness);
        let mut encoded = BytesMut::new();
        let carried = carried.lend_in(&mut encoded);
        match link.relay(request, &carried, &peer_routing.view(), budget, entry) {
            Ok(correlation) => {
                flight.pushed(Target::Peer(link), correlation);
                flight.watch(extras, false);
                Sent::Queued
            }
            Err(_) => {
                flight.disarm();
                Sent::Unsent
            }
        }
    }

    /// Pushes `request` on the reserved worker, encoded where it lies. A push that could not
    /// leave frees its slot; a full queue ends the dispatch as refused.
    fn push(
        &self,
        flight: &Arc<Flight>,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        reservation: Reservation,
    ) -> Sent {
        let worker_id = reservation.worker_id();
        let Some(link) = reservation.link().cloned() else {
            return Sent::Unsent;
        };
        flight.arm(Slot::Local(reservation));
        match link.push(request, extras, Arc::clone(flight) as _) {
            Ok(correlation) => {
                flight.pushed(Target::Worker(link), correlation);
                flight.watch(extras, true);
                Sent::Queued
            }
            Err(PushError::Closed) => {
                flight.disarm();
                Sent::Unsent
            }
            Err(PushError::Backpressure) => {
                flight.disarm();
                let detail = format!("worker {worker_id} outbound queue is full");
                flight.finish(refused(RefusedReason::WorkerBackpressure, &detail));
                Sent::Ended
            }
        }
    }

    fn give_up_on_closed_links(&self, flight: &Flight) {
        flight.finish(DispatchResult::WorkerLost {
            worker_id: flight.worker_id().unwrap_or_default(),
        });
    }

    fn flight(
        &self,
        caller: Caller,
        reply_timeout: Option<Duration>,
        active: Active,
        request: Option<(&RequestRef<'_>, &ExtrasRef<'_>)>,
    ) -> Arc<Flight> {
        let reply_timeout = reply_timeout.unwrap_or(self.limits.default_reply_timeout);
        // Named only for the debug log of outcomes, so nothing is spent when it is off.
        let logged = request
            .filter(|_| tracing::enabled!(tracing::Level::DEBUG))
            .map(|(request, extras)| {
                let task_queue = normalize_task_queue(request.task_queue);
                Box::new(Logged {
                    channel: lintel_wire::channel::dispatch_channel_name(
                        request.namespace,
                        task_queue,
                        None,
                    ),
                    trace_id: trace_id(&extras.read()),
                })
            });
        Flight::new(
            Arc::clone(&self.counters),
            logged,
            caller,
            active,
            reply_timeout,
            self.limits.max_payload(),
        )
    }

    /// Refuses a request that breaks a bound, or ends it when the node is draining.
    fn admit(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        options: &Options<'_>,
        crowded: bool,
    ) -> Result<(), DispatchResult> {
        validate(request, extras, options, &self.limits).map_err(DispatchResult::Refused)?;
        if self.is_draining() {
            return Err(DispatchResult::Draining);
        }
        if crowded {
            return Err(DispatchResult::Refused(RefusedDispatch {
                reason: RefusedReason::TooManyInFlight,
                detail: format!(
                    "the node runs at most {} dispatches at once",
                    self.limits.max_active
                ),
            }));
        }
        Ok(())
    }
}

impl PlaceAgain for Dispatcher {
    /// Places a dispatch again after the peer it was relayed to ran nothing, within what is
    /// left of its reply budget: somewhere free now (for the first few attempts), or back in
    /// the wait while its wait for a worker lasts; ends it with `last` when neither is left.
    fn place_again(
        &self,
        flight: &Arc<Flight>,
        (request, extras): (&RequestRef<'_>, &ExtrasRef<'_>),
        options: &Options<'_>,
        attempt: Attempt,
        last: (ResultRef<'_>, Arc<str>),
    ) {
        for _ in 0..MAX_CLOSED_LINKS {
            if flight.budget_left().is_zero() {
                break;
            }
            // Noted before looking, as a first placement does.
            let changes = self.mesh.changes().epoch();
            let address = address_of(request, extras);
            let placed = match self.place_now(address, options, attempt) {
                Some(placed) => placed,
                None => {
                    let Some(deadline) = attempt.wait_until.filter(|at| *at > Instant::now())
                    else {
                        break;
                    };
                    match self.select_or_wait(address, options, Scope::Cluster) {
                        Ok(reservation) => Placed::Local(reservation),
                        Err(wait) => {
                            let waiting = Waiting::new(
                                Arc::clone(flight),
                                (request, extras),
                                options,
                                (wait, deadline),
                                (Some(changes), Scope::Cluster),
                            );
                            if let Some(me) = self.me.upgrade() {
                                // The source still watches the reply deadline of the first
                                // relay; this task only waits and places.
                                tokio::spawn(async move { me.wait(waiting).await });
                            }
                            return;
                        }
                    }
                }
            };
            match self.send(flight, request, extras, placed, options, attempt) {
                Sent::Queued | Sent::Ended => return,
                Sent::Unsent => {}
            }
        }
        let (result, peer) = last;
        flight.relay_answered(result, peer);
    }
}

/// What became of one send, to a worker or a peer.
enum Sent {
    /// On the worker's or the peer's queue; its source now watches the reply deadline.
    Queued,
    /// The dispatch ended instead (the worker's queue was full).
    Ended,
    /// The link closed, or the peer's queue was full, before it left: nothing reached it.
    Unsent,
}

/// Cancels a flight whose in-process caller went away before its outcome.
struct CancelOnDrop(Option<Arc<Flight>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flight) = self.0.take() {
            flight.cancel();
        }
    }
}

/// The trace id of the request's `traceparent` header, for its debug line; none when it has
/// none or a malformed one.
fn trace_id(extras: &ExtrasView<'_>) -> Option<String> {
    let header = extras
        .headers
        .iter()
        .find(|header| header.name == TRACEPARENT)?;
    let parent = header.value.parse::<TraceParent>().ok()?;
    Some(parent.trace_id_hex())
}

fn refused(reason: RefusedReason, detail: &str) -> ResultRef<'_> {
    DispatchResult::Refused(RefusedDispatch { reason, detail })
}

fn address_of<'a, 'r: 'a, 'e: 'a>(request: &RequestRef<'r>, extras: &ExtrasRef<'e>) -> Address<'a> {
    Address {
        namespace: request.namespace,
        task_queue: normalize_task_queue(request.task_queue),
        activity_type: request.activity_type,
        node: request.node,
        needs_version: needs_version(extras),
        needs_features: needs_features(extras),
        deployment: extras.deployment(),
    }
}

/// What a worker or a peer link must have listed to carry a request with `extras`:
/// `heartbeat-timeout` for a heartbeat timeout.
fn needs_features(extras: &ExtrasRef<'_>) -> lintel_wire::FeatureSet {
    if extras.is_none() || !matches!(extras.read().heartbeat_timeout(), Ok(Some(_))) {
        return lintel_wire::FeatureSet::NONE;
    }
    lintel_wire::FeatureSet::HEARTBEAT_TIMEOUT
}

/// The lowest protocol version of a worker or a peer link that can carry a request with
/// `extras`: headers and a required deployment never travel in a version-2 frame, while its
/// priority and fairness fields may be left behind.
fn needs_version(extras: &ExtrasRef<'_>) -> u16 {
    if extras.is_none() {
        return 1;
    }
    let extras = extras.read();
    if extras.headers.is_empty() && extras.deployment.is_none() {
        1
    } else {
        3
    }
}
