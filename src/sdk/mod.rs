//! Worker and producer SDKs, speaking the wire protocol over TCP like any other client.
//!
//! - [`connect`]: dial, `Hello`/`Welcome` handshake with a timeout, typed [`ConnectError`]s.
//! - [`Worker`]: registers, runs pushed requests through a [`Handler`], reconnects with backoff.
//! - [`Client`]: a producer multiplexing many dispatches over one connection.

mod client;
pub mod connect;
mod worker;

pub use client::{Client, ClientConfig, ClientError};
pub use connect::{ConnectError, Connection, Handshake};
pub use worker::{
    handler_fn, Backoff, FnHandler, Handler, Worker, WorkerConfig, WorkerError, WorkerHandle,
    WorkerState,
};
