//! `lintel demo`: a node, echo workers and a producer on loopback, with no setup.
//!
//! With `--nodes N` above 1, N nodes link into one mesh in this process; the producer enters
//! at `node-1` and the workers run on the others, so every dispatch is relayed across a hop.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::{CreationError, Histogram};
use lintel_client::{
    Client, ClientConfig, ConnectError, DispatchOptions, Worker, WorkerConfig, WorkerConfigError,
    WorkerError, WorkerHandle,
};
use lintel_wire::channel::dispatch_channel_name;
use lintel_wire::{PeerLinkState, PeerStatus};
use tokio::sync::oneshot;
use tokio::task::{JoinError, JoinHandle};

use super::exit::fail;
use super::histogram;
use super::loadgen::{self, Load, Report, Run};
use lintel::activities::BuiltIn;
use lintel::config::{ConfigError, NodeConfig};
use lintel::node::{Node, ServeError};
use lintel::registry::DEFAULT_TASK_QUEUE;

/// The namespace the demo's workers serve and its producer dispatches in.
const NAMESPACE: &str = "demo";

/// The bound on every wait for the mesh: links coming up, pools announced.
const MESH_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
#[command(override_usage = "lintel demo [OPTIONS]")]
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
    /// Nodes to start, linked into one mesh; above 1, the producer enters at node-1 and the
    /// workers run on the other nodes, so every dispatch crosses a hop.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=16))]
    nodes: u8,
    /// Write the latency distribution as an SVG to this file, or as text bars to stdout with
    /// `-`.
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
}

