//! `lintel serve`: defaults, then a config file, then `LINTEL_*` variables, then flags, layered
//! key by key (see `layers`).

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use super::exit::fail;
use super::layers::{LayerError, Layered};
use super::signal::{count, hangups, seconds, Stops, INTERRUPTED};
use lintel::config::NodeConfig;
use lintel::dispatch::Placement;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every config key is also a LINTEL_<KEY> variable (LINTEL_MAX_CONNECTIONS=100) \
    and a key of the --config file; flags beat variables, variables beat the file. \
    `lintel serve --print-config` prints them all with where each came from. The client \
    commands' LINTEL_CONNECT and LINTEL_CLIENT_TLS_* variables are not read by serve."
)]
pub(super) struct Args {
    /// TOML config file; variables and flags override it.
    #[arg(long, env = "LINTEL_CONFIG")]
    config: Option<PathBuf>,
    /// Print the effective config, with where each value came from, and exit.
    #[arg(long)]
    print_config: bool,
    #[command(flatten)]
    flags: Flags,
}

/// The keys an operator changes often, as flags; every key is also a `LINTEL_<KEY>` variable
/// and a key of the config file. Only the flags given are laid over the other layers.
#[derive(Debug, Default, clap::Args, Serialize)]
struct Flags {
    /// Address to listen on (variable LINTEL_LISTEN) [default: 127.0.0.1:7400].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<String>,
    /// Node id in welcomes, status and peer links (variable LINTEL_NODE_ID) [default: lintel-<port>].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    node_id: Option<String>,
    /// Most connections at once (variable LINTEL_MAX_CONNECTIONS) [default: 16384].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_connections: Option<usize>,
    /// Require this token in every hello; it grants every role and namespace (variable LINTEL_AUTH_TOKEN).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_token: Option<String>,
    /// How often to ping workers and producers, in milliseconds (variable LINTEL_PING_INTERVAL_MS) [default: 5000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    ping_interval_ms: Option<u64>,
    /// Pings a new worker must answer before it is selected, the first sent at once; 0: none (variable LINTEL_WORKER_PROBATION_PINGS) [default: 1].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_probation_pings: Option<u32>,
    /// A worker whose ping waits this long, in milliseconds, is unreachable: not selected until it answers (variable LINTEL_WORKER_PING_TIMEOUT_MS) [default: 1000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    worker_ping_timeout_ms: Option<u64>,
    /// Default reply timeout, in milliseconds (variable LINTEL_REPLY_TIMEOUT_MS) [default: 30000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    reply_timeout_ms: Option<u64>,
    /// How long shutdown waits for in-flight dispatches, in milliseconds (variable LINTEL_DRAIN_TIMEOUT_MS) [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    drain_timeout_ms: Option<u64>,
    /// A node to link with, as host:port; a name is dialled at every address it resolves to,
    /// again every peer_resolve_interval_ms; repeatable, and one member joins the whole mesh
    /// (variable LINTEL_PEERS).
    #[arg(long = "peer", value_name = "ADDR")]
    #[serde(rename = "peers", skip_serializing_if = "Vec::is_empty")]
    peers: Vec<String>,
    /// Secret every peer must present to link (variable LINTEL_CLUSTER_SECRET).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_secret: Option<String>,
    /// Address peers dial this node at (variable LINTEL_ADVERTISE) [default: the listen address].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    advertise: Option<String>,
    /// Where a dispatch runs when both this node and a peer have a free worker
    /// (variable LINTEL_PLACEMENT) [default: local-first].
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "placement")]
    placement: Option<PlacementArg>,
    /// How often to ping peers, in milliseconds (variable LINTEL_PEER_PING_INTERVAL_MS) [default: 1000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    peer_ping_interval_ms: Option<u64>,
    /// Address for the admin HTTP listener (/metrics, /health, /ready, /status) (variable LINTEL_ADMIN_LISTEN) [default: off].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    admin_listen: Option<String>,
    /// Require `Authorization: Bearer` with this token on every admin request but /health (variable LINTEL_ADMIN_TOKEN).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    admin_token: Option<String>,
    /// PEM certificate chain to present; with --tls-key every connection speaks TLS (variable LINTEL_TLS_CERT).
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (variable LINTEL_TLS_KEY).
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// PEM CA certificates client certificates must chain to; every client must present one (variable LINTEL_TLS_CLIENT_CA).
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_client_ca: Option<PathBuf>,
    /// PEM CA certificates peers' certificates must chain to (variable LINTEL_TLS_CA) [default: --tls-client-ca].
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_ca: Option<PathBuf>,
    /// Bytes queued per connection before back-pressure (variable LINTEL_OUTBOUND_QUEUE_BYTES) [default: 8388608].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    outbound_queue_bytes: Option<usize>,
    /// How long a producer's full queue is borne before it is closed as a slow consumer, in
    /// milliseconds (variable LINTEL_SLOW_CONSUMER_GRACE_MS) [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    slow_consumer_grace_ms: Option<u64>,
}

