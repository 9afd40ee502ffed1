//! One live peer link: presence both ways, relays both ways, liveness, and an orderly end
//! (`retire`) when another link stays, the node drains or closes, or the peer says farewell.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{
    feature, Cancel, ErrorCode, Frame, FrameKind, FrameRef, NotImplemented, PeerHello, Ping, Pong,
    PoolPresence, PoolSettings, Presence, RelayAck, Resume, Resumed,
};
use tokio::time::Instant;

use super::super::close::Close;
use super::super::flights::{CloseOnDrop, Flights, Recipient, ReplyTimer};
use super::announce::{Announcer, FLUSH_INTERVAL, MIN_LOOK_INTERVAL};
use super::hello::{check_extensions, hello_frame, read_hello, Heard, LinkEnd, Side, DUPLICATE};
use super::retire::{Retirement, Why};
use crate::auth::Grant;
use crate::cluster::{Opener, PresenceError, Remote, SettingError, MAX_MEMBERS, MAX_SETTINGS};
use crate::implemented::IMPLEMENTED;
use crate::link::{CountedLink, Pair, PeerLink, ReplyFate, Unanswered};
use crate::shared::Shared;
use lintel_transport::burst::Burst;
use lintel_transport::keepalive::{Keepalive, Tick};
use lintel_transport::{FrameReader, Outbound};

/// How long a closing link waits for the relays it serves to report.
const SETTLE_GRACE: Duration = Duration::from_secs(5);

/// Outcomes read between two `RelayAck`s at most; one also goes with each ping.
const ACK_EVERY: usize = 128;

