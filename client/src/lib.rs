//! `lintel-client`: the worker and producer SDKs of the lintel push-dispatch bus, speaking the
//! wire protocol over TCP, or TLS, like any other client. It needs `lintel-wire`, tokio and rustls.
//!
//! # Layout
//! - [`connect`]: dial, `Hello`/`Welcome` handshake with a timeout, typed [`ConnectError`]s;
//!   [`keepalive`]: pings, their answers and the miss limit, and [`burst`]: the frames one turn
//!   of a connection's loop handles, for the SDKs and the node alike (from `lintel-transport`).
//! - [`nodes`]: the node addresses a client or worker is given, each name resolved to every
//!   address it names, tried in turn.
//! - [`Worker`]: registers, runs pushed requests through a [`Handler`], reconnects with backoff.
//! - [`Dispatch`]: one unit of work, built and checked against the node's limits; its one
//!   result is a [`DispatchResult`].
//! - [`Client`]: a producer multiplexing many dispatches over one connection at a time,
//!   moving between its nodes; a
//!   [`Subscription`] to the node's lifecycle events is a stream it feeds.
//! - [`DispatchOptions`]: routing, waits and version-3 extras (headers...) of one dispatch,
//!   shared with the node's in-process API.
//! - [`trace`]: W3C trace context (`traceparent`, `tracestate`) in a dispatch's headers, and
//!   with the `opentelemetry` feature to and from an OpenTelemetry `Context`.
//! - [`status`]: a node's status as operators read it, the JSON of a status document.
//! - [`tls`]: [`ClientTls`], what a connection to a TLS node trusts and presents, and a TLS
//!   [`Dialer`](transport::Dialer).
//! - [`transport`]: the `lintel-transport` crate, re-exported: a framed TCP connection, a reader
//!   plus a writer task behind a bounded queue, which the node's connections use too;
//!   [`transport::resolve`]: a name to every address it resolves to, again and again.
#![deny(unreachable_pub, rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

mod client;
pub mod connect;
mod dispatch;
mod node_info;
pub mod nodes;
mod options;
pub mod status;
mod subscription;
pub mod tls;
pub mod trace;
mod worker;

pub use lintel_transport as transport;
pub use lintel_transport::{burst, keepalive};

pub use client::{Client, ClientConfig, ClientError, Dispatched, Retried};
pub use connect::{ConnectError, Connection, Handshake};
pub use dispatch::{Dispatch, InvalidDispatch};
/// The one result of a dispatch and what its variants carry, re-exported from the wire: the
/// outcome a handler returns ([`ActivityOutcome`]), the worker's response, the census of a
/// no-worker outcome, a refusal and its reason.
pub use lintel_wire::{
    ActivityOutcome, Census, DispatchResponse, DispatchResult, NoWorkerReason, RefusedDispatch,
    RefusedReason,
};
/// A subscription's topics and the events it yields, re-exported from the wire.
pub use lintel_wire::{Event, EventTopic, NodeEvent};
/// The wire's refusal and its code, re-exported: what a node answers when it refuses a
/// connection, a registration or a subscription.
pub use lintel_wire::{Refusal, RefusalCode};
pub use node_info::{NodeInfo, NodeLimits};
pub use options::{
    DispatchOptions, RetryPolicy, RetryReason, DEFAULT_REPLY_TIMEOUT, MAX_UNSENT_ATTEMPTS,
};
pub use subscription::{Subscription, SubscriptionError};
pub use tls::{ClientTls, PemIdentity, TlsError};
pub use worker::{
    handler_fn, handler_fn_with, Backoff, CancelSignal, ConnectionThread, Extras, Fatal, FnHandler,
    FnHandlerWith, Handler, Heartbeat, HeartbeatError, Request, Worker, WorkerConfig,
    WorkerConfigBuilder, WorkerConfigError, WorkerError, WorkerHandle, WorkerState,
};
