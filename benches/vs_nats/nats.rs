//! NATS under test: `nats-server` as a child process on a free loopback port, `workers`
//! responders in one queue group on one subject echoing through async-nats, and one async-nats
//! requester calling `request`. Responders and requester run in the harness or in peer
//! processes, as the [`Mode`] says; NATS has no embedded layout. Cross-node
//! ([`crate::topology`]), two servers joined by a route, the requester on the first and the
//! responders on the second ([`NatsServers`]).

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

use crate::kind::Kind;
use crate::measure::{self, Load, Sample, Target};
use crate::mode::{Mode, Producer};
use crate::process::{Launcher, LoadSpec, Proc, Role};

/// The subject requests go to.
pub const SUBJECT: &str = "bench.echo";

/// The responders' queue group.
const QUEUE_GROUP: &str = "workers";

/// How long nats-server may take to say it is ready.
const READY_WAIT: Duration = Duration::from_secs(10);

/// How long the responders' interest may take to reach the requester's server.
const INTEREST_WAIT: Duration = Duration::from_secs(10);

/// Between two requests that found no responder yet.
const INTEREST_RETRY: Duration = Duration::from_millis(20);

/// Where to find `nats-server`, or how to get it.
pub fn find_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

/// Finds `nats-server`, running `scripts/install-nats.sh` once when it is missing.
///
/// # Errors
/// Exactly how to install it, when that failed.
pub fn find_or_install() -> Result<PathBuf, String> {
    if let Some(found) = find_server() {
        return Ok(found);
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/install-nats.sh");
    eprintln!("nats-server not found; running {}", script.display());
    let status = Command::new("bash").arg(&script).status();
    match (status, find_server()) {
        (Ok(status), Some(found)) if status.success() => Ok(found),
        (status, _) => Err(format!(
            "nats-server is not installed ({}); install it with `sudo apt-get install -y nats-server` \
             (Debian's package, 2.9) or run scripts/install-nats.sh as root",
            match status {
                Ok(status) => format!("install script exited with {status}"),
                Err(err) => format!("cannot run the install script: {err}"),
            }
        )),
    }
}

/// A running `nats-server`; killed and reaped on drop.
pub struct NatsServer {
    child: Child,
    pub addr: SocketAddr,
    pub version: String,
    _config: TempFile,
}

impl NatsServer {
    /// Starts `binary` on a free 127.0.0.1 port with payloads up to 4 MiB (lintel's frame limit)
    /// and waits until it says it is ready.
    ///
    /// # Errors
    /// What failed, as text.
    pub fn start(binary: &std::path::Path) -> Result<Self, String> {
        let port = free_port().map_err(|err| format!("no free port: {err}"))?;
        Self::launch(binary, port, &[])
    }

    /// [`Self::start`] on `port`, with `extra` arguments.
    fn launch(binary: &std::path::Path, port: u16, extra: &[String]) -> Result<Self, String> {
        let config = TempFile::new(
            &format!("nats-{port}.conf"),
            "max_payload: 4194304\nmax_pending: 268435456\nwrite_deadline: \"10s\"\n",
        )
        .map_err(|err| format!("cannot write the nats config: {err}"))?;
        let version = Command::new(binary)
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default();
        let mut child = Command::new(binary)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .args(extra)
            .arg("-c")
            .arg(&config.path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| format!("cannot start {}: {err}", binary.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr from nats-server")?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        // Reads the log to its end so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut ready = Some(ready_tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Server is ready") {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(Ok(()));
                    }
                } else if line.contains("[FTL]") || line.contains("[ERR]") {
                    if let Some(ready) = &ready {
                        let _ = ready.send(Err(line.clone()));
                    }
                    eprintln!("nats-server: {line}");
                }
            }
        });
        let mut server = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            version,
            _config: config,
        };
        match ready_rx.recv_timeout(READY_WAIT) {
            Ok(Ok(())) => Ok(server),
            Ok(Err(line)) => Err(format!("nats-server failed to start: {line}")),
            Err(_) => {
                let exited = server.child.try_wait().ok().flatten();
                Err(format!(
                    "nats-server was not ready within {READY_WAIT:?} (exit: {exited:?})"
                ))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("nats://{}", self.addr)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nats-servers of a run: one, or two joined by a route (cross-node). Requesters connect to
/// the first, responders to the last.
pub struct NatsServers {
    servers: Vec<NatsServer>,
}

impl NatsServers {
    /// One server, as [`NatsServer::start`] starts it.
    ///
    /// # Errors
    /// What failed, as text.
    pub fn one(binary: &std::path::Path) -> Result<Self, String> {
        Ok(Self {
            servers: vec![NatsServer::start(binary)?],
        })
    }

    /// Two servers in one cluster: server 2 (the responders') listens for routes, then server 1
    /// (the requester's) starts with a route to it. One route, solicited by server 1, carries
    /// both ways; solicited by both, one of them would first be refused (the other server not
    /// yet up) and then replaced as a duplicate. Whether the route is up is learnt from a request
    /// crossing it (see [`Nats::start`]).
    ///
    /// # Errors
    /// What failed, as text.
    pub fn routed_pair(binary: &std::path::Path) -> Result<Self, String> {
        let mut ports = Vec::with_capacity(4);
        // Held until all four are taken, so no two are the same.
        let mut held = Vec::with_capacity(4);
        for _ in 0..4 {
            let listener =
                StdListener::bind("127.0.0.1:0").map_err(|err| format!("no free port: {err}"))?;
            ports.push(listener.local_addr().map_err(|err| err.to_string())?.port());
            held.push(listener);
        }
        drop(held);
        let [client1, client2, cluster1, cluster2] = [ports[0], ports[1], ports[2], ports[3]];
        let cluster = |name: &str, port: u16| {
            vec![
                "--server_name".to_owned(),
                name.to_owned(),
                "--cluster_name".to_owned(),
                "vs-nats".to_owned(),
                "--cluster".to_owned(),
                format!("nats://127.0.0.1:{port}"),
            ]
        };
        let second = NatsServer::launch(binary, client2, &cluster("server-2", cluster2))?;
        let mut args = cluster("server-1", cluster1);
        args.extend([
            "--routes".to_owned(),
            format!("nats://127.0.0.1:{cluster2}"),
        ]);
        let first = NatsServer::launch(binary, client1, &args)?;
        Ok(Self {
            servers: vec![first, second],
        })
    }

    /// Where requesters connect: the first server.
    pub fn requester_url(&self) -> String {
        self.servers[0].url()
    }

    /// Where responders connect: the last server.
    pub fn responder_url(&self) -> String {
        self.servers[self.servers.len() - 1].url()
    }

    /// Every server's process.
    pub fn pids(&self) -> Vec<u32> {
        self.servers.iter().map(NatsServer::pid).collect()
    }

    pub fn version(&self) -> String {
        self.servers[0].version.clone()
    }
}

/// A file in the system's temp dir, removed on drop.
pub struct TempFile {
    pub path: PathBuf,
}

impl TempFile {
    pub fn new(name: &str, contents: &str) -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!("vs-nats-{}-{name}", std::process::id()));
        std::fs::write(&path, contents)?;
        Ok(Self { path })
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> std::io::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// NATS set up for one scenario: `workers` echo responders in the harness or in processes of
/// their own, and one requester in the harness or in a process per round.
pub struct Nats {
    responders: JoinSet<()>,
    procs: Vec<Proc>,
    requester: Requester,
    server_pids: Vec<u32>,
}

enum Requester {
    Harness(async_nats::Client, Arc<NatsTarget>),
    Process(Launcher, String),
}

impl Nats {
    /// Connects the responders to the last of `servers` where `mode` puts them, each one
    /// subscribed before the next starts, then the requester to the first; returns once a
    /// request from there is answered.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start(
        servers: &NatsServers,
        workers: usize,
        mode: Mode,
        launcher: &Launcher,
    ) -> Result<Self, String> {
        if !mode.runs(Kind::Nats) {
            return Err(format!("NATS has no {} layout", mode.key()));
        }
        let url = servers.responder_url();
        let mut nats = Self {
            responders: JoinSet::new(),
            procs: Vec::new(),
            requester: Requester::Process(launcher.clone(), servers.requester_url()),
            server_pids: servers.pids(),
        };
        if let Err(err) = nats
            .start_pieces(servers, &url, workers, mode, launcher)
            .await
        {
            nats.stop().await;
            return Err(err);
        }
        Ok(nats)
    }

    async fn start_pieces(
        &mut self,
        servers: &NatsServers,
        url: &str,
        workers: usize,
        mode: Mode,
        launcher: &Launcher,
    ) -> Result<(), String> {
        for _ in 0..workers.max(1) {
            if mode.workers_own_processes() {
                let role = Role::NatsResponder {
                    url: url.to_owned(),
                };
                self.procs.push(launcher.serve(&role).await?.0);
            } else {
                self.responders.spawn(responder(url).await?);
            }
        }
        let requester_url = servers.requester_url();
        wait_until_answered(&requester_url, INTEREST_WAIT).await?;
        if mode.producer() != Producer::OwnProcess {
            let client = connect(&requester_url).await?;
            let target = Arc::new(NatsTarget {
                client: client.clone(),
            });
            self.requester = Requester::Harness(client, target);
        }
        Ok(())
    }

    /// nats-server's processes.
    pub fn middle_pids(&self) -> Vec<u32> {
        self.server_pids.clone()
    }

    /// Runs `load` from wherever the requester is.
    pub async fn measure(&self, load: &Load) -> Sample {
        match &self.requester {
            Requester::Harness(_, target) => measure::run(target, load).await,
            Requester::Process(launcher, url) => {
                let spec = LoadSpec::of(load);
                let role = Role::NatsRequester {
                    url: url.clone(),
                    load: spec.clone(),
                };
                launcher
                    .measure(&role, &spec)
                    .await
                    .unwrap_or_else(Sample::failed_with)
            }
        }
    }

    /// Closes the requester and every responder.
    pub async fn stop(mut self) {
        if let Requester::Harness(client, _) = &self.requester {
            let _ = client.drain().await;
        }
        self.responders.shutdown().await;
        for proc in self.procs {
            proc.stop().await;
        }
    }
}

/// Connects one echo responder in the queue group and returns once the server has its
/// subscription; the future it returns answers requests until the connection ends.
///
/// # Errors
/// What failed, as text.
pub async fn responder(url: &str) -> Result<impl Future<Output = ()> + Send + 'static, String> {
    let client = connect(url).await?;
    let mut messages = client
        .queue_subscribe(SUBJECT, QUEUE_GROUP.to_owned())
        .await
        .map_err(|err| format!("nats subscribe failed: {err}"))?;
    // A flush is a PING/PONG round trip: the server has the subscription after it.
    client
        .flush()
        .await
        .map_err(|err| format!("nats flush failed: {err}"))?;
    Ok(async move {
        while let Some(message) = messages.next().await {
            if let Some(reply) = message.reply {
                if client.publish(reply, message.payload).await.is_err() {
                    return;
                }
            }
        }
    })
}

