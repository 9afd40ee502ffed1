//! The mesh: the peers this node has a link to, what each announced, and who else is known.
//!
//! Placement reads it to find a peer with a usable slot and charges the relay there under the
//! mesh's and that peer's locks, so concurrent dispatches never charge past what a peer
//! announced. Locks are taken mesh first, then a peer's view, never the other way. Every change
//! that can make a remote slot usable (a presence frame, a peer joining) bumps one counter that
//! waiting dispatches subscribe to before they look.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_wire::{Census, NodeRouting, PeerAddress, PeerLinkState, PeerStatus, Presence};
use tokio_util::sync::CancellationToken;

use super::changes::Changes;
use super::view::{draw, Charge, PresenceError, View};
use crate::link::PeerLink;
use crate::registry::{Address, NodeFilter};
use crate::signal::Signal;

/// Most member addresses a node keeps; gossip naming more is ignored past it.
pub const MAX_MEMBERS: usize = 1024;

/// One peer with a live link.
#[derive(Debug)]
pub struct Remote {
    pub node_id: Arc<str>,
    pub incarnation: u64,
    /// Where the peer says it is dialled.
    pub address: String,
    /// The node that dialled this link; decides which of two links to one peer stays.
    dialler: Arc<str>,
    pub link: PeerLink,
    view: Mutex<View>,
    /// Fires when this link lost to another one for the same peer, or when the token it was
    /// made under (the node's shutdown) fires.
    pub evicted: CancellationToken,
    received: AtomicU64,
}

