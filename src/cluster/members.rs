//! Who belongs to the cluster: members are node ids, never addresses.
//!
//! A member is known by its node id with the address it advertises (its own `PeerHello` says
//! so; gossip tells of members not heard from yet) and what its links did so far. A configured
//! `--peer` address is a join point, not a member: the node behind it may differ per connection
//! (a load-balanced name), so each join point records who answered there last, by node id.
//! A `--peer` name stands for every address it resolves to, each a join point of its own.
//! Every map here is keyed by what peers said or a name resolved to, and bounded by
//! [`MAX_MEMBERS`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

pub use lintel_client::status::JoinPoint;

use super::dials::Dials;
use crate::link::Pair;

/// Most members a node keeps; gossip naming more is ignored past it.
pub const MAX_MEMBERS: usize = 1024;

/// What one member's links did since this node started.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LinkTally {
    /// Links that came up: both sides kept them and the member's presence arrived.
    pub ups: u64,
    /// Links that came up and went down again.
    pub downs: u64,
    /// Relays sent to the member on links now closed.
    pub sent: u64,
    /// Relays the member sent here on links now closed.
    pub received: u64,
}

#[derive(Debug, Default)]
pub(super) struct Member {
    /// Where the member is dialled as it advertises itself; empty while unknown, or after
    /// another node answered there.
    pub(super) address: String,
    pub(super) tally: LinkTally,
    /// What this node keeps for the member's latest incarnation across links.
    pub(super) pair: Option<Arc<Pair>>,
}

/// What [`Members::learn`] changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Learned {
    Nothing,
    /// A new member.
    Member,
    /// A known member's address.
    Address,
}

/// Who answered at a join point the last time it was dialled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answerer {
    /// Nobody yet.
    Nobody,
    /// This member.
    Member(Arc<str>),
    /// One of these members, linked to this node at the time: the node there refused a second
    /// link before saying who it is.
    OneOf(BTreeSet<Arc<str>>),
    /// This node itself.
    Myself,
}

/// One join point: who answered there, where it came from and how dialling it goes.
#[derive(Debug)]
struct Entry {
    answer: Answerer,
    /// The `--peer` it comes from: the address itself, or a name that resolved to it.
    peer: Arc<str>,
    /// True when `peer` is a name that resolved to this address.
    resolved: bool,
    dials: Dials,
    /// Tells this entry from an earlier one at the same address, for its dialler.
    generation: u64,
}

/// What [`Members::resolved`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Resolved {
    pub(super) added: bool,
    pub(super) removed: bool,
}

/// The member table and the join points.
#[derive(Debug, Default)]
pub(super) struct Members {
    /// Ordered by node id, so diallers start in the same order in every run.
    by_id: BTreeMap<Arc<str>, Member>,
    join_points: BTreeMap<String, Entry>,
    generations: u64,
}

impl Members {
    /// Adds a configured join point; true when it was new.
    pub(super) fn add_join_point(&mut self, address: &str) -> bool {
        self.insert_join_point(address, Arc::from(address), false)
    }

    fn insert_join_point(&mut self, address: &str, peer: Arc<str>, resolved: bool) -> bool {
        if self.join_points.contains_key(address) || self.join_points.len() >= MAX_MEMBERS {
            return false;
        }
        let answer = self
            .member_at(address)
            .map_or(Answerer::Nobody, Answerer::Member);
        let mut dials = Dials::new();
        if answer != Answerer::Nobody {
            // A member advertising the address is known there, as if it had answered.
            dials.answered(false);
        }
        self.generations += 1;
        let entry = Entry {
            answer,
            peer,
            resolved,
            dials,
            generation: self.generations,
        };
        self.join_points.insert(address.to_owned(), entry);
        true
    }

