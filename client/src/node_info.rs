//! What a producer knows of the node it is connected to, from that node's welcome.

use lintel_wire::Welcome;

/// The node in use as its welcome described it: the negotiated version, its id, this
/// connection's pid, the limits it enforces and what it implements.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeInfo {
    /// The protocol version of the connection: the highest both sides speak.
    pub version: u16,
    /// The node's id, as peers and `lintel status` name it.
    pub node_id: String,
    /// The node's id for this connection, unique for the node's lifetime.
    pub pid: u64,
    /// The limits the node enforces on this connection.
    pub limits: NodeLimits,
    /// What the node implements (`lintel_wire::feature::*` names); empty before version 3.
    pub features: Vec<String>,
}

/// Limits a node enforces on a producer's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeLimits {
    /// Largest frame body the node accepts, in bytes.
    pub max_frame_len: u32,
    /// Most dispatches the connection may have in flight.
    pub max_in_flight: u32,
    /// Longest namespace, task queue, node, activity type or identity, in bytes.
    pub max_name_len: u32,
    /// Most headers on one dispatch; `None` from a node before version 3, which takes none.
    pub max_headers: Option<u32>,
    /// Most bytes of a dispatch's header names and values; `None` before version 3.
    pub max_header_bytes: Option<u32>,
}

impl NodeInfo {
    /// True when the node lists `feature`.
    pub fn implements(&self, feature: &str) -> bool {
        self.features.iter().any(|listed| listed == feature)
    }
}

impl From<&Welcome> for NodeInfo {
    fn from(welcome: &Welcome) -> Self {
        Self {
            version: welcome.version,
            node_id: welcome.node_id.clone(),
            pid: welcome.pid,
            limits: NodeLimits {
                max_frame_len: welcome.limits.max_frame_len,
                max_in_flight: welcome.limits.max_in_flight,
                max_name_len: welcome.limits.max_name_len,
                max_headers: welcome.header_limits.map(|limits| limits.max_headers),
                max_header_bytes: welcome.header_limits.map(|limits| limits.max_header_bytes),
            },
            features: welcome.features.clone(),
        }
    }
}
