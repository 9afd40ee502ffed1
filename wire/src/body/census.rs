//! A version-2 [`Census`]: how a status report (and a no-worker outcome on a version-1 or
//! version-2 connection) carries the one [`Census`](crate::message::Census).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::NoWorkerReason;

/// The census of version 1 and 2: the excluded workers counted as one, and no count of
/// deployment workers apart from compatible ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Census {
    pub reason: NoWorkerReason,
    pub pool_workers: u32,
    pub serving_activity: u32,
    pub compatible_workers: u32,
    pub at_capacity: u32,
    pub excluded: u32,
    pub last_departure_ms_ago: Option<u64>,
}

impl From<&crate::message::Census> for Census {
    /// The census as version 1 and 2 count: compatible workers are those of the required
    /// deployment, every exclusion is one, and a reason of version 3 is the nearest earlier one.
    fn from(census: &crate::message::Census) -> Self {
        Census {
            reason: census.reason.for_version_2(),
            pool_workers: census.pool_workers,
            serving_activity: census.serving_activity,
            compatible_workers: census.deployment_workers,
            at_capacity: census.at_capacity,
            excluded: census.excluded(),
            last_departure_ms_ago: census.last_departure_ms_ago,
        }
    }
}

impl From<Census> for crate::message::Census {
    /// A version-2 census read as version 3 counts: its excluded workers as draining, and no
    /// probation or unreachable count (absent).
    fn from(census: Census) -> Self {
        crate::message::Census {
            reason: census.reason,
            pool_workers: census.pool_workers,
            serving_activity: census.serving_activity,
            compatible_workers: census.compatible_workers,
            deployment_workers: census.compatible_workers,
            at_capacity: census.at_capacity,
            draining: census.excluded,
            probation: None,
            unreachable: None,
            last_departure_ms_ago: census.last_departure_ms_ago,
        }
    }
}

/// Writes a [`crate::message::Census`] as a version-2 census, for `#[serde(serialize_with)]`.
pub(crate) fn write_version_2_census<S: Serializer>(
    census: &crate::message::Census,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    Census::from(census).serialize(serializer)
}

/// Reads a version-2 census as a [`crate::message::Census`], for
/// `#[serde(deserialize_with)]`.
pub(crate) fn read_version_2_census<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<crate::message::Census, D::Error> {
    Census::deserialize(deserializer).map(crate::message::Census::from)
}
