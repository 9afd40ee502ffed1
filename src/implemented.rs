//! What this node implements of the features version 4 and later add, in one place: the
//! welcome and the peer hello list it, and every check that refuses a frame or a critical
//! extension as `Unsupported` reads it.

use lintel_wire::FeatureSet;

/// Every feature of version 4: `role-not-granted`, `worker-resume`, `progress` and
/// `heartbeat-timeout`. A frame or a critical extension of a feature not here is refused
/// `Unsupported`, naming it.
pub(crate) const IMPLEMENTED: FeatureSet = FeatureSet::ROLE_NOT_GRANTED
    .with(FeatureSet::WORKER_RESUME)
    .with(FeatureSet::PROGRESS)
    .with(FeatureSet::HEARTBEAT_TIMEOUT);
