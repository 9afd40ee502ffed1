//! The node's lifecycle events: workers registering, excluded, restored and departing; peer
//! links up and down.
//!
//! - `ring`: [`Events`], where the registry and the mesh publish, one bounded ring read by
//!   every [`Subscriber`] at its own pace.
//! - `json`: an event as the lines `lintel watch` prints and `/events` serves.

mod json;
mod ring;

pub use json::lines;
pub use ring::{topic_of, Delivery, Events, Published, Subscriber, EVENT_RING};
