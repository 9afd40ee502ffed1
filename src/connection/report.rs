//! A status report that fits in one frame: a node too large to describe in one is described
//! in part, with a marker saying what was left out. The same for every form of the report: a
//! version-1 `Status`, a version-2 `ClusterStatus`, a version-3 `StatusDocument`.
//!
//! Workers go first, from the end, then the waiting entries, then the pools, then the peers;
//! the marker is a pool with an empty namespace, which no real pool has.

use bytes::{Bytes, BytesMut};
use lintel_wire::{
    ClusterStatusReport, Frame, NodeStatus, PeerStatus, PoolStatus, StatusDocument, StatusReport,
    PROTOCOL_VERSION,
};

use crate::auth::Grant;
use crate::shared::Shared;
use crate::status;

/// A report's frame made from its node status, with the peers or without them.
type Rebuild<'a> = Box<dyn Fn(NodeStatus, bool) -> Frame + 'a>;

/// The node's status as a version-3 `StatusDocument` answering query `correlation`, scoped to
/// what `grant` sees and cut like the other reports to fit in `max_frame_len`.
pub(super) fn document(
    shared: &Shared,
    grant: &Grant,
    correlation: u64,
    max_frame_len: usize,
) -> Frame {
    let report = status::scoped_report(shared.cluster_status(correlation), grant);
    let (peers, peer_lost) = (report.peers, report.peer_lost);
    let dispatcher = &shared.dispatcher;
    let rebuild: Rebuild<'_> = Box::new(move |status, with_peers| {
        let report = ClusterStatusReport {
            correlation,
            status,
            peers: if with_peers {
                peers.clone()
            } else {
                Vec::new()
            },
            peer_lost,
        };
        // These types always serialize.
        let view = status::scoped_view(status::view(report, dispatcher), grant);
        let json = serde_json::to_vec(&view).unwrap_or_default();
        Frame::StatusDocument(StatusDocument {
            correlation,
            json: Bytes::from(json),
        })
    });
    fit_parts(report.status, &rebuild, max_frame_len)
}

/// `report` (a `Status` or `ClusterStatus` frame) cut down until it encodes within
/// `max_frame_len`; any other frame, or a report that fits, is returned as it is.
pub(super) fn fit(report: Frame, max_frame_len: usize) -> Frame {
    if fits(&report, max_frame_len) {
        return report;
    }
    let (status, rebuild): (NodeStatus, Rebuild<'static>) = match report {
        Frame::Status(report) => {
            let StatusReport {
                correlation,
                status,
            } = *report;
            (
                status,
                Box::new(move |status, _| {
                    Frame::from(StatusReport {
                        correlation,
                        status,
                    })
                }),
            )
        }
        Frame::ClusterStatus(report) => {
            let ClusterStatusReport {
                correlation,
                status,
                peers,
                peer_lost,
            } = *report;
            (
                status,
                Box::new(move |status, with_peers| {
                    let peers: Vec<PeerStatus> = if with_peers {
                        peers.clone()
                    } else {
                        Vec::new()
                    };
                    Frame::from(ClusterStatusReport {
                        correlation,
                        status,
                        peers,
                        peer_lost,
                    })
                }),
            )
        }
        other => return other,
    };
    fit_parts(status, &rebuild, max_frame_len)
}

/// Fits the report `rebuild` makes of `status` into `max_frame_len`: whole when it fits,
/// otherwise with as many workers as fit, then without pools, then without peers.
fn fit_parts(status: NodeStatus, rebuild: &Rebuild<'_>, max_frame_len: usize) -> Frame {
    let fits = |frame: &Frame| fits(frame, max_frame_len);
    let whole = rebuild(status.clone(), true);
    if fits(&whole) {
        return whole;
    }
    let total = status.pools.iter().map(|pool| pool.workers.len()).sum();
    // The most workers that still fit, with the waiting entries left out: found by bisection,
    // as a report's size grows with the workers it keeps.
    let with = |kept: usize, pools: bool, peers: bool| {
        rebuild(truncated(&status, kept, total, pools), peers)
    };
    if fits(&with(0, true, true)) {
        let (mut fit_in, mut too_many) = (0, total);
        while too_many - fit_in > 1 {
            let middle = fit_in + (too_many - fit_in) / 2;
            if fits(&with(middle, true, true)) {
                fit_in = middle;
            } else {
                too_many = middle;
            }
        }
        return with(fit_in, true, true);
    }
    let without_pools = with(0, false, true);
    if fits(&without_pools) {
        return without_pools;
    }
    with(0, false, false)
}

