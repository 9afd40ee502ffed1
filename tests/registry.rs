//! The registry in-process: selection tiers, rotation, reserved capacity, wake-ups, census and
//! the bounds on state keyed by names. Links are real loopback sockets; nothing is pushed.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

use futures_util::FutureExt;
use lintel::link::WorkerLink;
use lintel::registry::{
    normalize_task_queue, Address, AdmissionLimits, Exclusion, FairnessRef, Placed,
    RegistrationGuard, Registry, Reservation, Wait, WorkerId,
};
use lintel::transport::{self, FrameReader};
use lintel::wire::{Census, DepartureReason, NoWorkerReason, NodeRouting, RefusalCode, Register};
use tokio::net::{TcpListener, TcpStream};

/// A registry plus the loopback sockets behind its links.
struct Harness {
    registry: Arc<Registry>,
    listener: TcpListener,
    sockets: Vec<(TcpStream, FrameReader)>,
    next_pid: u64,
}

impl Harness {
    async fn new() -> Self {
        Self::with_limits(AdmissionLimits::default()).await
    }

    async fn with_limits(limits: AdmissionLimits) -> Self {
        Self {
            registry: Registry::new(limits),
            listener: TcpListener::bind("127.0.0.1:0").await.expect("bind"),
            sockets: Vec::new(),
            next_pid: 1,
        }
    }

    /// A link over a fresh loopback connection, to a worker speaking protocol version 3.
    async fn link(&mut self) -> (u64, WorkerLink) {
        self.link_speaking(3).await
    }

    /// A link over a fresh loopback connection, to a worker speaking `version`.
    async fn link_speaking(&mut self, version: u16) -> (u64, WorkerLink) {
        let addr = self.listener.local_addr().expect("addr");
        let (peer, accepted) = tokio::join!(TcpStream::connect(addr), self.listener.accept());
        let (reader, outbound, _writer) =
            transport::split(accepted.expect("accept").0, 1 << 20, 16);
        self.sockets.push((peer.expect("connect"), reader));
        let pid = self.next_pid;
        self.next_pid += 1;
        (pid, WorkerLink::new(pid, version, outbound))
    }

    async fn try_admit(
        &mut self,
        register: &Register,
    ) -> Result<RegistrationGuard, lintel::wire::Refusal> {
        let (pid, link) = self.link().await;
        self.registry.admit(pid, register, link)
    }

    async fn admit(&mut self, register: &Register) -> RegistrationGuard {
        self.try_admit(register).await.expect("admitted")
    }

    /// A reservation, or `None` on a miss.
    fn select(&self, address: Address<'_>, routing: &NodeRouting) -> Option<Reservation> {
        self.registry
            .select(address, &routing.view(), &FairnessRef::default())
            .ok()
    }

    /// The worker the next selection picks, releasing the slot at once.
    #[track_caller]
    fn next(&self, address: Address<'_>, routing: &NodeRouting) -> WorkerId {
        self.select(address, routing)
            .map(|reservation| reservation.worker_id())
            .expect("a worker was selected")
    }

    fn census(&self, address: Address<'_>) -> Census {
        self.registry.census(address, &NodeRouting::Any)
    }
}

fn worker(
    namespaces: &[&str],
    task_queue: &str,
    node: Option<&str>,
    activities: &[&str],
    max_concurrency: u32,
) -> Register {
    Register {
        namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
        task_queue: task_queue.to_owned(),
        node: node.map(str::to_owned),
        activity_types: activities.iter().map(|a| (*a).to_owned()).collect(),
        identity: "registry-test".into(),
        max_concurrency,
        ..Default::default()
    }
}

fn address<'a>(namespace: &'a str, task_queue: &'a str, activity_type: &'a str) -> Address<'a> {
    Address {
        namespace,
        task_queue: normalize_task_queue(task_queue),
        activity_type,
        node: None,
        needs_version: 1,
        needs_features: lintel::wire::FeatureSet::NONE,
        deployment: None,
    }
}

const ANY: NodeRouting = NodeRouting::Any;

fn pin(node: &str) -> NodeRouting {
    NodeRouting::Pin(node.to_owned())
}

// ---------------------------------------------------------------------------------------------
// Capacity.