    /// Makes `addresses`, what the `--peer` name `name` resolves to now, its join points: new
    /// ones are added (up to [`MAX_MEMBERS`] join points in all), and the name's join points
    /// at addresses it no longer names are removed. An address that is a join point already,
    /// configured or resolved from another name, stays as it is.
    pub(super) fn resolved(&mut self, name: &str, addresses: &[SocketAddr]) -> Resolved {
        let named: BTreeSet<String> = addresses.iter().map(ToString::to_string).collect();
        let before = self.join_points.len();
        self.join_points.retain(|address, entry| {
            !(entry.resolved && *entry.peer == *name) || named.contains(address)
        });
        let removed = self.join_points.len() < before;
        let peer: Arc<str> = Arc::from(name);
        let mut added = false;
        for address in &named {
            added |= self.insert_join_point(address, Arc::clone(&peer), true);
        }
        Resolved { added, removed }
    }

    /// Records a failed dial of `address`, when it is a join point.
    pub(super) fn dial_failed(&mut self, address: &str, error: &str) {
        if let Some(entry) = self.join_points.get_mut(address) {
            entry.dials.failed(error);
        }
    }

    /// The name join point `address` was resolved from; `None` for an address configured as
    /// such, or one that is no join point.
    pub(super) fn resolved_from(&self, address: &str) -> Option<Arc<str>> {
        self.join_points
            .get(address)
            .filter(|entry| entry.resolved)
            .map(|entry| Arc::clone(&entry.peer))
    }

    /// Learns that member `node_id` is dialled at `address`: from the member itself
    /// (`authoritative`), or from gossip, which only fills in an address not known yet. Past
    /// [`MAX_MEMBERS`] members, new ones are ignored.
    pub(super) fn learn(&mut self, node_id: &str, address: &str, authoritative: bool) -> Learned {
        let full = self.by_id.len() >= MAX_MEMBERS;
        let learned = match self.by_id.get_mut(node_id) {
            Some(member) if member.address == address => Learned::Nothing,
            Some(member) if authoritative || member.address.is_empty() => {
                address.clone_into(&mut member.address);
                Learned::Address
            }
            Some(_) => Learned::Nothing,
            None if full => return Learned::Nothing,
            None => {
                let member = Member {
                    address: address.to_owned(),
                    tally: LinkTally::default(),
                    pair: None,
                };
                self.by_id.insert(Arc::from(node_id), member);
                Learned::Member
            }
        };
        // The member's own word comes with a link to it: where it answered before, it is
        // reachable again, whatever the last dial there came to.
        if authoritative {
            for entry in self.join_points.values_mut() {
                if matches!(&entry.answer, Answerer::Member(id) if id.as_ref() == node_id) {
                    entry.dials.answered(false);
                }
            }
        }
        // A join point at the address a member advertises is that member, as if it had
        // answered there: its own dialler takes it over, instead of a second dial racing the
        // first.
        if !address.is_empty() {
            if let Some(entry) = self.join_points.get_mut(address) {
                if entry.answer == Answerer::Nobody {
                    entry.answer = Answerer::Member(Arc::from(node_id));
                    entry.dials.answered(false);
                }
            }
        }
        learned
    }

    /// The member advertising `address`, if one does.
    fn member_at(&self, address: &str) -> Option<Arc<str>> {
        self.by_id
            .iter()
            .find(|(_, member)| member.address == address)
            .map(|(id, _)| Arc::clone(id))
    }

    /// Records who answered a dial of `address`. A join point there remembers it; a member
    /// that advertised `address` but is not who answered loses that address.
    pub(super) fn answered(&mut self, address: &str, answer: Answerer) {
        if let Some(entry) = self.join_points.get_mut(address) {
            if answer != Answerer::Nobody {
                entry.dials.answered(answer == Answerer::Myself);
            }
            let known = &mut entry.answer;
            *known = match (answer.clone(), &*known) {
                // Refused twice: the one who answered is linked both times.
                (Answerer::OneOf(now), Answerer::OneOf(before)) => {
                    let both: BTreeSet<Arc<str>> = now.intersection(before).cloned().collect();
                    if both.is_empty() {
                        Answerer::OneOf(now)
                    } else {
                        Answerer::OneOf(both)
                    }
                }
                (answer, _) => answer,
            };
        }
        let answered_by = match &answer {
            Answerer::Member(id) => Some(id.as_ref()),
            Answerer::Myself => None,
            Answerer::Nobody | Answerer::OneOf(_) => return,
        };
        for (id, member) in &mut self.by_id {
            if member.address == address && Some(id.as_ref()) != answered_by {
                member.address.clear();
            }
        }
    }

