//! Nodes on a turmoil network: each node host serves the connections its simulated listener
//! accepts and dials its peers through the simulated network, and every byte a node writes
//! passes a tap that records the `Relay` frames, counts presence bytes and what each end of a
//! link wrote, and (when the run traces frames) records each frame it sends in the trace.
//! Every socket of a node can be reset by the simulation ([`sim_links`](super::sim_links)).
//!
//! The [`Ledger`] is what the simulation observed, written by the taps, the workers and the
//! producers, and checked once the run ends.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use lintel::cluster::Mesh;
use lintel::registrations::Registrations;
use lintel::transport::{Dialer, Dialing, Socket};
use lintel::wire::{DispatchResult, Frame, FrameCodec, DEFAULT_MAX_FRAME_LEN};
use lintel::{Node, NodeConfig};
use tokio::io::AsyncWrite;
use tokio_util::codec::Decoder;

use super::sim_links::{At, KillSwitch, Killable, Links, DUPLICATE};

/// The port every node listens on.
pub const PORT: u16 = 7000;

/// Where node `name` is dialled.
pub fn address(name: &str) -> String {
    format!("{name}:{PORT}")
}

/// How one dispatch ended, as its producer read it.
#[derive(Debug, Clone)]
pub struct Ended {
    pub served_by: String,
    pub result: DispatchResult,
    /// When its producer read it, in simulated time.
    pub at: Duration,
}

/// What the simulation observed.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Each submitted dispatch, by workflow id, with its origin: the node its producer is
    /// connected to.
    pub submitted: BTreeMap<String, String>,
    /// When each dispatch was submitted, in simulated time.
    pub submitted_at: BTreeMap<String, Duration>,
    /// Every outcome a producer read, by workflow id.
    pub outcomes: BTreeMap<String, Vec<Ended>>,
    /// Dispatches in flight when their producer's connection closed: nobody is left to answer.
    pub lost: BTreeSet<String>,
    /// Each push a worker received, by workflow id: the worker and the node it is connected to.
    pub pushes: BTreeMap<String, Vec<(String, String)>>,
    /// Each `Relay` a node wrote: the sending node and the relayed workflow id.
    pub relays: Vec<(String, String)>,
    /// Broken invariants the clients saw as they ran (a worker over capacity, an outcome for
    /// nothing in flight).
    pub violations: Vec<String>,
    /// Producers that submitted everything and heard every outcome.
    pub producers_done: usize,
    /// Once set, producers submit nothing more, and are done once every outcome is in.
    pub producers_stop: bool,
    /// Every fault, submission, push, reply, outcome, loss and (with `trace_frames`) frame a
    /// node wrote, with the simulated time it was recorded at, in that order: two runs of one
    /// seed record the same.
    pub trace: Vec<Traced>,
    /// Whether every frame a node writes goes into the trace.
    pub trace_frames: bool,
    /// Every connection between nodes and what each end wrote on it.
    pub links: Links,
    /// Bytes of `Presence` frames each node wrote, framing included.
    pub presence_bytes: BTreeMap<String, u64>,
    /// Relays a node listed in a `Resume` on a new link, each asking what became of a relay
    /// a cut link left unanswered.
    pub resumed: u64,
    /// The mesh of each node's current process, while it runs: held weakly, so a crash drops
    /// it with everything else of the process.
    pub meshes: BTreeMap<String, Weak<Mesh>>,
    /// What starts the drain of each node's current process: notify it once, and the process
    /// drains, retires its links and ends (a bounce starts it again).
    pub drains: BTreeMap<String, Arc<tokio::sync::Notify>>,
}

/// One line of the trace: when, which dispatch (or `-`), and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Traced {
    pub at: Duration,
    pub workflow_id: String,
    pub what: String,
}

impl fmt::Display for Traced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>6}.{:03} ms  {}  {}",
            self.at.as_millis(),
            self.at.subsec_micros() % 1_000,
            self.workflow_id,
            self.what
        )
    }
}

impl Ledger {
    /// Adds `what` happening to `workflow_id` now, in simulated time, to the trace.
    pub fn note(&mut self, workflow_id: &str, what: String) {
        self.trace.push(Traced {
            at: turmoil::sim_elapsed().unwrap_or_default(),
            workflow_id: workflow_id.to_owned(),
            what,
        });
    }

    /// Records a relay of `workflow_id` that `node` wrote (`Relay` or `Relay`).
    fn relayed(&mut self, node: &str, workflow_id: String) {
        self.note(&workflow_id, format!("relayed by {node}"));
        self.relays.push((node.to_owned(), workflow_id));
    }
}

/// The ledger, shared by every host of one simulation.
#[derive(Debug, Clone, Default)]
pub struct Record(Arc<Mutex<Ledger>>);

impl Record {
    pub fn lock(&self) -> MutexGuard<'_, Ledger> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A write half that records what `node` writes through it: relays, presence bytes, what its
/// end of the link did, and (with `trace_frames`) every frame in the trace.
struct Tap<W> {
    inner: W,
    node: String,
    record: Record,
    at: At,
    codec: FrameCodec,
    written: BytesMut,
    /// The bytes stopped decoding; nothing more is recorded.
    lost_track: bool,
}

impl<W> Tap<W> {
    fn new(inner: W, node: &str, record: &Record, at: At) -> Self {
        Self {
            inner,
            node: node.to_owned(),
            record: record.clone(),
            at,
            codec: FrameCodec::new(DEFAULT_MAX_FRAME_LEN),
            written: BytesMut::new(),
            lost_track: false,
        }
    }

