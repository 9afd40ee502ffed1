//! `lintel serve`: defaults, then a config file, then environment, then flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::exit::fail;
use super::signal::shutdown_signal;
use crate::config::NodeConfig;
use crate::dispatch::Placement;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Address to listen on [default: 127.0.0.1:7400].
    #[arg(long, env = "LINTEL_LISTEN")]
    listen: Option<SocketAddr>,
    /// TOML config file; flags and LINTEL_* variables override it.
    #[arg(long, env = "LINTEL_CONFIG")]
    config: Option<PathBuf>,
    /// Node id in welcomes and status [default: lintel-<port>].
    #[arg(long, env = "LINTEL_NODE_ID")]
    node_id: Option<String>,
    /// Most connections at once.
    #[arg(long, env = "LINTEL_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Require this token in every hello.
    #[arg(long, env = "LINTEL_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
    /// How often to ping workers, in milliseconds.
    #[arg(long, env = "LINTEL_PING_INTERVAL_MS")]
    ping_interval_ms: Option<u64>,
    /// Default reply timeout, in milliseconds.
    #[arg(long, env = "LINTEL_REPLY_TIMEOUT_MS")]
    reply_timeout_ms: Option<u64>,
    /// How long shutdown waits for in-flight dispatches, in milliseconds.
    #[arg(long, env = "LINTEL_DRAIN_TIMEOUT_MS")]
    drain_timeout_ms: Option<u64>,
    /// A node to link with, as host:port; repeatable, and one member joins the whole mesh.
    #[arg(
        long = "peer",
        value_name = "ADDR",
        env = "LINTEL_PEERS",
        value_delimiter = ','
    )]
    peers: Vec<String>,
    /// Secret every peer must present to link.
    #[arg(long, env = "LINTEL_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: Option<String>,
    /// Address peers dial this node at [default: the listen address].
    #[arg(long, env = "LINTEL_ADVERTISE")]
    advertise: Option<String>,
    /// Where a dispatch runs when both this node and a peer have a free worker.
    #[arg(long, env = "LINTEL_PLACEMENT", value_enum)]
    placement: Option<PlacementArg>,
    /// How often to ping peers, in milliseconds [default: 1000].
    #[arg(long, env = "LINTEL_PEER_PING_INTERVAL_MS")]
    peer_ping_interval_ms: Option<u64>,
}

/// `--placement` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PlacementArg {
    /// A local worker with a free slot first, peers only when none is free here.
    LocalFirst,
    /// Local and remote free slots alike, chosen weighted by free slots.
    Weighted,
}

/// The node's config: defaults, then the file, then variables and flags.
///
/// # Errors
/// The exit code after printing why the file could not be read.
pub(super) fn load(args: Args) -> Result<NodeConfig, ExitCode> {
    let mut config = match &args.config {
        Some(path) => NodeConfig::from_file(path).map_err(fail)?,
        None => NodeConfig::default(),
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(node_id) = args.node_id {
        config.node_id = node_id;
    }
    if let Some(max) = args.max_connections {
        config.max_connections = max;
    }
    if let Some(token) = args.auth_token {
        config.auth_token = Some(token);
    }
    if let Some(ms) = args.ping_interval_ms {
        config.ping_interval_ms = ms;
    }
    if let Some(ms) = args.reply_timeout_ms {
        config.reply_timeout_ms = ms;
    }
    if let Some(ms) = args.drain_timeout_ms {
        config.drain_timeout_ms = ms;
    }
    if !args.peers.is_empty() {
        config.peers = args.peers;
    }
    if let Some(secret) = args.cluster_secret {
        config.cluster_secret = Some(secret);
    }
    if let Some(advertise) = args.advertise {
        config.advertise = advertise;
    }
    if let Some(placement) = args.placement {
        config.placement = match placement {
            PlacementArg::LocalFirst => Placement::LocalFirst,
            PlacementArg::Weighted => Placement::Weighted,
        };
    }
    if let Some(ms) = args.peer_ping_interval_ms {
        config.peer_ping_interval_ms = ms;
    }
    Ok(config)
}

/// Serves until Ctrl-C, then drains.
pub(super) async fn run(config: NodeConfig) -> ExitCode {
    match crate::node::serve(config, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(err),
    }
}