    /// Member `node_id`'s pair for `incarnation`: the one kept, or a new one from `make`
    /// that replaces a pair of an older incarnation. A member not known gets a pair kept
    /// nowhere.
    pub(super) fn pair(
        &mut self,
        node_id: &str,
        incarnation: u64,
        make: impl FnOnce() -> Arc<Pair>,
    ) -> Arc<Pair> {
        let Some(member) = self.by_id.get_mut(node_id) else {
            return make();
        };
        match &member.pair {
            Some(pair) if pair.incarnation() == incarnation => Arc::clone(pair),
            _ => Arc::clone(member.pair.insert(make())),
        }
    }

    /// The pair kept for member `node_id`'s latest incarnation, if any.
    pub(super) fn kept_pair(&self, node_id: &str) -> Option<&Arc<Pair>> {
        self.by_id.get(node_id)?.pair.as_ref()
    }

    /// Every member's node id.
    pub(super) fn ids(&self) -> Vec<Arc<str>> {
        self.by_id.keys().cloned().collect()
    }

    /// Where to dial member `node_id`: its advertised address first, then every join point
    /// where it answered last.
    pub(super) fn addresses(&self, node_id: &str) -> Vec<String> {
        let mut addresses: Vec<String> = self
            .by_id
            .get(node_id)
            .map(|member| member.address.clone())
            .into_iter()
            .filter(|address| !address.is_empty())
            .collect();
        for (address, entry) in &self.join_points {
            if matches!(&entry.answer, Answerer::Member(id) if id.as_ref() == node_id)
                && !addresses.contains(address)
            {
                addresses.push(address.clone());
            }
        }
        addresses
    }

    /// Who answered at join point `address` last; `None` when it is not one.
    pub(super) fn join_point(&self, address: &str) -> Option<&Answerer> {
        self.join_points.get(address).map(|entry| &entry.answer)
    }

    /// The generation of join point `address`: a join point removed and added again at the
    /// same address is a new one, with a new generation.
    pub(super) fn generation(&self, address: &str) -> Option<u64> {
        self.join_points.get(address).map(|entry| entry.generation)
    }

    /// Every join point's address and generation.
    pub(super) fn join_point_addresses(&self) -> Vec<(String, u64)> {
        self.join_points
            .iter()
            .map(|(address, entry)| (address.clone(), entry.generation))
            .collect()
    }

    /// The join points as status shows them; `linked` tells whether a member has a link up.
    pub(super) fn join_points(&self, linked: impl Fn(&str) -> bool) -> Vec<JoinPoint> {
        self.join_points
            .iter()
            .map(|(address, entry)| {
                let answer = &entry.answer;
                let up = match answer {
                    Answerer::Member(id) => linked(id),
                    Answerer::OneOf(ids) => ids.iter().any(|id| linked(id)),
                    Answerer::Nobody | Answerer::Myself => false,
                };
                let last_error = entry.dials.last_error();
                JoinPoint {
                    address: address.clone(),
                    node_id: match answer {
                        Answerer::Member(id) => Some(id.to_string()),
                        Answerer::Nobody | Answerer::OneOf(_) | Answerer::Myself => None,
                    },
                    myself: *answer == Answerer::Myself,
                    peer: entry.peer.to_string(),
                    state: entry.dials.state(up),
                    since_unix_ms: entry.dials.since_unix_ms(),
                    last_error: last_error.map(|(text, _)| text.to_owned()),
                    last_error_unix_ms: last_error.map(|(_, at)| at),
                    dial_failures: entry.dials.failures(),
                }
            })
            .collect()
    }