/// Requests on [`SUBJECT`] from a connection to `url` until one is answered, for at most
/// `within`: the responders' interest has reached that server then.
///
/// # Errors
/// None was answered in time.
async fn wait_until_answered(url: &str, within: Duration) -> Result<(), String> {
    let client = connect(url).await?;
    let target = NatsTarget {
        client: client.clone(),
    };
    let deadline = Instant::now() + within;
    let mut last = String::new();
    // The count bounds the loop even if requests fail faster than the retry pause.
    for _ in 0..within.as_millis() / INTEREST_RETRY.as_millis() + 1 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match tokio::time::timeout(left, target.call(0, Bytes::from_static(b"ping"))).await {
            Ok(Ok(())) => {
                let _ = client.drain().await;
                return Ok(());
            }
            Ok(Err(err)) => last = err,
            Err(_) => last = "timed out".to_owned(),
        }
        tokio::time::sleep(INTEREST_RETRY).await;
    }
    let _ = client.drain().await;
    Err(format!(
        "no request from {url} was answered within {within:?} (last: {last})"
    ))
}

/// A requester connection to `url`.
///
/// # Errors
/// The connect error, as text.
pub async fn connect(url: &str) -> Result<async_nats::Client, String> {
    async_nats::ConnectOptions::new()
        .request_timeout(Some(Duration::from_secs(10)))
        .connect(url)
        .await
        .map_err(|err| format!("cannot connect to nats-server: {err}"))
}

