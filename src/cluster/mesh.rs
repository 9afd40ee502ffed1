//! The mesh: the peers this node has a link to, what each announced, and who the members are.
//!
//! Placement reads it to find a peer with a usable slot and charges the relay there under the
//! mesh's and that peer's locks, so concurrent dispatches never charge past what a peer
//! announced. Locks are taken mesh first, then a peer's view, never the other way. Every change
//! that can make a remote slot usable (a presence frame, a peer joining) bumps one counter that
//! waiting dispatches subscribe to before they look.
//!
//! # One link per pair, settled before a relay can use the other
//!
//! A link is joined here by [`Mesh::join`], atomically against every other link to the same
//! member, by each side at one moment of the hellos:
//! - the acceptor joins on the dialler's `PeerHello`, before it sends its own; a link to the
//!   same incarnation already joined makes it refuse the newcomer with `Goodbye`, its own
//!   hello never sent, unless the peer dialled that link too, or the peer's hello says it held
//!   a link to this incarnation and lost it (a cut only the peer saw, of a link this node
//!   dialled): a dialler dials only while it holds no link, so the old one is dead over there.
//!   When it is confirmed (below) and relays resume between the two, it is taken as cut (its
//!   relays wait for the newcomer, which joins once the old link stopped reading and left
//!   them); otherwise it is retired;
//! - the dialler joins on the acceptor's `PeerHello`. That hello says the acceptor had no other
//!   link to this incarnation joined: an older link this node dialled is dead over there and
//!   gives way; against a link this node accepted (both dialled at once), the one dialled by
//!   the node whose id sorts lower stays, the same answer both sides reach. A dialler whose
//!   link loses says `Goodbye` and sends nothing else on it.
//!
//! So a link replaced by another to the same incarnation is held no more on the other side:
//! dead, or never joined there. When relays resume over both and the old one is confirmed, it
//! is taken as cut (its relays both ways left for the newcomer) rather than retired with a
//! farewell nobody reads.
//!
//! A link joined here is confirmed ([`Mesh::confirm`]) once the peer sent more than a last word
//! on it, so it joined the link too; only then does it take over what earlier links to the
//! same incarnation left (relays still unanswered, what runs here for the peer). The link that
//! loses a simultaneous dial is never confirmed, since the side that turned it down sends only
//! `Goodbye` on it: it ends holding nothing of another link's.
//!
//! Each side sends presence on a link only after its own join, and a link carries relays only
//! once the peer's presence arrived on it (an [`established`](Remote::is_established) link).
//! So the link that loses a simultaneous dial never carries a relay: its dialler turned it
//! down and never sent presence on it, so its acceptor never relays there; and the dialler
//! never joined it, so never relays there either. Retiring it puts no relay in doubt. A link
//! is replaced only by a new incarnation of its peer (the old process is gone) or by a link
//! whose dial or hello proved the old one dead on the other side; an established link to a
//! live incarnation is otherwise never evicted for a newcomer.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_wire::{
    NodeEvent, NodeRouting, PeerAddress, PeerLinkState, PeerStatus, Presence, RoutingRef,
};
use tokio_util::sync::CancellationToken;

use super::changes::Changes;
use super::members::{Answerer, JoinPoint, Learned, LinkTally, Members};
use super::view::{draw, PoolCapacity, PresenceError, View};
use crate::epoch::Epoch;
use crate::events::Events;
use crate::link::{Charge, Pair, PeerLink, RemoteSlot};
use crate::registry::{Address, CensusCount, Elsewhere, NodeFilter, Tiers};

/// Which node opened a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opener {
    /// This node, named by its own node id.
    Here(Arc<str>),
    /// The peer.
    Peer,
    /// The peer, saying in its hello that it held a link to this node's incarnation and lost
    /// it: a link this node dialled to it is dead over there.
    PeerAfterCut,
}

/// One peer with a live link.
#[derive(Debug)]
pub struct Remote {
    pub node_id: Arc<str>,
    pub incarnation: u64,
    /// Where the peer says it is dialled.
    pub address: String,
    /// Who dialled this link; decides which of two links to one peer stays.
    opener: Opener,
    pub link: PeerLink,
    view: Mutex<View>,
    /// Fires when this link gave way to another one for the same peer, or when the token it
    /// was made under (the node retiring its links) fires.
    pub evicted: CancellationToken,
    received: AtomicU64,
    /// Set when the peer's first presence arrived: it kept the link too.
    established: AtomicBool,
    /// Set by [`Mesh::confirm`] once the peer sent more than a last word on the link: it joined
    /// it too, and what earlier links to it left is the link's from then on.
    confirmed: AtomicBool,
    /// Relays over this link resume on a new link to the same incarnation after a cut.
    resumes: bool,
    /// Set when a new link to the same incarnation replaced this one while relays resume: the
    /// other side holds this one no more, and it ends as a cut link does.
    cut_over: AtomicBool,
    /// Fires once the link's session let go of what it holds: its relays closed, or left for a
    /// new link (see [`Mesh::join`]).
    pub let_go: CancellationToken,
}

