//! A producer given three nodes, each a `lintel serve` process with an SDK worker of its own,
//! runs 20,000 dispatches while the nodes are drained and restarted in turn, then while they
//! are killed with SIGKILL and restarted.
//!
//! Asserted: through drains, every dispatch completes and the client reports no error; through
//! kills, every dispatch ends with an outcome, or `ConnectionLost { may_have_run: true }` only
//! when it was submitted to the node just killed. The handlers count executions by dispatch:
//! none ran twice (no dispatch here is marked idempotent). Each worker registers again with
//! its own node once that node is back. Every wait is on an event or the node's log, bounded.

use lintel_test_support as support;
use lintel_test_support::processes;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lintel::dispatch::DispatchOptions;
use lintel::sdk::{
    handler_fn, Client, ClientConfig, ClientError, Request, Worker, WorkerHandle, WorkerState,
};
use lintel::wire::{ActivityOutcome, DispatchResult};
use processes::NodeProcess;
use support::{plain, request, within, WAIT};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Dispatches the run makes at least.
const DISPATCHES: u64 = 20_000;
/// Dispatches in flight at once.
const CONCURRENCY: usize = 32;
/// Dispatch ids the handlers count executions of; the load never goes past it.
const MAX_IDS: u64 = 1_000_000;

/// How a node leaves in a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Drain,
    Kill,
}

/// The three nodes, each with its worker, and the executions its handlers counted.
struct Cluster {
    nodes: Vec<Option<NodeProcess>>,
    addrs: Vec<SocketAddr>,
    workers: Vec<WorkerHandle>,
    executions: Arc<Vec<AtomicU32>>,
}

fn node_args(index: usize) -> Vec<String> {
    vec!["--node-id".to_owned(), format!("n{index}")]
}

impl Cluster {
    async fn start() -> Self {
        let executions: Arc<Vec<AtomicU32>> =
            Arc::new((0..MAX_IDS).map(|_| AtomicU32::new(0)).collect());
        let (mut nodes, mut addrs, mut workers) = (Vec::new(), Vec::new(), Vec::new());
        for index in 0..3 {
            let node = NodeProcess::launch(&node_args(index), &[]).await;
            addrs.push(node.addr);
            let counted = Arc::clone(&executions);
            let handler = handler_fn(move |request: Request| {
                let counted = Arc::clone(&counted);
                async move {
                    let id = std::str::from_utf8(&request.input)
                        .ok()
                        .and_then(|text| text.parse::<usize>().ok());
                    if let Some(slot) = id.and_then(|id| counted.get(id)) {
                        slot.fetch_add(1, Ordering::Relaxed);
                    }
                    ActivityOutcome::Success(request.input)
                }
            });
            let mut config =
                support::worker_config(node.addr.to_string(), plain("ns", "echo", 64, "w"));
            config.reconnect.max = Duration::from_millis(400);
            let worker = Worker::spawn(config, handler);
            within("a worker to register", worker.wait_registered(WAIT))
                .await
                .unwrap();
            nodes.push(Some(node));
            workers.push(worker);
        }
        Self {
            nodes,
            addrs,
            workers,
            executions,
        }
    }

    /// Takes node `index` down as `fault` says and starts it again on its address; returns
    /// once its worker has registered with it again.
    async fn cycle(&mut self, index: usize, fault: Fault) {
        let mut state = self.workers[index].state();
        let node = self.nodes[index].take().expect("the node runs");
        match fault {
            Fault::Drain => {
                let (status, _) = node.stop("TERM", Duration::from_secs(20)).await;
                assert!(status.success(), "a drained node exits 0: {status}");
            }
            Fault::Kill => {
                node.kill().await;
            }
        }
        within(
            "the worker to leave its node",
            state.wait_for(|state| !matches!(state, WorkerState::Registered { .. })),
        )
        .await
        .unwrap();
        let listen = self.addrs[index].to_string();
        self.nodes[index] = Some(NodeProcess::launch_at(&listen, &node_args(index), &[]).await);
        within(
            "the worker to follow its node back",
            state.wait_for(|state| matches!(state, WorkerState::Registered { .. })),
        )
        .await
        .unwrap();
    }
}

/// What each dispatch ended as, and the node the client used when it was made.
#[derive(Default)]
struct Ledger {
    completed: u64,
    other_outcomes: Vec<(u64, DispatchResult)>,
    errors: Vec<(u64, Option<SocketAddr>, ClientError)>,
    retried: u64,
    served_by_node: std::collections::BTreeMap<SocketAddr, u64>,
}

