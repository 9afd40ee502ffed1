//! The cluster as this node sees it: peers with a live link, the pools each announced, and the
//! relays charged against them.
//!
//! - `view`: one peer's announced pools and the charges against them.
//! - `changes`: a subscription to the mesh's links or members changing.
//! - `members`: the members by node id, the join points and who answered at each.
//! - `dials`: how dialling a join point goes, for status and metrics.
//! - `settings`: each pool's current deployment, last writer wins across the mesh.
//! - `mesh`: the set of peers, which of two links to one peer stays, placement's remote half
//!   and status.

mod changes;
mod dials;
mod members;
mod mesh;
mod settings;
mod view;

pub use changes::{Changes, MeshGone};
pub use members::{Answerer, JoinPoint, LinkTally, MAX_MEMBERS};
pub use mesh::{JoinDial, JoinError, MemberTally, Mesh, Opener, Remote};
pub use settings::{SettingError, Settings, MAX_SETTINGS};
pub use view::{PoolCapacity, PresenceError, MAX_POOLS_PER_PEER};