#[tokio::test]
async fn a_worker_at_capacity_is_skipped_until_a_slot_is_freed() {
    let mut h = Harness::new().await;
    let _guard = h.admit(&worker(&["ns"], "", None, &["act"], 2)).await;
    let here = address("ns", "", "act");
    let first = h.select(here, &ANY).expect("an idle worker is selectable");
    let second = h.select(here, &ANY).expect("one of two slots is left");
    assert!(
        h.select(here, &ANY).is_none(),
        "a full worker is not selected"
    );
    assert_eq!(h.registry.reserved_slots(), 2);

    // Full, not gone: the census still counts it.
    let census = h.census(here);
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!((census.compatible_workers, census.at_capacity), (1, 1));

    drop(first);
    assert!(
        h.select(here, &ANY).is_some(),
        "a freed slot makes it selectable"
    );
    drop(second);
    assert_eq!(h.registry.reserved_slots(), 0);
}

#[tokio::test]
async fn simultaneous_selections_claim_no_more_slots_than_stated() {
    const CAPACITY: usize = 4;
    const RACERS: usize = 32;
    let mut h = Harness::new().await;
    let _guard = h
        .admit(&worker(&["ns"], "", None, &["act"], CAPACITY as u32))
        .await;
    for round in 0..20 {
        let barrier = Barrier::new(RACERS);
        let won: Vec<Option<Reservation>> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..RACERS)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        h.select(address("ns", "", "act"), &ANY)
                    })
                })
                .collect();
            racers
                .into_iter()
                .map(|racer| racer.join().expect("racer"))
                .collect()
        });
        let granted = won.iter().filter(|slot| slot.is_some()).count();
        assert_eq!(
            granted, CAPACITY,
            "round {round}: {RACERS} racers claimed {granted} slots"
        );
        assert_eq!(h.registry.reserved_slots(), CAPACITY as u64);
        drop(won);
        assert_eq!(
            h.registry.reserved_slots(),
            0,
            "every reservation gives its slot back"
        );
    }
}

#[tokio::test]
async fn a_capacity_change_applies_to_the_next_selection_and_zero_is_refused() {
    let mut h = Harness::new().await;
    let guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let id = guard.worker_id();
    let here = address("ns", "", "act");
    let held = h.select(here, &ANY).expect("selectable");
    assert!(h.select(here, &ANY).is_none());

    h.registry.set_capacity(id, 3).expect("raise");
    let more: Vec<_> = (0..2).map(|_| h.select(here, &ANY)).collect();
    assert!(
        more.iter().all(Option::is_some),
        "the raise applies at once"
    );
    assert!(h.select(here, &ANY).is_none());

    let refusal = h.registry.set_capacity(id, 0).expect_err("zero is refused");
    assert_eq!(refusal.code, RefusalCode::ZeroCapacity);

    h.registry.set_capacity(id, 1).expect("lower");
    drop(more);
    assert!(
        h.select(here, &ANY).is_none(),
        "one in flight against a capacity of one"
    );
    drop(held);
    assert!(h.select(here, &ANY).is_some());
}

#[tokio::test]
async fn a_reservation_outliving_its_worker_leaks_no_slot() {
    let mut h = Harness::new().await;
    let guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let held = h.select(address("ns", "", "act"), &ANY).expect("selected");
    drop(guard);
    assert_eq!(h.registry.worker_count(), 0);
    assert_eq!(h.registry.reserved_slots(), 0);
    drop(held);

    let _back = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    assert!(h.select(address("ns", "", "act"), &ANY).is_some());
    assert_eq!(h.registry.reserved_slots(), 0);
}

// ---------------------------------------------------------------------------------------------
// Waiters: grants in arrival order.

/// Misses and queues, as a dispatch that may wait does.
fn queue(h: &Harness, here: Address<'_>, routing: &NodeRouting) -> Wait {
    match h
        .registry
        .select_or_wait(here, &routing.view(), &FairnessRef::default())
    {
        Err(wait) => *wait,
        Ok(reservation) => panic!(
            "expected to queue, got a slot on {}",
            reservation.worker_id()
        ),
    }
}

/// The slot granted to `wait` by now, if any.
fn granted(wait: &mut Wait) -> Option<Reservation> {
    match wait.granted().now_or_never().flatten()? {
        Placed::Local(reservation) => Some(reservation),
        Placed::Remote(..) => panic!("a registry of its own granted a relay"),
    }
}

#[tokio::test]
async fn a_freed_slot_is_granted_to_the_queued_waiter_not_to_a_later_selection() {
    let mut h = Harness::new().await;
    let _guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let held = h.select(here, &ANY).expect("selected");
    let mut wait = queue(&h, here, &ANY);
    assert!(granted(&mut wait).is_none(), "nothing freed yet");
    drop(held);
    assert!(
        h.select(here, &ANY).is_none(),
        "the freed slot went to the waiter, not to a later arrival"
    );
    assert!(granted(&mut wait).is_some());
}