    /// Member `node_id`'s tally, to add to; `None` past the bound.
    pub(super) fn tally(&mut self, node_id: &str) -> Option<&mut LinkTally> {
        self.by_id.get_mut(node_id).map(|member| &mut member.tally)
    }

    /// Every member, in node id order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Member)> {
        self.by_id.iter()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lintel_client::status::JoinState;

    fn ids(names: &[&str]) -> BTreeSet<Arc<str>> {
        names.iter().map(|name| Arc::from(*name)).collect()
    }

    #[test]
    fn gossip_cannot_grow_the_member_table_past_its_bound() {
        let mut members = Members::default();
        for n in 0..MAX_MEMBERS + 10 {
            members.learn(&format!("n{n}"), &format!("10.0.0.1:{n}"), false);
        }
        assert_eq!(members.len(), MAX_MEMBERS);
        assert_eq!(
            members.learn("late", "10.0.0.2:1", true),
            Learned::Nothing,
            "ignored past the bound"
        );
        assert_eq!(
            members.learn("n0", "10.0.0.9:1", false),
            Learned::Nothing,
            "gossip does not move a known member"
        );
    }

    #[test]
    fn a_members_own_word_on_its_address_beats_gossip() {
        let mut members = Members::default();
        assert_eq!(members.learn("b", "old:1", false), Learned::Member);
        members.learn("b", "gossiped:1", false);
        assert_eq!(members.addresses("b"), ["old:1"]);
        members.learn("b", "own:1", true);
        assert_eq!(members.addresses("b"), ["own:1"]);
    }

    #[test]
    fn a_join_point_is_dialled_as_the_member_that_answered_there() {
        let mut members = Members::default();
        members.add_join_point("proxy:1");
        assert_eq!(members.join_point("proxy:1"), Some(&Answerer::Nobody));
        members.learn("b", "b:1", true);
        members.answered("proxy:1", Answerer::Member("b".into()));
        assert_eq!(members.addresses("b"), ["b:1", "proxy:1"]);
        // Behind a load balancer, another node answers the next time.
        members.learn("c", "c:1", true);
        members.answered("proxy:1", Answerer::Member("c".into()));
        assert_eq!(members.addresses("b"), ["b:1"]);
        assert_eq!(members.addresses("c"), ["c:1", "proxy:1"]);
    }

    #[test]
    fn a_join_point_at_a_members_advertised_address_is_that_member() {
        let mut members = Members::default();
        members.add_join_point("b:1");
        members.learn("b", "b:1", false);
        assert_eq!(
            members.join_point("b:1"),
            Some(&Answerer::Member("b".into()))
        );
        members.learn("c", "c:1", true);
        members.add_join_point("c:1");
        assert_eq!(
            members.join_point("c:1"),
            Some(&Answerer::Member("c".into()))
        );
    }

    #[test]
    fn refusals_narrow_who_stands_behind_a_join_point() {
        let mut members = Members::default();
        members.add_join_point("lb:1");
        members.answered("lb:1", Answerer::OneOf(ids(&["b", "c", "d"])));
        members.answered("lb:1", Answerer::OneOf(ids(&["c", "d", "e"])));
        assert_eq!(
            members.join_point("lb:1"),
            Some(&Answerer::OneOf(ids(&["c", "d"])))
        );
        members.answered("lb:1", Answerer::OneOf(ids(&["f"])));
        assert_eq!(
            members.join_point("lb:1"),
            Some(&Answerer::OneOf(ids(&["f"]))),
            "nobody in common: the latest refusal stands"
        );
    }

