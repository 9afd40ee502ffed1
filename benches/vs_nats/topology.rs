//! How many middles a request crosses on its way to a worker: one (the default grid), or two
//! (`--cross-node`), the cost of reaching a worker that is connected to another node.
//!
//! Cross-node, each system puts its producer on one middle and its workers on another:
//! - lintel: two `lintel serve` processes, node `a` and node `b`, each given the other with
//!   `--peer`; the producer connects to `a`, the workers register on `b`, and `a` relays every
//!   dispatch to `b` over the peer link.
//! - NATS: two `nats-server` processes joined by a route; the requester connects to server 1,
//!   the responders to server 2.
//! - the floor: a three-hop relay, client -> relay 1 -> relay 2 -> echo and back, each relay a
//!   process of its own, framed as the two-hop floor is.
//!
//! Every system waits, bounded, until a request crosses both middles before it is measured:
//! presence and interest take a moment to travel between middles.
//!
//! Cross-node is a flag of its own rather than more cells of the default grid: it needs a
//! routed pair of nats-servers where the grid shares one plain server, its question (what the
//! second middle costs) is answered at 1 and at 256 in flight, and its results go to a file of
//! their own, `cross-node.json`, so neither run replaces the other's.

use serde_json::Value;

use crate::kind::Kind;

/// How many middles stand between producer and workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// producer -> middle -> worker.
    OneMiddle,
    /// producer -> middle A -> middle B -> worker.
    CrossNode,
}

impl Topology {
    pub fn key(self) -> &'static str {
        match self {
            Topology::OneMiddle => "one-middle",
            Topology::CrossNode => "cross-node",
        }
    }

    /// What the topology means, for the table and the JSON.
    pub fn label(self) -> &'static str {
        match self {
            Topology::OneMiddle => "one middle: producer -> middle -> worker",
            Topology::CrossNode => {
                "cross-node: producer -> middle A -> middle B -> worker; lintel two peered nodes, \
                 NATS two routed servers, the floor a three-hop relay"
            }
        }
    }

    /// Middles in a row between producer and workers.
    pub fn middles(self) -> usize {
        match self {
            Topology::OneMiddle => 1,
            Topology::CrossNode => 2,
        }
    }

    /// The processes whose CPU time is reported as `kind`'s middle, cross-node.
    fn cross_node_middles(kind: Kind) -> &'static str {
        match kind {
            Kind::Lintel | Kind::LintelTls => {
                "two `lintel serve` processes peered with --peer: node a (the producer's) and \
                 node b (the workers'); CPU time of both"
            }
            Kind::Nats => {
                "two nats-server processes joined by a route: server 1 (the requester's) and \
                 server 2 (the responders'); CPU time of both"
            }
            Kind::Floor => {
                "two floor relay processes in a row (vs_nats peers): relay 1 (the client's) and \
                 relay 2 (the echo servers'); CPU time of both"
            }
        }
    }

    /// Writes the topology into a results document from [`crate::report::to_json`]; cross-node,
    /// each system's `processes.<kind>.middle` names both middles.
    pub fn annotate(self, doc: &mut Value) {
        doc["topology"] = Value::from(self.key());
        doc["topology_label"] = Value::from(self.label());
        if self == Topology::CrossNode {
            for kind in Kind::EVERY {
                let processes = &mut doc["processes"][kind.key()];
                if processes.is_object() {
                    processes["middle"] = Value::from(Self::cross_node_middles(kind));
                }
            }
        }
    }
}
