//! Five `lintel serve` processes on hosts of their own (network namespaces behind one bridge,
//! `support/src/netns.rs`), finding each other through `peers.test` in each host's `hosts`
//! file, with raw workers and producers as processes in those namespaces, through four faults
//! in one run:
//! (a) host n1 cut off the bridge for [`PARTITION`], longer than the relink grace;
//! (b) node n2 SIGKILLed and started again;
//! (c) host n3's link flapping, down [`FLAP`] and up [`FLAP`], [`FLAPS`] times: each cut
//!     shorter than the relink grace;
//! (d) every link dialled to n4 crossing a proxy inside n4's namespace that delays each chunk,
//!     stalls a few (TCP's face of packet loss) and cuts a few connections.
//!
//! Before relying on it, the test checks that a host's link set down stops its traffic (a TCP
//! connect to it times out); it skips, saying why, where it does not, and without root and `ip
//! netns`, unless `CI_REQUIRE_NETNS` is set. At the end: every dispatch the producers submitted
//! has exactly one outcome, ran on at most one worker and was served by the node it names;
//! `peer-lost` only between an origin and a peer that (a) or (b) severed for longer than
//! [`RELINK_GRACE_MS`]; no worker held more pushes than its capacity; each node shows exactly
//! one link up to each other node. The workers, producers and proxy are this test binary run
//! again inside a namespace, told their part by [`HELPER`]. Every process is killed, and every
//! namespace, veth and bridge removed, also when the test fails.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lintel::status::Status;
use lintel::wire::{DispatchResult, PeerLinkState};
use support::faulty::{Proxy, Weather};
use support::host_clients::{self, unix_ms, Collected, ProducerSpec, Report, WorkerSpec};
use support::processes::{signal, until};
use support::sim_checks::{ledger_violations, unexplained_peer_lost, Cut};
use support::{Netns, Served};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const TEST: &str =
    "five_nodes_on_hosts_of_their_own_keep_every_invariant_through_partitions_kills_and_flaps";

/// Set in a helper process: its part (`worker ...`, `producer ...`, `proxy ...`, `probe ...`).
const HELPER: &str = "LINTEL_HOSTS_HELPER";

const NODES: usize = 5;
const PORT: u16 = 7400;
/// Hosts with a worker, and hosts with a producer; n4 has only a producer, so all it submits
/// crosses the proxy's links.
const WORKER_HOSTS: [usize; 3] = [1, 2, 3];
const PRODUCER_HOSTS: [usize; 3] = [0, 3, 4];
const CAPACITY: u32 = 4;
/// The host behind the proxy, the host partitioned, the node killed, the host flapping.
const PROXIED: usize = 4;
const PARTITIONED: usize = 1;
const KILLED: usize = 2;
const FLAPPING: usize = 3;

/// A cut link's relays wait this long for a relink before they end `peer-lost`: longer than a
/// flap's cut (2 s) plus its detection (under 1 s) and a redial, shorter than the partition.
const RELINK_GRACE_MS: u64 = 6_000;
/// Peers pinged this often, and closed after three unanswered: a cut is found in under 1 s.
const PEER_PING_MS: u64 = 200;
const PARTITION: Duration = Duration::from_secs(10);
const KILLED_FOR: Duration = Duration::from_secs(1);
const FLAP: Duration = Duration::from_secs(2);
const FLAPS: u32 = 3;
/// How long after a severing cut ended a dispatch submitted may still end `peer-lost` by it:
/// its relay waited the grace from when the cut was found, which takes under a few seconds.
const DETECTION: Duration = Duration::from_millis(RELINK_GRACE_MS + 4_000);

/// The longest the mesh may take to show one link per pair again, and producers to finish.
const SETTLE: Duration = Duration::from_secs(45);

const WAIT_FOR_WORKER_MS: u64 = 3_000;
const REPLY_TIMEOUT_MS: u64 = 20_000;

