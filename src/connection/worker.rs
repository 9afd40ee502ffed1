//! A worker connection: registration, replies, capacity, liveness and drain.
//!
//! Eligibility is earned by answers: a newly registered worker stays in probation until it
//! answers `worker_probation_pings` pings, each sent at once (the first right behind the
//! acknowledgement, so its answer proves the acknowledgement arrived); a worker whose ping
//! waits longer than `worker_ping_timeout_ms` is unreachable (out of selection, keeping what it
//! runs) until it answers one; `max_missed_pings` unanswered close it.
//!
//! While the node drains, a registered worker's connection stays open until the worker says
//! `Drained` (its replies came before it), then the node says `Goodbye` and closes; a worker
//! that never says it is closed when the drain timeout ends. `Drain` goes out behind every
//! push queued before it (it would overtake them in the control lane), and no push after it.

use std::future::Future;
use std::sync::Arc;

use lintel_wire::{
    CodecError, DepartureReason, Drain, ErrorCode, FeatureSet, Frame, FrameKind, FrameRef,
    NotImplemented, Ping, Pong, Refusal, RefusalCode, Register, Registered as RegisteredFrame,
    ResumeSession, Session, SessionResumed,
};

use tokio_util::task::task_tracker::TaskTrackerToken;

use super::close::Close;
use super::handshake::clip;
use crate::auth::Grant;
use crate::implemented::IMPLEMENTED;
use crate::link::{ReplyFate, WorkerLink};
use crate::logfields::List;
use crate::registrations::Registered;
use crate::registry::Exclusion;
use crate::sessions::{Sessions, Token};
use crate::shared::{Fired, Shared};
use lintel_transport::keepalive::{Answered, Keepalive, Tick};
use lintel_transport::{FrameReader, Outbound};

/// Runs the worker role of connection `pid`, speaking protocol `version`, until the
/// connection should close. Not an `async fn`: the connection state is built here and
/// captured once, instead of its parts being held beside it in every idle connection's task.
pub(super) fn serve<'a>(
    shared: &'a Arc<Shared>,
    (pid, version): (u64, u16),
    reader: &'a mut FrameReader,
    outbound: &'a Outbound,
    grant: Grant,
) -> impl Future<Output = Close> + Send + 'a {
    let mut conn = WorkerConn {
        shared,
        pid,
        version,
        outbound,
        grant,
        registered: None,
        undrained: None,
        keepalive: Keepalive::new(
            shared.config.ping_interval(),
            shared.config.max_missed_pings,
        )
        .overdue_after(shared.config.worker_ping_timeout()),
        probation: 0,
        drained: false,
        said_goodbye: false,
        cut: false,
        session: None,
        kick: None,
    };
    async move {
        let mut drain_sent = false;
        // The drain began: `Drain` goes once the pushes queued before it are written.
        let mut drain_due = false;
        // Made once, not per turn of the loop: each token wait registers with its token once, and
        // later turns only read the token's state.
        let draining = Fired::new(&shared.draining);
        let closing = Fired::new(&shared.closing);
        tokio::pin!(draining, closing);
        // Every branch is cancel-safe: `FrameReader::ready`, `Keepalive::tick`, token waits and
        // `Outbound::below` lose nothing when another branch wins. Biased so that a flooding peer
        // cannot starve shutdown.
        let close = loop {
            let found = tokio::select! {
                biased;
                () = &mut draining, if !drain_sent && !drain_due => {
                    let Some(registered) = conn.registered.as_ref() else {
                        break Close::goodbye("node is draining");
                    };
                    // No push is queued from now on; one placed before the drain is placed
                    // again.
                    registered.link.retire();
                    drain_due = true;
                    None
                }
                () = outbound.below(1), if drain_due => {
                    drain_due = false;
                    drain_sent = true;
                    let grace_ms = shared.config.drain_timeout_ms;
                    // Owed even to a full queue (once per connection): the drain waits for the
                    // answer, so the worker must hear it.
                    let _ = outbound.send_owed(Frame::Drain(Drain { grace_ms }));
                    None
                }
                () = &mut closing => {
                    if let Some(registered) = conn.registered.as_mut() {
                        registered.shutting_down = true;
                    }
                    break Close::goodbye("node shutting down");
                }
                () = kicked(conn.kick.as_ref()), if conn.kick.is_some() => {
                    break Close::goodbye("session resumed on another connection");
                }
                found = reader.ready() => Some(found),
                tick = conn.keepalive.tick() => {
                    if let Err(close) = conn.ping(tick) {
                        break close;
                    }
                    None
                }
            };
            // Read where it lies: a reply is a few hundred bytes of views.
            let joining = match found {
                None => None,
                Some(found) => match reader.take(found) {
                    None => break Close::Quietly,
                    Some(Err(err)) => {
                        // Ended mid-frame or stalled in one: the link failed, it was not closed.
                        conn.cut = matches!(err, CodecError::Truncated { .. })
                            || lintel_transport::is_frame_timeout(&err);
                        break Close::read_failed(err);
                    }
                    // Copied out and handled below, once the frame is let go: a wait here
                    // would carry the frame's view in every idle connection's task.
                    Some(Ok(FrameRef::Frame(Frame::Register(register)))) => {
                        Some(Joining::Register(register.clone()))
                    }
                    Some(Ok(FrameRef::Frame(Frame::ResumeSession(resume)))) => {
                        Some(Joining::Resume(Box::new(resume.clone())))
                    }
                    Some(Ok(frame)) => match conn.handle(frame) {
                        Ok(()) => None,
                        Err(close) => break close,
                    },
                },
            };
            // Boxed: registering happens once, and its waits would otherwise be carried in
            // every idle connection's task.
            let joined = match joining {
                None => Ok(()),
                Some(Joining::Register(register)) => Box::pin(conn.register(*register)).await,
                Some(Joining::Resume(resume)) => Box::pin(conn.resume(resume)).await,
            };
            if let Err(close) = joined {
                break close;
            }
        };
        // Deregister (or park the session) before the close frame goes out: nothing selects a
        // closing worker.
        if let Some(mut registered) = conn.registered.take() {
            registered.departure =
                departure(&close, conn.drained, conn.cut, registered.shutting_down);
            if let Some(token) = conn.session {
                park(
                    shared,
                    token,
                    registered,
                    conn.grant.clone(),
                    conn.said_goodbye,
                );
            }
        } else if let Some(token) = conn.session {
            shared.sessions.closed(&token);
        }
        close
    }
}

