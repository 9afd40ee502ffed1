//! `lintel serve`: defaults, then a config file, then `LINTEL_*` variables, then flags, layered
//! key by key (see `config::layers`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use super::exit::fail;
use super::signal::shutdown_signal;
use crate::config::{Layered, NodeConfig};
use crate::dispatch::Placement;

#[derive(Debug, clap::Args)]
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
    /// Address to listen on [default: 127.0.0.1:7400].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<SocketAddr>,
    /// Node id in welcomes, status and peer links [default: lintel-<port>].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    node_id: Option<String>,
    /// Most connections at once [default: 16384].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_connections: Option<usize>,
    /// Require this token in every hello; it grants every role and namespace.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_token: Option<String>,
    /// How often to ping workers and producers, in milliseconds [default: 5000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    ping_interval_ms: Option<u64>,
    /// Default reply timeout, in milliseconds [default: 30000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    reply_timeout_ms: Option<u64>,
    /// How long shutdown waits for in-flight dispatches, in milliseconds [default: 10000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    drain_timeout_ms: Option<u64>,
    /// A node to link with, as host:port; repeatable, and one member joins the whole mesh.
    #[arg(long = "peer", value_name = "ADDR")]
    #[serde(rename = "peers", skip_serializing_if = "Vec::is_empty")]
    peers: Vec<String>,
    /// Secret every peer must present to link.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_secret: Option<String>,
    /// Address peers dial this node at [default: the listen address].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    advertise: Option<String>,
    /// Where a dispatch runs when both this node and a peer have a free worker
    /// [default: local-first].
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "placement")]
    placement: Option<PlacementArg>,
    /// How often to ping peers, in milliseconds [default: 1000].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    peer_ping_interval_ms: Option<u64>,
    /// Address for the admin HTTP listener (/metrics, /health, /ready, /status) [default: off].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    admin_listen: Option<SocketAddr>,
    /// PEM certificate chain to present; with --tls-key every connection speaks TLS.
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// PEM CA certificates client certificates must chain to; every client must present one.
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_client_ca: Option<PathBuf>,
    /// PEM CA certificates peers' certificates must chain to [default: --tls-client-ca].
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_ca: Option<PathBuf>,
    /// Bytes queued per connection before back-pressure [default: 8388608].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    outbound_queue_bytes: Option<usize>,
    /// How long a producer's full queue is borne before it is closed as a slow consumer, in
    /// milliseconds [default: 10000].
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
    let config = layered.build().map_err(fail)?;
    if args.print_config {
        print!("{}", layered.describe());
        return Ok(Loaded::Printed);
    }
    Ok(Loaded::Serve(Box::new(config)))
}

fn layer(args: &Args) -> Result<Layered, crate::config::ConfigError> {
    let mut layered = Layered::defaults()?;
    if let Some(path) = &args.config {
        layered = layered.file(path)?;
    }
    layered.env(std::env::vars())?.flags(&args.flags)
}

/// Serves until Ctrl-C, then drains.
pub(super) async fn run(config: NodeConfig) -> ExitCode {
    super::tls::warn_if_exposed(&config);
    match crate::node::serve(config, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(err),
    }
}
