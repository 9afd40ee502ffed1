//! Keeps a link to every member: one dialler per member, keyed by node id, and one per
//! configured join point until a node answering there says who it is.
//!
//! A member is dialled, at its advertised address and then at each join point where it
//! answered, while no link to it is joined, whichever side opened that link and whatever
//! address it came by; of two members, the one whose id sorts higher dials a moment later. A join point is dialled until a node answers there; from then on it is
//! one of that member's addresses. While a dial to a join point is in flight, nobody knows who
//! will answer, so members are not dialled meanwhile, for up to a second.
//! A join point whose node refused a second link (it is linked already) waits until none of
//! the members linked at the time is. A configured name is a join point at each address it
//! resolves to, now and at each resolution after (`discover`). Each dialler redials with
//! jittered exponential backoff; its failures are warnings, the first at once and then one
//! every [`FAILURE_SUMMARY`] while they go on, and each is counted against its join point. Links
//! are opened by the node's [`Dialer`](lintel_transport::Dialer), TCP unless the node
//! was given another; a resolved address is dialled as its name's.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lintel_client::connect::{connect_with, ConnectError};
use lintel_client::Handshake;
use lintel_transport::resolve::DialResolved;
use lintel_transport::Batched;
use lintel_wire::Role;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::super::handshake::PEER_VERSION;
use super::discover::discover;
use super::hello::{self, HelloFailed, Refusal, Side};
use super::session;
use crate::cluster::{Answerer, JoinDial};
use crate::shared::Shared;

/// First pause before redialling.
const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest pause before redialling.
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A link that lived this long starts its next backoff afresh; with relays resuming, one that
/// lived the relink grace already does (see [`fresh_after`]).
const STABLE: Duration = Duration::from_secs(10);
/// How long the node whose id sorts higher waits, once a member is unlinked, before it dials
/// it: a member that knows this node dials it meanwhile, so the two seldom dial each other at
/// once (which forms a duplicate link, settled but wasted).
const DEFER: Duration = Duration::from_millis(300);
/// Longest a member's dial waits for a join point's dial in flight (whose answer may be that
/// member) to be answered.
const JOINING_WAIT: Duration = Duration::from_secs(1);
/// While the dials of one dialler (a member's, or a join point's) keep failing, how often that
/// is logged again.
const FAILURE_SUMMARY: Duration = Duration::from_secs(30);

/// Dials every member and every configured join point, until the node retires its links.
pub(crate) async fn supervise(shared: Arc<Shared>, tasks: TaskTracker) {
    let mesh = Arc::clone(shared.dispatcher.mesh());
    // Subscribed before the first look, so no member learned meanwhile is missed.
    let mut members = mesh.subscribe_members();
    for seed in &shared.config.peers {
        match (&shared.resolver, seed.parse::<SocketAddr>()) {
            (Some(resolver), Err(_)) => {
                tasks.spawn(discover(
                    Arc::clone(&shared),
                    seed.clone(),
                    resolver.clone(),
                ));
            }
            _ => {
                mesh.add_join_point(seed);
                if seed == shared.advertise() {
                    mesh.answered(seed, Answerer::Myself);
                }
            }
        }
    }
    let mut dialled: HashSet<Arc<str>> = HashSet::new();
    // The generation of each join point dialled: one removed and added again is dialled anew.
    let mut joined: HashMap<String, u64> = HashMap::new();
    loop {
        for node_id in mesh.member_ids() {
            if dialled.insert(Arc::clone(&node_id)) {
                tasks.spawn(Batched::new(dial_member(Arc::clone(&shared), node_id)));
            }
        }
        let join_points = mesh.join_point_addresses();
        joined.retain(|address, _| join_points.iter().any(|(known, _)| known == address));
        for (address, generation) in join_points {
            if joined.insert(address.clone(), generation) != Some(generation) {
                let dial = dial_join_point(Arc::clone(&shared), address, generation);
                tasks.spawn(Batched::new(dial));
            }
        }
        tokio::select! {
            () = shared.retiring.cancelled() => return,
            changed = members.changed() => if changed.is_err() { return },
        }
    }
}

/// Keeps a link to member `node_id` until the node retires its links.
async fn dial_member(shared: Arc<Shared>, node_id: Arc<str>) {
    let mesh = Arc::clone(shared.dispatcher.mesh());
    let mut backoff = Backoff::default();
    let mut failures = Failures::default();
    // Which of the member's addresses to try: the next one after each failure.
    let mut turn = 0;
    loop {
        let Some(address) = member_unlinked(&shared, &node_id, turn).await else {
            return;
        };
        // Said in the hello: a link this node lost, the peer may still hold as alive.
        let lost = mesh.lost_link_to(&node_id);
        match reach(&shared, &address, None, lost).await {
            Reached::Answered { node_id: id, lived } => {
                failures.recovered(&node_id, &address);
                if id != node_id {
                    turn += 1;
                }
                if lived >= fresh_after(&shared) {
                    backoff = Backoff::default();
                }
            }
            Reached::Refused(Refusal::Duplicate) => {
                tracing::debug!(peer = %node_id, %address, "already linked; dial turned down");
            }
            Reached::Refused(Refusal::Myself) => mesh.answered(&address, Answerer::Myself),
            Reached::Refused(Refusal::Other(reason)) => {
                failures.failed(&shared, &node_id, &address, &DialError::Goodbye(reason));
                turn += 1;
            }
            Reached::Failed(err) => {
                failures.failed(&shared, &node_id, &address, &err);
                turn += 1;
            }
            Reached::Closing => return,
        }
        if !backoff.pause(&shared).await {
            return;
        }
    }
}