/// The proxy's weather: 2-15 ms per chunk, 0.5% of chunks stalled 50-300 ms, 0.15% cut.
const WEATHER: Weather = Weather {
    delay_ms: (2, 15),
    stall_per_million: 5_000,
    stall_ms: (50, 300),
    cut_per_million: 1_500,
    seed: 0x4057,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_on_hosts_of_their_own_keep_every_invariant_through_partitions_kills_and_flaps()
{
    if let Ok(part) = std::env::var(HELPER) {
        helper(&part).await;
        return;
    }
    let Some(netns) = Netns::create_or_skip(TEST, NODES) else {
        return;
    };
    let started = Instant::now();
    if let Err(why) = cutting_a_link_stops_traffic(&netns).await {
        assert!(
            std::env::var_os(support::netns::REQUIRE).is_none(),
            "{TEST}: {why}, and {} is set",
            support::netns::REQUIRE
        );
        eprintln!("skipping {TEST}: {why}");
        return;
    }
    let ips: Vec<String> = netns.hosts().iter().map(|h| h.ip.to_string()).collect();
    let names: String = ips.iter().map(|ip| format!("{ip} peers.test\n")).collect();
    for index in 0..NODES {
        netns.write_hosts(index, &names).expect("hosts");
    }
    let collected = Arc::new(Mutex::new(Collected::new(unix_ms())));
    let at = || Duration::from_millis(unix_ms().saturating_sub(lock(&collected).start_unix_ms));

    // Declared after the namespaces, so killed before they are removed.
    let mut nodes: Vec<Served> = (0..NODES).map(|index| start_node(&netns, index)).collect();
    let mut proxy = Helper::spawn(
        &netns,
        PROXIED,
        &format!("proxy {}:{PORT} 127.0.0.1:{PORT}", ips[PROXIED]),
        &collected,
    );
    wait_meshed(&netns, "the mesh to form").await;
    let mut workers = Vec::new();
    for index in WORKER_HOSTS {
        let part = format!(
            "worker w{index} n{index} {} {CAPACITY}",
            client_address(&netns, index)
        );
        workers.push(Helper::spawn(&netns, index, &part, &collected));
    }
    until("every worker registered", SETTLE, async || {
        let registered = lock(&collected).registered.len();
        (registered == WORKER_HOSTS.len())
            .then_some(())
            .ok_or(format!("{registered} registered"))
    })
    .await;
    let mut producers: Vec<Helper> = PRODUCER_HOSTS
        .iter()
        .map(|&index| {
            let part = format!(
                "producer p{index} n{index} {}",
                client_address(&netns, index)
            );
            Helper::spawn(&netns, index, &part, &collected)
        })
        .collect();
    until("outcomes from every producer", SETTLE, async || {
        let state = lock(&collected);
        let origins: std::collections::BTreeSet<&String> = state
            .ledger
            .outcomes
            .keys()
            .filter_map(|id| state.ledger.submitted.get(id))
            .collect();
        (origins.len() == PRODUCER_HOSTS.len())
            .then_some(())
            .ok_or(format!("outcomes for {origins:?}"))
    })
    .await;
    let mut cuts = Vec::new();
    let mut timings = Vec::new();

    // (a) A partition longer than the grace: n1's relays may end peer-lost.
    let from = at();
    netns.set_link(PARTITIONED, false).expect("cut n1 off");
    tokio::time::sleep(PARTITION).await;
    netns.set_link(PARTITIONED, true).expect("join n1 again");
    let healed = wait_meshed(&netns, "the mesh to heal after the partition").await;
    cuts.push(Cut::node("n1").during(from, at()));
    timings.push(format!("partition {PARTITION:?} healed {healed:?} later"));

    // (b) A node killed and started again: a new incarnation, its relays lost.
    let from = at();
    signal(nodes[KILLED].pid(), "KILL").await;
    tokio::time::sleep(KILLED_FOR).await;
    nodes[KILLED] = start_node(&netns, KILLED);
    let healed = wait_meshed(&netns, "the mesh to take in the restarted node").await;
    cuts.push(Cut::node("n2").during(from, at()));
    timings.push(format!(
        "kill, restart after {KILLED_FOR:?}, relinked {healed:?} later"
    ));

    // (d) Besides the weather's own cuts, every link through the proxy cut at once.
    proxy.send("reset").await;
    let healed = wait_meshed(&netns, "the mesh to relink through the proxy").await;
    timings.push(format!("proxy reset, relinked {healed:?} later"));

    // (c) A flapping link: each cut shorter than the grace, so nothing may end peer-lost.
    for _ in 0..FLAPS {
        netns.set_link(FLAPPING, false).expect("flap n3 down");
        tokio::time::sleep(FLAP).await;
        netns.set_link(FLAPPING, true).expect("flap n3 up");
        tokio::time::sleep(FLAP).await;
    }
    let healed = wait_meshed(&netns, "the mesh to settle after the flaps").await;
    timings.push(format!(
        "{FLAPS} flaps of {FLAP:?}, settled {healed:?} later"
    ));

    for producer in &mut producers {
        producer.stdin.take();
    }
    until("every producer to have every outcome", SETTLE, async || {
        let done = lock(&collected).done.len();
        (done == PRODUCER_HOSTS.len())
            .then_some(())
            .ok_or(format!("{done} done"))
    })
    .await;
    wait_meshed(&netns, "one link per pair at the end").await;
    let mut link_downs = Vec::new();
    for index in 0..NODES {
        let status = status_of(&netns, index).await.expect("a node's status");
        link_downs.push(status.peers.iter().map(|peer| peer.link_downs).sum::<u64>());
    }
    let weather = proxy.stop_weather(&collected).await;
    drop(producers);
    drop(workers);
    drop(nodes);

    let state = lock(&collected);
    let ledger = &state.ledger;
    let mut violations = ledger_violations(ledger);
    violations.extend(unexplained_peer_lost(ledger, &cuts, DETECTION));
    violations.extend(
        ledger
            .lost
            .iter()
            .map(|id| format!("{id} lost with its producer's connection")),
    );
    for (worker, peak) in &state.peaks {
        if *peak > CAPACITY {
            violations.push(format!("{worker} held {peak} pushes, capacity {CAPACITY}"));
        }
    }
    let relayed = |origin: &str| -> usize {
        ledger
            .outcomes
            .iter()
            .filter(|(id, _)| ledger.submitted.get(*id).is_some_and(|o| o == origin))
            .flat_map(|(_, ended)| ended)
            .filter(|ended| {
                ended.served_by != origin && matches!(ended.result, DispatchResult::Completed(_))
            })
            .count()
    };
    let mut peer_lost: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for (id, ended) in &ledger.outcomes {
        for ended in ended {
            if let DispatchResult::PeerLost { peer, .. } = &ended.result {
                let origin = ledger.submitted.get(id).map_or("?", String::as_str);
                *peer_lost.entry(format!("{origin}->{peer}")).or_default() += 1;
            }
        }
    }
    println!(
        "hosts: dispatches={} outcomes={:?} peer-lost={peer_lost:?} link-downs={link_downs:?} relayed-completions n0={} n4={} \
         peaks={:?} proxy connections={} chunks={} stalls={} cuts={} faults: {} elapsed={:.1}s",
        ledger.submitted.len(),
        state.kinds,
        relayed("n0"),
        relayed("n4"),
        state.peaks,
        weather[0],
        weather[1],
        weather[2],
        weather[3],
        timings.join("; "),
        started.elapsed().as_secs_f64(),
    );
    assert!(
        violations.is_empty(),
        "{} violations, the first:\n{}",
        violations.len(),
        violations
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        state.peaks.len(),
        WORKER_HOSTS.len(),
        "every worker ran something: {:?}",
        state.peaks
    );
    assert!(
        relayed("n0") > 0 && relayed("n4") > 0,
        "dispatches crossed the links"
    );
    assert!(
        weather[0] > 1 && weather[2] > 0,
        "the proxy carried links again after its reset, and stalled chunks: {weather:?}"
    );
    assert!(
        link_downs[FLAPPING] >= u64::from(FLAPS),
        "the flaps cut n3's links: {link_downs:?} links down"
    );
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where clients on host `index` reach its node: n4 listens on loopback only, behind its proxy.
fn client_address(netns: &Netns, index: usize) -> String {
    if index == PROXIED {
        format!("127.0.0.1:{PORT}")
    } else {
        format!("{}:{PORT}", netns.host(index).ip)
    }
}

/// `lintel serve` as node `n{index}` in host `index`'s namespace, started and listening.
fn start_node(netns: &Netns, index: usize) -> Served {
    let mut command = netns.command(index, env!("CARGO_BIN_EXE_lintel"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("LINTEL_") {
            command.env_remove(&name);
        }
    }
    let advertise = format!("{}:{PORT}", netns.host(index).ip);
    command
        .args(["serve", "--listen", &client_address(netns, index)])
        .args(["--advertise", &advertise])
        .args([
            "--node-id",
            &format!("n{index}"),
            "--peer",
            "peers.test:7400",
        ])
        .env("LINTEL_PEER_RESOLVE_INTERVAL_MS", "500")
        .env("LINTEL_PEER_PING_INTERVAL_MS", PEER_PING_MS.to_string())
        .env("LINTEL_MAX_MISSED_PINGS", "3")
        .env("LINTEL_PEER_RELINK_GRACE_MS", RELINK_GRACE_MS.to_string())
        .env("LINTEL_PING_INTERVAL_MS", "1000")
        .env("RUST_LOG", "info");
    let mut node = Served::spawn(command);
    node.wait_for("listening");
    node
}

/// Node `index`'s status, asked with `lintel status --json` from inside its namespace.
async fn status_of(netns: &Netns, index: usize) -> Result<Status, String> {
    let mut command = netns.command(index, env!("CARGO_BIN_EXE_lintel"));
    command.args([
        "status",
        "--json",
        "--connect",
        &client_address(netns, index),
    ]);
    let out = tokio::process::Command::from(command)
        .output()
        .await
        .map_err(|err| err.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|err| err.to_string())
}

/// Waits until every node shows exactly one link up to each other node; how long it took.
async fn wait_meshed(netns: &Netns, what: &str) -> Duration {
    let began = Instant::now();
    until(what, SETTLE, async || {
        for index in 0..NODES {
            let status = status_of(netns, index).await?;
            for other in (0..NODES).filter(|other| *other != index) {
                let id = format!("n{other}");
                let up = status
                    .peers
                    .iter()
                    .filter(|peer| peer.link.node_id == id && peer.link.state == PeerLinkState::Up)
                    .count();
                if up != 1 {
                    return Err(format!(
                        "n{index} has {up} links up to {id}: {:?}",
                        status.peers
                    ));
                }
            }
        }
        Ok(())
    })
    .await;
    began.elapsed()
}

/// Checks that a host whose link is set down cannot be reached while it is down: a connect to
/// it is refused (nothing listens yet) while up, and times out while down.
async fn cutting_a_link_stops_traffic(netns: &Netns) -> Result<(), String> {
    let target = format!("{}:{PORT}", netns.host(PARTITIONED).ip);
    let before = probe(netns, &target).await;
    netns.set_link(PARTITIONED, false)?;
    let down = probe(netns, &target).await;
    netns.set_link(PARTITIONED, true)?;
    let after = probe(netns, &target).await;
    match (before.as_str(), down.as_str(), after.as_str()) {
        ("refused", "timeout", "refused") => Ok(()),
        _ => Err(format!(
            "a link set down does not stop traffic here: a connect from n0 to n1 came to {before:?} \
             with the link up, {down:?} with it down, {after:?} up again"
        )),
    }
}

/// How a TCP connect from host 0 to `target` went, from a probe run there.
async fn probe(netns: &Netns, target: &str) -> String {
    let mut command =
        tokio::process::Command::from(helper_command(netns, 0, &format!("probe {target}")));
    let out = command
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .await
        .expect("run a probe");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|line| match Report::parse(line) {
            Some(Report::Probe(result)) => Some(result),
            _ => None,
        })
        .unwrap_or_else(|| format!("no-answer({})", out.status))
}

/// This test binary in host `index`'s namespace, running only this test, as helper `part`.
fn helper_command(netns: &Netns, index: usize, part: &str) -> std::process::Command {
    let exe = std::env::current_exe().expect("the test binary");
    let mut command = netns.command(index, exe);
    command
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(HELPER, part);
    command
}

/// A helper process whose report lines go into the collection as they come; killed on drop.
struct Helper {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: JoinHandle<()>,
}

impl Helper {
    fn spawn(netns: &Netns, index: usize, part: &str, collected: &Arc<Mutex<Collected>>) -> Self {
        let mut command = tokio::process::Command::from(helper_command(netns, index, part));
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start a helper");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let collected = Arc::clone(collected);
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(report) = Report::parse(&line) {
                    lock(&collected).take(report);
                }
            }
        });
        Self {
            child,
            stdin,
            reader,
        }
    }

    /// Writes `command` as a line to the helper's stdin.
    async fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("the helper's stdin is open");
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("write to the helper");
    }

    /// Closes the proxy's stdin, waits for its last counts and its exit; the counts.
    async fn stop_weather(mut self, collected: &Arc<Mutex<Collected>>) -> [u64; 4] {
        self.stdin.take();
        let _ = tokio::time::timeout(support::WAIT, self.child.wait()).await;
        let _ = tokio::time::timeout(support::WAIT, &mut self.reader).await;
        lock(collected).weather
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        self.reader.abort();
    }
}