impl Remote {
    /// A peer reached over `link`, opened by `opener`, whose relays resume after a cut when
    /// `resumes`; its `evicted` token is a child of `retiring`, so one wait hears both.
    pub fn new(
        node_id: Arc<str>,
        incarnation: u64,
        address: String,
        opener: Opener,
        resumes: bool,
        link: PeerLink,
        retiring: &CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            incarnation,
            address,
            opener,
            link,
            view: Mutex::new(View::default()),
            evicted: retiring.child_token(),
            received: AtomicU64::new(0),
            established: AtomicBool::new(false),
            confirmed: AtomicBool::new(false),
            resumes,
            cut_over: AtomicBool::new(false),
            let_go: CancellationToken::new(),
        })
    }

    /// True once a new link replaced this one while relays resume: it ends as a cut link does.
    pub fn is_cut_over(&self) -> bool {
        self.cut_over.load(Ordering::Acquire)
    }

    fn view(&self) -> MutexGuard<'_, View> {
        // Every update leaves the view consistent before anything that could panic.
        self.view
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a relay this peer sent us.
    pub fn relay_received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }

    /// True once the peer's presence arrived on this link: both sides kept it, and relays may
    /// go over it.
    pub fn is_established(&self) -> bool {
        self.established.load(Ordering::Acquire)
    }

    /// True once [`Mesh::confirm`] confirmed the link: it may hold what earlier links to the
    /// same incarnation left.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed.load(Ordering::Acquire)
    }

    fn status(&self, before: LinkTally) -> PeerStatus {
        let view = self.view();
        PeerStatus {
            node_id: self.node_id.to_string(),
            address: self.address.clone(),
            state: PeerLinkState::Up,
            synced: view.synced,
            relays_sent: before.sent.saturating_add(self.link.sent()),
            relays_received: before
                .received
                .saturating_add(self.received.load(Ordering::Relaxed)),
            relays_in_flight: u32::try_from(self.link.in_flight()).unwrap_or(u32::MAX),
            pools: view.channels(),
        }
    }
}

/// Why a new link to a peer was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// A link to the same incarnation of the peer stays instead.
    #[error("duplicate peer link")]
    Duplicate,
}

/// One member's figures for the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTally {
    pub node_id: String,
    pub tally: LinkTally,
}

#[derive(Debug, Default)]
struct State {
    /// Ordered by node id, so placement weighs peers in the same order in every run.
    remotes: BTreeMap<Arc<str>, Arc<Remote>>,
    members: Members,
    /// Dials of join points in flight whose answer is not in yet.
    joining: usize,
}

/// The peers of one node. Share it as `Arc<Mesh>`.
#[derive(Debug)]
pub struct Mesh {
    state: Mutex<State>,
    /// Touched when a remote slot may have become usable: a presence frame, a link coming
    /// or going, a relay's charge taken back.
    changes: Arc<Epoch>,
    /// Touched when a link comes up or goes down, or what the diallers wait on changes.
    links: Arc<Epoch>,
    /// Links up, read without the lock on every dispatch.
    linked: AtomicUsize,
    /// Touched when a member is learned or a link joins.
    members_changed: Arc<Epoch>,
    /// Links turned down because another link to the same incarnation stays.
    duplicates: AtomicU64,
    max_groups: usize,
    /// Where a link coming up (its peer's first presence) and going down are told.
    events: Events,
}

impl Mesh {
    /// An empty mesh accepting at most `max_groups` groups per announced pool.
    pub fn new(max_groups: usize) -> Arc<Self> {
        Self::telling(max_groups, Events::default())
    }

