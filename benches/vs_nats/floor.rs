//! The floor: a plain two-hop TCP relay with no logic, the least any broker-mediated
//! request/reply can cost.
//!
//! client -> relay -> echo -> relay -> client, on loopback. A message is a 4-byte big-endian
//! length, an 8-byte id and the payload. The relay reads only lengths: it hands whole messages
//! from a client connection to its echo connections (one to each echo server) in turn, and whole
//! replies back, batching whatever one read returned into one write. An echo server writes back
//! what it read. The client pipelines: one writer task per connection batching queued messages,
//! one reader completing waiters by id.
//!
//! [`Floor`] places the pieces as the [`Mode`] says: echo servers and the relay in the harness or
//! in peer processes ([`serve_echo`], [`serve_relay`]), the client in the harness or in a peer
//! process per round. In `embedded` the client dials the echo servers itself, with no relay: the
//! floor of a producer inside the middle's process.
//!
//! Cross-node ([`Topology::CrossNode`]) the floor is a three-hop relay: client -> relay 1 ->
//! relay 2 -> echo and back. Relay 1 is the same relay with relay 2 as its only upstream; since a
//! relay reads only lengths, it cannot tell a relay from an echo server.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::measure::{self, Load, Sample, Target};
use crate::mode::{Mode, Producer};
use crate::process::{Launcher, LoadSpec, Proc, Role};
use crate::topology::Topology;

/// Bytes before the payload: length (of id plus payload) and id.
const HEADER: usize = 4 + 8;

/// Messages the client queues for each connection's writer.
const QUEUE: usize = 1024;

/// The floor set up for one scenario.
pub struct Floor {
    /// Echo servers and the relay running in the harness.
    tasks: JoinSet<()>,
    /// Echo servers and the relay running as peer processes.
    procs: Vec<Proc>,
    /// The relays' processes, when they have their own.
    relay_pids: Vec<u32>,
    client: Client,
}

enum Client {
    Harness(Arc<FloorClient>),
    /// A client process per round, dialling these.
    Process(Launcher, Vec<SocketAddr>),
}

impl Floor {
    /// Starts `workers` echo servers, the relay (two in a row, cross-node) and the client where
    /// `mode` puts them.
    ///
    /// # Errors
    /// What failed, as text.
    pub async fn start(
        workers: usize,
        mode: Mode,
        topology: Topology,
        launcher: &Launcher,
    ) -> Result<Self, String> {
        let workers = workers.max(1);
        let mut floor = Self {
            tasks: JoinSet::new(),
            procs: Vec::new(),
            relay_pids: Vec::new(),
            client: Client::Process(launcher.clone(), Vec::new()),
        };
        match floor.start_pieces(workers, mode, topology, launcher).await {
            Ok(()) => Ok(floor),
            Err(err) => {
                floor.stop().await;
                Err(format!("floor: {err}"))
            }
        }
    }

    async fn start_pieces(
        &mut self,
        workers: usize,
        mode: Mode,
        topology: Topology,
        launcher: &Launcher,
    ) -> Result<(), String> {
        let mut echo = Vec::with_capacity(workers);
        if mode.workers_own_processes() {
            for _ in 0..workers {
                let (proc, addr) = launcher.serve(&Role::FloorEcho).await?;
                self.procs.push(proc);
                echo.push(parse_addr(&addr)?);
            }
        } else {
            let listener = bind().await?;
            let addr = listener.local_addr().map_err(|err| err.to_string())?;
            self.tasks.spawn(serve_echo(listener));
            echo.resize(workers, addr);
        }
        let targets = if mode.producer() == Producer::InMiddle {
            if topology != Topology::OneMiddle {
                return Err(format!(
                    "no {} layout in mode {}",
                    topology.key(),
                    mode.key()
                ));
            }
            echo
        } else {
            // Relays from the workers' end: each one's only upstream is the one started before.
            let mut upstream = echo;
            for _ in 0..topology.middles() {
                upstream = vec![self.start_relay(upstream, mode, launcher).await?];
            }
            upstream
        };
        self.client = if mode.producer() == Producer::OwnProcess {
            Client::Process(launcher.clone(), targets)
        } else {
            let client = FloorClient::connect(&targets)
                .await
                .map_err(|err| format!("cannot connect the client: {err}"))?;
            Client::Harness(Arc::new(client))
        };
        Ok(())
    }

