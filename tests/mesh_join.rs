//! Peers as real `lintel serve` processes on loopback. Join storms: every node started at once,
//! each given one seed, through a proxy (so the address a node is configured with differs from
//! the one its seed advertises); read from each node's `/metrics`, the links that came up, went
//! down, and were turned down as duplicates while joining. And what joining logs: a duplicate
//! link nothing at info, an unreachable peer one warning, then one every 30 s at most.
//!
//! Each pair of nodes forms at most one duplicate link, and only when both dial each other
//! before either's dial arrives: a join point is dialled before anyone knows who answers
//! there, so it can cross a dial from the node behind it. No link that came up is ever
//! replaced: every node counts exactly one link up per other node, and none down.

use lintel_test_support as support;

use lintel_test_support::processes;

use std::time::Duration;

use processes::{until, NodeProcess};
use support::faulty::Proxy;

/// Longest a storm may take to settle.
const JOINED_BOUND: Duration = Duration::from_secs(60);

/// What one storm's nodes counted.
#[derive(Debug)]
struct Storm {
    nodes: usize,
    /// From the seeds' proxies letting dials through until every link was up, as polled.
    joined_in: Duration,
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
    let aimed = tokio::time::Instant::now();
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
        joined_in: aimed.elapsed(),
        ups: 0,
        downs: 0,
        duplicates: 0,
    };
    for node in &nodes {
        storm.ups += node.metric_sum("lintel_peer_link_ups_total").await as u64;
        storm.downs += node.metric_sum("lintel_peer_link_downs_total").await as u64;
        storm.duplicates += node.metric("lintel_peer_duplicate_links_total").await as u64;
    }
    println!(
        "{count} nodes: every link up {:?} after the seeds answered; {} links came up, {} went down, {} duplicates turned down",
        storm.joined_in, storm.ups, storm.downs, storm.duplicates
    );
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

/// Lines of `log` containing every one of `needles`.
fn count(log: &[String], needles: &[&str]) -> usize {
    log.iter()
        .filter(|line| needles.iter().all(|needle| line.contains(needle)))
        .count()
}

#[tokio::test]
async fn two_nodes_dialling_each_other_at_once_log_one_link_up_each_and_no_link_down() {
    let (to_a, to_b) = (Proxy::unaimed().await, Proxy::unaimed().await);
    let node = |id: &str, seed: &Proxy| {
        let args = [
            "--node-id".to_owned(),
            id.to_owned(),
            "--peer".to_owned(),
            seed.addr.to_string(),
        ];
        let log = "info,lintel::connection=debug,lintel::cluster=debug";
        async move { NodeProcess::launch(&args, &[("RUST_LOG", log)]).await }
    };
    let (a, b) = tokio::join!(node("a", &to_b), node("b", &to_a));
    // Both dials wait in the proxies, then go at once: one of the two links is turned down.
    to_a.aim(a.addr);
    to_b.aim(b.addr);
    until(
        "one link up each, one duplicate turned down",
        JOINED_BOUND,
        async || {
            let ups = [
                a.metric_sum("lintel_peer_link_ups_total").await,
                b.metric_sum("lintel_peer_link_ups_total").await,
            ];
            let duplicates = a.metric("lintel_peer_duplicate_links_total").await
                + b.metric("lintel_peer_duplicate_links_total").await;
            if ups == [1.0, 1.0] && duplicates == 1.0 {
                Ok(())
            } else {
                Err(format!("ups {ups:?}, duplicates {duplicates}"))
            }
        },
    )
    .await;
    // Settled on both sides once the duplicate's other end saw it end: its dialler read the
    // refusal, or its acceptor the goodbye. Both nodes keep running: a node stopped now would
    // rightly be logged down by the other.
    let settled = [
        "the node at a join point is linked already",
        "peer link closed before it came up",
    ];
    let logs = until(
        "the duplicate settled at both ends",
        JOINED_BOUND,
        async || {
            let logs = [a.log(), b.log()];
            let seen = |needles: &[&str]| logs.iter().map(|log| count(log, needles)).sum::<usize>();
            let ends = settled.iter().map(|line| seen(&[line])).sum::<usize>();
            if seen(&["duplicate peer link turned down"]) == 1 && ends >= 1 {
                Ok(logs)
            } else {
                Err(format!("{logs:#?}"))
            }
        },
    )
    .await;
    for log in &logs {
        assert_eq!(count(log, &["INFO", "peer link up"]), 1, "{log:#?}");
        assert_eq!(count(log, &["peer link down"]), 0, "{log:#?}");
    }
}

#[tokio::test]
async fn an_unreachable_peer_is_one_warning_with_its_address_and_error() {
    // Nobody listens at port 1: every dial is refused at once.
    let args = ["--peer".to_owned(), "127.0.0.1:1".to_owned()];
    let node = NodeProcess::launch(&args, &[("RUST_LOG", "info,lintel::connection=debug")]).await;
    let refused = ["peer dial failed", "address=127.0.0.1:1", "error="];
    until("three failed dials", JOINED_BOUND, async || {
        let failed = count(&node.log(), &refused);
        if failed >= 3 {
            Ok(())
        } else {
            Err(format!("{failed} failed dials logged"))
        }
    })
    .await;
    let log = node.kill().await;
    let warned: Vec<&String> = log
        .iter()
        .filter(|line| line.contains("WARN") && refused.iter().all(|part| line.contains(part)))
        .collect();
    assert_eq!(
        warned.len(),
        1,
        "the first failure a warning, the rest at debug for 30 s: {log:#?}"
    );
}