    /// As [`Mesh::new`], telling its links' ups and downs to `events`.
    pub fn telling(max_groups: usize, events: Events) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            changes: Arc::new(Epoch::default()),
            links: Arc::new(Epoch::default()),
            linked: AtomicUsize::new(0),
            members_changed: Arc::new(Epoch::default()),
            duplicates: AtomicU64::new(0),
            max_groups,
            events,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before anything that could panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `remote` as the link to its peer, or turns it down for the link that stays (see
    /// the module doc): a new incarnation replaces the old link; the acceptor of a second link
    /// to the same incarnation refuses it, unless the peer dialled both and relays resume over
    /// them; its dialler keeps it over an older link it dialled itself, and over one it
    /// accepted only when its own node id sorts lower. A link replaced by a new incarnation is
    /// closed at once (the old process is gone); one replaced by a link to the same
    /// incarnation takes no new relay and is retired by its session, or, when relays resume
    /// over both, ends as cut: that one is returned, and what it holds is left for `remote`
    /// once its [`Remote::let_go`] fires.
    ///
    /// # Errors
    /// [`JoinError::Duplicate`] when the existing link stays; it is counted.
    pub fn join(&self, remote: &Arc<Remote>) -> Result<Option<Arc<Remote>>, JoinError> {
        let replaced = {
            let mut state = self.lock();
            if let Some(old) = state.remotes.get(&remote.node_id) {
                if old.incarnation == remote.incarnation && !gives_way(old, remote) {
                    drop(state);
                    self.duplicates.fetch_add(1, Ordering::Relaxed);
                    return Err(JoinError::Duplicate);
                }
            }
            let _ = state.members.learn(&remote.node_id, &remote.address, true);
            let replaced = state
                .remotes
                .insert(Arc::clone(&remote.node_id), Arc::clone(remote));
            self.linked.store(state.remotes.len(), Ordering::Release);
            replaced
        };
        let mut cut = None;
        if let Some(old) = replaced {
            if old.incarnation == remote.incarnation {
                // The other side holds `old` no more (module doc): with relays resuming, it is
                // taken as cut, not retired with a farewell nobody reads.
                if resumes_over(&old, remote) {
                    old.cut_over.store(true, Ordering::Release);
                    cut = Some(Arc::clone(&old));
                }
                old.link.retire();
            } else {
                old.link.close();
            }
            old.evicted.cancel();
        }
        self.members_changed.touch();
        self.links.touch();
        self.changed();
        Ok(cut)
    }

    /// The incarnation of member `node_id` this node lost a link to and still holds relays of
    /// for a relink, while no link to it is joined; a dialler says so in its hello.
    pub fn lost_link_to(&self, node_id: &str) -> Option<u64> {
        let state = self.lock();
        if state.remotes.contains_key(node_id) {
            return None;
        }
        let pair = state.members.kept_pair(node_id)?;
        pair.holds_cut().then(|| pair.incarnation())
    }

    /// What this node keeps for incarnation `incarnation` of member `node_id` (learned as
    /// dialled at `address`) across its links: kept while the member is, replaced when a new
    /// incarnation links; `make` makes a new one.
    pub fn pair(
        &self,
        node_id: &str,
        address: &str,
        incarnation: u64,
        make: impl FnOnce() -> Arc<Pair>,
    ) -> Arc<Pair> {
        let mut state = self.lock();
        let _ = state.members.learn(node_id, address, true);
        state.members.pair(node_id, incarnation, make)
    }

    /// Forgets `remote` if it is still the link to its peer, and closes its link: what it
    /// announced is forgotten and its relays in flight end as lost, now. Its relay counts
    /// carry over to the member's; an established link counts as a link down, told with
    /// `reason`.
    pub fn leave(&self, remote: &Arc<Remote>, reason: &str) {
        self.left(remote, reason, true);
    }

    /// As [`Mesh::leave`] for a link cut under relays that may resume on a new link to the same
    /// incarnation: it takes no new relay, and those in flight keep waiting.
    pub fn leave_cut(&self, remote: &Arc<Remote>, reason: &str) {
        self.left(remote, reason, false);
    }

    fn left(&self, remote: &Arc<Remote>, reason: &str, close: bool) {
        self.forget(remote);
        // Closed (or retired) before its counts are read: no relay leaves on it after.
        if close {
            remote.link.close();
        } else {
            remote.link.retire();
        }
        let established = remote.is_established();
        if let Some(tally) = self.lock().members.tally(&remote.node_id) {
            tally.sent = tally.sent.saturating_add(remote.link.sent());
            tally.received = tally
                .received
                .saturating_add(remote.received.load(Ordering::Relaxed));
            if established {
                tally.downs += 1;
            }
        }
        if established {
            tracing::info!(peer = %remote.node_id, address = %remote.address, reason, "peer link down");
            self.events.publish(|| NodeEvent::PeerDown {
                node_id: remote.node_id.to_string(),
                incarnation: remote.incarnation,
                reason: reason.to_owned(),
            });
        } else {
            tracing::debug!(peer = %remote.node_id, "peer link closed before it came up");
        }
        self.links.touch();
        self.changed();
    }

    /// Forgets `remote` if it is still the link to its peer, leaving its link as it is: a
    /// retired link whose last frame is sent no longer stands for its peer, so the peer may
    /// link again while this one still hears the answers to its relays.
    pub fn forget(&self, remote: &Arc<Remote>) {
        let forgotten = {
            let mut state = self.lock();
            let current = state
                .remotes
                .get(&remote.node_id)
                .is_some_and(|current| Arc::ptr_eq(current, remote));
            if current {
                state.remotes.remove(&remote.node_id);
                self.linked.store(state.remotes.len(), Ordering::Release);
            }
            current
        };
        if forgotten {
            self.links.touch();
            self.changed();
        }
    }

    /// Confirms `remote`, its peer having sent more than a last word on it, if it is still the
    /// link to its peer; true when it is. Against [`Mesh::join`]: a link replaced before is
    /// never confirmed, and one confirmed before is replaced as cut when relays resume over
    /// both.
    pub fn confirm(&self, remote: &Arc<Remote>) -> bool {
        let state = self.lock();
        let current = state
            .remotes
            .get(&remote.node_id)
            .is_some_and(|current| Arc::ptr_eq(current, remote));
        if current {
            remote.confirmed.store(true, Ordering::Release);
        }
        current
    }

    /// Applies a presence frame from `remote`; the first one establishes the link.
    ///
    /// # Errors
    /// [`PresenceError`] for a frame that breaks a bound; the link should close.
    pub fn apply(&self, remote: &Remote, presence: Presence) -> Result<(), PresenceError> {
        let applied = remote.view().apply(presence, self.max_groups);
        if applied.is_ok() && !remote.established.swap(true, Ordering::AcqRel) {
            if let Some(tally) = self.lock().members.tally(&remote.node_id) {
                tally.ups += 1;
            }
            tracing::info!(peer = %remote.node_id, address = %remote.address, "peer link up");
            self.events.publish(|| NodeEvent::PeerUp {
                node_id: remote.node_id.to_string(),
                incarnation: remote.incarnation,
                address: remote.address.clone(),
            });
        }
        self.changed();
        applied
    }

    /// Learns that member `node_id` is dialled at `address`, from the member itself
    /// (`authoritative`) or from gossip; true when the member was new. Past
    /// [`MAX_MEMBERS`](super::MAX_MEMBERS)
    /// members, new ones are ignored: a peer's gossip cannot grow this node's state without
    /// bound.
    pub fn learn(&self, node_id: &str, address: &str, authoritative: bool) -> bool {
        let learned = self.lock().members.learn(node_id, address, authoritative);
        match learned {
            Learned::Member => self.members_changed.touch(),
            Learned::Address => self.links.touch(),
            Learned::Nothing => {}
        }
        learned == Learned::Member
    }

    /// Adds a configured join point; true when it was new.
    pub fn add_join_point(&self, address: &str) -> bool {
        let new = self.lock().members.add_join_point(address);
        if new {
            self.members_changed.touch();
        }
        new
    }

    /// Records who answered a dial of `address` (see [`Answerer`]).
    pub fn answered(&self, address: &str, answer: Answerer) {
        self.lock().members.answered(address, answer);
        self.links.touch();
    }

    /// Who answered at join point `address` last; `None` when it is not one, or not the one
    /// of `generation` any more.
    pub fn join_point(&self, address: &str, generation: u64) -> Option<Answerer> {
        let state = self.lock();
        let members = &state.members;
        (members.generation(address) == Some(generation))
            .then(|| members.join_point(address).cloned())
            .flatten()
    }

    /// Every join point's address and generation.
    pub fn join_point_addresses(&self) -> Vec<(String, u64)> {
        self.lock().members.join_point_addresses()
    }

    /// Makes `addresses` the join points of the `--peer` name `name` (see `Members::resolved`).
    pub fn resolved(&self, name: &str, addresses: &[std::net::SocketAddr]) {
        let resolved = self.lock().members.resolved(name, addresses);
        if resolved.added {
            self.members_changed.touch();
        }
        if resolved.removed {
            self.links.touch();
        }
    }

    /// The name join point `address` was resolved from, if it was.
    pub fn resolved_from(&self, address: &str) -> Option<Arc<str>> {
        self.lock().members.resolved_from(address)
    }

    /// Records a failed dial of `address`, when it is a join point; subscribers to links hear
    /// of it.
    pub fn dial_failed(&self, address: &str, error: &str) {
        self.lock().members.dial_failed(address, error);
        self.links.touch();
    }

    /// The join points, with who answered at each and how dialling them goes, for status.
    pub fn join_points(&self) -> Vec<JoinPoint> {
        let state = self.lock();
        state
            .members
            .join_points(|id| state.remotes.contains_key(id))
    }

    /// Every member's node id.
    pub fn member_ids(&self) -> Vec<Arc<str>> {
        self.lock().members.ids()
    }

    /// Where to dial member `node_id`, best first.
    pub fn addresses(&self, node_id: &str) -> Vec<String> {
        self.lock().members.addresses(node_id)
    }

    /// The members with a link joined now.
    pub fn linked_ids(&self) -> BTreeSet<Arc<str>> {
        self.lock().remotes.keys().cloned().collect()
    }

    /// True while a link to node `node_id` is joined, whatever address it came by.
    pub fn is_up(&self, node_id: &str) -> bool {
        self.lock().remotes.contains_key(node_id)
    }

    /// Marks a dial of a join point in flight until the guard drops: who answers is not known
    /// yet, so diallers of members wait rather than race it to the same node.
    pub fn joining(self: &Arc<Self>) -> JoinDial {
        self.lock().joining += 1;
        JoinDial(Arc::clone(self))
    }

    /// True while a dial of a join point is in flight.
    pub fn is_joining(&self) -> bool {
        self.lock().joining > 0
    }

    /// Links turned down because another link to the same incarnation stays.
    pub fn duplicates(&self) -> u64 {
        self.duplicates.load(Ordering::Relaxed)
    }

    /// What every member's links did, in node id order.
    pub fn tallies(&self) -> Vec<MemberTally> {
        self.lock()
            .members
            .iter()
            .map(|(id, member)| MemberTally {
                node_id: id.to_string(),
                tally: member.tally,
            })
            .collect()
    }

    /// The peers with a live link, as members to tell others about.
    pub fn known_peers(&self) -> Vec<PeerAddress> {
        let mut peers: Vec<PeerAddress> = self
            .lock()
            .remotes
            .values()
            .map(|remote| PeerAddress {
                node_id: remote.node_id.to_string(),
                address: remote.address.clone(),
            })
            .collect();
        peers.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        peers
    }

    /// A subscription that sees every later link coming up or going down.
    pub fn subscribe(&self) -> Changes {
        Changes::new(&self.links)
    }

    /// Touched on every change that can make a remote slot usable or change what a peer
    /// announced.
    pub fn changes(&self) -> &Epoch {
        &self.changes
    }

    /// A subscription that sees every later member learned.
    pub fn subscribe_members(&self) -> Changes {
        Changes::new(&self.members_changed)
    }

    fn changed(&self) {
        self.changes.touch();
    }

    /// True when no peer link is up; placement then skips the mesh entirely.
    pub fn is_empty(&self) -> bool {
        self.linked.load(Ordering::Acquire) == 0
    }

    /// Charges one relay to a peer with a usable slot for `address` under `filter`, chosen
    /// weighted by usable slots across every peer's groups; with the routing the relay carries.
    ///
    /// Holds the mesh's lock across both looks, so no other dispatch charges in between; a
    /// presence frame that shrank a peer's slots meanwhile makes it look again.
    pub(crate) fn reserve(
        &self,
        address: Address<'_>,
        filter: NodeFilter<'_>,
    ) -> Option<(RemoteSlot, NodeRouting)> {
        let state = self.lock();
        // A link too old to carry the dispatch is no candidate.
        let open = || {
            state.remotes.values().filter(|remote| {
                remote.is_established()
                    && remote
                        .link
                        .carries(address.needs_version, address.needs_features)
                    && remote.link.is_open()
                    && !remote.link.is_busy()
            })
        };
        let mut peers = open();
        if let (Some(only), None) = (peers.next(), peers.next()) {
            // One peer: one look at its view draws and charges.
            let charge = only.view().charge(address, filter)?;
            return Some(self.slot(only, charge, filter));
        }
        for _ in 0..=state.remotes.len() {
            let total = open()
                .map(|remote| u64::from(remote.view().usable_slots(address, filter)))
                .sum();
            let mut at = draw(total)?;
            for remote in open() {
                // Charged under the peer's lock: the draw walks the slots still usable there.
                if let Some(charge) = remote.view().charge_at(address, filter, &mut at) {
                    return Some(self.slot(remote, charge, filter));
                }
            }
        }
        None
    }

    fn slot(
        &self,
        remote: &Remote,
        charge: Charge,
        filter: NodeFilter<'_>,
    ) -> (RemoteSlot, NodeRouting) {
        let link = remote.link.clone();
        let slot = RemoteSlot::new(link, charge, Arc::clone(&self.changes));
        let routing = relay_routing(&slot, filter);
        (slot, routing)
    }

    /// Usable remote slots for `address` under `filter`, across every peer whose link can
    /// carry it.
    pub(crate) fn usable_slots(&self, address: Address<'_>, filter: NodeFilter<'_>) -> u32 {
        self.lock()
            .remotes
            .values()
            .filter(|remote| {
                remote
                    .link
                    .carries(address.needs_version, address.needs_features)
            })
            .map(|remote| remote.view().usable_slots(address, filter))
            .fold(0, u32::saturating_add)
    }

    /// Adds every peer's workers for `address` under `filter` to `tally`.
    pub(crate) fn count_into(
        &self,
        tally: &mut CensusCount,
        address: Address<'_>,
        filter: NodeFilter<'_>,
    ) {
        for remote in self.lock().remotes.values() {
            let can_carry = remote
                .link
                .carries(address.needs_version, address.needs_features);
            remote.view().count_into(tally, address, filter, can_carry);
        }
    }

    /// What each linked peer announced, per pool and activity type, by node id.
    pub fn capacity(&self) -> Vec<(String, Vec<PoolCapacity>)> {
        self.lock()
            .remotes
            .values()
            .map(|remote| (remote.node_id.to_string(), remote.view().capacity()))
            .collect()
    }

    /// Every member: the linked ones with their link's figures, the others connecting. Relay
    /// counts are the member's since this node started, across its links. Join points are not
    /// members and are not listed ([`Mesh::join_points`]).
    pub fn status(&self) -> Vec<PeerStatus> {
        let (remotes, members) = {
            let state = self.lock();
            let remotes: Vec<Arc<Remote>> = state.remotes.values().cloned().collect();
            let members: Vec<(Arc<str>, String, LinkTally)> = state
                .members
                .iter()
                .map(|(id, member)| (Arc::clone(id), member.address.clone(), member.tally))
                .collect();
            (remotes, members)
        };
        let before = |node_id: &str| {
            members
                .iter()
                .find(|(id, _, _)| id.as_ref() == node_id)
                .map(|(_, _, tally)| *tally)
                .unwrap_or_default()
        };
        let mut peers: Vec<PeerStatus> = remotes
            .iter()
            .map(|remote| remote.status(before(&remote.node_id)))
            .collect();
        for (node_id, address, tally) in &members {
            if !remotes.iter().any(|remote| remote.node_id == *node_id) {
                peers.push(PeerStatus {
                    node_id: node_id.to_string(),
                    address: address.clone(),
                    state: PeerLinkState::Connecting,
                    synced: false,
                    relays_sent: tally.sent,
                    relays_received: tally.received,
                    relays_in_flight: 0,
                    pools: Vec::new(),
                });
            }
        }
        peers.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        peers
    }

    /// A member this node has no link to, or whose whole presence has not arrived yet, first
    /// by node id; `None` once linked to every member it knows and synced with each.
    pub fn unlinked_member(&self) -> Option<Arc<str>> {
        let state = self.lock();
        state.members.ids().into_iter().find(|id| {
            state
                .remotes
                .get(id)
                .is_none_or(|remote| !remote.view().synced)
        })
    }

    /// True when every linked peer's whole presence has arrived.
    pub fn synced(&self) -> bool {
        self.lock()
            .remotes
            .values()
            .all(|remote| remote.view().synced)
    }
}

impl Elsewhere for Mesh {
    /// A relay charged in the first of `routing`'s node tiers where a peer has a usable slot.
    fn relay_slot(
        &self,
        address: Address<'_>,
        routing: &RoutingRef<'_>,
    ) -> Option<(RemoteSlot, NodeRouting)> {
        Tiers::new(routing, address.node)
            .iter()
            .find_map(|filter| self.reserve(address, filter))
    }
}

/// The routing a relay charged as `slot` carries: the charged group's node label when it has
/// one, so the peer serves from the group that was charged; otherwise the tier's filter.
fn relay_routing(slot: &RemoteSlot, filter: NodeFilter<'_>) -> NodeRouting {
    match (slot.node(), filter) {
        (Some(node), _) => NodeRouting::Pin(node.to_owned()),
        (None, NodeFilter::Any) => NodeRouting::Any,
        (None, NodeFilter::One(node)) => NodeRouting::Pin(node.to_owned()),
        (None, NodeFilter::Set(nodes)) => NodeRouting::Require(nodes.to_vec()),
    }
}

/// A dial of a join point in flight; see [`Mesh::joining`].
#[derive(Debug)]
pub struct JoinDial(Arc<Mesh>);

impl Drop for JoinDial {
    fn drop(&mut self) {
        {
            let mut state = self.0.lock();
            state.joining = state.joining.saturating_sub(1);
        }
        self.0.links.touch();
    }
}

/// True when `old`, joined to the same incarnation as `new`, gives way to it (module doc).
fn gives_way(old: &Remote, new: &Remote) -> bool {
    match (&new.opener, &old.opener) {
        // The peer dialled again, so it holds the old link no more; unless relays resume, the
        // old link is kept until pings find it dead.
        (Opener::Peer | Opener::PeerAfterCut, Opener::Peer | Opener::PeerAfterCut) => {
            resumes_over(old, new)
        }
        // The peer says it lost a link to this incarnation: the one this node dialled is dead
        // over there, though it looks alive here.
        (Opener::PeerAfterCut, Opener::Here(_)) => true,
        // Otherwise both may have dialled at once: the acceptor keeps the link it has.
        (Opener::Peer, Opener::Here(_)) => false,
        // The acceptor's hello says it holds no other link: our older dial is dead there.
        (Opener::Here(_), Opener::Here(_)) => true,
        // Both dialled at once: the link dialled by the lower node id stays.
        (Opener::Here(here), Opener::Peer | Opener::PeerAfterCut) => {
            here.as_ref() < new.node_id.as_ref()
        }
    }
}

/// True when relays over `old` resume on `new`: both resume, and `old` is confirmed (it may
/// hold relays; the loser of a simultaneous dial never is) and still takes relays.
fn resumes_over(old: &Remote, new: &Remote) -> bool {
    new.resumes && old.resumes && old.is_confirmed() && old.link.is_open()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link to `peer` over a real loopback socket, opened by `opener`.
    async fn remote(peer: &str, incarnation: u64, opener: Opener) -> Arc<Remote> {
        linked(peer, incarnation, opener, false).await
    }

    /// As [`remote`], its relays resuming after a cut when `resumes`.
    async fn linked(peer: &str, incarnation: u64, opener: Opener, resumes: bool) -> Arc<Remote> {
        // Nothing is written: the mesh only closes links, which sends nothing.
        let (outbound, _peer) = crate::link::fixtures::outbound().await;
        let pair = Pair::new(incarnation, &crate::link::Retention::new(1));
        let link = PeerLink::new(Arc::from(peer), 3, outbound, pair.numbering());
        Remote::new(
            Arc::from(peer),
            incarnation,
            format!("{peer}:1"),
            opener,
            resumes,
            link,
            &CancellationToken::new(),
        )
    }

    fn by(node: &str) -> Opener {
        Opener::Here(Arc::from(node))
    }

    fn current(mesh: &Mesh, peer: &str) -> Option<Arc<Remote>> {
        mesh.lock().remotes.get(peer).cloned()
    }

    fn presence() -> Presence {
        Presence {
            reset: true,
            synced: true,
            draining: false,
            pools: Vec::new(),
            extensions: Vec::new(),
        }
    }

    #[tokio::test]
    async fn the_acceptor_refuses_a_second_link_to_the_same_incarnation_and_counts_it() {
        let mesh = Mesh::new(64);
        let first = remote("b", 1, Opener::Peer).await;
        mesh.join(&first).unwrap();
        mesh.apply(&first, presence()).unwrap();
        let second = remote("b", 1, Opener::Peer).await;
        assert!(matches!(mesh.join(&second), Err(JoinError::Duplicate)));
        assert!(Arc::ptr_eq(&current(&mesh, "b").unwrap(), &first));
        assert!(
            !first.evicted.is_cancelled(),
            "the established link is kept"
        );
        assert_eq!(mesh.duplicates(), 1);
    }

    /// Joins a link to `b` opened by `old` and confirmed (its presence not arrived yet), then one
    /// opened by `new`, both with relays resuming, and checks the first was taken as cut; the
    /// mesh and both links.
    async fn replaced(old: Opener, new: Opener) -> (Arc<Mesh>, [Arc<Remote>; 2]) {
        let mesh = Mesh::new(64);
        let first = linked("b", 1, old, true).await;
        mesh.join(&first).unwrap();
        assert!(mesh.confirm(&first));
        let second = linked("b", 1, new, true).await;
        let cut = mesh
            .join(&second)
            .unwrap()
            .expect("the old link is taken as cut");
        assert!(Arc::ptr_eq(&cut, &first) && first.is_cut_over());
        (mesh, [first, second])
    }

    #[tokio::test]
    async fn a_peer_dialling_again_replaces_its_old_link_as_cut_when_relays_resume() {
        let (mesh, [old, new]) = replaced(Opener::Peer, Opener::Peer).await;
        assert!(old.evicted.is_cancelled());
        assert!(
            !old.link.is_open() && !old.link.is_closed(),
            "it takes no relay, and those in flight wait for the newcomer"
        );
        assert!(Arc::ptr_eq(&current(&mesh, "b").unwrap(), &new));
        assert_eq!(mesh.duplicates(), 0);
    }

    #[tokio::test]
    async fn a_dialler_takes_its_older_dial_as_cut_when_the_acceptor_kept_a_new_one() {
        replaced(by("a"), by("a")).await;
    }

    #[tokio::test]
    async fn a_dialler_whose_lower_dial_wins_takes_the_link_it_accepted_as_cut() {
        replaced(Opener::Peer, by("a")).await;
        // The loser of a simultaneous dial was never confirmed: retired, as without resuming,
        // and never confirmed once replaced.
        let mesh = Mesh::new(64);
        let accepted = linked("b", 1, Opener::Peer, true).await;
        mesh.join(&accepted).unwrap();
        let dialled = linked("b", 1, by("a"), true).await;
        assert!(mesh.join(&dialled).unwrap().is_none());
        assert!(accepted.evicted.is_cancelled() && !accepted.is_cut_over());
        assert!(!mesh.confirm(&accepted) && !accepted.is_confirmed());
        assert!(mesh.confirm(&dialled));
    }

    #[tokio::test]
    async fn the_acceptor_keeps_a_link_it_dialled_itself_though_relays_resume() {
        // Both may have dialled at once: without the peer's word that it lost the link, the
        // acceptor keeps it.
        let mesh = Mesh::new(64);
        let mine = linked("b", 1, by("a"), true).await;
        mesh.join(&mine).unwrap();
        let theirs = linked("b", 1, Opener::Peer, true).await;
        assert!(matches!(mesh.join(&theirs), Err(JoinError::Duplicate)));
        assert!(!mine.evicted.is_cancelled() && !mine.is_cut_over());
    }

    #[tokio::test]
    async fn the_acceptor_takes_a_link_it_dialled_as_cut_when_the_peer_says_it_lost_it() {
        let mesh = Mesh::new(64);
        let mine = linked("b", 1, by("a"), true).await;
        mesh.join(&mine).unwrap();
        assert!(mesh.confirm(&mine));
        let theirs = linked("b", 1, Opener::PeerAfterCut, true).await;
        let cut = mesh.join(&theirs).unwrap();
        assert!(cut.is_some_and(|cut| Arc::ptr_eq(&cut, &mine)));
        assert!(mine.evicted.is_cancelled() && mine.is_cut_over());
        assert!(Arc::ptr_eq(&current(&mesh, "b").unwrap(), &theirs));
        assert_eq!(mesh.duplicates(), 0);
    }

    #[tokio::test]
    async fn a_dialler_that_lost_a_link_says_so_only_while_its_relays_wait_and_none_is_up() {
        let mesh = Mesh::new(64);
        let pair = mesh.pair("b", "b:1", 7, || {
            Pair::new(7, &crate::link::Retention::new(1))
        });
        assert_eq!(mesh.lost_link_to("b"), None, "nothing waits for a relink");
        pair.park(Some(Arc::new(())), Vec::new());
        assert_eq!(mesh.lost_link_to("b"), Some(7));
        let up = linked("b", 7, by("a"), true).await;
        mesh.join(&up).unwrap();
        assert_eq!(mesh.lost_link_to("b"), None, "a link is up");
        mesh.forget(&up);
        assert_eq!(pair.unpark(None).map(|_| ()), Some(()));
        assert_eq!(mesh.lost_link_to("b"), None, "taken over");
    }

    #[tokio::test]
    async fn a_new_incarnation_replaces_the_old_link_at_once() {
        let mesh = Mesh::new(64);
        let old = remote("b", 1, Opener::Peer).await;
        mesh.join(&old).unwrap();
        let new = remote("b", 2, Opener::Peer).await;
        mesh.join(&new).unwrap();
        assert!(old.evicted.is_cancelled());
        assert!(!old.link.is_open(), "its relays end now");
        assert!(Arc::ptr_eq(&current(&mesh, "b").unwrap(), &new));
        assert_eq!(mesh.duplicates(), 0);
    }

    #[tokio::test]
    async fn a_simultaneous_dial_settles_on_the_link_dialled_by_the_lower_id_on_both_sides() {
        // a dials b (link 1) while b dials a (link 2); each acceptor joins before its hello.
        let (at_a, at_b) = (Mesh::new(64), Mesh::new(64));
        let two_at_a = remote("b", 2, Opener::Peer).await;
        let one_at_b = remote("a", 1, Opener::Peer).await;
        at_a.join(&two_at_a).unwrap();
        at_b.join(&one_at_b).unwrap();
        // Each dialler reads the other's hello.
        let one_at_a = remote("b", 2, by("a")).await;
        let two_at_b = remote("a", 1, by("b")).await;
        at_a.join(&one_at_a).unwrap();
        assert!(matches!(at_b.join(&two_at_b), Err(JoinError::Duplicate)));
        assert!(
            two_at_a.evicted.is_cancelled(),
            "a retires the link b dialled"
        );
        assert!(Arc::ptr_eq(&current(&at_a, "b").unwrap(), &one_at_a));
        assert!(Arc::ptr_eq(&current(&at_b, "a").unwrap(), &one_at_b));
        assert_eq!(at_a.duplicates() + at_b.duplicates(), 1, "counted once");

        // The other order: b's dial is kept by both before a's reaches b, which refuses it.
        let (at_a, at_b) = (Mesh::new(64), Mesh::new(64));
        let two_at_a = remote("b", 2, Opener::Peer).await;
        at_a.join(&two_at_a).unwrap();
        let two_at_b = remote("a", 1, by("b")).await;
        at_b.join(&two_at_b).unwrap();
        let one_at_b = remote("a", 1, Opener::Peer).await;
        assert!(matches!(at_b.join(&one_at_b), Err(JoinError::Duplicate)));
        assert!(Arc::ptr_eq(&current(&at_a, "b").unwrap(), &two_at_a));
        assert!(Arc::ptr_eq(&current(&at_b, "a").unwrap(), &two_at_b));
    }

    #[tokio::test]
    async fn the_higher_dialler_gives_way_to_a_link_it_accepted() {
        let mesh = Mesh::new(64);
        let accepted = remote("a", 1, Opener::Peer).await;
        mesh.join(&accepted).unwrap();
        let dialled = remote("a", 1, by("b")).await;
        assert!(matches!(mesh.join(&dialled), Err(JoinError::Duplicate)));
        assert!(!accepted.evicted.is_cancelled());
    }

    #[tokio::test]
    async fn a_dial_the_acceptor_kept_replaces_an_older_dial_it_no_longer_holds() {
        let mesh = Mesh::new(64);
        let older = remote("b", 1, by("a")).await;
        mesh.join(&older).unwrap();
        let newer = remote("b", 1, by("a")).await;
        mesh.join(&newer).unwrap();
        assert!(older.evicted.is_cancelled());
        assert!(Arc::ptr_eq(&current(&mesh, "b").unwrap(), &newer));
    }

    #[tokio::test]
    async fn a_link_comes_up_with_the_peers_first_presence_and_its_counts_outlive_it() {
        let mesh = Mesh::new(64);
        let first = remote("b", 1, Opener::Peer).await;
        mesh.join(&first).unwrap();
        assert!(!first.is_established());
        mesh.apply(&first, presence()).unwrap();
        mesh.apply(&first, presence()).unwrap();
        assert!(first.is_established());
        for _ in 0..3 {
            first.relay_received();
        }
        mesh.leave(&first, "test");
        let second = remote("b", 1, Opener::Peer).await;
        mesh.join(&second).unwrap();
        second.relay_received();
        let status = mesh.status();
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].relays_received, 4, "counts survive the link drop");
        // A link that never came up counts neither up nor down.
        mesh.leave(&second, "test");
        let tally = mesh.tallies()[0].tally;
        assert_eq!((tally.ups, tally.downs, tally.received), (1, 1, 4));
        assert_eq!(mesh.status()[0].state, PeerLinkState::Connecting);
    }

    #[tokio::test]
    async fn status_lists_members_and_not_join_points() {
        let mesh = Mesh::new(64);
        mesh.add_join_point("proxy:1");
        mesh.learn("c", "c:1", false);
        let b = remote("b", 1, Opener::Peer).await;
        mesh.answered("proxy:1", Answerer::Member(Arc::from("b")));
        mesh.join(&b).unwrap();
        let ids: Vec<String> = mesh.status().into_iter().map(|p| p.node_id).collect();
        assert_eq!(ids, ["b", "c"]);
        let join_points: Vec<(String, Option<String>, bool)> = mesh
            .join_points()
            .into_iter()
            .map(
                |JoinPoint {
                     address,
                     node_id,
                     myself,
                     ..
                 }| (address, node_id, myself),
            )
            .collect();
        assert_eq!(join_points, [("proxy:1".into(), Some("b".into()), false)]);
        assert_eq!(mesh.addresses("b"), ["b:1", "proxy:1"]);
    }
}
