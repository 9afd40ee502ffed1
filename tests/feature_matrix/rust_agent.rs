//! The Rust agent: the matrix's worker and producer written with `lintel_client`, run as this
//! test binary again with [`AGENT_VAR`](crate::sdks::AGENT_VAR) holding its arguments. It
//! prints the contract's lines on stdout and exits 0 (pass, or a worker done), 1 (fail) or 3
//! (unsupported; the Rust SDK lacks nothing here). Every wait is bounded: it exits by itself
//! within 30 s.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use lintel_client::trace::TraceContext;
use lintel_client::{
    handler_fn_with, ActivityOutcome, Client, ClientConfig, Dispatch, DispatchOptions,
    DispatchResult, EventTopic, Extras, NoWorkerReason, NodeEvent, Request, Worker, WorkerConfig,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{signal, SignalKind};

use crate::scenarios::Scenario;

/// How long a worker serves before it leaves by itself; the runner is done with it sooner.
const WORKER_LIFETIME: Duration = Duration::from_secs(25);
/// How long a producer may take to its verdict.
const PRODUCER_BOUND: Duration = Duration::from_secs(25);
/// How long a handler that waits for its cancellation waits at most.
const HANDLER_WAIT: Duration = Duration::from_secs(20);
/// How long a dispatch waits for an eligible worker, where one is expected.
const WAIT_FOR_WORKER: Duration = Duration::from_secs(10);

const NAMESPACE: &str = "matrix";
const ACTIVITY: &str = "run";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// What the agent was told on its command line.
struct Args {
    role: String,
    addr: String,
    scenario: Scenario,
    deployment: Option<String>,
    identity: Option<String>,
}

impl Args {
    fn parse(words: &str) -> Result<Self, String> {
        let mut words = words.split_whitespace();
        let role = words.next().ok_or("no role")?.to_owned();
        let (mut addr, mut scenario, mut deployment, mut identity) = (None, None, None, None);
        while let Some(flag) = words.next() {
            let value = words
                .next()
                .ok_or_else(|| format!("{flag} without a value"))?
                .to_owned();
            match flag {
                "--addr" => addr = Some(value),
                "--scenario" => scenario = Some(value),
                "--deployment" => deployment = Some(value),
                "--identity" => identity = Some(value),
                other => return Err(format!("unknown flag {other}")),
            }
        }
        let scenario = scenario.ok_or("no --scenario")?;
        Ok(Self {
            role,
            addr: addr.ok_or("no --addr")?,
            scenario: Scenario::named(&scenario)
                .ok_or_else(|| format!("no scenario {scenario}"))?,
            deployment,
            identity,
        })
    }
}

/// Prints `line` on stdout at once.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Runs the agent `words` describe and exits the process with its code.
pub async fn main(words: &str) -> ! {
    let code = match Args::parse(words) {
        Ok(args) if args.role == "worker" => worker(args).await,
        Ok(args) if args.role == "producer" => producer(args).await,
        Ok(args) => {
            say(&format!("fail: unknown role {}", args.role));
            1
        }
        Err(why) => {
            say(&format!("fail: {why}"));
            1
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code)
}

/// Registers, says `ready`, serves the scenario's handler; drains on SIGTERM, saying `drained`.
async fn worker(args: Args) -> i32 {
    let mut config = WorkerConfig::builder()
        .node(args.addr.as_str())
        .namespace(NAMESPACE)
        .activity(ACTIVITY)
        .task_queue(args.scenario.name())
        .identity(args.identity.as_deref().unwrap_or("matrix-rust"))
        .concurrency(4);
    if let Some(deployment) = &args.deployment {
        config = config.deployment(deployment.as_str());
    }
    let config = match config.build() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("worker config: {err}");
            return 1;
        }
    };
    // Before `ready`: the runner may send SIGTERM as soon as a handler starts.
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(terminate) => terminate,
        Err(err) => {
            eprintln!("SIGTERM handler: {err}");
            return 1;
        }
    };
    let scenario = args.scenario;
    let deployment = args.deployment.unwrap_or_default();
    let handler = handler_fn_with(move |request: Request, extras: Extras| {
        handle(scenario, deployment.clone(), request, extras)
    });
    let worker = Worker::spawn(config, handler);
    if let Err(err) = worker.wait_registered(WAIT_FOR_WORKER).await {
        eprintln!("not registered: {err}");
        return 1;
    }
    say("ready");
    tokio::select! {
        _ = terminate.recv() => {
            worker.drain(Duration::from_secs(10)).await;
            say("drained");
            0
        }
        () = worker.stopped() => {
            eprintln!("the worker stopped: {:?}", *worker.state().borrow());
            1
        }
        () = tokio::time::sleep(WORKER_LIFETIME) => 0,
    }
}

