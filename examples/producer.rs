//! A producer on the Rust SDK: dispatches `wc` of each text on its command line, all at once
//! over one connection, with options (wait up to 2 s for a free worker, preferring one
//! labelled `fast`, reply within 10 s), and says what became of each: every outcome a dispatch
//! can end in has its own arm. Exits 0 when every dispatch completed with a result.
//!
//! ```sh
//! cargo run --example producer -- 127.0.0.1:7400 "hello world" "two
//! lines"
//! ```
//! With `LINTEL_CLIENT_TLS_CA=ca.crt` set it speaks TLS, trusting that CA.

use std::process::ExitCode;
use std::time::Duration;

use lintel_client::{Client, ClientConfig, ClientTls, DispatchOptions, Dispatched};
use lintel_wire::{ActivityOutcome, DispatchRequest, DispatchResult};

/// One line saying what became of a dispatch, and whether it gave a result.
fn describe(dispatched: &Dispatched) -> (String, bool) {
    let by = dispatched.served_by.as_deref().unwrap_or("?");
    match &dispatched.result {
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
        DispatchResult::Draining => ("the node is draining; try another".into(), false),
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
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7400".into());
    let texts: Vec<String> = args.collect();
    let mut config = ClientConfig::default();
    if let Some(ca) = std::env::var_os("LINTEL_CLIENT_TLS_CA") {
        config.tls = Some(ClientTls::from_files(ca.as_ref(), None)?);
    }
    let client = Client::connect(addr.as_str(), config).await?;
    let options = DispatchOptions::default()
        .wait_for_worker(Duration::from_secs(2))
        .prefer(["fast"])
        .reply_timeout(Duration::from_secs(10));

    let mut dispatches = tokio::task::JoinSet::new();
    for (at, text) in texts.into_iter().enumerate() {
        let request = DispatchRequest {
            namespace: "demo".into(),
            task_queue: String::new(),
            activity_type: "wc".into(),
            node: None,
            workflow_id: format!("example-{}", std::process::id()),
            ordinal: at as u64,
            run_id: None,
            attempt: 1,
            input: text.clone().into(),
            deadline_unix_ms: None,
        };
        let (client, options) = (client.clone(), options.clone());
        dispatches.spawn(async move { (text, client.dispatch_traced(request, &options).await) });
    }
    let mut all_done = true;
    while let Some(joined) = dispatches.join_next().await {
        let (text, dispatched) = joined?;
        // An error here is the connection, not the dispatch: the node went away.
        let (line, done) = describe(&dispatched?);
        all_done &= done;
        println!("{text:?}: {line}");
    }
    Ok(if all_done {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
