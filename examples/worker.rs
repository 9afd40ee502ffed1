//! A worker on the Rust SDK: serves `wc` (the lines, words and bytes of a UTF-8 text) in
//! namespace `demo`, eight at a time, reconnecting whenever the node goes away, until Ctrl-C;
//! then it drains: finishes what it runs and leaves.
//!
//! ```sh
//! cargo run --example worker -- 127.0.0.1:7400
//! ```
//! With `LINTEL_CLIENT_TLS_CA=ca.crt` set it speaks TLS, trusting that CA.

use std::time::Duration;

use lintel_client::{handler_fn, ActivityOutcome, ClientTls, Request, Worker, WorkerConfig};

/// The activity: counts a text's lines, words and bytes, answering them as JSON. Input that is
/// not UTF-8 fails for good: another attempt cannot help.
fn wc(request: &Request) -> ActivityOutcome {
    let Ok(text) = std::str::from_utf8(&request.input) else {
        return ActivityOutcome::Failure {
            message: "the input is not UTF-8 text".into(),
            retryable: false,
        };
    };
    let counts = format!(
        r#"{{"lines":{},"words":{},"bytes":{}}}"#,
        text.lines().count(),
        text.split_whitespace().count(),
        text.len()
    );
    ActivityOutcome::Success(counts.into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7400".into());
    let mut config = WorkerConfig::builder()
        .node(addr.clone())
        .namespace("demo")
        .activity("wc")
        .identity(format!("wc-example-{}", std::process::id()))
        .concurrency(8)
        .build()?;
    if let Some(ca) = std::env::var_os("LINTEL_CLIENT_TLS_CA") {
        // Read again at every reconnect: a rotated CA file is taken up without a restart.
        config.tls = Some(ClientTls::from_files(ca.as_ref(), None)?);
    }
    let worker = Worker::spawn(
        config,
        handler_fn(|request: Request| std::future::ready(wc(&request))),
    );
    let worker_id = worker.wait_registered(Duration::from_secs(30)).await?;
    println!("registered as worker {worker_id} at {addr}; Ctrl-C drains");
    tokio::signal::ctrl_c().await?;
    println!("draining");
    worker.drain(Duration::from_secs(10)).await;
    println!("drained");
    Ok(())
}
