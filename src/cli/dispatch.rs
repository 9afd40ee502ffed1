//! `lintel dispatch`: submit one request, print its result bytes, exit by outcome class.

use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use lintel_client::{Client, ConnectError, DispatchOptions};
use lintel_wire::{ActivityOutcome, DispatchRequest, DispatchResult, RefusalCode};

use super::connect::NodeArgs;
use super::exit::{fail, DRAINING};
use super::extras::{self, FairnessArgs};
use lintel::dispatch::outcome;

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "lintel dispatch [OPTIONS] --namespace <NAMESPACE> --activity <ACTIVITY> \
                      --input <INPUT>"
)]
pub(super) struct Args {
    #[command(flatten)]
    target: NodeArgs,
    /// Namespace to dispatch in.
    #[arg(long)]
    namespace: String,
    /// Task queue; empty means `default`.
    #[arg(long, default_value = "", hide_default_value = true)]
    task_queue: String,
    /// Activity type, e.g. `echo`, `sleep` or `headers`.
    #[arg(long)]
    activity: String,
    /// Only workers with this placement label (`worker --label`), on any node.
    #[arg(long, conflicts_with_all = ["prefer", "require", "node"])]
    label: Option<String>,
    /// Old name of --label.
    #[arg(long, hide = true, conflicts_with_all = ["prefer", "require"])]
    node: Option<String>,
    /// Try workers with these labels first, in order, then any worker (comma-separated).
    #[arg(
        long,
        value_name = "LABELS",
        value_delimiter = ',',
        conflicts_with = "require"
    )]
    prefer: Vec<String>,
    /// Only workers with one of these labels (comma-separated).
    #[arg(long, value_name = "LABELS", value_delimiter = ',')]
    require: Vec<String>,
    /// Print on stderr the node whose worker served the dispatch, or that decided its
    /// outcome when no worker's reply came.
    #[arg(long)]
    verbose: bool,
    /// How long to wait for a worker; without it, no eligible worker fails at once.
    #[arg(long)]
    wait_ms: Option<u64>,
    /// How long to wait for the reply [node default: 30000].
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// The request's input, sent as UTF-8 bytes.
    #[arg(long)]
    input: String,
    #[command(flatten)]
    fairness: FairnessArgs,
    /// A header the worker reads beside the request, e.g. `traceparent=00-...`; repeat for
    /// more (in order; a name may repeat).
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = extras::header)]
    headers: Vec<(String, String)>,
    /// Only a worker registered with this deployment may run it (needs a version-3 node).
    #[arg(long)]
    deployment: Option<String>,
}

/// Exit codes per outcome class; 0 is a successful completion.
fn exit_code(result: &DispatchResult) -> u8 {
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            ActivityOutcome::Success(_) => 0,
            ActivityOutcome::Failure { .. } => 10,
        },
        DispatchResult::NoWorker(_) | DispatchResult::NoWorker3(_) => 11,
        DispatchResult::WorkerLost { .. } => 12,
        DispatchResult::Timeout { .. } => 13,
        DispatchResult::Refused(_) => 14,
        DispatchResult::Cancelled => 15,
        DispatchResult::Draining => DRAINING,
        DispatchResult::PeerLost { .. } => 17,
        DispatchResult::ShutDown { .. } => 18,
    }
}

pub(super) async fn run(args: Args) -> ExitCode {
    let config = match args.target.config("lintel-dispatch") {
        Ok(config) => config,
        Err(err) => return fail(err),
    };
    let client = match Client::connect(args.target.connect.as_str(), config).await {
        Ok(client) => client,
        // A refusal at hello for draining is the draining outcome too.
        Err(ConnectError::Refused(refusal)) if refusal.code == RefusalCode::Draining => {
            eprintln!("draining: {}", refusal.reason);
            return ExitCode::from(DRAINING);
        }
        Err(err) => return fail(args.target.cannot_connect(&err)),
    };
    let request = DispatchRequest {
        namespace: args.namespace,
        task_queue: args.task_queue,
        activity_type: args.activity,
        node: None,
        workflow_id: format!("cli-{}", std::process::id()),
        ordinal: 1,
        run_id: None,
        attempt: 1,
        input: Bytes::from(args.input),
        deadline_unix_ms: None,
    };
    let mut options = DispatchOptions {
        wait_for_worker: args.wait_ms.map(Duration::from_millis),
        reply_timeout: args.timeout_ms.map(Duration::from_millis),
        ..DispatchOptions::default()
    };
    options = args.fairness.apply(options);
    for (name, value) in args.headers {
        options = options.header(name, value);
    }
    if args.node.is_some() {
        tracing::warn!("--node is deprecated: it matches a worker's placement label; use --label");
    }
    if let Some(label) = args.label.or(args.node) {
        options = options.pin(label);
    } else if !args.prefer.is_empty() {
        options = options.prefer(args.prefer);
    } else if !args.require.is_empty() {
        options = options.require(args.require);
    }
    if let Some(deployment) = args.deployment {
        options = options.deployment(deployment);
    }
    let dispatched = match client.dispatch_traced(request, &options).await {
        Ok(dispatched) => dispatched,
        Err(err) => return fail(format!("connection lost: {err}")),
    };
    client.close().await;
    if args.verbose {
        let node = dispatched.served_by.as_deref().unwrap_or("an unknown node");
        match &dispatched.result {
            DispatchResult::Completed(_) => eprintln!("served by {node}"),
            _ => eprintln!("decided by {node}: no worker's reply"),
        }
    }
    let result = dispatched.result;
    if let DispatchResult::Completed(response) = &result {
        if let ActivityOutcome::Success(bytes) = &response.outcome {
            use std::io::Write;
            let mut stdout = std::io::stdout();
            let _ = stdout
                .write_all(bytes)
                .and_then(|()| stdout.write_all(b"\n"));
            return ExitCode::SUCCESS;
        }
    }
    eprintln!("{}: {}", class_of(&result), outcome::describe(&result));
    ExitCode::from(exit_code(&result))
}

fn class_of(result: &DispatchResult) -> &'static str {
    match result {
        DispatchResult::Completed(_) => "activity-failed",
        other => outcome::class(other),
    }
}
