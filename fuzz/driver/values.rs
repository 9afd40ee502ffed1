//! Structured values the frame-body targets build: the wire types do not implement
//! `Arbitrary`, so these mirror a request, a routing and a member list. The crate including a
//! frame-body driver declares this module at its root.

use arbitrary::Arbitrary;
use bytes::Bytes;
use lintel_wire::{DispatchRequest, NodeRouting, PeerAddress};

/// Picks one of `values` by `index`, wrapping.
pub(crate) fn pick<T: Copy>(values: &[T], index: u8) -> T {
    values[usize::from(index) % values.len()]
}

pub(crate) fn peers(peers: Vec<(String, String)>) -> Vec<PeerAddress> {
    peers
        .into_iter()
        .map(|(node_id, address)| PeerAddress { node_id, address })
        .collect()
}

#[derive(Debug, Arbitrary)]
pub(crate) struct Request {
    namespace: String,
    task_queue: String,
    activity_type: String,
    node: Option<String>,
    workflow_id: String,
    ordinal: u64,
    run_id: Option<String>,
    attempt: u32,
    input: Vec<u8>,
    deadline_unix_ms: Option<u64>,
}

impl Request {
    pub(crate) fn into_wire(self) -> DispatchRequest {
        DispatchRequest {
            namespace: self.namespace,
            task_queue: self.task_queue,
            activity_type: self.activity_type,
            node: self.node,
            workflow_id: self.workflow_id,
            ordinal: self.ordinal,
            run_id: self.run_id,
            attempt: self.attempt,
            input: Bytes::from(self.input),
            deadline_unix_ms: self.deadline_unix_ms,
        }
    }
}

#[derive(Debug, Arbitrary)]
pub(crate) enum Routing {
    Any,
    Pin(String),
    Prefer(Vec<String>),
    Require(Vec<String>),
}

impl Routing {
    pub(crate) fn into_wire(self) -> NodeRouting {
        match self {
            Routing::Any => NodeRouting::Any,
            Routing::Pin(node) => NodeRouting::Pin(node),
            Routing::Prefer(nodes) => NodeRouting::Prefer(nodes),
            Routing::Require(nodes) => NodeRouting::Require(nodes),
        }
    }
}