#[tokio::test]
async fn a_registration_is_granted_to_a_waiter_queued_before_it() {
    let mut h = Harness::new().await;
    let here = address("ns", "", "act");
    let mut wait = queue(&h, here, &ANY);
    let _guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    assert!(granted(&mut wait).is_some());
}

#[tokio::test]
async fn a_restored_worker_is_granted_to_a_waiter() {
    let mut h = Harness::new().await;
    let guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    h.registry
        .set_excluded(guard.worker_id(), Exclusion::Draining, true);
    assert!(
        h.select(here, &ANY).is_none(),
        "an excluded worker is not selected"
    );
    assert_eq!(h.census(here).reason, NoWorkerReason::AllExcluded);
    let mut wait = queue(&h, here, &ANY);
    assert!(granted(&mut wait).is_none());
    h.registry
        .set_excluded(guard.worker_id(), Exclusion::Draining, false);
    assert!(granted(&mut wait).is_some());
}

#[tokio::test]
async fn a_capacity_raise_is_granted_to_a_waiter() {
    let mut h = Harness::new().await;
    let guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let _held = h.select(here, &ANY).expect("selected");
    let mut wait = queue(&h, here, &ANY);
    assert!(granted(&mut wait).is_none());
    h.registry
        .set_capacity(guard.worker_id(), 2)
        .expect("raise");
    assert!(granted(&mut wait).is_some());
}

#[tokio::test]
async fn waiters_for_one_address_are_granted_in_arrival_order() {
    let mut h = Harness::new().await;
    let _guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let held = h.select(here, &ANY).expect("selected");
    let mut waits: Vec<Wait> = (0..3).map(|_| queue(&h, here, &ANY)).collect();
    let mut slot = held;
    for turn in 0..3 {
        drop(slot);
        let (first, later) = waits.split_at_mut(turn + 1);
        slot = first
            .last_mut()
            .and_then(granted)
            .unwrap_or_else(|| panic!("waiter {turn} did not get the slot freed in its turn"));
        for wait in later {
            assert!(granted(wait).is_none(), "a later waiter jumped the queue");
        }
        assert!(h.select(here, &ANY).is_none());
    }
}

#[tokio::test]
async fn a_waiter_the_freed_worker_cannot_serve_is_passed_by_for_a_later_one() {
    let mut h = Harness::new().await;
    let _guard = h.admit(&worker(&["ns"], "", Some("n2"), &["act"], 1)).await;
    let here = address("ns", "", "act");
    let held = h.select(here, &ANY).expect("selected");
    let mut pinned = queue(&h, here, &pin("n1"));
    let mut any = queue(&h, here, &ANY);
    drop(held);
    assert!(
        granted(&mut pinned).is_none(),
        "n2 cannot serve a pin to n1"
    );
    assert!(granted(&mut any).is_some());
}

#[tokio::test]
async fn a_slot_freed_before_the_wait_ends_is_the_waiters_even_if_it_gives_up() {
    let mut h = Harness::new().await;
    let _guard = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let held = h.select(here, &ANY).expect("selected");
    let wait = queue(&h, here, &ANY);
    drop(held);
    // The deadline fires now, after the grant landed but before the waiter looked.
    let slot = wait.give_up().expect("the granted slot is returned");
    assert_eq!(h.registry.reserved_slots(), 1);
    drop(slot);
    assert_eq!(h.registry.reserved_slots(), 0);
}

#[tokio::test]
async fn a_waiter_that_gives_up_unserved_gets_a_census_that_agrees_with_the_miss() {
    let mut h = Harness::new().await;
    let _a = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let _b = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let _held: Vec<Reservation> = (0..2)
        .map(|_| h.select(here, &ANY).expect("selected"))
        .collect();
    let wait = queue(&h, here, &ANY);
    let census = wait.give_up().expect_err("nothing was granted");
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(census.at_capacity, census.compatible_workers);
    assert_eq!(census.compatible_workers, 2);
}

#[tokio::test]
async fn a_queued_waiter_is_counted_until_it_leaves() {
    let h = Harness::new().await;
    let here = address("ns", "", "act");
    let wait = queue(&h, here, &ANY);
    let (_, waiting) = h.registry.snapshot();
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        (waiting[0].activity_type.as_str(), waiting[0].waiting),
        ("act", 1)
    );
    assert_eq!(waiting[0].task_queue, "default");
    assert_eq!(h.registry.waiting(), 1);
    drop(wait);
    assert!(
        h.registry.snapshot().1.is_empty(),
        "the waiting record is pruned at zero"
    );
    assert_eq!(h.registry.waiting(), 0);
}

