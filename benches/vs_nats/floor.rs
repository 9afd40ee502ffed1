//! The floor: a plain two-hop TCP relay with no logic, the least any broker-mediated
//! request/reply can cost.
//!
//! client -> relay -> echo -> relay -> client, on loopback. A message is a 4-byte big-endian
//! length, an 8-byte id and the payload. The relay reads only lengths: it hands whole messages
//! from its client to its `workers` echo connections in turn, and whole replies back, batching
//! whatever one read returned into one write. The echo server writes back what it read. The
//! client pipelines: one writer task batching queued messages, one reader completing waiters by id.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::measure::Target;

/// Bytes before the payload: length (of id plus payload) and id.
const HEADER: usize = 4 + 8;

/// Messages the client queues for its writer.
const QUEUE: usize = 1024;

/// The relay, the echo server and one pipelined client connection through them.
pub struct Floor {
    tasks: JoinSet<()>,
    client: FloorClient,
}

impl Floor {
    /// Starts an echo server and a relay on 127.0.0.1 that opens `workers` echo connections per
    /// client connection, and connects one client.
    ///
    /// # Errors
    /// Binding or connecting failed.
    pub async fn start(workers: usize) -> io::Result<Self> {
        let mut tasks = JoinSet::new();
        let echo = TcpListener::bind("127.0.0.1:0").await?;
        let echo_addr = echo.local_addr()?;
        tasks.spawn(accept_loop(echo, |stream| async move {
            let _ = echo_connection(stream).await;
        }));
        let relay = TcpListener::bind("127.0.0.1:0").await?;
        let relay_addr = relay.local_addr()?;
        let workers = workers.max(1);
        tasks.spawn(accept_loop(relay, move |stream| async move {
            let _ = relay_connection(stream, echo_addr, workers).await;
        }));
        let client = FloorClient::connect(relay_addr).await?;
        Ok(Self { tasks, client })
    }

    /// The request path through the relay.
    pub fn target(&self) -> Arc<FloorClient> {
        Arc::new(self.client.clone())
    }

    /// Stops every task and closes every connection.
    pub async fn stop(mut self) {
        self.client.writer.abort();
        self.client.reader.abort();
        self.tasks.shutdown().await;
    }
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

/// Forwards whole messages from the client to `workers` echo connections in turn, and whole
/// replies back.
async fn relay_connection(client: TcpStream, echo: SocketAddr, workers: usize) -> io::Result<()> {
    let (mut from_client, to_client) = client.into_split();
    let to_client = Arc::new(tokio::sync::Mutex::new(to_client));
    let mut upstreams = Vec::with_capacity(workers);
    let mut returns = JoinSet::new();
    for _ in 0..workers {
        let stream = TcpStream::connect(echo).await?;
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

/// One pipelined client connection to the relay; clones share it.
#[derive(Clone)]
pub struct FloorClient {
    queue: mpsc::Sender<(u64, Bytes)>,
    waiters: Waiters,
    next_id: Arc<AtomicU64>,
    writer: Arc<tokio::task::AbortHandle>,
    reader: Arc<tokio::task::AbortHandle>,
}

impl FloorClient {
    async fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (from_relay, to_relay) = stream.into_split();
        let (queue, queued) = mpsc::channel(QUEUE);
        let waiters = Waiters::default();
        let writer = tokio::spawn(write_loop(to_relay, queued)).abort_handle();
        let reader = tokio::spawn(read_loop(from_relay, Arc::clone(&waiters))).abort_handle();
        Ok(Self {
            queue,
            waiters,
            next_id: Arc::new(AtomicU64::new(1)),
            writer: Arc::new(writer),
            reader: Arc::new(reader),
        })
    }
}

impl Target for FloorClient {
    async fn call(&self, _lane: usize, payload: Bytes) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let len = payload.len();
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        if self.queue.send((id, payload)).await.is_err() {
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
async fn write_loop(mut to_relay: OwnedWriteHalf, mut queued: mpsc::Receiver<(u64, Bytes)>) {
    let mut batch = Vec::with_capacity(QUEUE);
    let mut out = BytesMut::with_capacity(64 * 1024);
    while queued.recv_many(&mut batch, QUEUE).await > 0 {
        for (id, payload) in batch.drain(..) {
            out.reserve(HEADER + payload.len());
            out.put_u32(u32::try_from(8 + payload.len()).unwrap_or(u32::MAX));
            out.put_u64(id);
            out.put_slice(&payload);
        }
        if to_relay.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
}

/// Completes waiters by id; on EOF drops them all, so every caller hears at once.
async fn read_loop(mut from_relay: tokio::net::tcp::OwnedReadHalf, waiters: Waiters) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Ok(true) = read_some(&mut from_relay, &mut buf).await {
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
