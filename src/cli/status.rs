//! `lintel status`: a node's pools, workers, capacity, in-flight work and waiting dispatches.

use std::process::ExitCode;
use std::time::Duration;

use lintel::status::{Fairness, JoinPoint, Status};
use lintel_client::status::{JoinState, Standing};
use lintel_wire::PeerLinkState;

use super::exit::fail;

/// How long `lintel status` waits for the report before giving up.
const STATUS_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, clap::Args)]
#[command(override_usage = "lintel status [OPTIONS]")]
pub(super) struct Args {
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: super::connect::NodeArgs,
}

pub(super) async fn run(args: Args) -> ExitCode {
    let client = match args.target.producer("lintel-status").await {
        Ok(client) => client,
        Err(code) => return code,
    };
    // A version-3 node sends its status document; an earlier one a report read the same way.
    let status = match tokio::time::timeout(STATUS_TIMEOUT, client.status()).await {
        Ok(Ok(status)) => status,
        Ok(Err(err)) => return fail(format!("no status: {err}")),
        Err(_) => {
            return fail(format!(
                "no status: the node did not answer within {} s",
                STATUS_TIMEOUT.as_secs()
            ))
        }
    };
    client.close().await;
    if args.json {
        match status.to_json() {
            Ok(json) => println!("{json}"),
            Err(err) => return fail(err),
        }
    } else {
        print!("{}", render(&status));
    }
    ExitCode::SUCCESS
}

/// The status as text for people, with the names the JSON uses (`-` for `_`).
fn render(status: &Status) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "node {}  up {:.1}s  connections {}{}",
        status.node_id,
        status.uptime_ms as f64 / 1000.0,
        status.connections,
        if status.draining { "  DRAINING" } else { "" }
    );
    let named = status.counters.named();
    // The outcome classes on one line, the rest on the next.
    for line in [named.get(..10), named.get(10..)].into_iter().flatten() {
        let shown: Vec<String> = line
            .iter()
            .map(|(name, value)| format!("{name} {value}"))
            .collect();
        let _ = writeln!(out, "{}", shown.join("  "));
    }
    for listed in &status.peers {
        let peer = &listed.link;
        let state = match peer.state {
            PeerLinkState::Up if peer.synced => "up",
            PeerLinkState::Up => "up (presence arriving)",
            PeerLinkState::Connecting => "connecting",
        };
        let name = if peer.node_id.is_empty() {
            "?"
        } else {
            &peer.node_id
        };
        let _ = writeln!(
            out,
            "peer {name} at {}  {state}  relays sent {} received {} in flight {}  pools {}",
            peer.address,
            peer.relays_sent,
            peer.relays_received,
            peer.relays_in_flight,
            if peer.pools.is_empty() {
                "-".to_owned()
            } else {
                peer.pools.join(",")
            }
        );
        for pool in &listed.remote_pools {
            let _ = writeln!(
                out,
                "  remote {} {}  workers {}  slots {}  free {}",
                pool.channel, pool.activity_type, pool.workers, pool.slots, pool.free
            );
        }
    }
    for point in &status.join_points {
        let _ = writeln!(out, "{}", join_point_line(point));
    }
    if status.pools.is_empty() {
        let _ = writeln!(
            out,
            "\nno local pools: no worker is registered on this node"
        );
    }
    for pool in &status.pools {
        // The marker a report too large for one frame ends with: no real pool lacks a namespace.
        if pool.namespace.is_empty() {
            let _ = writeln!(out, "\n{}", pool.channel);
            continue;
        }
        let _ = writeln!(
            out,
            "\npool {}  ({} / {})",
            pool.channel, pool.namespace, pool.task_queue
        );
        let _ = writeln!(
            out,
            "  {:>6} {:>10} {:<24} {:<12} {:<11} {:>9} {:<}",
            "worker", "connection", "identity", "label", "state", "in-flight", "activities"
        );
        for w in &pool.workers {
            // A version-2 report says only that an excluded worker is excluded.
            let state = w.state.map_or("excluded", Standing::as_str);
            let _ = writeln!(
                out,
                "  {:>6} {:>10} {:<24} {:<12} {:<11} {:>4}/{:<4} {}",
                w.worker_id,
                w.pid,
                w.identity,
                w.label.as_deref().unwrap_or("-"),
                state,
                w.in_flight,
                w.max_concurrency,
                w.activity_types.join(","),
            );
            if w.deployment.is_some() || w.instance_id.is_some() {
                let _ = writeln!(
                    out,
                    "  {:>6} deployment {}  instance {}",
                    "",
                    w.deployment.as_deref().unwrap_or("-"),
                    w.instance_id.as_deref().unwrap_or("-")
                );
            }
        }
    }
    for current in &status.current_deployments {
        let _ = writeln!(
            out,
            "\npool {}  current deployment {}  (set by {} at {})",
            current.channel,
            current.deployment.as_deref().unwrap_or("- (cleared)"),
            current.set_by,
            rfc3339(current.set_at_unix_ms)
        );
    }
    for waiting in &status.waiting {
        let _ = writeln!(
            out,
            "\nwaiting {} at {}/{}/{}: {:?}",
            waiting.waiting,
            waiting.namespace,
            waiting.task_queue,
            waiting.activity_type,
            waiting.census.reason
        );
    }
    render_fairness(&mut out, &status.fairness);
    out
}

