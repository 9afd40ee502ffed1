//! Fault schedules: a seed draws crashes and restarts of node hosts, partitions, held links and
//! added latency, each with its end, as a list of timed [`Event`]s to apply to a turmoil
//! simulation.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

/// One change to the simulated world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The host's software stops at once: its tasks are dropped, its sockets closed.
    Crash(&'static str),
    /// A new process starts on the host.
    Restart(&'static str),
    /// Segments between the two are dropped; turmoil does not retransmit them.
    Partition(&'static str, &'static str),
    Repair(&'static str, &'static str),
    /// Segments between the two wait, then are delivered on release.
    Hold(&'static str, &'static str),
    Release(&'static str, &'static str),
    /// Latency between the two is this many milliseconds.
    Slow(&'static str, &'static str, u64),
    /// Latency between the two is healthy again.
    Fast(&'static str, &'static str),
}

/// An action and when it happens, in simulated time since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub at: Duration,
    pub action: Action,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>6} ms  {:?}", self.at.as_millis(), self.action)
    }
}

/// What faults may hit, and when.
pub struct Targets<'a> {
    /// Hosts that crash and restart.
    pub nodes: &'a [&'static str],
    /// Links that are partitioned, held or slowed, the likely ones first.
    pub links: &'a [(&'static str, &'static str)],
    /// How many of `links`, from the front, take four faults in five.
    pub likely_links: usize,
    /// Faults begin within this window and every one has ended by its end.
    pub window: Range<Duration>,
}

/// The fault schedule of `seed`: every 150 to 700 ms a fault may begin (one in five a crash,
/// then partitions, holds and slow links), unless its node or link is already faulty; each
/// lasts a drawn time, cut short at the end of the window. Sorted by time; an end and a start
/// at the same instant keep that order.
pub fn schedule(seed: u64, targets: &Targets<'_>) -> Vec<Event> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let window = &targets.window;
    let mut node_free: BTreeMap<&str, Duration> = BTreeMap::new();
    let mut link_free: BTreeMap<(&str, &str), Duration> = BTreeMap::new();
    let mut events = Vec::new();
    let mut at = window.start;
    loop {
        at += Duration::from_millis(rng.u64(150..700));
        if at >= window.end {
            break;
        }
        let lasts = |rng: &mut fastrand::Rng, millis: Range<u64>| {
            (at + Duration::from_millis(rng.u64(millis))).min(window.end)
        };
        let kind = rng.u32(0..10);
        if kind < 2 {
            let node = targets.nodes[rng.usize(0..targets.nodes.len())];
            if node_free.get(node).is_some_and(|free| *free > at) {
                continue;
            }
            let until = lasts(&mut rng, 300..1_500);
            node_free.insert(node, until);
            events.push(Event {
                at,
                action: Action::Crash(node),
            });
            events.push(Event {
                at: until,
                action: Action::Restart(node),
            });
            continue;
        }
        let likely = targets.likely_links.min(targets.links.len());
        let link = if rng.u32(0..5) == 0 || likely == 0 {
            targets.links[rng.usize(0..targets.links.len())]
        } else {
            targets.links[rng.usize(0..likely)]
        };
        if link_free.get(&link).is_some_and(|free| *free > at) {
            continue;
        }
        let (x, y) = link;
        let (start, end, until) = match kind {
            2..=4 => (
                Action::Partition(x, y),
                Action::Repair(x, y),
                lasts(&mut rng, 200..2_000),
            ),
            5..=6 => (
                Action::Hold(x, y),
                Action::Release(x, y),
                lasts(&mut rng, 50..800),
            ),
            _ => (
                Action::Slow(x, y, rng.u64(20..300)),
                Action::Fast(x, y),
                lasts(&mut rng, 500..3_000),
            ),
        };
        link_free.insert(link, until);
        events.push(Event { at, action: start });
        events.push(Event {
            at: until,
            action: end,
        });
    }
    events.sort_by_key(|event| event.at);
    events
}

/// Applies `action` to `sim`; a healthy link's latency lies in `healthy`.
pub fn apply(sim: &mut turmoil::Sim<'_>, action: Action, healthy: &Range<Duration>) {
    match action {
        Action::Crash(node) => sim.crash(node),
        Action::Restart(node) => sim.bounce(node),
        Action::Partition(x, y) => sim.partition(x, y),
        Action::Repair(x, y) => sim.repair(x, y),
        Action::Hold(x, y) => sim.hold(x, y),
        Action::Release(x, y) => sim.release(x, y),
        Action::Slow(x, y, millis) => sim.set_link_latency(x, y, Duration::from_millis(millis)),
        Action::Fast(x, y) => {
            sim.set_link_latency(x, y, healthy.start);
            sim.set_link_max_message_latency(x, y, healthy.end);
        }
    }
}
