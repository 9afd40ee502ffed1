//! The worker's connect, register and reconnect loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{ErrorCode, ErrorFrame, FeatureSet, Frame, Pong, Register, Role};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::config::WorkerConfig;
use super::handler::Handler;
use super::retries::Retries;
use super::session::{InFlight, Session};
use super::state::{Fatal, SessionEnd, WorkerState};
use crate::connect::{is_final_refusal, next_frame, ConnectError, Connection, Handshake};
use crate::nodes::Nodes;
use lintel_transport::keepalive::Keepalive;
use lintel_transport::{Batched, FrameReader, Outbound};

/// The runtime's configuration and its side of the handle's channels.
pub(super) struct Runtime<H> {
    pub(super) config: WorkerConfig,
    pub(super) handler: Arc<H>,
    pub(super) state: watch::Sender<WorkerState>,
    pub(super) capacity: watch::Receiver<u32>,
    pub(super) drain: watch::Receiver<Option<Duration>>,
}

impl<H: Handler> Runtime<H> {
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
        loop {
            if self.drain.borrow().is_some() {
                return WorkerState::Stopped;
            }
            self.state.send_replace(WorkerState::Connecting);
            let (ended, served) = self.session(&nodes, avoid, &mut retries).await;
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
                SessionEnd::Lost => {
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
            // Its handlers answer a heartbeat timeout with `Request::heartbeat`.
            understands: FeatureSet::HEARTBEAT_TIMEOUT,
        };
        let (conn, address) = match nodes
            .connect(&handshake, self.config.tls.as_ref(), avoid)
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
        let registered =
            tokio::time::timeout(timeout, register(&mut reader, &outbound, registration))
                .await
                .unwrap_or(Err(ConnectError::Timeout(timeout)));
        let worker_id = match registered {
            Ok(worker_id) => worker_id,
            Err(err) => return (ended(err), Some(address)),
        };
        retries.reached(addr);
        tracing::debug!(worker_id, pid = welcome.pid, node = %welcome.node_id, "worker registered");
        self.state.send_replace(WorkerState::Registered {
            worker_id,
            pid: welcome.pid,
        });
        let session = Session {
            handler: Arc::clone(&self.handler),
            state: &self.state,
            capacity_rx: &mut self.capacity,
            drain_rx: &mut self.drain,
            keepalive: Keepalive::from_limits(&welcome.limits),
            outbound,
            worker_id,
            capacity,
            tasks: JoinSet::new(),
            in_flight: InFlight::default(),
            draining: None,
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
    loop {
        match next_frame(reader).await? {
            Frame::Registered(registered) => return Ok(registered.worker_id),
            Frame::RegisterRefused(refusal) => return Err(ConnectError::Refused(refusal)),
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