/// Runs helper `part` in this process: a worker, a producer, the proxy, or a probe.
async fn helper(part: &str) {
    let words: Vec<&str> = part.split(' ').collect();
    let address = |index: usize| -> SocketAddr {
        words
            .get(index)
            .and_then(|word| word.parse().ok())
            .unwrap_or_else(|| panic!("helper {part:?}: no address at word {index}"))
    };
    let word = |index: usize| words.get(index).copied().unwrap_or_default().to_owned();
    let seed = u64::from(std::process::id());
    match words.first().copied() {
        Some("worker") => {
            let spec = WorkerSpec {
                name: word(1),
                node_id: word(2),
                node: address(3),
                capacity: word(4).parse().expect("capacity"),
            };
            host_clients::worker(spec, seed).await;
        }
        Some("producer") => {
            let spec = ProducerSpec {
                name: word(1),
                node_id: word(2),
                node: address(3),
                window: 8,
                pause_ms: (5, 25),
                wait_for_worker_ms: WAIT_FOR_WORKER_MS,
                reply_timeout_ms: REPLY_TIMEOUT_MS,
            };
            let (stop, stopped) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                let _ = tokio::io::stdin().read_to_end(&mut Vec::new()).await;
                stop.send_replace(true);
            });
            host_clients::producer(spec, seed, stopped).await;
        }
        Some("proxy") => {
            let proxy = Proxy::weathered(address(1), address(2), WEATHER).await;
            let mut commands = BufReader::new(tokio::io::stdin()).lines();
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                tokio::select! {
                    command = commands.next_line() => match command {
                        Ok(Some(command)) if command == "reset" => proxy.reset(),
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => break,
                    },
                    _ = every.tick() => Report::Weather(proxy.counts().read()).print(),
                }
            }
            Report::Weather(proxy.counts().read()).print();
        }
        Some("probe") => {
            let target = address(1);
            let connect = tokio::net::TcpStream::connect(target);
            let result = match tokio::time::timeout(Duration::from_millis(1_500), connect).await {
                Ok(Ok(_)) => "connected",
                Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => "refused",
                Ok(Err(_)) => "failed",
                Err(_) => "timeout",
            };
            Report::Probe(result.to_owned()).print();
        }
        _ => panic!("unknown helper part {part:?}"),
    }
}