/// Runs a link once the other side's hello is read: joins it to the mesh or turns it down,
/// then serves it until it closes or is retired; what was learned over it is forgotten and
/// what it relayed here and is still running is cancelled on the way out.
pub(super) async fn run(
    shared: &Arc<Shared>,
    reader: &mut FrameReader,
    outbound: &Outbound,
    linked: LinkEnd,
    heard: Heard,
) -> Close {
    // Held until the link has ended: a draining node waits for its links' retirement.
    let _linked = shared.peer_links.token();
    let Heard {
        hello: theirs,
        farewell,
        pool_settings,
        resume,
        lost_ours,
    } = heard;
    let mesh = Arc::clone(shared.dispatcher.mesh());
    let node_id: Arc<str> = Arc::from(theirs.node_id.as_str());
    let (side, version) = (linked.side, linked.version);
    let opener = match side {
        Side::Dialled => Opener::Here(Arc::from(shared.node_id())),
        Side::Accepted if lost_ours => Opener::PeerAfterCut,
        Side::Accepted => Opener::Peer,
    };
    outbound.set_limits(shared.config.queue_limits());
    let pair = mesh.pair(&node_id, &theirs.advertise, theirs.incarnation, || {
        Pair::new(theirs.incarnation, &shared.retention)
    });
    // Both sides number relays per pair of incarnations and keep outcomes until acknowledged.
    let resumable = version >= 3 && resume;
    let grace = shared.config.peer_relink_grace();
    let link = PeerLink::new(
        Arc::clone(&node_id),
        version,
        outbound.clone(),
        pair.numbering(),
    );
    // Counted until the link let go of its relays (closed, below).
    let counted = pair.link_up();
    let remote = Remote::new(
        Arc::clone(&node_id),
        theirs.incarnation,
        theirs.advertise.clone(),
        opener,
        resumable && !grace.is_zero(),
        link,
        &shared.retiring,
    );
    // Fires as the link ends, whichever way: a newcomer that replaced it as cut waits no longer.
    let _let_go = remote.let_go.clone().drop_guard();
    // Joined before anything is sent: the acceptor's hello and each side's presence go out
    // only on a link this side kept (see the mesh's module doc).
    let joined = mesh.join(&remote);
    learn(shared, &theirs);
    let cut_over = match joined {
        Ok(cut_over) => cut_over,
        Err(_) => {
            tracing::debug!(peer = %node_id, ?side, "duplicate peer link turned down");
            return Close::goodbye(DUPLICATE);
        }
    };
    // The older link this one replaced as cut stops reading and leaves what it holds first, so
    // no relay can still arrive on it once this one resumes them.
    if let Some(old) = cut_over {
        let left = tokio::time::timeout(shared.config.handshake_timeout(), old.let_go.cancelled());
        if left.await.is_err() {
            tracing::warn!(peer = %node_id, "the link replaced as cut did not let go in time");
        }
    }
    // What earlier links to this incarnation left (what runs here for the peer, relays still
    // unanswered there) is taken over only once the peer shows it joined this link too
    // (`Session::take_over`): a link that loses a simultaneous dial never is, and ends without
    // taking anything with it.
    let served = Flights::new(
        Arc::clone(&shared.dispatcher),
        outbound.clone(),
        shared.config.max_active_dispatches,
        Recipient::Peer {
            kept: resumable.then(|| Arc::clone(&pair)),
        },
        // The origin held its producer to its grants; a peer relays what it was allowed.
        Grant::all(),
    );
    let closer = CloseOnDrop(Some(Arc::clone(&served)));
    let mut session = Session {
        shared,
        remote: &remote,
        version,
        outbound,
        served,
        closer,
        announcer: Announcer::default(),
        keepalive: Keepalive::new(
            shared.config.peer_ping_interval(),
            shared.config.max_missed_pings,
        ),
        budget: shared.config.outbound_queue_bytes,
        farewell_heard: false,
        settings_sent: pool_settings.then_some(0),
        heard: false,
        confirmed: false,
        announce: false,
        resuming: Vec::new(),
        pair: resumable.then(|| Arc::clone(&pair)),
        acks: Vec::new(),
        cut: false,
    };
    let ended = session.serve(reader).await;
    // A link that ended with no last word from the peer, while this node runs on, may have
    // been cut: its relays both ways wait for a new link to the same incarnation, up to the
    // grace. One never confirmed holds nothing to wait for.
    let cut = resumable
        && session.confirmed
        && session.cut
        && matches!(ended, Ended::Close(_))
        && !session.farewell_heard
        && !grace.is_zero()
        && !shared.closing.is_cancelled()
        && !remote.link.is_closed();
    let served = Arc::clone(&session.served);
    let (close, down) = match ended {
        Ended::Close(close) => {
            let down = down_reason(&close);
            (close, down)
        }
        Ended::Retire(why) => {
            let retirement = Retirement {
                shared,
                remote: &remote,
                outbound,
                served: &served,
                keepalive: &mut session.keepalive,
                farewell: version >= 3 && farewell,
            };
            (retirement.run(reader, why).await, why.reason().to_owned())
        }
    };
    let resuming = std::mem::take(&mut session.resuming);
    let closer = std::mem::replace(&mut session.closer, CloseOnDrop(None));
    if cut {
        // Left for the next link before this one leaves the mesh, which lets the next join.
        remote.link.retire();
        let mut links = resuming;
        links.push((remote.link.clone(), counted));
        let running = closer
            .hand_on()
            .map(|served| served as Arc<dyn Any + Send + Sync>);
        let parking = pair.park(running, links);
        mesh.leave_cut(&remote, &down);
        remote.let_go.cancel();
        // What is parked holds handles to this link's queue: its socket is let go now.
        outbound.close();
        expire_after_grace(shared, pair, parking);
        return close;
    }
    mesh.leave(&remote, &down);
    for (link, _) in resuming {
        link.close();
    }
    drop(closer);
    let _ = tokio::time::timeout(SETTLE_GRACE, served.settled()).await;
    close
}

/// Why a link that ends with `close` went down, for its event: the frame this side closes
/// with, or the peer's close.
fn down_reason(close: &Close) -> String {
    match close {
        Close::With(frame) | Close::Shed(frame) => match &**frame {
            Frame::Error(error) => format!("{:?}: {}", error.code, error.reason),
            Frame::Goodbye(goodbye) => goodbye.reason.clone(),
            other => format!("closed with {}", other.name()),
        },
        Close::Quietly => "the link closed".to_owned(),
    }
}