/// The scenario's handler for one request.
async fn handle(
    scenario: Scenario,
    deployment: String,
    request: Request,
    extras: Extras,
) -> ActivityOutcome {
    match scenario {
        Scenario::WorkerLost | Scenario::Timeout | Scenario::Cancel => {
            say("started");
            until_cancelled(&request).await
        }
        Scenario::Drain => {
            say("started");
            tokio::time::sleep(Duration::from_millis(500)).await;
            ActivityOutcome::Success(request.input)
        }
        Scenario::Headers => {
            let mut lines: Vec<String> = extras
                .headers
                .iter()
                .map(|header| format!("{}={}\n", header.name, header.value))
                .collect();
            lines.sort();
            ActivityOutcome::Success(Bytes::from(lines.concat()))
        }
        Scenario::Deployment => ActivityOutcome::Success(Bytes::from(deployment)),
        Scenario::Heartbeat => {
            for details in ["25", "50", "75"] {
                if let Err(err) = request.heartbeat(details) {
                    eprintln!("heartbeat {details}: {err}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            ActivityOutcome::Success(Bytes::from_static(b"done"))
        }
        Scenario::Echo | Scenario::NoWorker | Scenario::Events => {
            ActivityOutcome::Success(request.input)
        }
    }
}

/// Never answers within [`HANDLER_WAIT`]; says `cancelled` when the request's cancel signal
/// fires first. The runtime drops a cancelled handler, so the signal is watched by a task of
/// its own, which says nothing once the handler answered.
async fn until_cancelled(request: &Request) -> ActivityOutcome {
    let signal = request.cancel_signal();
    let answered = Arc::new(AtomicBool::new(false));
    let watching = Arc::clone(&answered);
    tokio::spawn(async move {
        if tokio::time::timeout(HANDLER_WAIT, signal.cancelled())
            .await
            .is_ok()
            && !watching.load(Ordering::Acquire)
        {
            say("cancelled");
        }
    });
    tokio::time::sleep(HANDLER_WAIT).await;
    answered.store(true, Ordering::Release);
    ActivityOutcome::Failure {
        message: "never cancelled".to_owned(),
        retryable: false,
    }
}

/// Runs the scenario's producer: `pass` and 0, or `fail: REASON` and 1.
async fn producer(args: Args) -> i32 {
    match tokio::time::timeout(PRODUCER_BOUND, produce(&args)).await {
        Ok(Ok(())) => {
            say("pass");
            0
        }
        Ok(Err(why)) => {
            say(&format!("fail: {why}"));
            1
        }
        Err(_) => {
            say(&format!("fail: no verdict within {PRODUCER_BOUND:?}"));
            1
        }
    }
}

async fn produce(args: &Args) -> Result<(), String> {
    let client = Client::connect_nodes([args.addr.as_str()], ClientConfig::default())
        .await
        .map_err(|err| format!("connect: {err}"))?;
    let scenario = args.scenario;
    let dispatch = Dispatch::new(NAMESPACE, ACTIVITY).task_queue(scenario.name());
    let waiting = DispatchOptions::default().wait_for_worker(WAIT_FOR_WORKER);
    let run = |dispatch: Dispatch, options: DispatchOptions| {
        let client = &client;
        async move {
            client
                .dispatch(&dispatch, &options)
                .await
                .map_err(|err| format!("dispatch: {err}"))
        }
    };
    match scenario {
        Scenario::Echo => {
            let result = run(dispatch.input("matrix-echo"), waiting).await?;
            succeeded(result, b"matrix-echo")
        }
        Scenario::NoWorker => match run(dispatch, DispatchOptions::default()).await? {
            DispatchResult::NoWorker(census) if census.reason == NoWorkerReason::PoolEmpty => {
                Ok(())
            }
            other => Err(format!("expected no-worker PoolEmpty, got {other:?}")),
        },
        Scenario::WorkerLost => {
            let options = waiting.reply_timeout(Duration::from_secs(20));
            match run(dispatch.input("matrix-lost"), options).await? {
                DispatchResult::WorkerLost { .. } => Ok(()),
                other => Err(format!("expected worker-lost, got {other:?}")),
            }
        }
        Scenario::Timeout => {
            let options = waiting.reply_timeout(Duration::from_millis(500));
            match run(dispatch.input("matrix-timeout"), options).await? {
                DispatchResult::Timeout { .. } => Ok(()),
                other => Err(format!("expected timeout, got {other:?}")),
            }
        }
        Scenario::Cancel => cancel(&client, dispatch, waiting).await,
        Scenario::Drain => {
            let result = run(dispatch.input("matrix-drain"), waiting).await?;
            succeeded(result, b"matrix-drain")
        }
        Scenario::Headers => {
            let parent = TRACEPARENT
                .parse()
                .map_err(|err| format!("traceparent: {err}"))?;
            let options = waiting
                .header("x-matrix", "one")
                .header("x-tenant", "acme")
                .trace_context(&TraceContext::new(parent));
            let result = run(dispatch.input("matrix-headers"), options).await?;
            let expected = format!("traceparent={TRACEPARENT}\nx-matrix=one\nx-tenant=acme\n");
            succeeded(result, expected.as_bytes())
        }
        Scenario::Deployment => {
            for deployment in ["green", "blue"] {
                let options = waiting.clone().deployment(deployment);
                let result = run(dispatch.clone().input("matrix-deployment"), options).await?;
                succeeded(result, deployment.as_bytes())?;
            }
            Ok(())
        }
        Scenario::Events => events(&client).await,
        Scenario::Heartbeat => {
            let (progress, mut details) = tokio::sync::mpsc::channel(16);
            let options = waiting
                .heartbeat_timeout(Duration::from_secs(2))
                .progress(progress);
            let result = run(dispatch.input("matrix-heartbeat"), options).await?;
            succeeded(result, b"done")?;
            let mut seen = Vec::new();
            while let Ok(detail) = details.try_recv() {
                seen.push(String::from_utf8_lossy(&detail).into_owned());
            }
            if seen == ["25", "50", "75"] {
                Ok(())
            } else {
                Err(format!("expected progress 25, 50, 75, got {seen:?}"))
            }
        }
    }
}

/// Completed with `Success(expected)`, or why not.
fn succeeded(result: DispatchResult, expected: &[u8]) -> Result<(), String> {
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            ActivityOutcome::Success(output) if output.as_ref() == expected => Ok(()),
            outcome => Err(format!(
                "expected Success({:?}), got {outcome:?}",
                String::from_utf8_lossy(expected)
            )),
        },
        other => Err(format!("expected a completion, got {other:?}")),
    }
}

/// Dispatches, says `ready`, and on `go` from stdin drops the dispatch, which cancels it.
async fn cancel(
    client: &Client,
    dispatch: Dispatch,
    waiting: DispatchOptions,
) -> Result<(), String> {
    let options = waiting.reply_timeout(Duration::from_secs(20));
    let dispatch = dispatch.input("matrix-cancel");
    let mut dispatched = Box::pin(client.dispatch(&dispatch, &options));
    say("ready");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    tokio::select! {
        result = &mut dispatched => return Err(format!("the dispatch ended before `go`: {result:?}")),
        line = stdin.next_line() => match line {
            Ok(Some(line)) if line.trim() == "go" => {}
            other => return Err(format!("expected `go` on stdin, read {other:?}")),
        },
    }
    // Dropping the dispatch sends its Cancel; the node answers in order, so once this status
    // arrives it has read the Cancel.
    drop(dispatched);
    client
        .status()
        .await
        .map(drop)
        .map_err(|err| format!("status after the cancel: {err}"))
}

/// Subscribes to worker events, says `ready`, and waits for `matrix-events` to register.
async fn events(client: &Client) -> Result<(), String> {
    let mut events = client
        .subscribe(&[EventTopic::Workers])
        .await
        .map_err(|err| format!("subscribe: {err}"))?;
    say("ready");
    let registered = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    if let NodeEvent::WorkerRegistered(worker) = event.event {
                        if worker.identity == "matrix-events" {
                            return Ok(());
                        }
                    }
                }
                Err(err) => return Err(format!("the subscription ended: {err}")),
            }
        }
        Err("the subscription ended".to_owned())
    };
    tokio::time::timeout(Duration::from_secs(10), registered)
        .await
        .map_err(|_| "no worker-registered event for matrix-events within 10 s".to_owned())?
}
