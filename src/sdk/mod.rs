//! Worker and producer SDKs, speaking the wire protocol over TCP like any other client.
//!
//! - [`connect`]: dial, `Hello`/`Welcome` handshake with a timeout, typed [`ConnectError`]s.
//! - [`Client`]: a producer multiplexing many dispatches over one connection.

mod client;
pub mod connect;

pub use client::{Client, ClientConfig, ClientError};
pub use connect::{ConnectError, Connection, Handshake};