/// How long a link must have lived for the next dial to start its backoff afresh: the relink
/// grace while relays resume, so a link cut again and again is redialled within it (the first
/// pause is at most 150 ms); [`STABLE`] otherwise.
fn fresh_after(shared: &Shared) -> Duration {
    match shared.config.peer_relink_grace() {
        Duration::ZERO => STABLE,
        grace => grace.min(STABLE),
    }
}

/// Dials join point `address` (of `generation`) until a node answering there says who it
/// is, the join point is removed, or the node retires its links.
async fn dial_join_point(shared: Arc<Shared>, address: String, generation: u64) {
    let mesh = Arc::clone(shared.dispatcher.mesh());
    let mut backoff = Backoff::default();
    let mut failures = Failures::default();
    loop {
        if !join_point_needed(&shared, &address, generation).await {
            return;
        }
        match reach(&shared, &address, Some(mesh.joining()), None).await {
            Reached::Answered { .. } => failures.recovered(&address, &address),
            Reached::Refused(Refusal::Duplicate) => {
                tracing::debug!(%address, "the node at a join point is linked already");
                mesh.answered(&address, Answerer::OneOf(mesh.linked_ids()));
            }
            Reached::Refused(Refusal::Myself) => mesh.answered(&address, Answerer::Myself),
            Reached::Refused(Refusal::Other(reason)) => {
                failures.failed(&shared, &address, &address, &DialError::Goodbye(reason));
            }
            Reached::Failed(err) => failures.failed(&shared, &address, &address, &err),
            Reached::Closing => return,
        }
        if !backoff.pause(&shared).await {
            return;
        }
    }
}

/// Waits while member `node_id` is linked or no address for it is known; then, once it is
/// unlinked, [`DEFER`] more when this node's id sorts higher, and while a join point's dial is
/// in flight, up to [`JOINING_WAIT`]. Returns the address to dial on this `turn`; `None` once
/// the node retires its links.
async fn member_unlinked(shared: &Shared, node_id: &str, turn: usize) -> Option<String> {
    let mesh = shared.dispatcher.mesh();
    let defer = if shared.node_id() > node_id {
        DEFER
    } else {
        Duration::ZERO
    };
    let mut unlinked_since = None;
    loop {
        let mut links = mesh.subscribe();
        let mut members = mesh.subscribe_members();
        if shared.retiring.is_cancelled() {
            return None;
        }
        let mut wake = None;
        let addresses = mesh.addresses(node_id);
        let address = addresses.get(turn % addresses.len().max(1));
        match address {
            Some(address) if !mesh.is_up(node_id) => {
                let since = *unlinked_since.get_or_insert_with(Instant::now);
                let now = Instant::now();
                let deferred = since + defer;
                let joined = since + JOINING_WAIT;
                if now < deferred {
                    wake = Some(deferred);
                } else if mesh.is_joining() && now < joined {
                    wake = Some(joined);
                } else {
                    return Some(address.clone());
                }
            }
            _ => unlinked_since = None,
        }
        let woken = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = shared.retiring.cancelled() => return None,
            _ = links.changed() => {}
            _ = members.changed() => {}
            () = woken => {}
        }
    }
}

/// Waits until join point `address` is to be dialled: nobody answered there yet, or every
/// member that may have is unlinked. False once a member said who it is there, the join point
/// of `generation` is gone, or the node retires its links.
async fn join_point_needed(shared: &Shared, address: &str, generation: u64) -> bool {
    let mesh = shared.dispatcher.mesh();
    loop {
        let mut links = mesh.subscribe();
        if shared.retiring.is_cancelled() {
            return false;
        }
        match mesh.join_point(address, generation) {
            None | Some(Answerer::Member(_) | Answerer::Myself) => return false,
            Some(Answerer::Nobody) => return true,
            Some(Answerer::OneOf(ids)) if !ids.iter().any(|id| mesh.is_up(id)) => return true,
            Some(Answerer::OneOf(_)) => {}
        }
        tokio::select! {
            () = shared.retiring.cancelled() => return false,
            _ = links.changed() => {}
        }
    }
}

/// What became of one dial.
enum Reached {
    /// Node `node_id` answered with its hello; the link it led to has ended by now, after it
    /// `lived` this long.
    Answered {
        node_id: Arc<str>,
        lived: Duration,
    },
    /// The node there said `Goodbye` instead of its hello.
    Refused(Refusal),
    Failed(DialError),
    /// The node retires its links.
    Closing,
}

