//! Join storms of real `lintel serve` processes on loopback: every node started at once, each
//! given one seed, through a proxy (so the address a node is configured with differs from the
//! one its seed advertises). Read from each node's `/metrics`: the links that came up, went
//! down, and were turned down as duplicates while joining.
//!
//! Each pair of nodes forms at most one duplicate link, and only when both dial each other
//! before either's dial arrives: a join point is dialled before anyone knows who answers
//! there, so it can cross a dial from the node behind it. No link that came up is ever
//! replaced: every node counts exactly one link up per other node, and none down.

mod support;

// Node processes and their admin endpoints; the worker processes serve other tests.
#[allow(dead_code)]
#[path = "support/processes.rs"]
mod processes;

use std::time::Duration;

use processes::{until, NodeProcess};
use support::faulty::Proxy;

/// Longest a storm may take to settle.
const JOINED_BOUND: Duration = Duration::from_secs(60);

/// What one storm's nodes counted.
#[derive(Debug)]
struct Storm {
    nodes: usize,
    ups: u64,
    downs: u64,
    duplicates: u64,
}

/// Starts `count` nodes at once, each with one seed drawn from a fixed random tree, and waits
/// until every node has a link up to every other.
async fn storm(count: usize) -> Storm {
    let mut rng = fastrand::Rng::with_seed(count as u64);
    let seeds: Vec<usize> = (0..count)
        .map(|i| match i {
            0 => rng.usize(1..count),
            _ => rng.usize(0..i),
        })
        .collect();
    let proxies = futures_util::future::join_all((0..count).map(|_| Proxy::unaimed())).await;
    let starts = (0..count).map(|i| {
        let args = [
            "--node-id".to_owned(),
            format!("n{i:02}"),
            "--peer".to_owned(),
            proxies[seeds[i]].addr.to_string(),
            "--peer-ping-interval-ms".to_owned(),
            "200".to_owned(),
        ];
        async move { NodeProcess::launch(&args, &[]).await }
    });
    // Started together; a dial to a seed not listening yet waits in its proxy.
    let nodes = futures_util::future::join_all(starts).await;
    for (proxy, node) in proxies.iter().zip(&nodes) {
        proxy.aim(node.addr);
    }
    let others = (count - 1) as f64;
    until(
        &format!("{count} nodes each with a link up to every other"),
        JOINED_BOUND,
        async || {
            for (i, node) in nodes.iter().enumerate() {
                let ups = node.metric_sum("lintel_peer_link_ups_total").await;
                let up = node.metric_sum("lintel_peer_up").await;
                if ups < others || up < others {
                    return Err(format!("n{i:02}: {up} links up, {ups} came up"));
                }
            }
            Ok(())
        },
    )
    .await;
    let mut storm = Storm {
        nodes: count,
        ups: 0,
        downs: 0,
        duplicates: 0,
    };
    for node in &nodes {
        storm.ups += node.metric_sum("lintel_peer_link_ups_total").await as u64;
        storm.downs += node.metric_sum("lintel_peer_link_downs_total").await as u64;
        storm.duplicates += node.metric("lintel_peer_duplicate_links_total").await as u64;
    }
    println!("{storm:?}");
    storm
}

fn check(storm: &Storm) {
    let n = storm.nodes as u64;
    assert_eq!(
        storm.ups,
        n * (n - 1),
        "one link up per node and other node, none replaced: {storm:?}"
    );
    assert_eq!(storm.downs, 0, "no link went down: {storm:?}");
    let pairs = n * (n - 1) / 2;
    assert!(
        storm.duplicates <= pairs,
        "at most one duplicate per pair ({pairs}): {storm:?}"
    );
}

/// 12 nodes, then 16 (one storm at a time: the machine runs every process).
#[tokio::test]
async fn nodes_started_at_once_with_one_seed_each_form_one_link_per_pair() {
    for count in [12, 16] {
        check(&storm(count).await);
    }
}