    /// A relay to `upstream`, in a process of its own or in the harness as `mode` says; returns
    /// its address.
    async fn start_relay(
        &mut self,
        upstream: Vec<SocketAddr>,
        mode: Mode,
        launcher: &Launcher,
    ) -> Result<SocketAddr, String> {
        if mode.middle_own_process() {
            let (proc, addr) = launcher.serve(&Role::FloorRelay { echo: upstream }).await?;
            self.relay_pids.extend(proc.pid());
            self.procs.push(proc);
            parse_addr(&addr)
        } else {
            let listener = bind().await?;
            let addr = listener.local_addr().map_err(|err| err.to_string())?;
            self.tasks.spawn(serve_relay(listener, upstream));
            Ok(addr)
        }
    }

    /// The processes the relays run in: their own, or the harness's.
    pub fn middle_pids(&self) -> Vec<u32> {
        if self.relay_pids.is_empty() {
            vec![std::process::id()]
        } else {
            self.relay_pids.clone()
        }
    }

    /// Runs `load` from wherever the client is.
    pub async fn measure(&self, load: &Load) -> Sample {
        match &self.client {
            Client::Harness(client) => measure::run(client, load).await,
            Client::Process(launcher, targets) => {
                let spec = LoadSpec::of(load);
                let role = Role::FloorClient {
                    targets: targets.clone(),
                    load: spec.clone(),
                };
                launcher
                    .measure(&role, &spec)
                    .await
                    .unwrap_or_else(Sample::failed_with)
            }
        }
    }

    /// Stops every task and process and closes every connection.
    pub async fn stop(mut self) {
        if let Client::Harness(client) = &self.client {
            client.close();
        }
        self.tasks.shutdown().await;
        for proc in self.procs {
            proc.stop().await;
        }
    }
}

async fn bind() -> Result<TcpListener, String> {
    TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|err| format!("cannot bind a loopback port: {err}"))
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|err| format!("bad address {text:?} from a peer: {err}"))
}

/// Echoes every whole message on every connection `listener` accepts.
pub async fn serve_echo(listener: TcpListener) {
    accept_loop(listener, |stream| async move {
        let _ = echo_connection(stream).await;
    })
    .await;
}

/// Relays every connection `listener` accepts to one connection to each of `echo`, in turn.
pub async fn serve_relay(listener: TcpListener, echo: Vec<SocketAddr>) {
    let echo: Arc<[SocketAddr]> = echo.into();
    accept_loop(listener, move |stream| {
        let echo = Arc::clone(&echo);
        async move {
            let _ = relay_connection(stream, &echo).await;
        }
    })
    .await;
}

async fn accept_loop<F, Fut>(listener: TcpListener, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        connections.spawn(serve(stream));
        while connections.try_join_next().is_some() {}
    }
}

/// The length of the prefix of `buf` made of whole messages.
pub fn whole_messages(buf: &[u8]) -> usize {
    let mut at = 0;
    while buf.len() - at >= 4 {
        let len = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        if buf.len() - at - 4 < len {
            break;
        }
        at += 4 + len;
    }
    at
}

/// Reads into `buf` until at least one whole message is there; `Ok(false)` on a clean EOF.
async fn read_some(
    stream: &mut (impl AsyncReadExt + Unpin),
    buf: &mut BytesMut,
) -> io::Result<bool> {
    buf.reserve(64 * 1024);
    Ok(stream.read_buf(buf).await? > 0)
}

/// Writes back every whole message it reads.
async fn echo_connection(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while read_some(&mut stream, &mut buf).await? {
        let whole = whole_messages(&buf);
        if whole > 0 {
            let out = buf.split_to(whole);
            stream.write_all(&out).await?;
        }
    }
    Ok(())
}

/// Forwards whole messages from the client to one connection to each of `echo` in turn, and
/// whole replies back.
async fn relay_connection(client: TcpStream, echo: &[SocketAddr]) -> io::Result<()> {
    let (mut from_client, to_client) = client.into_split();
    let to_client = Arc::new(tokio::sync::Mutex::new(to_client));
    let workers = echo.len();
    let mut upstreams = Vec::with_capacity(workers);
    let mut returns = JoinSet::new();
    for addr in echo {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (from_echo, to_echo) = stream.into_split();
        returns.spawn(relay_back(from_echo, Arc::clone(&to_client)));
        upstreams.push((to_echo, BytesMut::new()));
    }
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut next = 0;
    while read_some(&mut from_client, &mut buf).await? {
        let mut whole = buf.split_to(whole_messages(&buf));
        if workers == 1 {
            upstreams[0].0.write_all(&whole).await?;
            continue;
        }
        while whole.has_remaining() {
            let len = 4 + u32::from_be_bytes([whole[0], whole[1], whole[2], whole[3]]) as usize;
            upstreams[next].1.extend_from_slice(&whole.split_to(len));
            next = (next + 1) % workers;
        }
        for (to_echo, out) in &mut upstreams {
            if !out.is_empty() {
                to_echo.write_all(out).await?;
                out.clear();
            }
        }
    }
    returns.shutdown().await;
    Ok(())
}

