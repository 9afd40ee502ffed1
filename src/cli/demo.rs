//! `lintel demo`: a node, echo workers and a producer on loopback, with no setup.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use lintel_client::{Client, ClientConfig, DispatchOptions, Worker, WorkerConfig};
use lintel_wire::Register;

use super::exit::fail;
use super::loadgen::{self, Load};
use crate::activities::BuiltIn;
use crate::config::NodeConfig;
use crate::node::Node;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Echo workers to start.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Dispatches to push.
    #[arg(long, default_value_t = 5_000)]
    dispatches: u64,
    /// Dispatches in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Input bytes per dispatch.
    #[arg(long, default_value_t = 64)]
    payload: usize,
}

pub(super) async fn run(args: Args) -> ExitCode {
    let config = NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        node_id: "demo".into(),
        ..NodeConfig::default()
    };
    let listener = match crate::listener::bind(config.listen, config.backlog) {
        Ok(listener) => listener,
        Err(err) => return fail(format!("cannot bind a loopback port: {err}")),
    };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(err) => return fail(err),
    };
    let node = match Node::new(config) {
        Ok(node) => std::sync::Arc::new(node),
        Err(err) => return fail(err),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = std::sync::Arc::clone(&node);
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        serving.serve(listener, shutdown).await
    });
    println!("node listening on {addr}");

    let mut workers = Vec::new();
    for index in 0..args.workers.max(1) {
        let registration = Register {
            namespaces: vec!["demo".into()],
            task_queue: String::new(),
            node: None,
            activity_types: vec!["echo".into()],
            identity: format!("demo-worker-{index}"),
            max_concurrency: 64,
        };
        workers.push(Worker::spawn(
            WorkerConfig::new(addr.to_string(), registration),
            BuiltIn,
        ));
    }
    for worker in &workers {
        if let Err(err) = worker.wait_registered(Duration::from_secs(10)).await {
            return fail(format!("a demo worker did not register: {err}"));
        }
    }
    println!("{} echo workers registered", workers.len());

    let client = match Client::connect(addr, ClientConfig::default()).await {
        Ok(client) => client,
        Err(err) => return fail(format!("producer cannot connect: {err}")),
    };
    let load = Load {
        namespace: "demo".into(),
        activity: "echo".into(),
        payload: args.payload,
        concurrency: args.concurrency,
        count: Some(args.dispatches),
        duration: None,
        options: DispatchOptions::default().wait_for_worker(Duration::from_secs(5)),
        progress: false,
    };
    println!(
        "pushing {} dispatches of {} B, {} in flight",
        args.dispatches, args.payload, args.concurrency
    );
    let report = match loadgen::run(&client, &load).await {
        Ok(report) => report,
        Err(err) => {
            eprintln!("cannot record latencies: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{} dispatches in {:.2}s: {:.0}/s, latency p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us",
        report.dispatches,
        report.elapsed_s,
        report.rps,
        report.p50_us,
        report.p99_us,
        report.p999_us
    );
    for (class, count) in &report.outcomes {
        println!("  {class}: {count}");
    }

    client.close().await;
    for worker in &workers {
        worker.drain(Duration::from_secs(5)).await;
    }
    let _ = stop.send(());
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return fail(err),
        Err(err) => return fail(err),
    }
    if report.failures() > 0 || report.dispatches != args.dispatches {
        return fail(format!(
            "{} of {} dispatches did not complete",
            args.dispatches - report.outcomes.get("completed").copied().unwrap_or(0),
            args.dispatches
        ));
    }
    println!("demo ok");
    ExitCode::SUCCESS
}
