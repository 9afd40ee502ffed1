//! The invariants a simulation run is checked against once it ends, from its [`Ledger`] and
//! the faults it went through.

use std::time::Duration;

use lintel::wire::{ActivityOutcome, DispatchResult};

use super::sim::Ledger;

/// A fault that can end a relay `PeerLost`: a node's process gone, or a link between two nodes
/// cut (partitioned, held or reset), from one time to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub what: Severed,
    pub from: Duration,
    pub until: Duration,
}

/// What a [`Cut`] severed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Severed {
    Node(String),
    Link(String, String),
}

impl Cut {
    pub fn node(node: &str) -> Severed {
        Severed::Node(node.to_owned())
    }

    pub fn link(x: &str, y: &str) -> Severed {
        Severed::Link(x.to_owned(), y.to_owned())
    }

    /// True when this cut can sever the relay from `origin` to `peer`.
    fn severs(&self, origin: &str, peer: &str) -> bool {
        match &self.what {
            Severed::Node(node) => node == origin || node == peer,
            Severed::Link(x, y) => (x == origin && y == peer) || (x == peer && y == origin),
        }
    }
}

impl Severed {
    /// This cut, lasting from `from` to `until`.
    pub fn during(self, from: Duration, until: Duration) -> Cut {
        Cut {
            what: self,
            from,
            until,
        }
    }
}

/// Every `PeerLost` no cut explains: between its submission and its outcome, neither its
/// origin nor the peer it names went down, and no link between them was cut (a cut counts
/// until `detection` after it ended, the time missed pings take to find a link dead).
pub fn unexplained_peer_lost(ledger: &Ledger, cuts: &[Cut], detection: Duration) -> Vec<String> {
    let mut found = Vec::new();
    for (workflow_id, outcomes) in &ledger.outcomes {
        let (Some(origin), Some(submitted)) = (
            ledger.submitted.get(workflow_id),
            ledger.submitted_at.get(workflow_id),
        ) else {
            continue;
        };
        for ended in outcomes {
            let DispatchResult::PeerLost { peer, .. } = &ended.result else {
                continue;
            };
            let explained = cuts.iter().any(|cut| {
                cut.severs(origin, peer)
                    && cut.from <= ended.at
                    && cut.until + detection >= *submitted
            });
            if !explained {
                found.push(format!(
                    "{workflow_id} (origin {origin}) ended PeerLost({peer}) at {:?}, submitted at {submitted:?}, though no cut severed {origin} from {peer} meanwhile",
                    ended.at
                ));
            }
        }
    }
    found
}

/// Every broken invariant the ledger shows: the clients' and the taps' own findings; one
/// outcome per dispatch (none when its producer's connection was lost); one push per dispatch;
/// one hop; `served_by` names the node that ran a completed dispatch and the origin of a lost
/// one; no link turned down as a duplicate carried a relay.
pub fn ledger_violations(ledger: &Ledger) -> Vec<String> {
    let mut found: Vec<String> = ledger.violations.clone();
    found.extend(ledger.links.violations());
    for (workflow_id, origin) in &ledger.submitted {
        let outcomes = ledger.outcomes.get(workflow_id).map_or(0, Vec::len);
        let lost = ledger.lost.contains(workflow_id);
        match (outcomes, lost) {
            (1, false) | (0, true) => {}
            (0, false) => found.push(format!("{workflow_id} (origin {origin}) has no outcome")),
            (n, _) => found.push(format!(
                "{workflow_id} (origin {origin}) has {n} outcomes: {:?}",
                ledger.outcomes.get(workflow_id)
            )),
        }
    }
    for workflow_id in ledger.outcomes.keys() {
        if !ledger.submitted.contains_key(workflow_id) {
            found.push(format!("outcome for {workflow_id}, never submitted"));
        }
    }
    for (workflow_id, pushes) in &ledger.pushes {
        if pushes.len() > 1 {
            found.push(format!("{workflow_id} pushed to {pushes:?}"));
        }
    }
    for (sender, workflow_id) in &ledger.relays {
        match ledger.submitted.get(workflow_id) {
            Some(origin) if origin == sender => {}
            Some(origin) => found.push(format!(
                "{sender} relayed {workflow_id}, whose origin is {origin}: a second hop"
            )),
            None => found.push(format!("{sender} relayed {workflow_id}, never submitted")),
        }
    }
    for (workflow_id, ended) in ledger
        .outcomes
        .iter()
        .flat_map(|(id, outcomes)| outcomes.iter().map(move |ended| (id, ended)))
    {
        let origin = ledger.submitted.get(workflow_id);
        match &ended.result {
            DispatchResult::Completed(response) => {
                let ran_on = match &response.outcome {
                    ActivityOutcome::Success(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                    ActivityOutcome::Failure { message, .. } => message.clone(),
                };
                let pushed_to = ledger.pushes.get(workflow_id);
                let pushed_there = pushed_to
                    .is_some_and(|pushes| pushes.iter().any(|(_, node)| *node == ended.served_by));
                if ran_on != ended.served_by || !pushed_there {
                    found.push(format!(
                        "{workflow_id} completed, served_by {} but ran on {ran_on}, pushed to {pushed_to:?}",
                        ended.served_by
                    ));
                }
            }
            DispatchResult::PeerLost { peer, .. }
                if origin != Some(&ended.served_by) || origin == Some(peer) =>
            {
                found.push(format!(
                    "{workflow_id} (origin {origin:?}) lost peer {peer}, served_by {}",
                    ended.served_by
                ));
            }
            _ => {}
        }
    }
    found
}