struct WorkerConn<'a> {
    shared: &'a Arc<Shared>,
    pid: u64,
    /// The protocol version the connection speaks.
    version: u16,
    outbound: &'a Outbound,
    /// The namespaces this worker may register into.
    grant: Grant,
    registered: Option<Registered>,
    /// Held from registration until the worker says `Drained`: the node's drain waits for it.
    undrained: Option<TaskTrackerToken>,
    keepalive: Keepalive,
    /// Answers the registered worker still owes before it may be selected.
    probation: u32,
    /// The worker said `Drained`: whatever ends its connection, it left drained.
    drained: bool,
    /// The worker said `Goodbye`: it left on purpose, so its session is not kept.
    said_goodbye: bool,
    /// The connection ended mid-frame or stalled in one: lost, not closed on purpose.
    cut: bool,
    /// The token of the worker's session, when it was given one (or resumed one).
    session: Option<Token>,
    /// Cancelled when another connection resumes the session: this one closes.
    kick: Option<tokio_util::sync::CancellationToken>,
}

/// A frame that makes the connection a worker's, handled once its view is let go.
enum Joining {
    Register(Box<Register>),
    Resume(Box<ResumeSession>),
}

/// Resolves once `kick` is cancelled; never without one.
async fn kicked(kick: Option<&tokio_util::sync::CancellationToken>) {
    match kick {
        Some(kick) => kick.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Keeps `registered`'s session under `token` for a resume when its connection was lost (not
/// closed by either side on purpose: `goodbye` says the worker said `Goodbye`), out of
/// selection; otherwise, or with no room, drops it.
fn park(
    shared: &Shared,
    token: Token,
    registered: crate::registrations::Registered,
    grant: Grant,
    goodbye: bool,
) {
    let lost = matches!(
        registered.departure,
        DepartureReason::Disconnected | DepartureReason::MissedPings
    );
    if goodbye || !lost || registered.shutting_down || registered.link.is_superseded() {
        shared.sessions.closed(&token);
        return;
    }
    let worker_id = registered.worker_id;
    let pushes = registered.link.in_flight();
    registered.link.set_parked(true);
    shared
        .dispatcher
        .registry()
        .set_excluded(worker_id, Exclusion::Unreachable, true);
    match shared.sessions.park(
        token,
        registered,
        grant,
        (&shared.draining, &shared.closing),
    ) {
        Ok(()) => tracing::info!(
            worker_id,
            pushes,
            grace_ms = shared.config.worker_resume_grace_ms,
            "worker connection lost: its session waits for a resume"
        ),
        Err((_, err)) => tracing::info!(
            worker_id,
            pushes,
            error = %err,
            "worker connection lost: its session is not kept, its pushes end worker-lost"
        ),
    }
}

/// Why a registered worker whose connection ends with `close` leaves, as far as the node can
/// prove: it said `Drained`, the node shut down, it missed its pings, it broke the protocol
/// (not when the connection was `cut` mid-frame), or else its connection closed.
fn departure(close: &Close, drained: bool, cut: bool, shutting_down: bool) -> DepartureReason {
    if drained {
        return DepartureReason::Drained;
    }
    if shutting_down {
        return DepartureReason::NodeShutdown;
    }
    match close {
        Close::With(frame) | Close::Shed(frame) => match &**frame {
            Frame::Error(error) if error.code == ErrorCode::LivenessTimeout => {
                DepartureReason::MissedPings
            }
            Frame::Error(_) if !cut => DepartureReason::ProtocolError,
            _ => DepartureReason::Disconnected,
        },
        Close::Quietly => DepartureReason::Disconnected,
    }
}

impl WorkerConn<'_> {
    /// Handles every frame but `Register`, which needs to wait for room to answer.
    fn handle(&mut self, frame: FrameRef<'_>) -> Result<(), Close> {
        let frame = match frame {
            FrameRef::Reply(reply) => {
                let registered = self.registered("Reply")?;
                match registered.link.reply(reply.correlation, reply.response) {
                    ReplyFate::Delivered => {}
                    ReplyFate::Late => {
                        tracing::debug!(
                            pid = self.pid,
                            correlation = reply.correlation,
                            "late reply"
                        );
                    }
                    ReplyFate::Unknown => {
                        self.shared.dispatcher.counters().reply_dropped();
                        tracing::debug!(
                            pid = self.pid,
                            correlation = reply.correlation,
                            "reply dropped"
                        );
                    }
                }
                return Ok(());
            }
            FrameRef::Frame(frame) => frame,
            other => return Err(Close::unexpected(other.name(), "on a worker connection")),
        };
        match frame {
            Frame::CapacityUpdate(update) => {
                let worker_id = self.registered(frame.name())?.worker_id;
                self.shared
                    .dispatcher
                    .registry()
                    .set_capacity(worker_id, update.max_concurrency)
                    .map_err(|refusal| Close::error(ErrorCode::ZeroCapacity, refusal.reason))
            }
            Frame::Drain(_) => {
                let worker_id = self.registered(frame.name())?.worker_id;
                self.shared.dispatcher.registry().set_excluded(
                    worker_id,
                    Exclusion::Draining,
                    true,
                );
                Ok(())
            }
            Frame::Drained(_) => {
                self.registered(frame.name())?;
                self.undrained = None;
                self.drained = true;
                if self.shared.draining.is_cancelled() {
                    return Err(Close::goodbye("drained"));
                }
                Ok(())
            }
            Frame::Ping(Ping { nonce }) => {
                let _ = self.outbound.try_send(Frame::Pong(Pong { nonce: *nonce }));
                Ok(())
            }
            Frame::Pong(Pong { nonce }) => {
                let answered = self.keepalive.answered(*nonce);
                self.answered(answered);
                Ok(())
            }
            Frame::Goodbye(_) => {
                self.said_goodbye = true;
                Err(Close::Quietly)
            }
            Frame::Progress(progress) => {
                if let Some(missing) = NotImplemented::kind(FrameKind::Progress, IMPLEMENTED) {
                    return Err(Close::error(ErrorCode::Unsupported, missing.to_string()));
                }
                let registered = self.registered(frame.name())?;
                // Progress for no push in flight is dropped.
                if !registered
                    .link
                    .progress(progress.correlation, &progress.details)
                {
                    tracing::debug!(
                        pid = self.pid,
                        correlation = progress.correlation,
                        "progress for no push in flight"
                    );
                }
                Ok(())
            }
            other => Err(Close::unexpected(other.name(), "on a worker connection")),
        }
    }

    /// Answers a `ResumeSession`: the session of its token, when this node keeps it for this
    /// connection's credential, is registered on this connection and its pushes the worker
    /// holds attached here; `RegisterRefused{SessionUnknown}` otherwise, the connection still
    /// unregistered.
    async fn resume(&mut self, resume: Box<ResumeSession>) -> Result<(), Close> {
        if self.registered.is_some() {
            return Err(Close::unexpected("ResumeSession", "once registered"));
        }
        if let Some(missing) = NotImplemented::kind(FrameKind::ResumeSession, IMPLEMENTED) {
            return self
                .refuse_session(RefusalCode::Unsupported, missing.to_string())
                .await;
        }
        let Ok(token) = Token::try_from(&resume.token[..]) else {
            return self
                .refuse_session(RefusalCode::SessionUnknown, "unknown session".into())
                .await;
        };
        let deadline = tokio::time::Instant::now() + self.shared.config.handshake_timeout();
        let taken = tokio::select! {
            taken = self.shared.sessions.take(&token, (&self.grant, self.outbound.listed()), deadline) => taken,
            () = self.shared.closing.cancelled() => return Err(Close::goodbye("node shutting down")),
        };
        let Some(registered) = taken else {
            return self
                .refuse_session(
                    RefusalCode::SessionUnknown,
                    "unknown or expired session".into(),
                )
                .await;
        };
        let worker_id = registered.worker_id;
        // The answer is queued on this connection in the same step that moves the link here,
        // ahead of any cancel or push of the link's.
        let rebound = registered
            .link
            .rebind(self.outbound.clone(), &resume.holding, |rebound| {
                Frame::from(SessionResumed {
                    worker_id,
                    attached: rebound.attached.clone(),
                    unknown: rebound.unknown.clone(),
                })
            });
        let Some(rebound) = rebound else {
            drop(registered);
            return self
                .refuse_session(
                    RefusalCode::SessionUnknown,
                    "unknown or expired session".into(),
                )
                .await;
        };
        registered.link.set_parked(false);
        self.registered = Some(registered);
        self.session = Some(token);
        self.kick = Some(self.shared.sessions.open(token, self.grant.clone()));
        self.undrained = Some(self.shared.undrained.token());
        let registry = self.shared.dispatcher.registry();
        registry.moved(worker_id, self.pid);
        self.probation = self.shared.config.worker_probation_pings;
        if self.probation > 0 {
            registry.set_excluded(worker_id, Exclusion::Probation, true);
        }
        registry.set_excluded(worker_id, Exclusion::Unreachable, false);
        if self.probation > 0 {
            self.ping_now();
        }
        tracing::info!(
            pid = self.pid,
            worker_id,
            attached = rebound.attached.len(),
            unknown = rebound.unknown.len(),
            "worker session resumed"
        );
        Ok(())
    }

    /// Refuses a `ResumeSession` with `code`, once the queue has room; the connection stays
    /// usable to register anew.
    async fn refuse_session(&mut self, code: RefusalCode, reason: String) -> Result<(), Close> {
        tracing::info!(pid = self.pid, code = ?code, reason = reason.as_str(), "session resume refused");
        self.shared.connection_counts.refused("resume", code);
        let refused = Frame::RegisterRefused(Refusal { code, reason });
        self.outbound
            .send(refused)
            .await
            .map_err(|_| Close::Quietly)
    }

    /// Gives a worker that listed `worker-resume` its session, right after `Registered`.
    fn open_session(&mut self) {
        let sessions = &self.shared.sessions;
        if self.version < 4
            || !sessions.enabled()
            || !IMPLEMENTED.contains(FeatureSet::WORKER_RESUME)
            || !self.outbound.listed().contains(FeatureSet::WORKER_RESUME)
        {
            return;
        }
        let token = match Sessions::issue() {
            Ok(token) => token,
            Err(err) => {
                tracing::warn!(pid = self.pid, error = %err, "worker given no session");
                return;
            }
        };
        let session = Session {
            token: bytes::Bytes::copy_from_slice(&token),
            resume_grace_ms: u64::try_from(sessions.grace().as_millis()).unwrap_or(u64::MAX),
        };
        // Owed: once per registration, right behind `Registered`.
        if self.outbound.send_owed(Frame::from(session)).is_ok() {
            self.session = Some(token);
            self.kick = Some(sessions.open(token, self.grant.clone()));
        }
    }

    async fn register(&mut self, register: Register) -> Result<(), Close> {
        if self.registered.is_some() {
            return Err(Close::unexpected("Register", "once registered"));
        }
        if let Some(namespace) = register
            .namespaces
            .iter()
            .find(|namespace| !self.grant.allows(namespace))
        {
            let refused = Frame::RegisterRefused(Refusal {
                code: RefusalCode::Unauthorized,
                reason: self.grant.refusal(namespace),
            });
            tracing::info!(
                pid = self.pid,
                namespace = clip(namespace),
                "registration refused: namespace not granted"
            );
            self.shared.dispatcher.registry().refused(&register);
            self.shared
                .connection_counts
                .refused("register", RefusalCode::Unauthorized);
            return self
                .outbound
                .send(refused)
                .await
                .map_err(|_| Close::Quietly);
        }
        let link = WorkerLink::held(self.pid, self.version, self.outbound.clone());
        let notifier = Arc::clone(&self.shared.notifier);
        match notifier.on_worker_registered(self.pid, &register, link.clone()) {
            Ok(worker_id) => {
                self.registered =
                    Some(Registered::new(notifier, self.pid, worker_id, link.clone()));
                self.undrained = Some(self.shared.undrained.token());
                let ack = Frame::Registered(RegisteredFrame { worker_id });
                self.outbound.send(ack).await.map_err(|_| Close::Quietly)?;
                self.open_session();
                link.open();
                // The registry admitted it in probation when this is not zero.
                self.probation = self.shared.config.worker_probation_pings;
                if self.probation > 0 {
                    self.ping_now();
                }
                tracing::info!(
                    pid = self.pid,
                    worker_id,
                    identity = %register.identity,
                    namespaces = %List(&register.namespaces),
                    activities = %List(&register.activity_types),
                    label = register.node.as_deref().unwrap_or(""),
                    capacity = register.max_concurrency,
                    deployment = register.deployment.as_deref().unwrap_or(""),
                    instance = register.instance_id.as_deref().unwrap_or(""),
                    version = self.version,
                    "worker registered"
                );
            }
            Err(refusal) => {
                tracing::info!(
                    pid = self.pid,
                    identity = clip(&register.identity),
                    code = ?refusal.code,
                    reason = refusal.reason.as_str(),
                    "registration refused"
                );
                self.shared
                    .connection_counts
                    .refused("register", refusal.code);
                self.shared.dispatcher.registry().refused(&register);
                let refused = Frame::RegisterRefused(refusal);
                self.outbound
                    .send(refused)
                    .await
                    .map_err(|_| Close::Quietly)?;
            }
        }
        Ok(())
    }

    /// The registration a frame (named as [`Frame::name`] names it) needs.
    fn registered(&self, frame: &str) -> Result<&Registered, Close> {
        self.registered
            .as_ref()
            .ok_or_else(|| Close::unexpected(frame, "before Registered"))
    }

    fn ping(&mut self, tick: Tick) -> Result<(), Close> {
        if let Some(registered) = &self.registered {
            if tick == Tick::Overdue {
                let registry = self.shared.dispatcher.registry();
                if registry.set_excluded(registered.worker_id, Exclusion::Unreachable, true) {
                    tracing::warn!(
                        pid = self.pid,
                        worker_id = registered.worker_id,
                        "worker unreachable: a ping waits past worker_ping_timeout_ms; not selected until it answers"
                    );
                }
                return Ok(());
            }
            // Pushes that ended long ago without a reply give their slots back.
            let grace = self.shared.config.late_reply_grace();
            if let Some(cutoff) = tokio::time::Instant::now().checked_sub(grace) {
                registered.link.reclaim(cutoff);
            }
        }
        if let Some(ping) = Close::unless_pinged(tick)? {
            self.send_ping(ping);
        }
        Ok(())
    }

    /// Pings now, not at the next tick.
    fn ping_now(&mut self) {
        let ping = self.keepalive.ping_now();
        self.send_ping(ping);
    }

    fn send_ping(&self, ping: Ping) {
        // Owed, in the control lane: a queue full of pushes must not make a live worker miss it.
        let _ = self.outbound.send_owed(Frame::Ping(ping));
    }

    /// An answer to the latest ping restores an unreachable worker and counts toward its
    /// probation; a probation not over yet sends its next ping at once.
    fn answered(&mut self, answered: Answered) {
        let Some(registered) = &self.registered else {
            return;
        };
        let worker_id = registered.worker_id;
        let registry = self.shared.dispatcher.registry();
        match answered {
            Answered::Stale => return,
            Answered::Restored => {
                if registry.set_excluded(worker_id, Exclusion::Unreachable, false) {
                    tracing::info!(pid = self.pid, worker_id, "worker answers pings again");
                }
            }
            Answered::InTime => {}
        }
        if self.probation == 0 {
            return;
        }
        self.probation -= 1;
        if self.probation == 0 {
            tracing::debug!(pid = self.pid, worker_id, "worker out of probation");
            registry.set_excluded(worker_id, Exclusion::Probation, false);
        } else {
            self.ping_now();
        }
    }
}