/// Runs [`CONCURRENCY`] dispatchers until `stop` is set and [`DISPATCHES`] were made; `made`
/// counts them as they end.
fn load(
    client: &Client,
    made: watch::Sender<u64>,
    stop: watch::Receiver<bool>,
) -> (JoinSet<()>, Arc<Mutex<Ledger>>) {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let next = Arc::new(AtomicU64::new(0));
    let made = Arc::new(made);
    let mut tasks = JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (client, ledger, next, made, stop) = (
            client.clone(),
            Arc::clone(&ledger),
            Arc::clone(&next),
            Arc::clone(&made),
            stop.clone(),
        );
        tasks.spawn(async move {
            let options = DispatchOptions::default().wait_for_worker(Duration::from_secs(5));
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if (id >= DISPATCHES && *stop.borrow()) || id >= MAX_IDS {
                    return;
                }
                let node = client.node_addr();
                let answer = client
                    .submit(
                        &support::dispatch_of(request("ns", "echo", &id.to_string())),
                        &options,
                    )
                    .await;
                {
                    let mut ledger = ledger.lock().unwrap();
                    match answer {
                        Ok(dispatched) => {
                            ledger.retried += dispatched.retried.len() as u64;
                            if let Some(node) = dispatched.node {
                                *ledger.served_by_node.entry(node).or_default() += 1;
                            }
                            match dispatched.result {
                                DispatchResult::Completed(_) => ledger.completed += 1,
                                other => ledger.other_outcomes.push((id, other)),
                            }
                        }
                        Err(err) => ledger.errors.push((id, node, err)),
                    }
                }
                made.send_modify(|made| *made += 1);
            }
        });
    }
    (tasks, ledger)
}

/// Runs the load through a cycle of `fault` on each node, the client's own first; returns the
/// ledger and the node taken down during each stretch of dispatches.
async fn run(fault: Fault) -> (Cluster, Arc<Mutex<Ledger>>, Vec<SocketAddr>) {
    let mut cluster = Cluster::start().await;
    let config = {
        let mut config = ClientConfig::default();
        config.handshake_timeout = Duration::from_secs(5);
        config
    };
    let nodes: Vec<String> = cluster.addrs.iter().map(ToString::to_string).collect();
    let client = within(
        "the client to connect",
        Client::connect_nodes(nodes, config),
    )
    .await
    .unwrap();
    let (made_tx, mut made) = watch::channel(0);
    let (stop_tx, stop) = watch::channel(false);
    let (mut tasks, ledger) = load(&client, made_tx, stop);
    let mut order: Vec<usize> = Vec::new();
    let mut taken = Vec::new();
    for round in 0..3u64 {
        let mark = (round + 1) * DISPATCHES / 4;
        within(
            "dispatches before the fault",
            made.wait_for(|made| *made >= mark),
        )
        .await
        .unwrap();
        // The node the client uses when it was not taken down yet, else the next one left.
        let current = client
            .node_addr()
            .and_then(|addr| cluster.addrs.iter().position(|a| *a == addr))
            .filter(|index| !order.contains(index));
        let index = current.unwrap_or_else(|| (0..3).find(|i| !order.contains(i)).unwrap());
        order.push(index);
        taken.push(cluster.addrs[index]);
        cluster.cycle(index, fault).await;
    }
    stop_tx.send_replace(true);
    within("the last dispatches", async {
        while let Some(task) = tasks.join_next().await {
            task.unwrap();
        }
    })
    .await;
    (cluster, ledger, taken)
}

fn assert_none_ran_twice(cluster: &Cluster) {
    let twice: Vec<usize> = (0..cluster.executions.len())
        .filter(|id| cluster.executions[*id].load(Ordering::Relaxed) > 1)
        .collect();
    assert!(twice.is_empty(), "dispatches that ran twice: {twice:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dispatch_completes_while_each_node_in_turn_is_drained_and_restarted() {
    let started = tokio::time::Instant::now();
    let (cluster, ledger, taken) = run(Fault::Drain).await;
    let ledger = ledger.lock().unwrap();

    assert!(
        ledger.errors.is_empty(),
        "client errors: {:?}",
        ledger.errors
    );
    assert!(
        ledger.other_outcomes.is_empty(),
        "not completed: {:?}",
        ledger.other_outcomes
    );
    assert!(ledger.completed >= DISPATCHES, "{}", ledger.completed);
    assert_none_ran_twice(&cluster);
    let served: Vec<_> = ledger.served_by_node.iter().collect();
    eprintln!(
        "drain: {} completed, {} retried, served by node {served:?}, taken down {taken:?}, {:?}",
        ledger.completed,
        ledger.retried,
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_kills_every_dispatch_ends_once_and_only_the_killed_node_leaves_it_in_doubt() {
    let started = tokio::time::Instant::now();
    let (cluster, ledger, taken) = run(Fault::Kill).await;
    let ledger = ledger.lock().unwrap();

    for (id, node, err) in &ledger.errors {
        match err {
            ClientError::ConnectionLost { may_have_run: true } => assert!(
                node.is_some_and(|node| taken.contains(&node)),
                "dispatch {id} lost on {node:?}, which was never killed"
            ),
            other => panic!("dispatch {id}: {other}"),
        }
    }
    assert_none_ran_twice(&cluster);
    let ended = ledger.completed + ledger.other_outcomes.len() as u64 + ledger.errors.len() as u64;
    assert!(ended >= DISPATCHES, "{ended}");
    eprintln!(
        "kill: {} completed, {} other outcomes, {} lost in doubt, {} retried, {:?}",
        ledger.completed,
        ledger.other_outcomes.len(),
        ledger.errors.len(),
        ledger.retried,
        started.elapsed()
    );
}