impl Remote {
    /// A peer reached over `link`, dialled by node `dialler`; its `evicted` token is a child
    /// of `closing`, so one wait hears both.
    pub fn new(
        node_id: Arc<str>,
        incarnation: u64,
        address: String,
        dialler: Arc<str>,
        link: PeerLink,
        closing: &CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            incarnation,
            address,
            dialler,
            link,
            view: Mutex::new(View::default()),
            evicted: closing.child_token(),
            received: AtomicU64::new(0),
        })
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

    fn status(&self) -> PeerStatus {
        let view = self.view();
        PeerStatus {
            node_id: self.node_id.to_string(),
            address: self.address.clone(),
            state: PeerLinkState::Up,
            synced: view.synced,
            relays_sent: self.link.sent(),
            relays_received: self.received.load(Ordering::Relaxed),
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

#[derive(Debug, Default)]
struct State {
    /// Ordered by node id, so placement weighs peers in the same order in every run.
    remotes: BTreeMap<Arc<str>, Arc<Remote>>,
    /// Every address known to be a member, with the node id last seen there.
    members: BTreeMap<String, Option<Arc<str>>>,
}

/// The peers of one node. Share it as `Arc<Mesh>`.
#[derive(Debug)]
pub struct Mesh {
    state: Mutex<State>,
    /// Touched when a remote slot may have become usable: a presence frame, a link coming
    /// or going, a relay's charge taken back.
    changes: Arc<Signal>,
    /// Touched when a link comes up or goes down.
    links: Arc<Signal>,
    /// Links up, read without the lock on every dispatch.
    linked: AtomicUsize,
    /// Touched when a member is learned.
    members_changed: Arc<Signal>,
    max_groups: usize,
}

impl Mesh {
    /// An empty mesh accepting at most `max_groups` groups per announced pool.
    pub fn new(max_groups: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            changes: Arc::new(Signal::default()),
            links: Arc::new(Signal::default()),
            linked: AtomicUsize::new(0),
            members_changed: Arc::new(Signal::default()),
            max_groups,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before anything that could panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `remote` as the link to its peer, or refuses it for an existing link.
    ///
    /// A new incarnation replaces the old link; of two links to one incarnation the one
    /// dialled by the node whose id sorts lower stays (the older on a tie). A replaced link is
    /// closed at once, so its relays end as lost.
    ///
    /// # Errors
    /// [`JoinError::Duplicate`] when the existing link stays.
    pub fn join(&self, remote: &Arc<Remote>) -> Result<(), JoinError> {
        let replaced = {
            let mut state = self.lock();
            if let Some(old) = state.remotes.get(&remote.node_id) {
                let keep_old = old.incarnation == remote.incarnation
                    && old.dialler.as_ref() <= remote.dialler.as_ref();
                if keep_old {
                    return Err(JoinError::Duplicate);
                }
            }
            if state.members.len() < MAX_MEMBERS || state.members.contains_key(&remote.address) {
                state
                    .members
                    .insert(remote.address.clone(), Some(Arc::clone(&remote.node_id)));
            }
            let replaced = state
                .remotes
                .insert(Arc::clone(&remote.node_id), Arc::clone(remote));
            self.linked.store(state.remotes.len(), Ordering::Release);
            replaced
        };
        if let Some(old) = replaced {
            old.evicted.cancel();
            old.link.close();
        }
        self.members_changed.touch();
        self.links.touch();
        self.changed();
        Ok(())
    }

    /// Forgets `remote` if it is still the link to its peer, and closes its link: what it
    /// announced is forgotten and its relays in flight end as lost, now.
    pub fn leave(&self, remote: &Arc<Remote>) {
        {
            let mut state = self.lock();
            let current = state
                .remotes
                .get(&remote.node_id)
                .is_some_and(|current| Arc::ptr_eq(current, remote));
            if current {
                state.remotes.remove(&remote.node_id);
                self.linked.store(state.remotes.len(), Ordering::Release);
            }
        }
        remote.link.close();
        self.links.touch();
        self.changed();
    }

    /// Applies a presence frame from `remote`.
    ///
    /// # Errors
    /// [`PresenceError`] for a frame that breaks a bound; the link should close.
    pub fn apply(&self, remote: &Remote, presence: Presence) -> Result<(), PresenceError> {
        let applied = remote.view().apply(presence, self.max_groups);
        self.changed();
        applied
    }

    /// Learns a member address; true when it was new. Past [`MAX_MEMBERS`] addresses, new
    /// ones are ignored: a peer's gossip cannot grow this node's state without bound.
    pub fn learn(&self, address: &str) -> bool {
        let new = {
            let mut state = self.lock();
            if state.members.contains_key(address) || state.members.len() >= MAX_MEMBERS {
                false
            } else {
                state.members.insert(address.to_owned(), None);
                true
            }
        };
        if new {
            self.members_changed.touch();
        }
        new
    }

    /// Every known member address.
    pub fn member_addresses(&self) -> Vec<String> {
        self.lock().members.keys().cloned().collect()
    }

    /// The node id last seen at `address`, if a link there ever came up.
    pub fn node_at(&self, address: &str) -> Option<Arc<str>> {
        self.lock().members.get(address).cloned().flatten()
    }

    /// True while a link to node `node_id` is up.
    pub fn is_up(&self, node_id: &str) -> bool {
        self.lock().remotes.contains_key(node_id)
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
    pub fn changes(&self) -> &Signal {
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
    /// weighted by usable slots across every peer's groups.
    ///
    /// Holds the mesh's lock across both looks, so no other dispatch charges in between; a
    /// presence frame that shrank a peer's slots meanwhile makes it look again.
    pub(crate) fn reserve(
        &self,
        address: Address<'_>,
        filter: NodeFilter<'_>,
    ) -> Option<RemoteSlot> {
        let state = self.lock();
        let open = || {
            state
                .remotes
                .values()
                .filter(|remote| remote.link.is_open() && !remote.link.is_busy())
        };
        let mut peers = open();
        if let (Some(only), None) = (peers.next(), peers.next()) {
            // One peer: one look at its view draws and charges.
            let charge = only.view().charge(address, filter)?;
            return Some(RemoteSlot {
                remote: Arc::clone(only),
                charge,
                changes: Arc::clone(&self.changes),
            });
        }
        for _ in 0..=state.remotes.len() {
            let total = open()
                .map(|remote| u64::from(remote.view().usable_slots(address, filter)))
                .sum();
            let mut at = draw(total)?;
            for remote in open() {
                // Charged under the peer's lock: the draw walks the slots still usable there.
                if let Some(charge) = remote.view().charge_at(address, filter, &mut at) {
                    return Some(RemoteSlot {
                        remote: Arc::clone(remote),
                        charge,
                        changes: Arc::clone(&self.changes),
                    });
                }
            }
        }
        None
    }

    /// Usable remote slots for `address` under `filter`, across every peer.
    pub(crate) fn usable_slots(&self, address: Address<'_>, filter: NodeFilter<'_>) -> u32 {
        self.lock()
            .remotes
            .values()
            .map(|remote| remote.view().usable_slots(address, filter))
            .fold(0, u32::saturating_add)
    }

    /// Adds every peer's workers for `address` under `filter` to `census`.
    pub(crate) fn count_into(
        &self,
        census: &mut Census,
        address: Address<'_>,
        filter: NodeFilter<'_>,
    ) {
        for remote in self.lock().remotes.values() {
            remote.view().count_into(census, address, filter);
        }
    }

    /// Every known member: the linked ones with their link's figures, the others connecting.
    pub fn status(&self) -> Vec<PeerStatus> {
        let (remotes, members) = {
            let state = self.lock();
            let remotes: Vec<Arc<Remote>> = state.remotes.values().cloned().collect();
            let members: Vec<(String, Option<Arc<str>>)> = state
                .members
                .iter()
                .map(|(address, id)| (address.clone(), id.clone()))
                .collect();
            (remotes, members)
        };
        let mut peers: Vec<PeerStatus> = remotes.iter().map(|remote| remote.status()).collect();
        for (address, node_id) in members {
            let linked = remotes.iter().any(|remote| {
                remote.address == address || node_id.as_ref() == Some(&remote.node_id)
            });
            if !linked {
                peers.push(PeerStatus {
                    node_id: node_id.map(|id| id.to_string()).unwrap_or_default(),
                    address,
                    state: PeerLinkState::Connecting,
                    synced: false,
                    relays_sent: 0,
                    relays_received: 0,
                    relays_in_flight: 0,
                    pools: Vec::new(),
                });
            }
        }
        peers.sort_by(|a, b| (&a.node_id, &a.address).cmp(&(&b.node_id, &b.address)));
        peers
    }

    /// True when every linked peer's whole presence has arrived.
    pub fn synced(&self) -> bool {
        self.lock()
            .remotes
            .values()
            .all(|remote| remote.view().synced)
    }
}

/// A relay charged against a peer's announced capacity; dropping it takes the charge back.
#[derive(Debug)]
pub struct RemoteSlot {
    remote: Arc<Remote>,
    charge: Charge,
    changes: Arc<Signal>,
}

impl RemoteSlot {
    /// The peer's link.
    pub fn link(&self) -> &PeerLink {
        &self.remote.link
    }

    /// The routing the relay carries: the charged group's node label when it has one, so the
    /// peer serves from the group that was charged; otherwise the tier's filter.
    pub(crate) fn routing(&self, filter: NodeFilter<'_>) -> NodeRouting {
        match (&self.charge.node, filter) {
            (Some(node), _) => NodeRouting::Pin(node.clone()),
            (None, NodeFilter::Any) => NodeRouting::Any,
            (None, NodeFilter::One(node)) => NodeRouting::Pin(node.to_owned()),
            (None, NodeFilter::Set(nodes)) => NodeRouting::Require(nodes.to_vec()),
        }
    }
}

impl Drop for RemoteSlot {
    fn drop(&mut self) {
        self.charge.release();
        // The peer's announced free slots do not change when our own relay ends, so this is
        // the only wake a waiting dispatch gets for the slot.
        self.changes.touch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gossip_cannot_grow_the_member_list_past_its_bound() {
        let mesh = Mesh::new(64);
        for port in 0..MAX_MEMBERS + 10 {
            mesh.learn(&format!("127.0.0.1:{port}"));
        }
        assert_eq!(mesh.member_addresses().len(), MAX_MEMBERS);
        assert!(
            !mesh.learn("127.0.0.1:65000"),
            "a new address past the bound is ignored"
        );
        assert!(!mesh.learn("127.0.0.1:0"), "a known address is not new");
    }
}
