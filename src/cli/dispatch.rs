//! `lintel dispatch`: submit one request, print its result bytes, exit by outcome class.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lintel_client::{
    ActivityOutcome, Client, ClientConfig, ClientError, ConnectError, Dispatch, DispatchOptions,
    DispatchResult, RefusalCode,
};

use super::connect::NodeArgs;
use super::exit::{fail, usage, DRAINING};
use super::extras::{self, FairnessArgs};
use super::input::{self, Read, Source};
use super::signal::Stops;
use lintel::dispatch::{outcome, FRAME_OVERHEAD};

#[derive(Debug, clap::Args)]
#[command(
    override_usage = "lintel dispatch [OPTIONS] --namespace <NAMESPACE> --activity <ACTIVITY> \
                      <--input <INPUT>|--input-file <FILE>>"
)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["input", "input_file"])))]
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
    /// The request's input: these bytes as they are, or `-` to read standard input.
    #[arg(long, value_name = "INPUT", allow_hyphen_values = true)]
    input: Option<OsString>,
    /// Read the request's input from this file, its bytes as they are.
    #[arg(long, value_name = "FILE")]
    input_file: Option<PathBuf>,
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
        DispatchResult::NoWorker(_) => 11,
        DispatchResult::WorkerLost { .. } => 12,
        DispatchResult::Timeout { .. } | DispatchResult::HeartbeatTimeout { .. } => 13,
        DispatchResult::Refused(_) => REFUSED,
        DispatchResult::Cancelled => 15,
        DispatchResult::Draining => DRAINING,
        DispatchResult::PeerLost { .. } => 17,
        DispatchResult::ShutDown { .. } => 18,
    }
}

/// The exit code of a `refused` dispatch, by the node or, before sending it, by the client.
const REFUSED: u8 = 14;

/// The exit code of a dispatch cancelled here (Ctrl-C), as of the `cancelled` outcome.
const CANCELLED: u8 = 15;

/// Dispatches and says what became of it. Ctrl-C (or SIGTERM) cancels: the node is sent
/// `Cancel` for a dispatch already submitted, and the command exits 15.
pub(super) async fn run(args: Args) -> ExitCode {
    let mut stops = Stops::new();
    let cancelled = |what: &str| {
        eprintln!("cancelled: interrupted{what}");
        ExitCode::from(CANCELLED)
    };
    let client = tokio::select! {
        connected = connect(&args.target) => match connected {
            Ok(client) => client,
            Err(code) => return code,
        },
        () = stops.next() => return cancelled(" before the dispatch was sent"),
    };
    let prepared = tokio::select! {
        prepared = prepare(args, &client) => prepared,
        () = stops.next() => {
            client.close().await;
            return cancelled(" before the dispatch was sent");
        }
    };
    let (request, options, verbose) = match prepared {
        Ok(prepared) => prepared,
        Err(code) => {
            client.close().await;
            return code;
        }
    };
    let dispatched = tokio::select! {
        dispatched = client.submit(&request, &options) => dispatched,
        () = stops.next() => {
            // The dispatch's future is dropped: it queued `Cancel`, written before the goodbye.
            client.close().await;
            return cancelled("; the node was told to cancel the dispatch");
        }
    };
    client.close().await;
    let dispatched = match dispatched {
        Ok(dispatched) => dispatched,
        // Refused here, against the limits the node stated: the `refused` outcome's exit code.
        Err(err @ ClientError::Invalid(_)) => {
            eprintln!("refused: {err}; nothing was sent");
            return ExitCode::from(REFUSED);
        }
        Err(err) => return fail(format!("connection lost: {err}")),
    };
    if verbose {
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

/// Connects to the node as the producer `lintel-dispatch`.
async fn connect(target: &NodeArgs) -> Result<Client, ExitCode> {
    let config = target.config("lintel-dispatch").map_err(fail)?;
    match Client::connect_nodes(target.nodes(), config).await {
        Ok(client) => Ok(client),
        // A refusal at hello for draining is the draining outcome too.
        Err(ConnectError::Refused(refusal)) if refusal.code == RefusalCode::Draining => {
            eprintln!("draining: {}", refusal.reason);
            Err(ExitCode::from(DRAINING))
        }
        Err(err) => Err(fail(target.cannot_connect(&err))),
    }
}

/// The request, its options and `--verbose`, the input read within what `client`'s node takes.
async fn prepare(
    args: Args,
    client: &Client,
) -> Result<(Dispatch, DispatchOptions, bool), ExitCode> {
    // Of one length whatever the process id, so the input's limit is the same at every run.
    let workflow_id = format!("cli-{:010}", std::process::id());
    let header_bytes: usize = args
        .headers
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    let node_max = usize::try_from(client.node_info().limits.max_frame_len).unwrap_or(usize::MAX);
    // A frame goes out only within both sides' limits: the node's, and this command's own.
    let own_max = ClientConfig::default().max_frame_len;
    let (max_frame_len, whose) = if node_max <= own_max {
        (node_max, "the node's max_frame_len".to_owned())
    } else {
        (
            own_max,
            format!("this command's frame limit (the node's is {node_max})"),
        )
    };
    let limit = Limit {
        max_frame_len,
        carried: workflow_id.len() + header_bytes,
    };
    let source = match (args.input, args.input_file) {
        (_, Some(path)) => Source::File(path),
        (Some(input), None) if input == "-" => Source::Stdin,
        (Some(input), None) => Source::Given(input),
        (None, None) => return Err(usage("--input or --input-file is required")),
    };
    let input = match input::read(source, limit.max_input()).await {
        Ok(Read::Whole(input)) => input,
        Ok(Read::Over { len }) => {
            return Err(fail(format!(
                "the input is {len} bytes, over the {} a dispatch to {} can carry: {whose} of \
                 {max_frame_len} bytes, less {FRAME_OVERHEAD} for the push and {} for the \
                 request's id and headers",
                limit.max_input(),
                args.target.connect,
                limit.carried,
            )))
        }
        Err(err) => return Err(fail(err)),
    };
    let request = Dispatch::new(args.namespace, args.activity)
        .task_queue(args.task_queue)
        .workflow(workflow_id, 1)
        .input(input);
    let mut options = DispatchOptions::default();
    options.wait_for_worker = args.wait_ms.map(Duration::from_millis);
    options.reply_timeout = args.timeout_ms.map(Duration::from_millis);
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
    Ok((request, options, args.verbose))
}

/// What a dispatch's input may weigh on a node: its frame limit less the push's reserve and
/// what the request carries beside the input.
struct Limit {
    max_frame_len: usize,
    /// Bytes of the request's id and headers, counted against the same budget.
    carried: usize,
}

impl Limit {
    fn max_input(&self) -> usize {
        self.max_frame_len
            .saturating_sub(FRAME_OVERHEAD)
            .saturating_sub(self.carried)
    }
}

fn class_of(result: &DispatchResult) -> &'static str {
    match result {
        DispatchResult::Completed(_) => "activity-failed",
        other => outcome::class(other),
    }
}