/// Why the demo stopped before reporting success.
#[derive(Debug, thiserror::Error)]
enum DemoError {
    #[error("cannot bind a loopback port: {0}")]
    Bind(#[source] std::io::Error),
    #[error(transparent)]
    LocalAddr(std::io::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("a demo worker did not register: {0}")]
    Register(#[source] WorkerError),
    #[error("a demo worker's configuration: {0}")]
    WorkerConfig(#[from] WorkerConfigError),
    #[error("producer cannot connect: {0}")]
    Connect(#[source] ConnectError),
    #[error("cannot record latencies: {0}")]
    Latencies(#[from] CreationError),
    #[error("{node} did not see {what} within {}s", MESH_WAIT.as_secs())]
    Mesh { node: String, what: String },
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    ServeTask(#[from] JoinError),
    #[error("cannot write the histogram to {}: {source}", path.display())]
    Histogram {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{missing} of {total} dispatches did not complete")]
    Incomplete { missing: u64, total: u64 },
}

/// Runs the demo; fails unless every dispatch completed and every node shut down cleanly.
pub(super) async fn run(args: Args) -> ExitCode {
    let finished = if args.nodes > 1 {
        cluster(&args).await
    } else {
        single(&args).await
    };
    match finished {
        Ok(()) => {
            println!("demo ok");
            ExitCode::SUCCESS
        }
        Err(err) => fail(err),
    }
}

/// One node with every worker on it.
async fn single(args: &Args) -> Result<(), DemoError> {
    let node = Serving::start(NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        node_id: "demo".into(),
        ..NodeConfig::default()
    })?;
    println!("node listening on {}", node.addr);

    let homes = vec![&node; args.workers.max(1)];
    let workers = start_workers(&homes, false).await?;
    println!("{} echo workers registered", workers.len());

    let client = Client::connect(node.addr, ClientConfig::default())
        .await
        .map_err(DemoError::Connect)?;
    println!(
        "pushing {} dispatches of {} B, {} in flight",
        args.dispatches, args.payload, args.concurrency
    );
    let Run { report, latencies } = loadgen::run(&client, &load(args)).await?;
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
    draw(args, &latencies)?;
    finish(client, &workers, vec![node], &report, args.dispatches).await
}

/// `args.nodes` nodes in one mesh, the producer on `node-1`, the workers on the others.
async fn cluster(args: &Args) -> Result<(), DemoError> {
    let clustered = |ordinal: u8, peers: Vec<String>| NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        node_id: format!("node-{ordinal}"),
        peers,
        ..NodeConfig::default()
    };
    let entry = Serving::start(clustered(1, Vec::new()))?;
    println!("{} listening on {}", entry.id, entry.addr);
    // Nodes join one at a time: a node's link to the seed is synced both ways before the next
    // node dials, since two links set up at once at the seed can each miss learning the other.
    let mut serving = Vec::with_capacity(usize::from(args.nodes) - 1);
    for ordinal in 2..=args.nodes {
        let node = Serving::start(clustered(ordinal, vec![entry.addr.to_string()]))?;
        println!(
            "{} listening on {}, seeded with {}",
            node.id, node.addr, entry.id
        );
        for (from, to) in [(&node, &entry), (&entry, &node)] {
            from.wait_peers(&format!("a link up and synced to {}", to.id), |peers| {
                linked(peers, &to.id)
            })
            .await?;
        }
        serving.push(node);
    }
    let nodes: Vec<&Serving> = std::iter::once(&entry).chain(&serving).collect();
    let ids: Vec<&str> = nodes.iter().map(|node| node.id.as_str()).collect();
    for node in &nodes {
        let others: Vec<&str> = ids.iter().copied().filter(|id| *id != node.id).collect();
        node.wait_peers(&format!("links up and synced to {others:?}"), |peers| {
            others.iter().all(|id| linked(peers, id))
        })
        .await?;
    }
    println!(
        "mesh up: each of {} nodes linked and synced with the other {}",
        nodes.len(),
        nodes.len() - 1
    );

    let homes: Vec<&Serving> = (0..args.workers.max(1))
        .map(|index| &serving[index % serving.len()])
        .collect();
    let workers = start_workers(&homes, true).await?;
    let mut placed = BTreeMap::<&str, usize>::new();
    for home in &homes {
        *placed.entry(home.id.as_str()).or_default() += 1;
    }
    let placed_line: Vec<String> = placed
        .iter()
        .map(|(id, count)| format!("{count} on {id}"))
        .collect();
    println!(
        "{} echo workers registered: {}",
        workers.len(),
        placed_line.join(", ")
    );
    let pool = dispatch_channel_name(NAMESPACE, DEFAULT_TASK_QUEUE, None);
    for id in placed.keys() {
        entry
            .wait_peers(&format!("{id} announcing {pool}"), |peers| {
                peers
                    .iter()
                    .any(|peer| peer.node_id == *id && peer.pools.contains(&pool))
            })
            .await?;
    }

    let client = Client::connect(entry.addr, ClientConfig::default())
        .await
        .map_err(DemoError::Connect)?;
    println!(
        "pushing {} dispatches of {} B into {}, {} in flight, each relayed to a worker's node",
        args.dispatches, args.payload, entry.id, args.concurrency
    );
    let Run { report, latencies } = loadgen::run(&client, &load(args)).await?;
    println!(
        "{} cross-node dispatches in {:.2}s: {:.0}/s, latency p50 {:.1} us, p90 {:.1} us, \
         p99 {:.1} us",
        report.dispatches,
        report.elapsed_s,
        report.rps,
        report.p50_us,
        report.p90_us,
        report.p99_us
    );
    for (class, count) in &report.outcomes {
        println!("  {class}: {count}");
    }
    for id in &ids {
        let count = report.served_by.get(*id).copied().unwrap_or(0);
        println!("  served by {id}: {count}");
    }
    for (id, count) in &report.served_by {
        if !ids.contains(&id.as_str()) {
            println!("  served by {id}: {count}");
        }
    }
    draw(args, &latencies)?;
    let nodes = std::iter::once(entry).chain(serving).collect();
    finish(client, &workers, nodes, &report, args.dispatches).await
}

/// Writes the latency histogram where `--histogram` asks, if it does.
fn draw(args: &Args, latencies: &Histogram<u64>) -> Result<(), DemoError> {
    match &args.histogram {
        Some(path) => {
            histogram::write(path, latencies, false).map_err(|source| DemoError::Histogram {
                path: path.clone(),
                source,
            })
        }
        None => Ok(()),
    }
}

/// The load every demo pushes: `args.dispatches` echoes, waiting up to 5 s for a worker.
fn load(args: &Args) -> Load {
    Load {
        namespace: NAMESPACE.into(),
        activity: "echo".into(),
        payload: args.payload,
        concurrency: args.concurrency,
        count: Some(args.dispatches),
        duration: None,
        options: DispatchOptions::default().wait_for_worker(Duration::from_secs(5)),
        keys: Vec::new(),
        progress: true,
    }
}

/// Starts one echo worker per entry of `homes`, at that node, and waits until each registered.
/// With `labelled`, each worker announces its node's id as its node label.
async fn start_workers(homes: &[&Serving], labelled: bool) -> Result<Vec<WorkerHandle>, DemoError> {
    let workers: Vec<WorkerHandle> = homes
        .iter()
        .enumerate()
        .map(|(index, home)| {
            let mut config = WorkerConfig::builder()
                .node(home.addr.to_string())
                .namespace(NAMESPACE)
                .activity("echo")
                .identity(format!("demo-worker-{index}"))
                .concurrency(64);
            if labelled {
                config = config.label(home.id.clone());
            }
            Ok(Worker::spawn(config.build()?, BuiltIn))
        })
        .collect::<Result<_, DemoError>>()?;
    for worker in &workers {
        worker
            .wait_registered(Duration::from_secs(10))
            .await
            .map_err(DemoError::Register)?;
    }
    Ok(workers)
}

/// Closes the producer, drains the workers, stops every node and waits for each, then checks
/// that every one of `total` dispatches completed.
async fn finish(
    client: Client,
    workers: &[WorkerHandle],
    nodes: Vec<Serving>,
    report: &Report,
    total: u64,
) -> Result<(), DemoError> {
    client.close().await;
    for worker in workers {
        worker.drain(Duration::from_secs(5)).await;
    }
    let servers: Vec<JoinHandle<Result<(), ServeError>>> =
        nodes.into_iter().map(Serving::begin_stop).collect();
    for server in servers {
        server.await??;
    }
    if report.failures() > 0 || report.dispatches != total {
        let completed = report.outcomes.get("completed").copied().unwrap_or(0);
        return Err(DemoError::Incomplete {
            missing: total.saturating_sub(completed),
            total,
        });
    }
    Ok(())
}

/// True when `peers` shows an up, synced link to `id`.
fn linked(peers: &[PeerStatus], id: &str) -> bool {
    peers
        .iter()
        .any(|peer| peer.node_id == id && peer.state == PeerLinkState::Up && peer.synced)
}

/// A node serving on a loopback port in this process; dropping it starts its shutdown.
struct Serving {
    id: String,
    addr: SocketAddr,
    node: Arc<Node>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), ServeError>>,
}

impl Serving {
    /// Binds `config.listen` and serves `config` there until stopped.
    fn start(config: NodeConfig) -> Result<Self, DemoError> {
        let listener =
            lintel::listener::bind(config.listen, config.backlog).map_err(DemoError::Bind)?;
        let addr = listener.local_addr().map_err(DemoError::LocalAddr)?;
        let id = config.effective_node_id(addr.port());
        let node = Arc::new(Node::new(config)?);
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = Arc::clone(&node);
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            serving.serve(listener, shutdown).await
        });
        Ok(Self {
            id,
            addr,
            node,
            stop,
            server,
        })
    }

    /// Signals the drain-then-close shutdown; the handle ends when the node stopped.
    fn begin_stop(self) -> JoinHandle<Result<(), ServeError>> {
        let _ = self.stop.send(());
        self.server
    }

    /// Waits until `holds` is true of this node's peers, looking again on every mesh change.
    ///
    /// # Errors
    /// [`DemoError::Mesh`] naming `what` when [`MESH_WAIT`] passes first.
    async fn wait_peers(
        &self,
        what: &str,
        holds: impl Fn(&[PeerStatus]) -> bool,
    ) -> Result<(), DemoError> {
        let mesh = self.node.dispatcher().mesh();
        let held = async {
            loop {
                // Noted before looking, so no change between the look and the wait is lost.
                let mut seen = mesh.changes().epoch();
                let mut members = mesh.subscribe_members();
                if holds(&self.node.peers()) {
                    return;
                }
                tokio::select! {
                    () = mesh.changes().changed(&mut seen) => {}
                    _ = members.changed() => {}
                }
            }
        };
        tokio::time::timeout(MESH_WAIT, held)
            .await
            .map_err(|_| DemoError::Mesh {
                node: self.id.clone(),
                what: what.to_owned(),
            })
    }
}
