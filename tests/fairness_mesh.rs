//! Priority and fairness across a mesh of three nodes on 127.0.0.1: the pool's workers are at
//! `c`; tenants' SDK producers dispatch at `a` and `b`, over real sockets (no grants, so each
//! request names its key). A serving node does not queue relays: a relay carries the key its
//! origin decided, a per-key cap at the serving node holds it whichever node it came from, an
//! origin relays to its own waiters by priority and key as a local slot would serve them, and
//! the origins race for each slot that frees, unordered, each dispatch running once.

use lintel_test_support as support;

use lintel::dispatch::DispatchOptions;
use lintel::registry::fairness::KeyPolicy;
use lintel::sdk::Client;
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::{DispatchRequest, DispatchResult, Push};
use lintel::NodeConfig;
use support::{
    assert_b_served_within_25, client, cluster_config, logging_worker, plain, request,
    wait_fairness, waiting, within, RawWorker, TestNode, TASK,
};
use tokio::task::JoinHandle;

/// Three nodes: `c` with `config`'s fairness, `a` and `b` joined through it, each seeing the
/// others.
async fn mesh(fairness: Vec<KeyPolicy>) -> (TestNode, TestNode, TestNode) {
    let c = TestNode::with_config(NodeConfig {
        fairness,
        ..cluster_config("c", &[])
    })
    .await;
    let a = TestNode::joined("a", &[&c]).await;
    let b = TestNode::joined("b", &[&c]).await;
    c.wait_linked(&["a", "b"]).await;
    a.wait_linked(&["b", "c"]).await;
    b.wait_linked(&["a", "c"]).await;
    (a, b, c)
}

/// Waits until `a` and `b` know `c`'s pool `ns`.
async fn announced(a: &TestNode, b: &TestNode) {
    let pool = dispatch_channel_name("ns", "default", None);
    a.wait_announced("c", &pool).await;
    b.wait_announced("c", &pool).await;
}

fn work(input: &str) -> DispatchRequest {
    request("ns", "work", input)
}

/// Dispatches `n` inputs `label:0`, `label:1`, ... through `producer` with `options`.
fn dispatch_many(
    producer: &Client,
    label: &str,
    n: usize,
    options: &DispatchOptions,
) -> Vec<JoinHandle<DispatchResult>> {
    (0..n)
        .map(|i| {
            let (producer, options) = (producer.clone(), options.clone());
            let request = work(&format!("{label}:{i}"));
            tokio::spawn(async move {
                producer
                    .dispatch(&support::dispatch_of(request), &options)
                    .await
                    .expect("connection")
            })
        })
        .collect()
}

fn of_key(keys: &[(String, u64)], key: &str) -> u64 {
    keys.iter().find(|(k, _)| k == key).map_or(0, |(_, n)| *n)
}

async fn completed(handles: Vec<JoinHandle<DispatchResult>>) {
    for handle in handles {
        let outcome = within("an outcome", handle).await.expect("task");
        assert!(
            matches!(outcome, DispatchResult::Completed(_)),
            "{outcome:?}"
        );
    }
}

fn input(push: &Push) -> String {
    String::from_utf8_lossy(&push.request.input).into_owned()
}

#[tokio::test]
async fn a_serving_nodes_cap_holds_a_key_relayed_from_two_origins() {
    let cap = KeyPolicy {
        key: "noisy".into(),
        max_in_flight: Some(1),
        weight: None,
    };
    let (a, b, c) = mesh(vec![cap]).await;
    let mut worker = RawWorker::start(c.addr, plain("ns", "work", 3, "raw")).await;
    announced(&a, &b).await;
    let (at_a, at_b) = (client(a.addr).await, client(b.addr).await);

    // `noisy` enters at both a and b; one runs at c, the rest wait at their origins.
    let mut noisy = dispatch_many(&at_a, "noisy-a", 2, &waiting(3, "noisy", 1_000));
    noisy.extend(dispatch_many(
        &at_b,
        "noisy-b",
        2,
        &waiting(3, "noisy", 1_000),
    ));
    let first_noisy = worker.next_push().await;
    wait_fairness(&a, "noisy waiting at a", |s| {
        of_key(&s.waiting_by_key, "noisy") >= 1
    })
    .await;
    wait_fairness(&b, "noisy waiting at b", |s| {
        of_key(&s.waiting_by_key, "noisy") >= 1
    })
    .await;
    // Two slots are free at c, but noisy is at its cap there: quiet, from b, takes both.
    let quiet = dispatch_many(&at_b, "quiet", 2, &waiting(3, "quiet", 1_000));
    let mut quiet_pushes = Vec::new();
    for _ in 0..2 {
        let push = worker.next_push().await;
        assert!(
            input(&push).starts_with("quiet:"),
            "{} was pushed",
            input(&push)
        );
        quiet_pushes.push(push);
    }
    let status = c.registry().fairness();
    assert_eq!(status.capped, [("noisy".to_owned(), 1, 1)]);
    assert_eq!(
        (
            of_key(&status.served.by_key, "noisy"),
            of_key(&status.served.by_key, "quiet")
        ),
        (1, 2),
        "c counted each relay under the key its origin decided"
    );

    // Each noisy runs once the one before it ended: one at a time, from either origin.
    let mut running = first_noisy;
    let mut origins = vec![input(&running)];
    for push in &quiet_pushes {
        worker.reply(push, "ok").await;
    }
    for _ in 0..3 {
        worker.reply(&running, "ok").await;
        running = worker.next_push().await;
        assert!(input(&running).starts_with("noisy-"), "{}", input(&running));
        assert_eq!(c.registry().fairness().capped, [("noisy".to_owned(), 1, 1)]);
        origins.push(input(&running));
    }
    worker.reply(&running, "ok").await;
    origins.sort();
    assert_eq!(
        origins,
        ["noisy-a:0", "noisy-a:1", "noisy-b:0", "noisy-b:1"]
    );
    completed(noisy).await;
    completed(quiet).await;
    let served = c.registry().fairness().served.by_key;
    assert_eq!((of_key(&served, "noisy"), of_key(&served, "quiet")), (4, 2));
}

