//! An event as JSON lines: what `lintel watch` prints and the admin listener's `/events` serves.
//!
//! One object per line, with `event` (`worker_registered`, `worker_excluded`,
//! `worker_restored`, `worker_departed`, `peer_up`, `peer_down`, `missed`), `seq` and
//! `at_unix_ms`. A worker event gives one line per pool the worker is in, each naming its
//! `pool` (the channel name) beside `worker_id` and `identity` (and `deployment`,
//! `instance_id` when set, `reason` for an exclusion or departure); the lines of one event
//! share its `seq`.

use lintel_wire::{DepartureReason, ExclusionReason, NodeEvent, WorkerEvent};
use serde::Serialize;

/// One line's object; absent fields are left out.
#[derive(Debug, Serialize)]
struct Line<'a> {
    event: &'static str,
    seq: u64,
    at_unix_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deployment: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instance_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incarnation: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
}

impl Line<'_> {
    fn new(event: &'static str, seq: u64, at_unix_ms: u64) -> Self {
        Self {
            event,
            seq,
            at_unix_ms,
            worker_id: None,
            identity: None,
            pool: None,
            deployment: None,
            instance_id: None,
            node_id: None,
            incarnation: None,
            address: None,
            reason: None,
            count: None,
        }
    }
}

/// The JSON lines of event `seq`, which happened at `at_unix_ms`.
pub fn lines(seq: u64, at_unix_ms: u64, event: &NodeEvent) -> Vec<String> {
    let line = |name| Line::new(name, seq, at_unix_ms);
    let objects: Vec<Line<'_>> = match event {
        NodeEvent::WorkerRegistered(worker) => per_pool(line("worker_registered"), worker, None),
        NodeEvent::WorkerExcluded { worker, reason } => {
            per_pool(line("worker_excluded"), worker, Some(exclusion(*reason)))
        }
        NodeEvent::WorkerRestored(worker) => per_pool(line("worker_restored"), worker, None),
        NodeEvent::WorkerDeparted { worker, reason } => {
            per_pool(line("worker_departed"), worker, Some(departure(*reason)))
        }
        NodeEvent::PeerUp {
            node_id,
            incarnation,
            address,
        } => vec![Line {
            node_id: Some(node_id),
            incarnation: Some(*incarnation),
            address: Some(address),
            ..line("peer_up")
        }],
        NodeEvent::PeerDown {
            node_id,
            incarnation,
            reason,
        } => vec![Line {
            node_id: Some(node_id),
            incarnation: Some(*incarnation),
            reason: Some(reason),
            ..line("peer_down")
        }],
        NodeEvent::Missed { count } => vec![Line {
            count: Some(*count),
            ..line("missed")
        }],
    };
    objects
        .iter()
        // A struct of strings and numbers always serializes.
        .filter_map(|object| serde_json::to_string(object).ok())
        .collect()
}

/// One line per pool of `worker` (one without a pool when it names none).
fn per_pool<'a>(base: Line<'a>, worker: &'a WorkerEvent, reason: Option<&'a str>) -> Vec<Line<'a>> {
    let line = |pool| Line {
        worker_id: Some(worker.worker_id),
        identity: Some(&worker.identity),
        pool,
        deployment: worker.deployment.as_deref(),
        instance_id: worker.instance_id.as_deref(),
        reason,
        ..Line::new(base.event, base.seq, base.at_unix_ms)
    };
    if worker.channels.is_empty() {
        return vec![line(None)];
    }
    worker
        .channels
        .iter()
        .map(|channel| line(Some(channel)))
        .collect()
}

fn exclusion(reason: ExclusionReason) -> &'static str {
    match reason {
        ExclusionReason::Unreachable => "unreachable",
        ExclusionReason::Draining => "draining",
        ExclusionReason::Probation => "probation",
    }
}

fn departure(reason: DepartureReason) -> &'static str {
    match reason {
        DepartureReason::Disconnected => "disconnected",
        DepartureReason::MissedPings => "missed_pings",
        DepartureReason::Drained => "drained",
        DepartureReason::NodeShutdown => "node_shutdown",
        DepartureReason::RefusedAtRegistration => "refused_at_registration",
        DepartureReason::Superseded => "superseded",
        DepartureReason::ProtocolError => "protocol_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_in_two_pools_is_two_lines_of_one_event() {
        let worker = WorkerEvent {
            worker_id: 7,
            identity: "w".into(),
            deployment: Some("v2".into()),
            instance_id: None,
            channels: vec![
                "aion.dispatch.a.default".into(),
                "aion.dispatch.b.default".into(),
            ],
        };
        let event = NodeEvent::WorkerDeparted {
            worker,
            reason: DepartureReason::MissedPings,
        };
        let lines: Vec<serde_json::Value> = lines(4, 1000, &event)
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                serde_json::json!({"event": "worker_departed", "seq": 4, "at_unix_ms": 1000,
                    "worker_id": 7, "identity": "w", "pool": "aion.dispatch.a.default",
                    "deployment": "v2", "reason": "missed_pings"}),
                serde_json::json!({"event": "worker_departed", "seq": 4, "at_unix_ms": 1000,
                    "worker_id": 7, "identity": "w", "pool": "aion.dispatch.b.default",
                    "deployment": "v2", "reason": "missed_pings"}),
            ]
        );
    }

    #[test]
    fn peer_and_missed_events_are_one_line_each() {
        let down = NodeEvent::PeerDown {
            node_id: "b".into(),
            incarnation: 9,
            reason: "the link closed".into(),
        };
        let line: serde_json::Value = serde_json::from_str(&lines(2, 5, &down)[0]).unwrap();
        assert_eq!(
            line,
            serde_json::json!({"event": "peer_down", "seq": 2, "at_unix_ms": 5, "node_id": "b",
                "incarnation": 9, "reason": "the link closed"})
        );
        let missed = lines(3, 6, &NodeEvent::Missed { count: 12 });
        assert_eq!(
            missed,
            [r#"{"event":"missed","seq":3,"at_unix_ms":6,"count":12}"#]
        );
    }
}
