//! The serde bodies of the kinds that are not their message's own: an earlier version's form
//! of a message a later version grew (`Welcome`, `Register`, `PeerHello`, `Presence`, and a
//! status report's `Census`), each with the translations from and to the one message, and
//! the message's choice of kind for a connection's version ([`Chooses`](crate::frame)).
//! Every type here is named as PROTOCOL.md names it.

mod census;
mod peer_hello;
mod presence;
mod register;
mod welcome;

pub use census::Census;
pub(crate) use census::{read_version_2_census, write_version_2_census};
pub use peer_hello::PeerHello;
pub use presence::{PoolPresence, Presence, PresenceGroup};
pub use register::Register;
pub use welcome::{Welcome, Welcome3};