/// `--placement` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PlacementArg {
    /// A local worker with a free slot first, peers only when none is free here.
    LocalFirst,
    /// Local and remote free slots alike, chosen weighted by free slots.
    Weighted,
}

fn placement<S: serde::Serializer>(
    arg: &Option<PlacementArg>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let placement = arg.map(|arg| match arg {
        PlacementArg::LocalFirst => Placement::LocalFirst,
        PlacementArg::Weighted => Placement::Weighted,
    });
    placement.serialize(serializer)
}

/// What `serve` does once its config is loaded.
pub(super) enum Loaded {
    /// Serve with this config.
    Serve(Box<NodeConfig>),
    /// The effective config was printed; exit.
    Printed,
}

/// The node's config: defaults, then the file, then variables, then flags.
///
/// # Errors
/// The exit code after printing which key, from which source, is wrong.
pub(super) fn load(args: Args) -> Result<Loaded, ExitCode> {
    let layered = layer(&args).map_err(fail)?;
    if args.print_config {
        print!("{}", layered.describe());
    }
    let config = layered.build().map_err(fail)?;
    if args.print_config {
        return Ok(Loaded::Printed);
    }
    Ok(Loaded::Serve(Box::new(config)))
}

fn layer(args: &Args) -> Result<Layered, LayerError> {
    let mut layered = Layered::defaults()?;
    if let Some(path) = &args.config {
        layered = layered.file(path)?;
    }
    layered.env(std::env::vars())?.flags(&args.flags)
}

/// Serves until Ctrl-C (or SIGTERM), then drains, saying what it waits for; a second one
/// leaves at once. Reads the TLS files again on each SIGHUP.
pub(super) async fn run(config: NodeConfig) -> ExitCode {
    let mut stops = Stops::new();
    super::tls::warn_if_exposed(&config);
    let drain_timeout = config.drain_timeout();
    let (node, listener) = match lintel::node::bind(config) {
        Ok(bound) => bound,
        Err(err) => return fail(err),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let signals = async {
        stops.next().await;
        let workers = workers(&node);
        tracing::info!(
            "interrupted: waiting up to {} for {} in flight and {} to finish, then stopping \
             (Ctrl-C again to leave at once)",
            seconds(drain_timeout),
            count(node.dispatcher().active(), "dispatch", "dispatches"),
            count(workers, "worker", "workers"),
        );
        let _ = stop.send(());
        stops.next().await;
    };
    let served = tokio::select! {
        served = node.serve(listener, async {
            let _ = stopped.await;
        }) => served,
        () = signals => {
            tracing::warn!(
                "interrupted again: leaving at once, abandoning {} in flight",
                count(node.dispatcher().active(), "dispatch", "dispatches"),
            );
            return ExitCode::from(INTERRUPTED);
        }
        () = hangups(|| {
            node.reload_tls();
        }) => Ok(()),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(err),
    }
}

/// The workers registered on `node`, each counted once whatever its pools.
fn workers(node: &lintel::Node) -> usize {
    let status = node.status();
    let mut ids: Vec<u64> = status
        .pools
        .iter()
        .flat_map(|pool| pool.workers.iter().map(|worker| worker.worker_id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}