    #[test]
    fn an_address_another_node_answers_at_is_no_longer_the_members() {
        let mut members = Members::default();
        members.learn("b", "shared:1", true);
        members.answered("shared:1", Answerer::Member("c".into()));
        assert!(members.addresses("b").is_empty());
        members.learn("d", "mine:1", true);
        members.answered("mine:1", Answerer::Myself);
        assert!(members.addresses("d").is_empty());
    }
    fn at(last: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, last], 7400))
    }

    #[test]
    fn a_names_join_points_follow_what_it_resolves_to() {
        let mut members = Members::default();
        members.add_join_point("198.18.0.9:7400");
        let first = members.resolved("peers:7400", &[at(1), at(2), at(9)]);
        assert_eq!(
            first,
            Resolved {
                added: true,
                removed: false
            }
        );
        let addresses: Vec<String> = members
            .join_point_addresses()
            .into_iter()
            .map(|(a, _)| a)
            .collect();
        assert_eq!(
            addresses,
            ["198.18.0.1:7400", "198.18.0.2:7400", "198.18.0.9:7400"]
        );
        assert_eq!(
            members.resolved_from("198.18.0.1:7400").as_deref(),
            Some("peers:7400")
        );
        assert_eq!(
            members.resolved_from("198.18.0.9:7400"),
            None,
            "configured as itself first"
        );
        let two = members.generation("198.18.0.2:7400");

        let second = members.resolved("peers:7400", &[at(1), at(3)]);
        assert_eq!(
            second,
            Resolved {
                added: true,
                removed: true
            }
        );
        let addresses: Vec<String> = members
            .join_point_addresses()
            .into_iter()
            .map(|(a, _)| a)
            .collect();
        assert_eq!(
            addresses,
            ["198.18.0.1:7400", "198.18.0.3:7400", "198.18.0.9:7400"],
            "gone from the name, gone; a configured address stays"
        );
        members.resolved("peers:7400", &[at(1), at(2)]);
        assert!(
            members.generation("198.18.0.2:7400") > two,
            "back again is a new join point"
        );
        assert_eq!(
            members.resolved("peers:7400", &[at(1), at(2)]),
            Resolved::default()
        );
    }

    #[test]
    fn names_cannot_grow_the_join_points_past_their_bound() {
        let mut members = Members::default();
        for n in 0..(MAX_MEMBERS / 64 + 2) {
            let addresses: Vec<SocketAddr> = (0..64)
                .map(|port| SocketAddr::from(([198, 18, 1, n as u8], port)))
                .collect();
            members.resolved(&format!("name{n}:1"), &addresses);
        }
        assert_eq!(members.join_point_addresses().len(), MAX_MEMBERS);
    }

    #[test]
    fn a_join_point_tells_its_dials() {
        let mut members = Members::default();
        members.add_join_point("b:1");
        members.dial_failed("b:1", "connection refused");
        members.dial_failed("elsewhere:1", "not a join point: nothing kept");
        let shown = members.join_points(|_| false);
        assert_eq!(shown[0].state, JoinState::Failing);
        assert_eq!(shown[0].last_error.as_deref(), Some("connection refused"));
        assert_eq!((shown[0].dial_failures, shown[0].peer.as_str()), (1, "b:1"));
        members.answered("b:1", Answerer::Member("b".into()));
        assert_eq!(
            members.join_points(|id| id == "b")[0].state,
            JoinState::Linked
        );
        assert_eq!(members.join_points(|_| false)[0].state, JoinState::Unlinked);

        // A member advertising a failing join point's address says who is there.
        members.add_join_point("c:1");
        members.dial_failed("c:1", "connection refused");
        members.learn("c", "c:1", true);
        let c = members.join_points(|id| id == "c").pop().unwrap();
        assert_eq!(
            (c.state, c.node_id.as_deref()),
            (JoinState::Linked, Some("c"))
        );

        // b's link went down and a dial there failed; then b dialled in again.
        members.dial_failed("b:1", "connection refused");
        assert_eq!(members.join_points(|_| true)[0].state, JoinState::Failing);
        members.learn("b", "b-advertised:1", true);
        assert_eq!(members.join_points(|_| true)[0].state, JoinState::Linked);
    }
}