    fn observe(&mut self, bytes: &[u8]) {
        if self.lost_track {
            return;
        }
        self.written.extend_from_slice(bytes);
        loop {
            let before = self.written.len();
            match self.codec.decode(&mut self.written) {
                Ok(Some(frame)) => {
                    let len = (before - self.written.len()) as u64;
                    self.record_frame(frame, len);
                }
                Ok(None) => return,
                Err(err) => {
                    let violation = format!("{} wrote bytes that are not frames: {err}", self.node);
                    self.record.lock().violations.push(violation);
                    self.lost_track = true;
                    self.written = BytesMut::new();
                    return;
                }
            }
        }
    }

    fn record_frame(&self, frame: Frame, len: u64) {
        let mut ledger = self.record.lock();
        let end = ledger.links.end_mut(self.at);
        match &frame {
            Frame::Relay(_) => {
                end.relays += 1;
                if end.closing {
                    let violation = format!(
                        "{} wrote a relay on a link it had begun to close",
                        self.node
                    );
                    ledger.violations.push(violation);
                }
            }
            Frame::Presence(_) => end.presence = true,
            Frame::Goodbye(goodbye) => {
                end.turned_down |= goodbye.reason == DUPLICATE && !end.presence;
                end.closing = true;
            }
            Frame::Error(_) | Frame::Farewell(_) => end.closing = true,
            _ => {}
        }
        match frame {
            Frame::Relay(relay) => ledger.relayed(&self.node, relay.request.workflow_id),
            Frame::Resume(resume) => ledger.resumed += resume.unanswered.len() as u64,
            Frame::Presence(_) => {
                *ledger.presence_bytes.entry(self.node.clone()).or_default() += len;
                if ledger.trace_frames {
                    let what = format!("{} wrote {frame:?}", self.node);
                    ledger.note("~", what);
                }
            }
            frame if ledger.trace_frames => {
                let what = format!("{} wrote {frame:?}", self.node);
                ledger.note("~", what);
            }
            _ => {}
        }
    }
}

impl<W> Drop for Tap<W> {
    fn drop(&mut self) {
        self.record.lock().links.end_mut(self.at).alive = false;
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Tap<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.observe(&buf[..written]);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A simulated connection; with `tap`, a node's socket: what is written through it is
/// recorded as `tap.0`'s, and the simulation can reset it.
pub fn socket(stream: turmoil::net::TcpStream, tap: Option<(&str, &Record)>) -> Socket {
    let local = stream.local_addr().ok();
    let peer = stream.peer_addr().ok();
    let (read, write) = stream.into_split();
    match (tap, local, peer) {
        (Some((node, record)), Some(local_addr), Some(peer_addr)) => {
            let switch = Arc::new(KillSwitch::default());
            let at = record
                .lock()
                .links
                .attach(node, local_addr, peer_addr, &switch);
            let write = Tap::new(Killable::new(write, &switch), node, record, at);
            Socket::from_io(Killable::new(read, &switch), write, local)
        }
        _ => Socket::from_io(read, write, local),
    }
}

/// Dials over the simulated network; a node's dialer taps what it writes.
pub struct SimDialer {
    tap: Option<(String, Record)>,
}

impl SimDialer {
    /// A dialer for a worker or a producer.
    pub fn client() -> Self {
        Self { tap: None }
    }

    /// A dialer for node `node`'s peer links.
    pub fn node(node: &str, record: &Record) -> Self {
        Self {
            tap: Some((node.to_owned(), record.clone())),
        }
    }
}

impl Dialer for SimDialer {
    fn dial<'a>(&'a self, address: &'a str) -> Dialing<'a> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(address).await?;
            let tap = self
                .tap
                .as_ref()
                .map(|(node, record)| (node.as_str(), record));
            Ok(socket(stream, tap))
        })
    }
}

/// Adds host `name` running a node with `config` until its drain is asked for
/// ([`Ledger::drains`]); a bounce starts a new node process with the same config.
pub fn node_host(
    sim: &mut turmoil::Sim<'_>,
    name: &'static str,
    config: NodeConfig,
    record: &Record,
) {
    let record = record.clone();
    sim.host(name, move || {
        let config = config.clone();
        let record = record.clone();
        async move {
            let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
            let local = listener.local_addr()?;
            let dialer = Arc::new(SimDialer::node(name, &record));
            let node = Node::with_dialer(
                config,
                |registry| Arc::new(Registrations::new(registry)),
                dialer,
            )?;
            let mesh = Arc::downgrade(node.dispatcher().mesh());
            let drain = Arc::new(tokio::sync::Notify::new());
            {
                let mut ledger = record.lock();
                ledger.meshes.insert(name.to_owned(), mesh);
                ledger.drains.insert(name.to_owned(), Arc::clone(&drain));
            }
            let incoming = futures_util::stream::unfold(listener, move |listener| {
                let record = record.clone();
                async move {
                    let accepted = listener
                        .accept()
                        .await
                        .map(|(stream, _)| socket(stream, Some((name, &record))));
                    Some((accepted, listener))
                }
            });
            node.serve_connections(local, incoming, drain.notified())
                .await;
            Ok(())
        }
    });
}