/// Most correlations one `Resume` lists.
const RESUME_CHUNK: usize = 4096;

/// Once the grace passes without a new link to take them over, what parking `parking` left
/// running here for the peer is cancelled and the relays of its cut links end `PeerLost` (or
/// `ShutDown` when the node closes first).
fn expire_after_grace(shared: &Shared, pair: Arc<Pair>, parking: u64) {
    let grace = shared.config.peer_relink_grace();
    let closing = shared.closing.clone();
    tokio::spawn(async move {
        let shut = tokio::select! {
            () = tokio::time::sleep(grace) => false,
            () = closing.cancelled() => true,
        };
        let left = pair.unpark(Some(parking));
        if let Some(served) = left.and_then(|left| left.downcast::<Flights>().ok()) {
            served.close();
        }
        for (link, _) in pair.unpark_cut(Some(parking)) {
            if shut {
                link.close_abandoning();
            } else {
                link.close();
            }
        }
    });
}

/// The other side and the members it knows become members here too, by node id.
fn learn(shared: &Shared, hello: &PeerHello) {
    let mesh = shared.dispatcher.mesh();
    let max_len = shared.config.max_name_len;
    if hello.advertise.len() <= max_len {
        mesh.learn(&hello.node_id, &hello.advertise, true);
    }
    for peer in hello.peers.iter().take(MAX_MEMBERS) {
        let usable = !peer.node_id.is_empty()
            && peer.node_id.len() <= max_len
            && peer.address.len() <= max_len;
        if usable && peer.node_id != shared.node_id() {
            mesh.learn(&peer.node_id, &peer.address, false);
        }
    }
}

/// How serving a live link ended.
enum Ended {
    /// It closes as this says.
    Close(Close),
    /// It is retired.
    Retire(Why),
}

struct Session<'a> {
    shared: &'a Arc<Shared>,
    remote: &'a Arc<Remote>,
    /// The protocol version the link speaks.
    version: u16,
    outbound: &'a Outbound,
    /// What runs here for the peer: this link's own, or what an earlier link left, once taken
    /// over.
    served: Arc<Flights>,
    /// Ends `served` if the link's task is dropped before it hands them on or closes them.
    closer: CloseOnDrop,
    announcer: Announcer,
    keepalive: Keepalive,
    /// The link's outbound byte budget.
    budget: usize,
    /// The peer said farewell: this side retires the link too.
    farewell_heard: bool,
    /// The last pool-settings change sent, when the peer takes them.
    settings_sent: Option<u64>,
    /// The peer sent more than a last word on the link: it joined it too.
    heard: bool,
    /// The mesh confirmed the link then ([`Mesh::confirm`]), so it took over what earlier
    /// links to the peer's incarnation left.
    ///
    /// [`Mesh::confirm`]: crate::cluster::Mesh::confirm
    confirmed: bool,
    /// What is announced changed without a registry change (dispatches taken over hold
    /// slots): look again.
    announce: bool,
    /// The peer's incarnation as both sides number relays and keep outcomes; `None` when the
    /// peer does not list `relay-resume`.
    pair: Option<Arc<Pair>>,
    /// Outcomes read since the last `RelayAck`, by correlation.
    acks: Vec<u64>,
    /// Links to the peer's incarnation cut before this one, whose relays resume here.
    resuming: Vec<(PeerLink, CountedLink)>,
    /// The link ended without a last word from the peer: read to its end or failed, or its
    /// pings went unanswered.
    cut: bool,
}

