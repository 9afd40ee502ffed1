//! The memory the registry spends on fairness keys, measured by allocation: a counting global
//! allocator tallies the bytes live in this process. 10,000 dispatches wait under 10,000
//! distinct keys, and again under the shared key; the difference is what the keys cost, and
//! it must stay within the bound the registry documents: at most [`BYTES_PER_KEY`] bytes plus
//! twice the key's length for each key with waiters, and nothing once its waiters have gone.
//! It prints one JSON line.

use lintel_test_support as support;

use lintel::registry::fairness::BYTES_PER_KEY;
use lintel::registry::{Address, AdmissionLimits, Fairness, FairnessRef, Registry};
use lintel::wire::NodeRouting;
use support::Counting;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const KEYS: usize = 10_000;

#[test]
fn ten_thousand_keys_cost_at_most_the_documented_bytes_each_and_nothing_once_gone() {
    let registry = Registry::new(AdmissionLimits::default());
    let address = Address {
        namespace: "ns",
        task_queue: "default",
        activity_type: "work",
        node: None,
        needs_version: 1,
        needs_features: lintel::wire::FeatureSet::NONE,
        deployment: None,
    };
    let routing = NodeRouting::Any;
    let keys: Vec<String> = (0..KEYS).map(|n| format!("tenant-{n:05}")).collect();
    let key_len = keys.first().map_or(0, String::len);
    let mut waits = Vec::with_capacity(KEYS);
    let queue = |fairness: FairnessRef<'_>| {
        registry
            .select_or_wait(address, &routing.view(), &fairness)
            .expect_err("no worker: it waits")
    };

    // Warm up the registry's maps, then measure the shared key and the distinct keys alike.
    waits.push(queue(FairnessRef::default()));
    waits.clear();
    let base = Counting::live();
    for _ in 0..KEYS {
        waits.push(queue(FairnessRef::default()));
    }
    let shared = Counting::live() - base;
    waits.clear();
    assert_eq!((registry.waiting(), registry.waiting_key_queues()), (0, 0));

    let base = Counting::live();
    for key in &keys {
        waits.push(queue(Fairness {
            key: key.as_str(),
            ..FairnessRef::default()
        }));
    }
    let distinct = Counting::live() - base;
    assert_eq!(registry.waiting_key_queues(), KEYS);
    waits.clear();
    assert_eq!((registry.waiting(), registry.waiting_key_queues()), (0, 0));
    let left = Counting::live().saturating_sub(base);

    let per_key = distinct.saturating_sub(shared) / KEYS;
    println!(
        "{{\"keys\":{KEYS},\"shared_bytes\":{shared},\"distinct_bytes\":{distinct},\
         \"per_key\":{per_key},\"bound\":{},\"left_after\":{left}}}",
        BYTES_PER_KEY + 2 * key_len
    );
    assert!(
        per_key <= BYTES_PER_KEY + 2 * key_len,
        "a key with waiters costs {per_key} bytes, over the documented {} + 2 x {key_len}",
        BYTES_PER_KEY
    );
    // Maps keep their capacity; nothing per key stays.
    assert!(
        left < 64 * 1024,
        "{left} bytes stayed after every key's waiters left"
    );
}