/// True when `frame` encodes within `max_frame_len`, as the latest version carries it (a
/// report is the same body in every version that has it).
fn fits(frame: &Frame, max_frame_len: usize) -> bool {
    let mut scratch = BytesMut::new();
    lintel_wire::encode_frame(frame, PROTOCOL_VERSION, &mut scratch, max_frame_len).is_ok()
}

/// `status` with only its first `kept` workers (of `total`), its waiting entries left out,
/// its pools too unless `pools`, and the marker pool last.
fn truncated(status: &NodeStatus, kept: usize, total: usize, pools: bool) -> NodeStatus {
    let mut left = kept;
    let mut out: Vec<PoolStatus> = Vec::new();
    if pools {
        for pool in &status.pools {
            let take = left.min(pool.workers.len());
            left -= take;
            out.push(PoolStatus {
                namespace: pool.namespace.clone(),
                task_queue: pool.task_queue.clone(),
                channel: pool.channel.clone(),
                workers: pool.workers.iter().take(take).cloned().collect(),
            });
            if left == 0 {
                break;
            }
        }
    }
    let pools_left_out = status.pools.len() - out.len();
    out.push(PoolStatus {
        namespace: String::new(),
        task_queue: String::new(),
        channel: format!(
            "truncated: {} workers and {} waiting entries not shown ({} pools left out)",
            total - kept.min(total),
            status.waiting.len(),
            pools_left_out
        ),
        workers: Vec::new(),
    });
    NodeStatus {
        node_id: status.node_id.clone(),
        uptime_ms: status.uptime_ms,
        connections: status.connections,
        draining: status.draining,
        pools: out,
        waiting: Vec::new(),
        counters: status.counters.clone(),
    }
}

#[cfg(test)]
mod tests {
    use lintel_wire::{Counters, WorkerStatus};

    use super::*;

    fn worker(id: u64) -> WorkerStatus {
        WorkerStatus {
            worker_id: id,
            pid: id,
            identity: "w".repeat(200),
            node: None,
            activity_types: vec!["a".repeat(200); 20],
            max_concurrency: 1,
            in_flight: 0,
            draining: false,
        }
    }

    fn report(pools: usize, workers: u64) -> Frame {
        let pools = (0..pools)
            .map(|n| PoolStatus {
                namespace: format!("ns{n}"),
                task_queue: "default".into(),
                channel: format!("aion.dispatch.ns{n}.default"),
                workers: (0..workers).map(worker).collect(),
            })
            .collect();
        Frame::from(StatusReport {
            correlation: 7,
            status: NodeStatus {
                node_id: "n".into(),
                uptime_ms: 1,
                connections: 2,
                draining: false,
                pools,
                waiting: Vec::new(),
                counters: Counters::default(),
            },
        })
    }

    fn encoded_len(frame: &Frame) -> usize {
        let mut buf = BytesMut::new();
        lintel_wire::encode_frame(frame, lintel_wire::PROTOCOL_VERSION, &mut buf, usize::MAX)
            .unwrap();
        buf.len()
    }

    #[test]
    fn a_report_that_fits_is_left_whole() {
        let whole = report(2, 3);
        assert_eq!(fit(whole.clone(), 1 << 20), whole);
    }

    #[test]
    fn a_report_too_large_for_a_frame_keeps_what_fits_and_ends_with_a_marker() {
        let whole = report(8, 40);
        let limit = 64 * 1024;
        assert!(encoded_len(&whole) > limit);
        let Frame::Status(cut) = fit(whole, limit) else {
            panic!("still a status report");
        };
        assert_eq!(cut.correlation, 7);
        assert!(encoded_len(&Frame::Status(cut.clone())) <= limit + 4);
        let marker = cut.status.pools.last().unwrap();
        assert!(marker.namespace.is_empty() && marker.workers.is_empty());
        assert!(
            marker.channel.starts_with("truncated: "),
            "{}",
            marker.channel
        );
        let shown: usize = cut.status.pools.iter().map(|p| p.workers.len()).sum();
        assert!(shown > 0, "some workers still fit");
        assert!(marker
            .channel
            .contains(&format!("{} workers", 8 * 40 - shown)));
    }
}