// ---------------------------------------------------------------------------------------------
// Node tiers and rotation.

#[tokio::test]
async fn a_node_pin_filters_within_the_pool() {
    let mut h = Harness::new().await;
    let on_n1 = h
        .admit(&worker(&["ns"], "tq", Some("n1"), &["dev"], 8))
        .await;
    let on_n2 = h
        .admit(&worker(&["ns"], "tq", Some("n2"), &["dev"], 8))
        .await;
    let here = address("ns", "tq", "dev");
    for _ in 0..3 {
        assert_eq!(h.next(here, &pin("n1")), on_n1.worker_id());
        assert_eq!(h.next(here, &pin("n2")), on_n2.worker_id());
    }
    assert!(h.select(here, &pin("absent")).is_none());
    let census = h.registry.census(here, &pin("absent").view());
    assert_eq!(census.reason, NoWorkerReason::NodeFilterMatchedNobody);
    assert_eq!((census.serving_activity, census.compatible_workers), (2, 0));
}

#[tokio::test]
async fn unpinned_selection_rotates_across_every_worker_in_order() {
    let mut h = Harness::new().await;
    let a = h
        .admit(&worker(&["ns"], "tq", Some("n1"), &["dev"], 8))
        .await;
    let b = h
        .admit(&worker(&["ns"], "tq", Some("n2"), &["dev"], 8))
        .await;
    let c = h.admit(&worker(&["ns"], "tq", None, &["dev"], 8)).await;
    let here = address("ns", "tq", "dev");
    let picked: Vec<_> = (0..6).map(|_| h.next(here, &ANY)).collect();
    let ids = [a.worker_id(), b.worker_id(), c.worker_id()];
    // A rotation, asserted as a sequence: each window of three names all three.
    for window in picked.windows(3) {
        let distinct: BTreeSet<_> = window.iter().collect();
        assert_eq!(distinct.len(), 3, "{picked:?}");
    }
    assert!(ids.iter().all(|id| picked.contains(id)));
}

#[tokio::test]
async fn workers_sharing_a_node_rotate_under_a_pin_and_share_the_cursor_with_unpinned() {
    let mut h = Harness::new().await;
    let a = h
        .admit(&worker(&["ns"], "tq", Some("shared"), &["dev"], 8))
        .await;
    let b = h
        .admit(&worker(&["ns"], "tq", Some("shared"), &["dev"], 8))
        .await;
    let here = address("ns", "tq", "dev");
    let first = h.next(here, &pin("shared"));
    let second = h.next(here, &ANY);
    let third = h.next(here, &pin("shared"));
    let fourth = h.next(here, &ANY);
    assert_ne!(first, second, "one cursor for pinned and unpinned lookups");
    assert_ne!(second, third);
    assert_ne!(third, fourth);
    assert_eq!(
        BTreeSet::from([first, second]),
        BTreeSet::from([a.worker_id(), b.worker_id()])
    );
}

#[tokio::test]
async fn each_activity_has_its_own_rotation() {
    let mut h = Harness::new().await;
    let _a = h.admit(&worker(&["ns"], "", None, &["x", "y"], 8)).await;
    let _b = h.admit(&worker(&["ns"], "", None, &["x", "y"], 8)).await;
    let x1 = h.next(address("ns", "", "x"), &ANY);
    let y1 = h.next(address("ns", "", "y"), &ANY);
    let x2 = h.next(address("ns", "", "x"), &ANY);
    let y2 = h.next(address("ns", "", "y"), &ANY);
    assert_eq!((x1, x2), (y1, y2), "x and y rotate independently");
    assert_ne!(x1, x2);
}

