//! The cluster as this node sees it: peers with a live link, the pools each announced, and the
//! relays charged against them.
//!
//! - `view`: one peer's announced pools and the charges against them.
//! - `changes`: a subscription to the mesh's links or members changing.
//! - `mesh`: the set of peers, placement's remote half, membership and status.

mod changes;
mod mesh;
mod view;

pub use changes::{Changes, MeshGone};
pub use mesh::{JoinError, Mesh, Remote, RemoteSlot, MAX_MEMBERS};
pub use view::{PresenceError, MAX_POOLS_PER_PEER};
