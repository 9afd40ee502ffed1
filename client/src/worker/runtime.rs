//! The worker's connect, register (or resume) and reconnect loop.

use std::net::SocketAddr;
use std::time::Duration;

use lintel_wire::{
    ErrorCode, ErrorFrame, FeatureSet, Frame, Pong, Refusal, RefusalCode, Register, ResumeSession,
    Role,
};
use tokio::sync::watch;

use super::config::WorkerConfig;
use super::held::Held;
use super::retries::Retries;
use super::session::Session;
use super::state::{Fatal, SessionEnd, WorkerState};
use crate::connect::{is_final_refusal, next_frame, ConnectError, Connection, Handshake};
use crate::nodes::Nodes;
use lintel_transport::keepalive::Keepalive;
use lintel_transport::{Batched, FrameReader, Outbound};

/// The runtime's configuration and its side of the handle's channels.
pub(super) struct Runtime {
    pub(super) config: WorkerConfig,
    pub(super) state: watch::Sender<WorkerState>,
    pub(super) capacity: watch::Receiver<u32>,
    pub(super) drain: watch::Receiver<Option<Duration>>,
    /// What it runs and holds, across connections.
    pub(super) held: Held,
    /// The current connection, for heartbeats; `None` between connections.
    pub(super) link: watch::Sender<Option<Outbound>>,
}

/// What a version-4 worker lists in `Features`: its handlers answer a heartbeat timeout with
/// `Request::heartbeat`, and it resumes its session after a lost connection.
const UNDERSTANDS: FeatureSet = FeatureSet::HEARTBEAT_TIMEOUT.with(FeatureSet::WORKER_RESUME);

/// How a connection became registered.
enum Joined {
    /// A new registration: nothing of before is held.
    Registered(u64),
    /// The session resumed: the node's worker id, its pushes held on.
    Resumed(u64),
}