/// Forwards whole replies from one echo connection to the client.
async fn relay_back(
    mut from_echo: tokio::net::tcp::OwnedReadHalf,
    to_client: Arc<tokio::sync::Mutex<OwnedWriteHalf>>,
) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Ok(true) = read_some(&mut from_echo, &mut buf).await {
        let whole = whole_messages(&buf);
        if whole > 0 {
            let out = buf.split_to(whole);
            if to_client.lock().await.write_all(&out).await.is_err() {
                return;
            }
        }
    }
}

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Bytes>>>>;

/// A pipelined client over one connection to each of its targets, taken in turn per request;
/// clones share the connections.
#[derive(Clone)]
pub struct FloorClient {
    links: Arc<[Link]>,
    next: Arc<AtomicUsize>,
    next_id: Arc<AtomicU64>,
}

struct Link {
    queue: mpsc::Sender<(u64, Bytes)>,
    waiters: Waiters,
    writer: tokio::task::AbortHandle,
    reader: tokio::task::AbortHandle,
}

impl FloorClient {
    /// One connection to each of `targets`.
    ///
    /// # Errors
    /// A connection failed.
    pub async fn connect(targets: &[SocketAddr]) -> io::Result<Self> {
        let mut links = Vec::with_capacity(targets.len());
        for addr in targets {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (from_peer, to_peer) = stream.into_split();
            let (queue, queued) = mpsc::channel(QUEUE);
            let waiters = Waiters::default();
            let writer = tokio::spawn(write_loop(to_peer, queued)).abort_handle();
            let reader = tokio::spawn(read_loop(from_peer, Arc::clone(&waiters))).abort_handle();
            links.push(Link {
                queue,
                waiters,
                writer,
                reader,
            });
        }
        if links.is_empty() {
            return Err(io::Error::other("no address to connect to"));
        }
        Ok(Self {
            links: links.into(),
            next: Arc::new(AtomicUsize::new(0)),
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// Stops every connection's tasks; waiting callers hear "connection-lost".
    pub fn close(&self) {
        for link in self.links.iter() {
            link.writer.abort();
            link.reader.abort();
        }
    }
}

impl Target for FloorClient {
    async fn call(&self, _lane: usize, payload: Bytes) -> Result<(), String> {
        let link = if self.links.len() == 1 {
            &self.links[0]
        } else {
            &self.links[self.next.fetch_add(1, Ordering::Relaxed) % self.links.len()]
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let len = payload.len();
        let (tx, rx) = oneshot::channel();
        link.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        if link.queue.send((id, payload)).await.is_err() {
            return Err("connection-lost".into());
        }
        match rx.await {
            Ok(reply) if reply.len() == len => Ok(()),
            Ok(reply) => Err(format!("wrong-echo-length {}", reply.len())),
            Err(_) => Err("connection-lost".into()),
        }
    }
}

/// Writes every queued message, as many per write as are waiting.
async fn write_loop(mut to_peer: OwnedWriteHalf, mut queued: mpsc::Receiver<(u64, Bytes)>) {
    let mut batch = Vec::with_capacity(QUEUE);
    let mut out = BytesMut::with_capacity(64 * 1024);
    while queued.recv_many(&mut batch, QUEUE).await > 0 {
        for (id, payload) in batch.drain(..) {
            out.reserve(HEADER + payload.len());
            out.put_u32(u32::try_from(8 + payload.len()).unwrap_or(u32::MAX));
            out.put_u64(id);
            out.put_slice(&payload);
        }
        if to_peer.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
}

/// Completes waiters by id; on EOF drops them all, so every caller hears at once.
async fn read_loop(mut from_peer: tokio::net::tcp::OwnedReadHalf, waiters: Waiters) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Ok(true) = read_some(&mut from_peer, &mut buf).await {
        let whole = whole_messages(&buf);
        let mut messages = buf.split_to(whole);
        while messages.has_remaining() {
            let len = messages.get_u32() as usize;
            let mut message = messages.split_to(len);
            let id = message.get_u64();
            let waiter = waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(waiter) = waiter {
                let _ = waiter.send(message.freeze());
            }
        }
    }
    waiters
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}