#[tokio::test]
async fn prefer_takes_nodes_in_order_then_any_and_require_never_leaves_its_set() {
    let mut h = Harness::new().await;
    let on_n1 = h.admit(&worker(&["ns"], "", Some("n1"), &["act"], 1)).await;
    let on_n2 = h.admit(&worker(&["ns"], "", Some("n2"), &["act"], 1)).await;
    let nodeless = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let prefer = NodeRouting::Prefer(vec!["n2".into(), "n1".into()]);
    let require = NodeRouting::Require(vec!["n1".into(), "n2".into()]);

    // Idle: the first preferred node wins, whatever the rotation says.
    for _ in 0..3 {
        assert_eq!(h.next(here, &prefer), on_n2.worker_id());
    }
    let held_n2 = h.select(here, &prefer).expect("n2");
    let held_n1 = h.select(here, &prefer).expect("then n1");
    assert_eq!(held_n1.worker_id(), on_n1.worker_id());
    // Both preferred nodes are full: require fails while the nodeless worker idles.
    assert!(h.select(here, &require).is_none());
    let census = h.registry.census(here, &require.view());
    assert_eq!(census.reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(census.compatible_workers, 2);
    // Prefer spills to any.
    let spilled = h.select(here, &prefer).expect("spills to any");
    assert_eq!(spilled.worker_id(), nodeless.worker_id());
    assert!(h.select(here, &prefer).is_none());
    drop((held_n1, held_n2, spilled));

    // Require accepts either node of its set.
    let picked: BTreeSet<_> = (0..4).map(|_| h.next(here, &require)).collect();
    assert_eq!(
        picked,
        BTreeSet::from([on_n1.worker_id(), on_n2.worker_id()])
    );
    let nowhere = NodeRouting::Require(vec!["n9".into()]);
    assert!(h.select(here, &nowhere).is_none());
    assert_eq!(
        h.registry.census(here, &nowhere.view()).reason,
        NoWorkerReason::NodeFilterMatchedNobody
    );
}

#[tokio::test]
async fn a_request_node_pins_when_routing_is_any_and_empty_means_none() {
    let mut h = Harness::new().await;
    let on_n1 = h.admit(&worker(&["ns"], "", Some("n1"), &["act"], 8)).await;
    let _on_n2 = h.admit(&worker(&["ns"], "", Some("n2"), &["act"], 8)).await;
    let pinned = Address {
        node: Some("n1"),
        ..address("ns", "", "act")
    };
    for _ in 0..3 {
        assert_eq!(h.next(pinned, &ANY), on_n1.worker_id());
    }
    let unpinned = Address {
        node: Some(""),
        ..address("ns", "", "act")
    };
    let picked: BTreeSet<_> = (0..4).map(|_| h.next(unpinned, &ANY)).collect();
    assert_eq!(picked.len(), 2);
    let absent = Address {
        node: Some("n3"),
        ..address("ns", "", "act")
    };
    assert!(h.select(absent, &ANY).is_none());
    assert_eq!(
        h.registry.census(absent, &ANY.view()).reason,
        NoWorkerReason::NodeFilterMatchedNobody
    );
}

// ---------------------------------------------------------------------------------------------
// Pool addresses.

#[tokio::test]
async fn an_empty_task_queue_is_the_default_pool() {
    let mut h = Harness::new().await;
    let guard = h.admit(&worker(&["ns"], "", None, &["act"], 8)).await;
    assert_eq!(h.next(address("ns", "", "act"), &ANY), guard.worker_id());
    assert_eq!(
        h.next(address("ns", "default", "act"), &ANY),
        guard.worker_id()
    );
    let (pools, _) = h.registry.snapshot();
    assert_eq!(pools.len(), 1);
    assert_eq!(pools[0].task_queue, "default");
}

#[tokio::test]
async fn namespaces_are_isolated_and_deregistration_stays_in_its_namespace() {
    let mut h = Harness::new().await;
    let a = h.admit(&worker(&["tenant-a"], "", None, &["act"], 8)).await;
    let b = h.admit(&worker(&["tenant-b"], "", None, &["act"], 8)).await;
    assert_ne!(a.worker_id(), b.worker_id());
    assert_eq!(h.next(address("tenant-a", "", "act"), &ANY), a.worker_id());
    assert_eq!(h.next(address("tenant-b", "", "act"), &ANY), b.worker_id());
    assert!(
        h.select(address("Tenant-A", "", "act"), &ANY).is_none(),
        "never normalized"
    );
    assert!(h.select(address("tenant-a", "", "missing"), &ANY).is_none());

    drop(a);
    assert!(h.select(address("tenant-a", "", "act"), &ANY).is_none());
    assert_eq!(h.next(address("tenant-b", "", "act"), &ANY), b.worker_id());
}

#[tokio::test]
async fn task_queues_partition_disjoint_pools_with_their_own_rotation() {
    let mut h = Harness::new().await;
    let norn = h
        .admit(&worker(&["local"], "norn", None, &["dev"], 8))
        .await;
    let claude_a = h
        .admit(&worker(&["local"], "claude", None, &["dev"], 8))
        .await;
    let claude_b = h
        .admit(&worker(&["local"], "claude", None, &["dev"], 8))
        .await;
    let claude = BTreeSet::from([claude_a.worker_id(), claude_b.worker_id()]);
    let first = h.next(address("local", "claude", "dev"), &ANY);
    for _ in 0..3 {
        assert_eq!(
            h.next(address("local", "norn", "dev"), &ANY),
            norn.worker_id()
        );
    }
    let second = h.next(address("local", "claude", "dev"), &ANY);
    assert_ne!(
        first, second,
        "claude's rotation is untouched by norn's traffic"
    );
    assert_eq!(BTreeSet::from([first, second]), claude);
}

#[tokio::test]
async fn a_worker_serving_a_namespace_set_is_reachable_in_each_and_leaves_all() {
    let mut h = Harness::new().await;
    let both = h.admit(&worker(&["a", "b"], "", None, &["dev"], 8)).await;
    let only_a = h.admit(&worker(&["a"], "", None, &["dev"], 8)).await;
    for _ in 0..3 {
        assert_eq!(h.next(address("b", "", "dev"), &ANY), both.worker_id());
    }
    let in_a: BTreeSet<_> = (0..4)
        .map(|_| h.next(address("a", "", "dev"), &ANY))
        .collect();
    assert_eq!(in_a, BTreeSet::from([both.worker_id(), only_a.worker_id()]));
    assert_eq!(h.census(address("b", "", "dev")).pool_workers, 1);

    drop(both);
    assert_eq!(
        h.census(address("b", "", "dev")).reason,
        NoWorkerReason::PoolEmpty
    );
    assert_eq!(h.next(address("a", "", "dev"), &ANY), only_a.worker_id());
    assert_eq!(h.registry.worker_count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Admission.

#[tokio::test]
async fn refused_registrations_insert_nothing() {
    let limits = AdmissionLimits {
        max_name_len: 16,
        max_set_len: 2,
    };
    let mut h = Harness::with_limits(limits).await;
    let cases = [
        (
            worker(&["ns"], "", None, &["act"], 0),
            RefusalCode::ZeroCapacity,
        ),
        (
            worker(&[], "", None, &["act"], 1),
            RefusalCode::EmptyNamespaces,
        ),
        (
            worker(&["ns"], "", None, &[], 1),
            RefusalCode::EmptyActivityTypes,
        ),
        (
            worker(&[""], "", None, &["act"], 1),
            RefusalCode::InvalidField,
        ),
        (
            worker(&["ns"], &"q".repeat(17), None, &["act"], 1),
            RefusalCode::InvalidField,
        ),
        (
            worker(&["ns"], "", None, &["a", "b", "c"], 1),
            RefusalCode::LimitExceeded,
        ),
    ];
    for (register, code) in cases {
        let refusal = h.try_admit(&register).await.expect_err("refused");
        assert_eq!(refusal.code, code, "{register:?}");
    }
    assert_eq!(h.registry.worker_count(), 0);
    assert_eq!(
        h.census(address("ns", "", "act")).reason,
        NoWorkerReason::PoolEmpty
    );
    assert!(h.registry.snapshot().0.is_empty());
}

#[tokio::test]
async fn a_draining_registry_refuses_admission_and_selects_nobody() {
    let mut h = Harness::new().await;
    let _guard = h.admit(&worker(&["ns"], "", None, &["act"], 8)).await;
    h.registry.drain();
    assert!(h.select(address("ns", "", "act"), &ANY).is_none());
    let census = h.census(address("ns", "", "act"));
    assert_eq!(census.reason, NoWorkerReason::AllExcluded);
    assert_eq!(census.draining, 1);
    let refusal = h
        .try_admit(&worker(&["ns"], "", None, &["act"], 8))
        .await
        .expect_err("refused while draining");
    assert_eq!(refusal.code, RefusalCode::Draining);
    assert_eq!(h.registry.worker_count(), 1);
}

// ---------------------------------------------------------------------------------------------
// What a worker can carry, and who it is.

/// `address` for a request with headers, which only a version-3 worker can carry.
fn with_headers(address: Address<'_>) -> Address<'_> {
    Address {
        needs_version: 3,
        needs_features: lintel::wire::FeatureSet::NONE,
        ..address
    }
}

#[tokio::test]
async fn a_version_2_worker_is_no_candidate_for_a_request_it_cannot_carry() {
    let mut h = Harness::new().await;
    let (pid, old_link) = h.link_speaking(2).await;
    let old = h
        .registry
        .admit(pid, &worker(&["ns"], "", None, &["act"], 4), old_link)
        .expect("admitted");
    let here = address("ns", "", "act");
    assert!(h.select(with_headers(here), &ANY).is_none());
    let census = h.census(with_headers(here));
    assert_eq!(census.reason, NoWorkerReason::CapabilityMatchedNobody);
    assert_eq!(
        (census.compatible_workers, census.deployment_workers),
        (1, 1)
    );
    assert_eq!(
        lintel::wire::body::Census::from(&census).reason,
        NoWorkerReason::NodeFilterMatchedNobody
    );
    assert_eq!(
        h.next(here, &ANY),
        old.worker_id(),
        "a plain request takes it"
    );
    let new = h.admit(&worker(&["ns"], "", None, &["act"], 4)).await;
    for _ in 0..3 {
        assert_eq!(h.next(with_headers(here), &ANY), new.worker_id());
    }
}

#[tokio::test]
async fn a_waiter_needing_version_3_is_passed_by_for_a_version_2_workers_slot() {
    let mut h = Harness::new().await;
    let (pid, old_link) = h.link_speaking(2).await;
    let _old = h
        .registry
        .admit(pid, &worker(&["ns"], "", None, &["act"], 1), old_link)
        .expect("admitted");
    let here = address("ns", "", "act");
    let held = h.select(here, &ANY).expect("selected");
    let mut traced = queue(&h, with_headers(here), &ANY);
    let mut plain = queue(&h, here, &ANY);
    drop(held);
    assert!(
        granted(&mut traced).is_none(),
        "a version-2 worker cannot carry it"
    );
    assert!(granted(&mut plain).is_some());
    let census = traced.give_up().expect_err("nothing was granted");
    assert_eq!(census.reason, NoWorkerReason::CapabilityMatchedNobody);
}

#[tokio::test]
async fn a_registration_with_a_workers_deployment_and_instance_id_supersedes_it() {
    let mut h = Harness::new().await;
    let identified = |deployment: Option<&str>, instance: &str| Register {
        deployment: deployment.map(str::to_owned),
        instance_id: Some(instance.into()),
        ..worker(&["ns"], "", None, &["act"], 1)
    };
    let (pid, first_link) = h.link().await;
    let first = h
        .registry
        .admit(pid, &identified(Some("v42"), "pod-1"), first_link.clone())
        .expect("admitted");
    let other = h.admit(&identified(Some("v43"), "pod-1")).await;
    let unversioned = h.admit(&identified(None, "pod-1")).await;
    assert_eq!(
        h.registry.worker_count(),
        3,
        "an instance id is unique per deployment"
    );
    assert!(!first_link.is_superseded());
    let again = h.admit(&identified(Some("v42"), "pod-1")).await;
    assert!(first_link.is_superseded() && first_link.is_closed());
    assert_eq!(h.registry.worker_count(), 3);
    assert_eq!(h.registry.departed(DepartureReason::Superseded), 1);
    drop(first);
    assert_eq!(
        h.registry.departed(DepartureReason::Disconnected),
        0,
        "the superseded worker's departure is recorded once"
    );
    let ids: Vec<WorkerId> = h.registry.deployments().iter().map(|row| row.0).collect();
    assert_eq!(
        ids,
        [
            other.worker_id(),
            unversioned.worker_id(),
            again.worker_id()
        ]
    );
    drop(again);
    assert_eq!(h.registry.departed(DepartureReason::Disconnected), 1);
}

#[tokio::test]
async fn a_required_deployment_selects_queues_and_censuses_its_workers_only() {
    let mut h = Harness::new().await;
    let of = |deployment: &str| Register {
        deployment: Some(deployment.into()),
        ..worker(&["ns"], "", None, &["act"], 1)
    };
    let v1 = h.admit(&of("v1")).await;
    let plain = h.admit(&worker(&["ns"], "", None, &["act"], 1)).await;
    let here = address("ns", "", "act");
    let v1_only = Address {
        deployment: Some("v1"),
        ..with_headers(here)
    };
    let held = h.select(v1_only, &ANY).expect("v1's worker");
    assert_eq!(held.worker_id(), v1.worker_id());
    let mut waiting = queue(&h, v1_only, &ANY);
    assert_eq!(h.census(v1_only).reason, NoWorkerReason::AllAtCapacity);
    assert_eq!(
        h.next(here, &ANY),
        plain.worker_id(),
        "no deployment takes any"
    );
    assert!(
        granted(&mut waiting).is_none(),
        "the plain slot is not v1's"
    );
    drop(held);
    let granted = granted(&mut waiting).expect("v1's freed slot");
    assert_eq!(granted.worker_id(), v1.worker_id());
    let v2_only = Address {
        deployment: Some("v2"),
        ..v1_only
    };
    let census = h.census(v2_only);
    assert_eq!(
        (
            census.reason,
            census.compatible_workers,
            census.deployment_workers
        ),
        (NoWorkerReason::DeploymentMatchedNobody, 2, 0)
    );
    assert!(h.select(v2_only, &ANY).is_none());
}

// ---------------------------------------------------------------------------------------------
// Census and keyed state.

#[tokio::test]
async fn a_never_served_address_censuses_empty_with_no_departure_age() {
    let h = Harness::new().await;
    let census = h.census(address("default", "general", "greet"));
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
    assert_eq!(
        (
            census.pool_workers,
            census.serving_activity,
            census.compatible_workers
        ),
        (0, 0, 0)
    );
    assert_eq!(census.last_departure_ms_ago, None);
}

#[tokio::test]
async fn the_census_separates_pool_activity_and_node_coverage() {
    let mut h = Harness::new().await;
    let _worker = h
        .admit(&worker(&["default"], "general", Some("n1"), &["greet"], 1))
        .await;
    let here = address("default", "general", "greet");
    let served = h.census(here);
    assert_eq!(
        (
            served.pool_workers,
            served.serving_activity,
            served.compatible_workers
        ),
        (1, 1, 1)
    );

    let other_activity = h.census(address("default", "general", "settle"));
    assert_eq!(other_activity.reason, NoWorkerReason::NoActivityMatch);
    assert_eq!(
        (other_activity.pool_workers, other_activity.serving_activity),
        (1, 0)
    );

    let wrong_node = h.registry.census(here, &(pin("n2")).view());
    assert_eq!(wrong_node.reason, NoWorkerReason::NodeFilterMatchedNobody);
    assert_eq!(
        (wrong_node.serving_activity, wrong_node.compatible_workers),
        (1, 0)
    );
}

#[tokio::test]
async fn a_departed_worker_leaves_a_departure_age_for_compatible_lookups_only() {
    let mut h = Harness::new().await;
    let guard = h
        .admit(&worker(&["default"], "general", Some("n1"), &["greet"], 1))
        .await;
    drop(guard);
    let here = address("default", "general", "greet");
    let census = h.census(here);
    assert_eq!(census.reason, NoWorkerReason::PoolEmpty);
    let age = census.last_departure_ms_ago.expect("a departure age");
    assert!(age < 60_000, "implausible age {age} ms");
    assert_eq!(
        h.registry
            .census(here, &(pin("n2")).view())
            .last_departure_ms_ago,
        None
    );
    assert_eq!(
        h.census(address("default", "general", "other"))
            .last_departure_ms_ago,
        None
    );
    assert_eq!(
        h.census(address("default", "other", "greet"))
            .last_departure_ms_ago,
        None
    );
}

#[tokio::test]
async fn rotation_cursors_are_pruned_with_the_last_worker_serving_their_activity() {
    let mut h = Harness::new().await;
    let both = h.admit(&worker(&["ns"], "tq", None, &["x", "y"], 8)).await;
    let only_x = h.admit(&worker(&["ns"], "tq", None, &["x"], 8)).await;
    h.next(address("ns", "tq", "x"), &ANY);
    h.next(address("ns", "tq", "y"), &ANY);
    assert_eq!(h.registry.keyed_state_len().0, 2);
    // Lookups for names nobody serves create nothing.
    for i in 0..20 {
        let activity = format!("made-up-{i}");
        assert!(h.select(address("ns", "tq", &activity), &ANY).is_none());
        assert!(h.select(address(&activity, "tq", "x"), &ANY).is_none());
    }
    assert_eq!(h.registry.keyed_state_len().0, 2);

    drop(both);
    assert_eq!(
        h.registry.keyed_state_len().0,
        1,
        "y's cursor goes with its last worker"
    );
    drop(only_x);
    assert_eq!(h.registry.keyed_state_len().0, 0);
}

#[tokio::test]
async fn departure_records_stay_bounded_however_many_addresses_workers_announce() {
    let mut h = Harness::new().await;
    // One link for every registration: the registry never pushes here.
    let (pid, link) = h.link().await;
    for i in 0..4_500 {
        let activity = format!("activity-{i}");
        let register = worker(&["ns"], "", None, &[activity.as_str()], 1);
        let guard = h
            .registry
            .admit(pid, &register, link.clone())
            .expect("admitted");
        h.next(address("ns", "", &activity), &ANY);
        drop(guard);
    }
    let (cursors, departures) = h.registry.keyed_state_len();
    assert_eq!(cursors, 0);
    assert!(departures <= 4_096, "{departures} departure records kept");
    assert!(departures > 0);
    assert_eq!(h.registry.worker_count(), 0);
    // The most recent departure is still known.
    assert!(h
        .census(address("ns", "", "activity-4499"))
        .last_departure_ms_ago
        .is_some());
}