#[tokio::test]
async fn tenants_entering_at_two_nodes_race_for_a_full_pool_and_each_runs_once() {
    let (a, b, c) = mesh(Vec::new()).await;
    let (_worker, log) = logging_worker(c.addr, 1, TASK).await;
    announced(&a, &b).await;
    let (at_a, at_b) = (client(a.addr).await, client(b.addr).await);
    // 200 of `a` wait at a, then 10 of `b` at b, for c's one slot. Each slot c frees goes to
    // whichever origin's relay reaches it first; the other hears that nothing ran and waits
    // again. Which origin wins is not ordered: one may win every race.
    let heavy = dispatch_many(&at_a, "a", 200, &waiting(3, "a", 1_000));
    wait_fairness(&a, "a's dispatches waiting", |s| {
        of_key(&s.waiting_by_key, "a") >= 198
    })
    .await;
    let light = dispatch_many(&at_b, "b", 10, &waiting(3, "b", 1_000));
    completed(light).await;
    let done = log.completed();
    let mut ran = done.clone();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), done.len(), "a dispatch ran twice: {done:?}");
    assert_eq!(done.iter().filter(|i| i.starts_with("b:")).count(), 10);
    for handle in heavy {
        handle.abort();
    }
}

#[tokio::test]
async fn at_an_origin_a_key_that_queues_after_another_is_relayed_within_a_few_completions() {
    let (a, b, c) = mesh(Vec::new()).await;
    let (_worker, log) = logging_worker(c.addr, 1, TASK).await;
    announced(&a, &b).await;
    let at_a = client(a.addr).await;
    // c's one slot is the pool's: one `a` runs there, the rest wait at a; then 10 of `b`.
    let heavy = dispatch_many(&at_a, "a", 200, &waiting(3, "a", 1_000));
    wait_fairness(&a, "a's dispatches waiting at a", |s| {
        of_key(&s.waiting_by_key, "a") >= 198
    })
    .await;
    let mark = log.completed().len();
    let light = dispatch_many(&at_a, "b", 10, &waiting(3, "b", 1_000));
    completed(light).await;
    let done = log.completed();
    assert_b_served_within_25(&done, mark);
    let mut ran = done.clone();
    ran.sort();
    ran.dedup();
    assert_eq!(ran.len(), done.len(), "a dispatch ran twice: {done:?}");
    for handle in heavy {
        handle.abort();
    }
}

#[tokio::test]
async fn at_an_origin_a_priority_one_dispatch_behind_a_hundred_priority_three_is_relayed_next() {
    let (a, b, c) = mesh(Vec::new()).await;
    let mut worker = RawWorker::start(c.addr, plain("ns", "work", 1, "raw")).await;
    announced(&a, &b).await;
    let at_a = client(a.addr).await;
    let first = dispatch_many(&at_a, "p3-first", 1, &waiting(3, "", 1_000));
    let held = worker.next_push().await;
    let behind = dispatch_many(&at_a, "p3", 100, &waiting(3, "", 1_000));
    wait_fairness(&a, "100 priority-3 waiters at a", |s| {
        s.waiting_by_priority[2] == 100
    })
    .await;
    let urgent = dispatch_many(&at_a, "p1", 1, &waiting(1, "", 1_000));
    wait_fairness(&a, "the priority-1 waiter at a", |s| {
        s.waiting_by_priority[0] == 1
    })
    .await;

    worker.reply(&held, "done").await;
    let next = worker.next_push().await;
    assert_eq!(input(&next), "p1:0");
    worker.reply(&next, "urgent done").await;
    completed(urgent).await;
    // Then the priority-3 waiters, in their order.
    let after = worker.next_push().await;
    assert_eq!(input(&after), "p3:0");
    completed(first).await;
    for handle in behind {
        handle.abort();
    }
}
