//! A producer on the Rust SDK: connects to one of several nodes, dispatches `wc` of each text
//! on its command line, all at once, with options (wait up to 2 s for a free worker, preferring
//! one labelled `fast`, reply within 10 s, the default retry policy), and says what became of
//! each: every outcome a dispatch can end in has its own arm. Exits 0 when every dispatch
//! completed with a result.
//!
//! ```sh
//! cargo run --example producer -- 127.0.0.1:7400,127.0.0.1:7401 "hello world" "two
//! lines"
//! ```
//! With `LINTEL_CLIENT_TLS_CA=ca.crt` set it speaks TLS, trusting that CA.

use std::process::ExitCode;
use std::time::Duration;

use lintel_client::{
    ActivityOutcome, Client, ClientConfig, ClientError, ClientTls, Dispatch, DispatchOptions,
    DispatchResult, Dispatched, RetryPolicy,
};

/// One line saying what became of a dispatch, and whether it gave a result.
fn describe(dispatched: &Dispatched) -> (String, bool) {
    let by = dispatched.served_by.as_deref().unwrap_or("?");
    let (line, done) = outcome(&dispatched.result, by);
    match dispatched.attempts() {
        1 => (line, done),
        attempts => (format!("{line} after {attempts} attempts"), done),
    }
}

/// What `result` says, the worker's node `by` named when it completed.
fn outcome(result: &DispatchResult, by: &str) -> (String, bool) {
    match result {
        DispatchResult::Completed(response) => match &response.outcome {
            ActivityOutcome::Success(bytes) => (
                format!("{} (served by {by})", String::from_utf8_lossy(bytes)),
                true,
            ),
            ActivityOutcome::Failure { message, retryable } => (
                format!("the activity failed (retryable: {retryable}): {message}"),
                false,
            ),
        },
        DispatchResult::NoWorker(census) => (
            format!(
                "no worker ({:?}): {} in the pool, {} at capacity, {} unreachable",
                census.reason,
                census.pool_workers,
                census.at_capacity,
                // Absent from a version-2 node, which does not count them apart.
                census.unreachable.unwrap_or(0)
            ),
            false,
        ),
        DispatchResult::WorkerLost { worker_id } => (
            format!("worker {worker_id} went away before replying; it may have run"),
            false,
        ),
        DispatchResult::Timeout {
            worker_id,
            after_ms,
        } => (
            format!("worker {worker_id} did not reply within {after_ms} ms"),
            false,
        ),
        DispatchResult::HeartbeatTimeout {
            worker_id,
            after_ms,
        } => (
            format!("worker {worker_id} missed its heartbeat; given up after {after_ms} ms"),
            false,
        ),
        DispatchResult::Refused(refused) => (
            format!("refused ({:?}): {}", refused.reason, refused.detail),
            false,
        ),
        DispatchResult::Cancelled => ("cancelled".into(), false),
        DispatchResult::Draining => ("every node tried is draining".into(), false),
        DispatchResult::PeerLost { peer, after_ms } => (
            format!("lost node {peer} after {after_ms} ms; it may have run"),
            false,
        ),
        DispatchResult::ShutDown { after_ms } => (
            format!("the node shut down after {after_ms} ms; it may have run"),
            false,
        ),
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let nodes = args.next().unwrap_or_else(|| "127.0.0.1:7400".into());
    let texts: Vec<String> = args.collect();
    let mut config = ClientConfig::default().name("example-producer");
    if let Some(ca) = std::env::var_os("LINTEL_CLIENT_TLS_CA") {
        config = config.tls(ClientTls::from_files(ca.as_ref(), None)?);
    }
    let client = Client::connect_nodes(nodes.split(','), config).await?;
    println!("connected to node {}", client.node_info().node_id);
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(2))
        .prefer(["fast"])
        .reply_timeout(Duration::from_secs(10))
        .retry(RetryPolicy::default().attempts(3));

    let mut dispatches = tokio::task::JoinSet::new();
    for text in texts {
        let dispatch = Dispatch::new("demo", "wc").input(text.clone());
        let (client, options) = (client.clone(), options.clone());
        dispatches.spawn(async move { (text, client.submit(&dispatch, &options).await) });
    }
    let mut all_done = true;
    while let Some(joined) = dispatches.join_next().await {
        let (text, dispatched) = joined?;
        let (line, done) = match dispatched {
            Ok(dispatched) => describe(&dispatched),
            Err(ClientError::ConnectionLost { may_have_run }) => (
                format!("the connection was lost (may have run: {may_have_run})"),
                false,
            ),
            Err(error) => (format!("not dispatched: {error}"), false),
        };
        all_done &= done;
        println!("{text:?}: {line}");
    }
    Ok(if all_done {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