/// Why a dial led to no link.
#[derive(Debug, thiserror::Error)]
enum DialError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("the node there said goodbye: {0}")]
    Goodbye(String),
    #[error("the peer hellos failed")]
    Hello,
}

/// Dials `address` and, when a node answers with its hello, runs the link until it ends.
/// Who answered is recorded before the link runs; `joining` is let go at the same moment. The
/// hello says this node lost a link to incarnation `lost` of the node it means to reach.
async fn reach(
    shared: &Arc<Shared>,
    address: &str,
    joining: Option<JoinDial>,
    lost: Option<u64>,
) -> Reached {
    let mut handshake = Handshake::new(Role::Peer, shared.node_id());
    handshake.versions = PEER_VERSION..=shared.config.max_protocol_version;
    handshake.auth_token = shared
        .config
        .cluster_secret
        .clone()
        .or_else(|| shared.config.auth_token.clone());
    handshake.timeout = shared.config.handshake_timeout();
    handshake.max_frame_len = shared.config.max_frame_len;
    handshake.queue_len = shared.config.outbound_queue;
    // An address a name resolved to is dialled as the name's: TLS checks the name.
    let name = shared.dispatcher.mesh().resolved_from(address);
    let resolved = name
        .as_deref()
        .zip(address.parse::<SocketAddr>().ok())
        .map(|(name, at)| DialResolved::new(&*shared.dialer, name, at));
    let dialer = match &resolved {
        Some(resolved) => resolved as &dyn lintel_transport::Dialer,
        None => &*shared.dialer,
    };
    let connected = tokio::select! {
        () = shared.retiring.cancelled() => return Reached::Closing,
        connected = connect_with(dialer, address, &handshake) => connected,
    };
    let mut conn = match connected {
        Ok(conn) => conn,
        Err(err) => return Reached::Failed(err.into()),
    };
    conn.reader
        .set_frame_timeout(Some(shared.config.frame_timeout()));
    let link = Side::Dialled.speaking(conn.welcome.version);
    let exchanged = hello::exchange(shared, &mut conn.reader, &conn.outbound, link, lost).await;
    let (close, reached) = match exchanged {
        Ok(theirs) => {
            let node_id: Arc<str> = Arc::from(theirs.hello.node_id.as_str());
            let mesh = shared.dispatcher.mesh();
            mesh.answered(address, Answerer::Member(Arc::clone(&node_id)));
            drop(joining);
            let linked = Instant::now();
            let close = session::run(shared, &mut conn.reader, &conn.outbound, link, theirs).await;
            let lived = linked.elapsed();
            (close, Reached::Answered { node_id, lived })
        }
        Err(HelloFailed::Myself) => (
            super::super::close::Close::Quietly,
            Reached::Refused(Refusal::Myself),
        ),
        Err(HelloFailed::Refused(refusal)) => (
            super::super::close::Close::Quietly,
            Reached::Refused(refusal),
        ),
        Err(HelloFailed::Close(close)) => (close, Reached::Failed(DialError::Hello)),
    };
    super::super::close::finish(shared, close, conn.outbound, conn.writer).await;
    reached
}

/// Jittered exponential backoff between dials.
struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self(BACKOFF_START)
    }
}

impl Backoff {
    /// Sleeps the next pause, ±50%; false when the node retires its links meanwhile.
    async fn pause(&mut self, shared: &Shared) -> bool {
        let pause = self.0.mul_f64(0.5 + fastrand::f64());
        self.0 = (self.0 * 2).min(BACKOFF_MAX);
        tokio::select! {
            () = shared.retiring.cancelled() => false,
            () = tokio::time::sleep(pause) => true,
        }
    }
}

/// The failed dials of one dialler since it last reached a node, for a warning at once and
/// then only every [`FAILURE_SUMMARY`]; each failure is also counted against its join point.
#[derive(Default)]
struct Failures {
    count: u64,
    since: Option<Instant>,
    told: Option<Instant>,
}

impl Failures {
    fn failed(
        &mut self,
        shared: &Shared,
        peer: &dyn fmt::Display,
        address: &str,
        error: &DialError,
    ) {
        shared
            .dispatcher
            .mesh()
            .dial_failed(address, &error.to_string());
        let now = Instant::now();
        self.count += 1;
        let since = *self.since.get_or_insert(now);
        match self.told {
            None => {
                tracing::warn!(%peer, %address, %error, "peer dial failed; retrying with backoff");
                self.told = Some(now);
            }
            Some(told) if now.duration_since(told) >= FAILURE_SUMMARY => {
                let failing_for_s = now.duration_since(since).as_secs();
                tracing::warn!(
                    %peer, %address, %error, failures = self.count, failing_for_s,
                    "peer dials still failing"
                );
                self.told = Some(now);
            }
            Some(_) => tracing::debug!(%peer, %address, %error, "peer dial failed"),
        }
    }

    fn recovered(&mut self, peer: &dyn fmt::Display, address: &str) {
        if self.count > 0 {
            tracing::info!(%peer, %address, failures = self.count, "peer reached after failed dials");
        }
        *self = Self::default();
    }
}