impl Session<'_> {
    async fn serve(&mut self, reader: &mut FrameReader) -> Ended {
        match self.serve_until_stopped(reader).await {
            Ok(why) => Ended::Retire(why),
            Err(close) => Ended::Close(close),
        }
    }

    /// Serves the link until it is to be retired, for the reason returned.
    ///
    /// # Errors
    /// The close owed when the link ends any other way.
    async fn serve_until_stopped(&mut self, reader: &mut FrameReader) -> Result<Why, Close> {
        let shared = self.shared;
        let registry = shared.dispatcher.registry();
        // Noted before the snapshot, so no change after it is missed.
        let mut seen = registry.changes().epoch();
        let mut seen_crossing = registry.crossings().epoch();
        let (members, mut seen_members) = shared.dispatcher.mesh().subscribe_members().into_parts();
        // The acceptor's first hello; the dialler's second. Members learned between the
        // dialler's first hello and the subscription above are only in this one: without it,
        // two nodes joining through one seed at once can miss each other.
        if self
            .outbound
            .send_owed(hello_frame(shared, self.version))
            .is_err()
            || self.snapshot().is_err()
        {
            return Err(Close::Quietly);
        }
        let mut last_look = Instant::now();
        let mut last_sent = Instant::now();
        let mut flush_at: Option<Instant> = None;
        let flush = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(flush);
        let mut timer = ReplyTimer::default();
        let timer_sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer_sleep);
        let mut draining_told = false;
        // Made once, not per turn of the loop: each token wait registers with its token once.
        // The eviction token is a child of the node's shutdown token: one wait hears both.
        let stop_token = self.remote.evicted.clone();
        let stop = stop_token.cancelled();
        let draining = shared.draining.cancelled();
        tokio::pin!(stop, draining);
        // Kept across turns as well, and made again only when they fire or a look moves the
        // epochs they wait past.
        let crossed = registry.crossings().after(seen_crossing);
        let changed = registry.changes().after(seen);
        let learned = members.after(seen_members);
        let settings = shared.dispatcher.settings();
        let settings_changed = settings.changes().after(settings.changes().epoch());
        tokio::pin!(crossed, changed, learned, settings_changed);
        // Every setting after the hellos, then each change.
        self.send_settings()?;
        // Every branch is cancel-safe: token waits, sleeps, keep-alive ticks, signal waits and
        // `FrameReader::next` lose nothing when another branch wins. A link is always read, so
        // two nodes relaying to each other never wait on each other and pings are always
        // heard; while its queue is over budget, relays it sends are turned away instead, so
        // what it is owed stays bounded.
        loop {
            let look = tokio::select! {
                biased;
                () = &mut stop => {
                    if shared.closing.is_cancelled() {
                        return Ok(Why::ShuttingDown);
                    }
                    if shared.retiring.is_cancelled() {
                        return Ok(Why::Draining);
                    }
                    if self.remote.link.is_closed() {
                        // A new incarnation of the peer replaced the link: the process that
                        // relayed here is gone, and what it relayed is cancelled.
                        return Err(Close::goodbye(DUPLICATE));
                    }
                    if self.remote.is_cut_over() {
                        // Its dialler's new link replaced it: this one is dead over there.
                        self.cut = true;
                        return Err(Close::Quietly);
                    }
                    return Ok(Why::Duplicate);
                }
                () = &mut draining, if !draining_told => {
                    draining_told = true;
                    true
                }
                () = &mut timer_sleep, if timer.armed.is_some() => {
                    timer.armed = None;
                    timer.arm(self.served.expire(Instant::now()), timer_sleep.as_mut());
                    false
                }
                tick = self.keepalive.tick() => {
                    // Unanswered pings: the link may be cut.
                    self.ping(tick).inspect_err(|_| self.cut = true)?;
                    false
                }
                // Free slots crossing zero, or workers coming and going: look at once.
                epoch = &mut crossed => {
                    seen_crossing = epoch;
                    crossed.set(registry.crossings().after(seen_crossing));
                    true
                }
                // Any other change waits for the next flush; not listened to while one is due.
                epoch = &mut changed, if flush_at.is_none() => {
                    seen = epoch;
                    changed.set(registry.changes().after(seen));
                    let due = (last_sent + FLUSH_INTERVAL).max(Instant::now());
                    schedule(&mut flush_at, flush.as_mut(), due);
                    false
                }
                () = &mut flush, if flush_at.is_some() => {
                    flush_at = None;
                    true
                }
                epoch = &mut settings_changed, if self.settings_sent.is_some() => {
                    settings_changed.set(settings.changes().after(epoch));
                    self.send_settings()?;
                    false
                }
                epoch = &mut learned => {
                    seen_members = epoch;
                    learned.set(members.after(seen_members));
                    let hello = hello_frame(shared, self.version);
                    if self.outbound.send_owed(hello).is_err() {
                        return Err(Close::Quietly);
                    }
                    false
                }
                found = reader.ready() => {
                    // Frames already read are handled in this turn, up to a bound, instead of
                    // each paying a poll of every branch above.
                    let mut found = found;
                    let mut burst = Burst::after_first();
                    loop {
                        let frame = match reader.take(found) {
                            // Closed or reset with no last word: the link may be cut.
                            None => {
                                self.cut = true;
                                return Err(Close::Quietly);
                            }
                            Some(Err(err)) => {
                                self.cut = true;
                                return Err(Close::read_failed(err));
                            }
                            Some(Ok(frame)) => frame,
                        };
                        timer.arm(self.handle(frame)?, timer_sleep.as_mut());
                        if self.farewell_heard {
                            return Ok(Why::PeerLeft);
                        }
                        match burst.next(reader) {
                            Some(next) => found = next,
                            None => break,
                        }
                    }
                    std::mem::take(&mut self.announce)
                }
            };
            if !look {
                continue;
            }
            // Look at the registry at most once per MIN_LOOK_INTERVAL, on a crossing or when a
            // flush is due; send at once when a group crossed zero, otherwise at most once per
            // FLUSH_INTERVAL.
            let now = Instant::now();
            let earliest = last_look + MIN_LOOK_INTERVAL;
            if now < earliest {
                schedule(&mut flush_at, flush.as_mut(), earliest);
                continue;
            }
            last_look = now;
            seen = registry.changes().epoch();
            seen_crossing = registry.crossings().epoch();
            changed.set(registry.changes().after(seen));
            crossed.set(registry.crossings().after(seen_crossing));
            let delta = self.announcer.delta(self.presence(), self.draining());
            if delta.frames.is_empty() {
                continue;
            }
            let due = last_sent + FLUSH_INTERVAL;
            if !delta.urgent && now < due {
                schedule(&mut flush_at, flush.as_mut(), due);
                continue;
            }
            for frame in &delta.frames {
                if self
                    .outbound
                    .send_owed(Frame::Presence(frame.clone()))
                    .is_err()
                {
                    return Err(Close::Quietly);
                }
            }
            self.announcer.commit(delta);
            last_sent = now;
        }
    }

    fn draining(&self) -> bool {
        self.shared.dispatcher.is_draining()
    }

    /// Sends the pool settings changed since the last sent, when the peer takes them.
    fn send_settings(&mut self) -> Result<(), Close> {
        let Some(sent) = self.settings_sent else {
            return Ok(());
        };
        let (settings, latest) = self.shared.dispatcher.settings().since(sent);
        self.settings_sent = Some(latest);
        if settings.is_empty() {
            return Ok(());
        }
        let frame = Frame::PoolSettings(PoolSettings { settings });
        self.outbound.send_owed(frame).map_err(|_| Close::Quietly)
    }

    /// Takes the peer's pool settings, the latest word winning; a malformed one closes the
    /// link, one past this node's bound on pools is left out.
    fn take_settings(&self, frame: &PoolSettings) -> Result<(), Close> {
        if frame.settings.len() > MAX_SETTINGS {
            return Err(Close::error(
                ErrorCode::LimitExceeded,
                format!("more than {MAX_SETTINGS} pool settings"),
            ));
        }
        let settings = self.shared.dispatcher.settings();
        for setting in &frame.settings {
            match settings.apply(setting.clone()) {
                Ok(_) => {}
                Err(SettingError::Full) => {
                    tracing::warn!(peer = %self.remote.node_id, channel = %setting.channel, "pool setting left out: this node holds {MAX_SETTINGS} already");
                }
                Err(err) => return Err(Close::error(ErrorCode::Malformed, err.to_string())),
            }
        }
        Ok(())
    }

    /// A version-2 link is not told of workers in probation: it has no word for them.
    fn presence(&self) -> Vec<PoolPresence> {
        let held = self.served.held_slots();
        let max_groups = self.shared.config.max_set_len;
        let registry = self.shared.dispatcher.registry();
        registry.presence(&held, self.version >= 3, max_groups)
    }

    fn snapshot(&mut self) -> Result<(), ()> {
        let pools = self.presence();
        let draining = self.draining();
        for frame in self.announcer.snapshot(pools, draining) {
            self.outbound
                .send_owed(Frame::Presence(frame))
                .map_err(|_| ())?;
        }
        Ok(())
    }

    /// Handles one frame; `Ok` carries a reply deadline for the link's timer.
    fn handle(&mut self, frame: FrameRef<'_>) -> Result<Option<Instant>, Close> {
        self.keepalive.heard();
        if !self.heard && !matches!(frame, FrameRef::Frame(Frame::Goodbye(_) | Frame::Error(_))) {
            self.take_over()?;
        }
        let frame = match frame {
            FrameRef::Relay(relay) => {
                if !self.takes_relay(relay.correlation) {
                    return Ok(None);
                }
                return Ok(self.served.relay(&relay));
            }
            FrameRef::RelayOutcome(outcome) => {
                let mut fate = self
                    .remote
                    .link
                    .answer(outcome.correlation, outcome.result.reborrow());
                for (cut, _) in &self.resuming {
                    if fate != ReplyFate::Unknown {
                        break;
                    }
                    fate = cut.answer(outcome.correlation, outcome.result.reborrow());
                }
                if fate == ReplyFate::Unknown {
                    tracing::debug!(
                        peer = %self.remote.node_id,
                        correlation = outcome.correlation,
                        "relay outcome for no relay in flight"
                    );
                }
                if self.pair.is_some() {
                    self.acks.push(outcome.correlation);
                    if self.acks.len() >= ACK_EVERY {
                        self.acknowledge();
                    }
                }
                return Ok(None);
            }
            FrameRef::Frame(frame) => frame,
            other => return Err(Close::unexpected(other.name(), "on a peer link")),
        };
        match frame {
            Frame::Presence(presence) => {
                let max_set_len = self.shared.config.max_set_len;
                check_extensions(&presence.extensions, max_set_len, frame.name())?;
                self.apply(presence.clone()).map(|()| None)
            }
            Frame::Cancel(cancel) => {
                self.served.cancel(cancel.correlation);
                Ok(None)
            }
            Frame::PeerHello(_) => {
                let max_set_len = self.shared.config.max_set_len;
                let hello = match read_hello(frame, max_set_len, self.shared.incarnation) {
                    Some(heard) => heard?.hello,
                    None => return Err(Close::unexpected(frame.name(), "on a peer link")),
                };
                if hello.node_id != *self.remote.node_id
                    || hello.incarnation != self.remote.incarnation
                {
                    return Err(Close::error(
                        ErrorCode::UnexpectedFrame,
                        "a PeerHello may not change the node id or incarnation of a link",
                    ));
                }
                learn(self.shared, &hello);
                Ok(None)
            }
            Frame::Farewell(_) => {
                // Every relay of ours still unanswered there was never handled: placed again.
                self.remote.link.close_unhandled();
                self.farewell_heard = true;
                Ok(None)
            }
            Frame::PoolSettings(settings) => self.take_settings(settings).map(|()| None),
            Frame::RelayAck(ack) => {
                self.resuming(FrameKind::RelayAck)?
                    .acknowledged(ack.below, &ack.also);
                Ok(None)
            }
            Frame::Resume(resume) => {
                self.resume(resume)?;
                Ok(None)
            }
            Frame::Resumed(resumed) => {
                self.resuming(FrameKind::Resumed)?;
                self.resumed(resumed);
                Ok(None)
            }
            Frame::Ping(Ping { nonce }) => {
                // Owed, and ahead of queued relays: a busy link still answers at once.
                let _ = self.outbound.send_owed(Frame::Pong(Pong { nonce: *nonce }));
                Ok(None)
            }
            Frame::Pong(_) => Ok(None),
            Frame::Goodbye(_) | Frame::Error(_) => Err(Close::Quietly),
            Frame::Progress(progress) => {
                if let Some(missing) = NotImplemented::kind(FrameKind::Progress, IMPLEMENTED) {
                    return Err(Close::error(ErrorCode::Unsupported, missing.to_string()));
                }
                // To the relay it names, on this link or a cut one it resumes; else dropped.
                let (correlation, details) = (progress.correlation, &progress.details);
                if !self.remote.link.progress(correlation, details) {
                    for (cut, _) in &self.resuming {
                        if cut.progress(correlation, details) {
                            break;
                        }
                    }
                }
                Ok(None)
            }
            other => Err(Close::unexpected(other.name(), "on a peer link")),
        }
    }

    /// The peer joined the link too (a peer that turns a link down sends its last word and
    /// nothing else): unless the link was replaced meanwhile, what earlier links to its
    /// incarnation left running here is served on it from now on, and their relays still
    /// unanswered there resume on it.
    ///
    /// # Errors
    /// `Close::Quietly` when the `Resume` cannot be queued.
    fn take_over(&mut self) -> Result<(), Close> {
        self.heard = true;
        // A link replaced meanwhile ends soon and takes nothing: its replacement may have.
        self.confirmed = self.shared.dispatcher.mesh().confirm(self.remote);
        let Some(pair) = self.pair.clone().filter(|_| self.confirmed) else {
            return Ok(());
        };
        if let Some(left) = pair
            .unpark(None)
            .and_then(|left| left.downcast::<Flights>().ok())
        {
            left.take_over(self.outbound.clone());
            // This link's own ran nothing yet: the peer's first relay is read after this.
            self.closer = CloseOnDrop(Some(Arc::clone(&left)));
            self.served = left;
            self.announce = true;
        }
        self.resuming = pair.unpark_cut(None);
        self.send_resume().map_err(|()| Close::Quietly)
    }

    /// The pair a resumption frame of `kind` acts on.
    ///
    /// # Errors
    /// `Error{Unsupported}` when the peer's hello did not list `relay-resume`.
    fn resuming(&self, kind: FrameKind) -> Result<&Arc<Pair>, Close> {
        self.pair.as_ref().ok_or_else(|| {
            Close::error(
                ErrorCode::Unsupported,
                format!(
                    "{kind} needs the feature {}, which the peer's hello did not list",
                    feature::RELAY_RESUME
                ),
            )
        })
    }

    /// Answers the peer's `Resume`: the outcome kept for each listed relay goes again as
    /// `RelayOutcome`, then `Resumed` says which of the others were never read (above the
    /// mark), which still run here and which are unknown.
    fn resume(&mut self, resume: &Resume) -> Result<(), Close> {
        let pair = Arc::clone(self.resuming(FrameKind::Resume)?);
        let handled_up_to = pair.handled_up_to();
        let (mut running, mut unknown) = (Vec::new(), Vec::new());
        for &correlation in &resume.unanswered {
            if let Some(outcome) = pair.kept_outcome(correlation) {
                if self
                    .outbound
                    .send_owed(Frame::RelayOutcome(outcome))
                    .is_err()
                {
                    return Err(Close::Quietly);
                }
            } else if correlation > handled_up_to {
                // Never read: the origin places it again.
            } else if self.served.is_running(correlation) {
                running.push(correlation);
            } else {
                unknown.push(correlation);
            }
        }
        let resumed = Frame::Resumed(Resumed {
            handled_up_to,
            running,
            unknown,
            last: resume.last,
        });
        self.outbound.send_owed(resumed).map_err(|_| Close::Quietly)
    }

    /// Sends `Resume` with the relays of the cut links still awaiting outcomes, in chunks;
    /// those that ended here meanwhile are let go and cancelled over there.
    fn send_resume(&mut self) -> Result<(), ()> {
        if self.resuming.is_empty() {
            return Ok(());
        }
        let mut live = Vec::new();
        for (cut, _) in &self.resuming {
            for correlation in cut.release_ended() {
                let cancel = Frame::Cancel(Cancel { correlation });
                self.outbound.send_owed(cancel).map_err(|_| ())?;
            }
            live.extend(cut.live());
        }
        if live.is_empty() {
            for (cut, _) in self.resuming.drain(..) {
                cut.close();
            }
            return Ok(());
        }
        live.sort_unstable();
        let chunks = live.chunks(RESUME_CHUNK).len();
        for (at, chunk) in live.chunks(RESUME_CHUNK).enumerate() {
            let resume = Frame::Resume(Resume {
                unanswered: chunk.to_vec(),
                last: at + 1 == chunks,
            });
            self.outbound.send_owed(resume).map_err(|_| ())?;
        }
        Ok(())
    }

    /// Applies the peer's answer to this node's `Resume`: relays still running there await
    /// their outcomes on this link, unknown ones end `PeerLost`, and with the last chunk those
    /// the peer never read are placed again and the cut links let go of the rest as lost.
    fn resumed(&mut self, resumed: &Resumed) {
        for (cut, _) in &self.resuming {
            for &correlation in &resumed.running {
                cut.move_to(correlation, &self.remote.link);
            }
            for &correlation in &resumed.unknown {
                cut.let_go(correlation, Unanswered::Lost);
            }
        }
        if resumed.last {
            for (cut, _) in self.resuming.drain(..) {
                cut.let_go_above(resumed.handled_up_to, Unanswered::Unhandled);
                cut.close();
            }
        }
    }

    /// Tells the peer which outcomes this node holds: every relay numbered below the lowest
    /// still without one, and those read since the last acknowledgement.
    fn acknowledge(&mut self) {
        let Some(pair) = &self.pair else {
            return;
        };
        let below = pair.below(|| self.remote.link.lowest_pending());
        let mut also = std::mem::take(&mut self.acks);
        also.retain(|&correlation| correlation >= below);
        // Owed, and small: one per `ACK_EVERY` outcomes read, or per ping.
        let _ = self
            .outbound
            .send_owed(Frame::RelayAck(RelayAck { below, also }));
    }

    /// Counts a relay the peer sent, and says whether to run it: while the link back is over
    /// its byte budget, it is turned away with `Refused{WorkerBackpressure}` instead.
    fn takes_relay(&mut self, correlation: u64) -> bool {
        self.remote.relay_received();
        if let Some(pair) = &self.pair {
            pair.handled(correlation);
        }
        let pressure = self.outbound.pressure();
        if !pressure.room || pressure.bytes.saturating_add(self.served.held_input()) >= self.budget
        {
            self.served.turn_away(correlation);
            return false;
        }
        true
    }

    fn apply(&mut self, presence: Presence) -> Result<(), Close> {
        let mesh = self.shared.dispatcher.mesh();
        mesh.apply(self.remote, presence).map_err(|err| {
            let code = match err {
                PresenceError::BadChannel(_) => ErrorCode::Malformed,
                PresenceError::TooManyPools | PresenceError::TooManyGroups { .. } => {
                    ErrorCode::LimitExceeded
                }
            };
            Close::error(code, err.to_string())
        })
    }

    fn ping(&mut self, tick: Tick) -> Result<(), Close> {
        if let Some(ping) = Close::unless_pinged(tick)? {
            // Owed: a ping a busy queue refused would count as missed and close a live link.
            let _ = self.outbound.send_owed(Frame::Ping(ping));
            if !self.acks.is_empty() {
                self.acknowledge();
            }
        }
        Ok(())
    }
}

/// Wakes the link at `at` unless an earlier wake is set.
fn schedule(
    flush_at: &mut Option<Instant>,
    sleep: std::pin::Pin<&mut tokio::time::Sleep>,
    at: Instant,
) {
    if flush_at.is_none_or(|set| at < set) {
        *flush_at = Some(at);
        sleep.reset(at);
    }
}
