//! Version 4: a dispatch's progress while it runs.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::bounded::{self, BoundedBytes, Details};

/// Version 4: the dispatch of `correlation` still runs, with `details` for the producer. A
/// worker sends it for a push (its heartbeat), a node passes it to a producer that asked for
/// it, a serving node to the origin of a relay; `correlation` is the receiver's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub correlation: u64,
    /// Opaque to the node; at most [`Progress::MAX_DETAILS`] bytes.
    #[serde(with = "BoundedBytes::<Details>")]
    pub details: Bytes,
}

impl Progress {
    /// Most bytes of details one progress carries.
    pub const MAX_DETAILS: usize = bounded::MAX_DETAILS;
}
