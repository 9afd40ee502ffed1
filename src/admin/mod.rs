//! The admin HTTP listener: `/metrics` (Prometheus text), `/health`, `/ready`, `/linked`,
//! `/status`, `/window` (the last minutes, second by second, and each pool's last seconds),
//! `/events` (the node's lifecycle events as Server-Sent Events), the console at `/` and
//! `/endpoints` listing them.
//!
//! Off unless `admin_listen` is set. With `admin_token` set, every request but `/health` and
//! the console's own files (which hold no data) must carry `Authorization: Bearer` with it.
//! Metrics are read from the node's own state at each scrape (pools, counters, peers), so
//! nothing is kept twice; the dispatch latency histogram is the one the dispatcher records
//! into. Label sets are bounded by real pools and peers, and by the join points the config
//! names.
//!
//! # Layout
//! - `routes`: the one table of routes, which both answers requests and writes `/endpoints`;
//!   the accept loop and the bearer-token check.
//! - `reply`: the response body type and a plain reply.
//! - `health`: `/ready` and `/linked`, why the node should get no traffic yet.
//! - `status`: `/status`, the status with what only the admin listener knows.
//! - `metrics`: `/metrics`.
//! - `events`: `/events`.
//! - `pools`: `GET /pools` and `POST /pools`, the pools' current deployments.

mod events;
mod health;
mod metrics;
mod pools;
mod reply;
mod routes;
mod status;

pub(crate) use routes::serve;