impl Runtime {
    /// Connects, serves and reconnects until a final refusal, a failure retrying cannot fix or
    /// a self-drain; returns the last state.
    pub(super) async fn run(mut self) -> WorkerState {
        let mut retries = Retries::default();
        let nodes = match Nodes::new(self.config.nodes.iter().cloned()) {
            Ok(nodes) => nodes,
            Err(err) => return WorkerState::Failed(Fatal::new(err)),
        };
        let addr = nodes.targets().join(",");
        let addr = addr.as_str();
        // The node last served: tried last after it drained or was lost.
        let mut avoid = None;
        // The node that keeps this worker's session, while it may be resumed.
        let mut home = None;
        loop {
            if self.drain.borrow().is_some() {
                return WorkerState::Stopped;
            }
            self.state.send_replace(WorkerState::Connecting);
            // A session past its grace is of no use any more: what it held is dropped now.
            if self.held.session.is_some() && self.held.resumable().is_none() {
                self.held.drop_all();
            }
            let (ended, served) = self.session(&nodes, avoid, home, &mut retries).await;
            self.link.send_replace(None);
            match &ended {
                SessionEnd::Lost { resumable } => self.held.lost(*resumable),
                // Not registered: a session lost earlier is still in its grace, or not.
                SessionEnd::Unreachable(_) => {}
                _ => self.held.drop_all(),
            }
            // A session kept on the node last served brings the worker back there first.
            if let (SessionEnd::Lost { .. }, Some(_)) = (&ended, self.held.resumable()) {
                home = served;
            }
            if self.held.resumable().is_none() {
                home = None;
            }
            avoid = served.or(avoid);
            let delay = match ended {
                SessionEnd::Refused(refusal) => {
                    tracing::warn!(%addr, code = ?refusal.code, reason = %refusal.reason, "worker refused for good");
                    return WorkerState::Refused(refusal);
                }
                SessionEnd::Failed(err) => {
                    tracing::warn!(%addr, error = %err, "worker cannot use the node; retrying would not help");
                    return WorkerState::Failed(Fatal::new(err));
                }
                SessionEnd::SelfDrained => return WorkerState::Stopped,
                SessionEnd::Lost { .. } => {
                    tracing::warn!(%addr, "worker lost its connection to the node; reconnecting");
                    self.config.reconnect.delay(0)
                }
                SessionEnd::NodeDrained if nodes.targets().len() > 1 => {
                    tracing::info!(%addr, "the node drained this worker; moving to another");
                    Duration::ZERO
                }
                SessionEnd::NodeDrained => {
                    tracing::info!(%addr, "the node drained this worker; reconnecting");
                    self.config.reconnect.delay(0)
                }
                SessionEnd::Unreachable(err) => {
                    let delay = self.config.reconnect.delay(retries.failures());
                    retries.failed(addr, &err, delay);
                    delay
                }
            };
            self.state.send_replace(WorkerState::Connecting);
            // Both branches are cancel-safe: a sleep and a watch wait hold no data.
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = self.drain.wait_for(Option::is_some) => return WorkerState::Stopped,
            }
        }
    }

    /// One connection from dial to close, and the address it was made to.
    async fn session(
        &mut self,
        nodes: &Nodes,
        avoid: Option<SocketAddr>,
        home: Option<SocketAddr>,
        retries: &mut Retries,
    ) -> (SessionEnd, Option<SocketAddr>) {
        let handshake = Handshake {
            versions: crate::connect::MIN_PROTOCOL_VERSION..=crate::connect::PROTOCOL_VERSION,
            role: Role::Worker,
            name: self.config.name.clone(),
            auth_token: self.config.auth_token.clone(),
            timeout: self.config.handshake_timeout,
            max_frame_len: self.config.max_frame_len,
            queue_len: self.config.queue_len,
            understands: UNDERSTANDS,
        };
        let (conn, address) = match nodes
            .connect(&handshake, self.config.tls.as_ref(), avoid, home)
            .await
        {
            Ok(connected) => connected,
            Err(err) => return (ended(err), None),
        };
        let addr = address.to_string();
        let addr = addr.as_str();
        let Connection {
            mut reader,
            outbound,
            writer: _,
            welcome,
            max_send_len: _,
        } = conn;
        let capacity = *self.capacity.borrow_and_update();
        let registration = registration(&self.config, capacity, welcome.version);
        let timeout = self.config.handshake_timeout;
        let joined = tokio::time::timeout(
            timeout,
            join(&mut reader, &outbound, &mut self.held, registration),
        )
        .await
        .unwrap_or(Err(ConnectError::Timeout(timeout)));
        let (worker_id, resumed) = match joined {
            Ok(Joined::Registered(worker_id)) => (worker_id, false),
            Ok(Joined::Resumed(worker_id)) => (worker_id, true),
            Err(err) => return (ended(err), Some(address)),
        };
        retries.reached(addr);
        tracing::debug!(worker_id, resumed, pid = welcome.pid, node = %welcome.node_id, "worker registered");
        self.state.send_replace(WorkerState::Registered {
            worker_id,
            pid: welcome.pid,
        });
        // A resumed worker keeps the capacity it registered; tell the node of a change since.
        if resumed && capacity != self.held.node_capacity {
            let update = Frame::CapacityUpdate(lintel_wire::CapacityUpdate {
                max_concurrency: capacity,
            });
            if outbound.send(update).await.is_err() {
                return (SessionEnd::Lost { resumable: true }, Some(address));
            }
        }
        self.held.node_capacity = capacity;
        self.link.send_replace(Some(outbound.clone()));
        let session = Session {
            state: &self.state,
            capacity_rx: &mut self.capacity,
            drain_rx: &mut self.drain,
            keepalive: Keepalive::from_limits(&welcome.limits),
            outbound,
            worker_id,
            capacity,
            held: &mut self.held,
            draining: None,
            answers: Vec::new(),
        };
        (Batched::new(session.serve(reader)).await, Some(address))
    }
}

/// The registration frame for a node of `version`: with the worker's deployment identity,
/// which a node before version 3 does not take (it is left behind, as PROTOCOL.md allows, and
/// a warning logged).
fn registration(config: &WorkerConfig, capacity: u32, version: u16) -> Frame {
    let register = Register {
        max_concurrency: capacity,
        ..config.registration.clone()
    };
    let (register, left_behind) = register.carried_at(version);
    if left_behind {
        tracing::warn!(
            version,
            "the node speaks protocol version {version}: registering without the deployment \
             and instance id, which need version 3"
        );
    }
    Frame::from(register)
}

/// How a connection that never registered ended: for good, or worth another attempt.
fn ended(err: ConnectError) -> SessionEnd {
    match err {
        ConnectError::Refused(refusal) if is_final_refusal(refusal.code) => {
            SessionEnd::Refused(refusal)
        }
        err if err.is_permanent() => SessionEnd::Failed(err),
        err => SessionEnd::Unreachable(err),
    }
}