/// Requests on [`SUBJECT`] through one async-nats connection.
pub struct NatsTarget {
    pub client: async_nats::Client,
}

impl Target for NatsTarget {
    async fn call(&self, _lane: usize, payload: Bytes) -> Result<(), String> {
        let len = payload.len();
        match self.client.request(SUBJECT, payload).await {
            Ok(reply) if reply.payload.len() == len => Ok(()),
            Ok(reply) => Err(format!("wrong-echo-length {}", reply.payload.len())),
            Err(err) => Err(format!("nats: {:?}", err.kind())),
        }
    }
}

/// Opens `count` idle subscriber connections: each says `CONNECT`, subscribes to [`SUBJECT`] in
/// the queue group and waits for the `PONG` that proves the server took both. Keep the returned
/// streams open for as long as the connections should exist.
///
/// # Errors
/// The first connection that failed, as text.
pub async fn idle_subscribers(
    addr: SocketAddr,
    count: usize,
) -> Result<Vec<tokio::net::TcpStream>, String> {
    let mut streams = Vec::with_capacity(count);
    let mut pending = JoinSet::new();
    let mut started = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while streams.len() < count {
        while started < count && pending.len() < 128 {
            pending.spawn(idle_subscriber(addr));
            started += 1;
        }
        match pending.join_next().await {
            Some(Ok(Ok(stream))) => streams.push(stream),
            Some(Ok(Err(err))) => return Err(format!("idle nats connection failed: {err}")),
            Some(Err(err)) => return Err(err.to_string()),
            None => break,
        }
        if Instant::now() > deadline {
            return Err("idle nats connections took over 120 s".into());
        }
    }
    Ok(streams)
}

async fn idle_subscriber(addr: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let mut stream = tokio::io::BufStream::new(stream);
    let mut line = String::new();
    stream.read_line(&mut line).await?; // INFO {...}
    stream
        .write_all(
            format!(
                "CONNECT {{\"verbose\":false,\"pedantic\":false,\"protocol\":1,\"headers\":true,\"no_responders\":true}}\r\nSUB {SUBJECT} {QUEUE_GROUP} 1\r\nPING\r\n"
            )
            .as_bytes(),
        )
        .await?;
    stream.flush().await?;
    loop {
        line.clear();
        if stream.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line.starts_with("PONG") {
            return Ok(stream.into_inner());
        }
        if line.starts_with("-ERR") {
            return Err(std::io::Error::other(line.trim().to_owned()));
        }
    }
}
