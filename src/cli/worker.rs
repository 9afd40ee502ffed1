//! `lintel worker`: a worker running the built-in activities until interrupted, then draining.
//!
//! Each registration prints `registered as worker ...` on stderr; scripts (and the vs_nats
//! harness) wait for that line before sending work.

use std::process::ExitCode;
use std::time::Duration;

use lintel_client::{Worker, WorkerConfig, WorkerState};
use lintel_wire::Register;

use super::exit::fail;
use super::signal::shutdown_signal;
use super::tls::ClientTlsArgs;
use lintel::activities::{BuiltIn, BUILT_IN};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Node address.
    #[arg(long, default_value = "127.0.0.1:7400", env = "LINTEL_CONNECT")]
    connect: String,
    /// Namespace to serve (repeat for several).
    #[arg(long = "namespace", required = true)]
    namespaces: Vec<String>,
    /// Task queue; empty means `default`.
    #[arg(long, default_value = "", hide_default_value = true)]
    task_queue: String,
    /// Activity type to serve: `echo` or `sleep` (repeat for several).
    #[arg(long = "activity", required = true)]
    activities: Vec<String>,
    /// The node this worker runs on, for pinned dispatches.
    #[arg(long)]
    node: Option<String>,
    /// Most requests in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: u32,
    /// Identity shown in status.
    #[arg(long)]
    identity: Option<String>,
    /// Auth token for nodes that require one.
    #[arg(long, env = "LINTEL_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
    /// How long a drain on Ctrl-C may take, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    drain_ms: u64,
    #[command(flatten)]
    tls: ClientTlsArgs,
}

pub(super) async fn run(args: Args) -> ExitCode {
    if let Some(unknown) = args
        .activities
        .iter()
        .find(|a| !BUILT_IN.contains(&a.as_str()))
    {
        return fail(format!(
            "unknown activity `{unknown}`; built in: {}",
            BUILT_IN.join(", ")
        ));
    }
    let identity = args
        .identity
        .unwrap_or_else(|| format!("lintel-worker-{}", std::process::id()));
    let registration = Register {
        namespaces: args.namespaces,
        task_queue: args.task_queue,
        node: args.node,
        activity_types: args.activities,
        identity,
        max_concurrency: args.concurrency,
    };
    let mut config = WorkerConfig::new(args.connect.clone(), registration);
    config.auth_token = args.auth_token;
    config.tls = match args.tls.load(&args.connect) {
        Ok(tls) => tls,
        Err(err) => return fail(err),
    };
    let handle = Worker::spawn(config, BuiltIn);
    let mut state = handle.state();
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
            last = Some(now.clone());
            match now {
                WorkerState::Registered { worker_id, pid } => {
                    eprintln!(
                        "registered as worker {worker_id} (connection {pid}) on {}",
                        args.connect
                    )
                }
                WorkerState::Connecting => eprintln!("connecting to {}", args.connect),
                WorkerState::Draining { .. } => eprintln!("draining"),
                WorkerState::Refused(refusal) => {
                    return Some(format!("refused ({:?}): {}", refusal.code, refusal.reason))
                }
                WorkerState::Stopped => return None,
            }
            if state.changed().await.is_err() {
                return None;
            }
        }
    };
    tokio::select! {
        refused = watch_state => match refused {
            Some(reason) => fail(reason),
            None => ExitCode::SUCCESS,
        },
        () = shutdown_signal() => {
            eprintln!("draining: finishing in-flight work");
            handle.drain(Duration::from_millis(args.drain_ms)).await;
            ExitCode::SUCCESS
        }
    }
}