/// One join point: its address (and the name it was resolved from), its state since when, and
/// its failed dials with the last error.
fn join_point_line(point: &JoinPoint) -> String {
    let from = if point.peer.is_empty() || point.peer == point.address {
        String::new()
    } else {
        format!(" ({})", point.peer)
    };
    let who = match (&point.state, &point.node_id) {
        (JoinState::Linked | JoinState::Unlinked, Some(id)) => format!(" {id}"),
        _ => String::new(),
    };
    let mut line = format!(
        "join point {}{from}  {}{who} since {}",
        point.address,
        point.state.as_str(),
        rfc3339(point.since_unix_ms)
    );
    if point.dial_failures > 0 {
        line.push_str(&format!("  dial failures {}", point.dial_failures));
    }
    if let (Some(error), Some(at)) = (&point.last_error, point.last_error_unix_ms) {
        line.push_str(&format!("  last error at {}: {error}", rfc3339(at)));
    }
    line
}

/// A time in milliseconds since the Unix epoch as RFC 3339, in UTC to the second.
fn rfc3339(unix_ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(unix_ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Waiting dispatches by priority and key, when there are any and the report carried them.
fn render_fairness(out: &mut String, fairness: &Fairness) {
    use std::fmt::Write;
    let by_priority: Vec<String> = (1..)
        .zip(&fairness.waiting_by_priority)
        .filter(|(_, n)| **n > 0)
        .map(|(priority, n)| format!("{priority}: {n}"))
        .collect();
    if !by_priority.is_empty() {
        let _ = writeln!(out, "waiting by priority  {}", by_priority.join("  "));
    }
    let mut by_key: Vec<String> = fairness
        .waiting_by_key
        .iter()
        .map(|count| {
            let key = if count.key.is_empty() {
                "(shared)"
            } else {
                &count.key
            };
            format!("{key}: {}", count.count)
        })
        .collect();
    if fairness.waiting_other_keys > 0 {
        by_key.push(format!("other: {}", fairness.waiting_other_keys));
    }
    if !by_key.is_empty() {
        let _ = writeln!(out, "waiting by key  {}", by_key.join("  "));
    }
    for capped in &fairness.capped {
        let _ = writeln!(
            out,
            "key {} running {}/{} (capped)",
            capped.key, capped.in_flight, capped.max_in_flight
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lintel::status::{CappedKey, KeyCount};

    fn count(key: &str, count: u64) -> KeyCount {
        KeyCount {
            key: key.into(),
            count,
        }
    }

    #[test]
    fn a_join_point_shows_its_state_since_when_and_its_last_error() {
        let failing = JoinPoint {
            address: "198.18.0.12:7400".into(),
            node_id: None,
            myself: false,
            peer: "lintel-peers:7400".into(),
            state: JoinState::Failing,
            since_unix_ms: 1_700_000_000_000,
            last_error: Some("i/o error: connection refused".into()),
            last_error_unix_ms: Some(1_700_000_030_500),
            dial_failures: 7,
        };
        assert_eq!(
            join_point_line(&failing),
            "join point 198.18.0.12:7400 (lintel-peers:7400)  failing since \
             2023-11-14T22:13:20Z  dial failures 7  last error at 2023-11-14T22:13:50Z: i/o \
             error: connection refused"
        );
        let linked = JoinPoint {
            address: "10.0.0.2:7400".into(),
            node_id: Some("b".into()),
            peer: "10.0.0.2:7400".into(),
            state: JoinState::Linked,
            last_error: None,
            last_error_unix_ms: None,
            dial_failures: 0,
            ..failing
        };
        assert_eq!(
            join_point_line(&linked),
            "join point 10.0.0.2:7400  linked b since 2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn waiters_by_priority_and_key_are_shown_when_the_report_carries_them() {
        let mut out = String::new();
        render_fairness(&mut out, &Fairness::default());
        assert_eq!(out, "", "a version-2 report carries none: nothing is shown");
        let fairness = Fairness {
            waiting_by_priority: vec![2, 0, 5, 0, 0],
            waiting_by_key: vec![count("a", 4), count("", 3)],
            waiting_other_keys: 1,
            capped: vec![CappedKey {
                key: "b".into(),
                in_flight: 4,
                max_in_flight: 4,
            }],
            ..Fairness::default()
        };
        render_fairness(&mut out, &fairness);
        assert_eq!(
            out,
            "waiting by priority  1: 2  3: 5\n\
             waiting by key  a: 4  (shared): 3  other: 1\n\
             key b running 4/4 (capped)\n"
        );
    }
}
