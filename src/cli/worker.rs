//! `lintel worker`: a worker running the built-in activities until interrupted, then draining.
//!
//! It logs through `tracing` like every long-running command: each registration is a
//! `registered as worker ...` line, which scripts (and the vs_nats harness) wait for before
//! sending work. While the node cannot be reached the worker retries, saying why; a failure
//! retrying cannot fix (a final refusal, TLS, another protocol) ends it with exit code 1.

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lintel::activities::{BuiltIn, BUILT_IN};
use lintel_client::{
    ActivityOutcome, ConnectionThread, Extras, Handler, Request, Worker, WorkerConfig, WorkerState,
};

use super::connect::NodeArgs;
use super::signal::{count, seconds, Stops, INTERRUPTED};

#[derive(Debug, clap::Args)]
#[command(override_usage = "lintel worker [OPTIONS] --namespace <NAMESPACE> --activity <ACTIVITY>")]
pub(super) struct Args {
    #[command(flatten)]
    target: NodeArgs,
    /// Namespace to serve (repeat for several).
    #[arg(long = "namespace", value_name = "NAMESPACE", required = true)]
    namespaces: Vec<String>,
    /// Task queue; empty means `default`.
    #[arg(long, default_value = "", hide_default_value = true)]
    task_queue: String,
    /// Activity type to serve: `echo`, `sleep` or `headers` (repeat for several).
    #[arg(long = "activity", value_name = "ACTIVITY", required = true)]
    activities: Vec<String>,
    /// This worker's placement label, which dispatches may pin (`dispatch --label`), prefer or
    /// require; not a node id.
    #[arg(long)]
    label: Option<String>,
    /// Old name of --label.
    #[arg(long = "node", hide = true, conflicts_with = "label")]
    node: Option<String>,
    /// Most requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: u32,
    /// Identity shown in status.
    #[arg(long)]
    identity: Option<String>,
    /// The deployment (version of this worker's code) it registers with: only it serves
    /// dispatches that require this deployment, or whose pool's current deployment it is.
    #[arg(long)]
    deployment: Option<String>,
    /// This instance's id: a later worker with the same deployment and instance id on the
    /// node replaces this one.
    #[arg(long)]
    instance_id: Option<String>,
    /// How long a drain on Ctrl-C may take, in milliseconds; a second Ctrl-C ends it at once.
    #[arg(long, default_value_t = 10_000)]
    drain_ms: u64,
}

pub(super) async fn run(args: Args) -> ExitCode {
    let mut stops = Stops::new();
    if let Some(unknown) = args
        .activities
        .iter()
        .find(|a| !BUILT_IN.contains(&a.as_str()))
    {
        return stop(format!(
            "unknown activity `{unknown}`; built in: {}",
            BUILT_IN.join(", ")
        ));
    }
    if args.node.is_some() {
        tracing::warn!("--node is deprecated: it sets the worker's placement label; use --label");
    }
    let identity = args
        .identity
        .unwrap_or_else(|| format!("lintel-worker-{}", std::process::id()));
    let mut builder = WorkerConfig::builder()
        .nodes(args.target.nodes())
        .namespaces(args.namespaces)
        .task_queue(args.task_queue)
        .activities(args.activities)
        .identity(identity)
        .concurrency(args.concurrency)
        // The built-in activities never block their thread: the connection can share it.
        .connection_thread(ConnectionThread::Shared);
    if let Some(label) = args.label.or(args.node) {
        builder = builder.label(label);
    }
    if let Some(deployment) = args.deployment {
        builder = builder.deployment(deployment);
    }
    if let Some(instance) = args.instance_id {
        builder = builder.instance_id(instance);
    }
    let mut config = match builder.build() {
        Ok(config) => config,
        Err(err) => return stop(err),
    };
    config.auth_token = args.target.auth_token.clone();
    config.tls = match args.target.tls.load() {
        Ok(tls) => tls,
        Err(err) => return stop(err),
    };
    let running = Arc::new(AtomicUsize::new(0));
    let handle = Worker::spawn(
        config,
        Counted {
            running: Arc::clone(&running),
        },
    );
    let in_flight = || count(running.load(Ordering::Relaxed), "request", "requests");
    let mut state = handle.state();
    let connect = args.target.connect.as_str();
    let watch_state = async {
        let mut last = None;
        loop {
            let now = state.borrow_and_update().clone();
            if last.as_ref() == Some(&now) {
                if state.changed().await.is_err() {
                    return None;
                }
                continue;
            }
            let first = last.is_none();
            last = Some(now.clone());
            match now {
                WorkerState::Registered { worker_id, pid } => {
                    tracing::info!(
                        "registered as worker {worker_id} (connection {pid}) on {connect}"
                    );
                }
                WorkerState::Connecting if first => tracing::info!("connecting to {connect}"),
                WorkerState::Connecting => {}
                WorkerState::Draining { .. } => tracing::info!("draining"),
                WorkerState::Refused(refusal) => {
                    return Some(format!(
                        "the node at {connect} refused this worker ({:?}): {}",
                        refusal.code, refusal.reason
                    ))
                }
                WorkerState::Failed(fatal) => {
                    return Some(args.target.cannot_connect(fatal.error()))
                }
                WorkerState::Stopped => return None,
                _ => {}
            }
            if state.changed().await.is_err() {
                return None;
            }
        }
    };
    tokio::pin!(watch_state);
    tokio::select! {
        stopped = &mut watch_state => return match stopped {
            Some(reason) => stop(reason),
            None => ExitCode::SUCCESS,
        },
        () = stops.next() => {}
    }
    let grace = Duration::from_millis(args.drain_ms);
    tracing::info!(
        "interrupted: waiting up to {} (--drain-ms) for {} in flight, then leaving \
         (Ctrl-C again to leave at once)",
        seconds(grace),
        in_flight()
    );
    tokio::select! {
        () = handle.drain(grace) => ExitCode::SUCCESS,
        () = stops.next() => {
            tracing::warn!("interrupted again: leaving at once, abandoning {} in flight", in_flight());
            ExitCode::from(INTERRUPTED)
        }
    }
}

/// The built-in activities, counting the requests running: what a drain waits for.
struct Counted {
    running: Arc<AtomicUsize>,
}

/// One running request, counted until it ends or is dropped (cancelled, aborted).
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(running: &Arc<AtomicUsize>) -> Self {
        running.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(running))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Handler for Counted {
    fn handle(&self, request: Request) -> impl Future<Output = ActivityOutcome> + Send {
        self.handle_with(request, Extras::default())
    }

    fn handle_with(
        &self,
        request: Request,
        extras: Extras,
    ) -> impl Future<Output = ActivityOutcome> + Send {
        let running = Running::start(&self.running);
        let outcome = BuiltIn.handle_with(request, extras);
        async move {
            let outcome = outcome.await;
            drop(running);
            outcome
        }
    }

    fn runs_briefly(&self) -> bool {
        BuiltIn.runs_briefly()
    }
}

/// Logs why the worker stops, as an error line like its other lines, and fails.
fn stop(reason: impl std::fmt::Display) -> ExitCode {
    tracing::error!("{reason}");
    ExitCode::FAILURE
}