/// Resumes the session `held` keeps, when it is still in its grace and the node resumes
/// sessions; registers anew otherwise, or when the node no longer knows the session (what was
/// held is dropped then).
async fn join(
    reader: &mut FrameReader,
    outbound: &Outbound,
    held: &mut Held,
    registration: Frame,
) -> Result<Joined, ConnectError> {
    let resumable = held
        .resumable()
        .map(|kept| kept.token.clone())
        .filter(|_| outbound.listed().contains(FeatureSet::WORKER_RESUME));
    let Some(token) = resumable else {
        held.drop_all();
        return register(reader, outbound, registration)
            .await
            .map(Joined::Registered);
    };
    let holding = held.holding();
    outbound
        .send(Frame::from(ResumeSession { token, holding }))
        .await
        .map_err(|_| ConnectError::Closed)?;
    match answer(reader, outbound).await? {
        Answer::Resumed(resumed) => {
            for correlation in &resumed.unknown {
                held.forget(*correlation);
            }
            // Every push held was listed (attached or unknown); anything else is not the node's.
            let attached: std::collections::HashSet<u64> =
                resumed.attached.iter().copied().collect();
            let strays: Vec<u64> = {
                let ledger = held.ledger();
                ledger
                    .in_flight
                    .keys()
                    .chain(ledger.unsent.keys())
                    .filter(|correlation| !attached.contains(correlation))
                    .copied()
                    .collect()
            };
            for correlation in strays {
                held.forget(correlation);
            }
            if let Some(kept) = &mut held.session {
                kept.lost_at = None;
            }
            tracing::info!(
                worker_id = resumed.worker_id,
                attached = resumed.attached.len(),
                unknown = resumed.unknown.len(),
                "worker session resumed"
            );
            Ok(Joined::Resumed(resumed.worker_id))
        }
        Answer::Refused(refusal)
            if matches!(
                refusal.code,
                RefusalCode::SessionUnknown | RefusalCode::Unsupported
            ) =>
        {
            tracing::warn!(code = ?refusal.code, reason = %refusal.reason, "session not resumed; registering anew");
            held.drop_all();
            register(reader, outbound, registration)
                .await
                .map(Joined::Registered)
        }
        Answer::Refused(refusal) => Err(ConnectError::Refused(refusal)),
        Answer::Registered(_) => Err(ConnectError::UnexpectedFrame("Registered")),
    }
}

/// The node's answer to a `Register` or a `ResumeSession`.
enum Answer {
    Registered(u64),
    Resumed(lintel_wire::SessionResumed),
    Refused(Refusal),
}

/// Sends the registration and waits for its answer, answering pings meanwhile.
async fn register(
    reader: &mut FrameReader,
    outbound: &Outbound,
    registration: Frame,
) -> Result<u64, ConnectError> {
    outbound
        .send(registration)
        .await
        .map_err(|_| ConnectError::Closed)?;
    match answer(reader, outbound).await? {
        Answer::Registered(worker_id) => Ok(worker_id),
        Answer::Refused(refusal) => Err(ConnectError::Refused(refusal)),
        Answer::Resumed(_) => Err(ConnectError::UnexpectedFrame("SessionResumed")),
    }
}

/// Waits for the node's answer to a registration or a resume, answering pings meanwhile.
async fn answer(reader: &mut FrameReader, outbound: &Outbound) -> Result<Answer, ConnectError> {
    loop {
        match next_frame(reader).await? {
            Frame::Registered(registered) => return Ok(Answer::Registered(registered.worker_id)),
            Frame::SessionResumed(resumed) => return Ok(Answer::Resumed(resumed)),
            Frame::RegisterRefused(refusal) => return Ok(Answer::Refused(refusal)),
            Frame::Ping(ping) => {
                let _ = outbound.try_send(Frame::Pong(Pong { nonce: ping.nonce }));
            }
            Frame::Pong(_) => {}
            Frame::Error(error) => return Err(ConnectError::Protocol(error)),
            Frame::Goodbye(goodbye) => return Err(ConnectError::Goodbye(goodbye.reason)),
            other => {
                let kind = other.name();
                outbound
                    .close_with(Frame::Error(ErrorFrame {
                        code: ErrorCode::UnexpectedFrame,
                        reason: format!("expected Registered or RegisterRefused, got {kind}"),
                    }))
                    .await;
                return Err(ConnectError::UnexpectedFrame(kind));
            }
        }
    }
}
