//! A worker's link: pushes to one worker connection, answered by its replies.
//!
//! A `Cancel` is a control frame and a `Push` bulk, so a `Cancel` may reach the worker before a
//! `Push` still queued: the worker ignores it, and the late reply frees the slot. Inside a
//! batching scope (every connection task) queuing is only a buffer append.

use std::sync::Arc;

use lintel_wire::{ExtrasRef, FeatureSet, Frame, FrameRef, Push, RequestRef, ResponseRef};
use std::sync::atomic::{AtomicBool, Ordering};

use lintel_wire::Goodbye;

use lintel_transport::Outbound;

use super::fate::{PushError, ReplyFate};
use super::table::{Entry, Kind, Link};

/// What a worker link holds for one push until the worker lets go of it.
pub type PushEntry = dyn Entry<ToWorker>;

/// A link to a worker connection.
pub type WorkerLink = Link<ToWorker>;

/// What a worker link knows of its worker: the connection it pushes on, the protocol
/// version it speaks, and whether another registration superseded it.
#[derive(Debug)]
pub struct ToWorker {
    pid: u64,
    version: u16,
    /// What the worker listed in its `Features`.
    listed: FeatureSet,
    superseded: AtomicBool,
    /// The worker's session waits for a resume: its connection is lost.
    parked: AtomicBool,
}

impl ToWorker {
    fn new(pid: u64, version: u16, listed: FeatureSet) -> Self {
        Self {
            pid,
            version,
            listed,
            superseded: AtomicBool::new(false),
            parked: AtomicBool::new(false),
        }
    }
}

impl Kind for ToWorker {
    type Answer<'a> = ResponseRef<'a>;
}

impl Link<ToWorker> {
    /// A link for the connection `pid`, speaking protocol `version`, whose frames go to
    /// `outbound`.
    pub fn new(pid: u64, version: u16, outbound: Outbound) -> Self {
        let kind = ToWorker::new(pid, version, outbound.listed());
        Link::with(kind, outbound, false, None)
    }

    /// A link that holds pushes until [`WorkerLink::open`]; a registering connection uses it
    /// so no push overtakes the `Registered` frame.
    pub fn held(pid: u64, version: u16, outbound: Outbound) -> Self {
        let kind = ToWorker::new(pid, version, outbound.listed());
        Link::with(kind, outbound, true, None)
    }

    /// Closes the link because another registration of the worker's deployment and instance
    /// id replaced it: its pushes end as lost, then the worker is told `Goodbye{"superseded"}`
    /// and the connection's write side shuts (its read side ends when the worker closes).
    pub fn supersede(&self) {
        self.inner.kind.superseded.store(true, Ordering::Release);
        self.close();
        let goodbye = Goodbye {
            reason: Goodbye::SUPERSEDED.into(),
        };
        let outbound = self.outbound();
        let _ = outbound.send_owed(Frame::Goodbye(goodbye));
        outbound.close();
    }

    /// True once [`WorkerLink::supersede`] was called.
    pub fn is_superseded(&self) -> bool {
        self.inner.kind.superseded.load(Ordering::Acquire)
    }

    /// Notes whether the worker's session waits for a resume (its heartbeat timers wait too).
    pub fn set_parked(&self, parked: bool) {
        self.inner.kind.parked.store(parked, Ordering::Release);
    }

    /// True while the worker's session waits for a resume.
    pub fn is_parked(&self) -> bool {
        self.inner.kind.parked.load(Ordering::Acquire)
    }

    /// The connection this link was made for: after a resume moved it, still the first one's.
    pub fn pid(&self) -> u64 {
        self.inner.kind.pid
    }

    /// The protocol version the worker speaks: from 3 it may be given requests with headers
    /// or a required deployment.
    pub fn version(&self) -> u16 {
        self.inner.kind.version
    }

    /// Whether the worker can carry a request that needs protocol `version` and the listed
    /// `features`.
    pub fn carries(&self, version: u16, features: FeatureSet) -> bool {
        self.inner.kind.version >= version && self.inner.kind.listed.contains(features)
    }

    /// What the worker listed in its `Features` on the connection the link was made for.
    pub fn listed(&self) -> FeatureSet {
        self.inner.kind.listed
    }

    /// Queues `request` with its `extras` as a push whose fate `entry` hears, written as the
    /// worker's version carries it; returns its worker correlation id. The request is encoded
    /// where it lies, or copied only while the link holds pushes. Selection never gives a
    /// version-2 worker a request its push could not carry.
    ///
    /// # Errors
    /// [`PushError::Closed`] when the link is closed, [`PushError::Backpressure`] when its
    /// queue is full; either way nothing was sent and no entry is left.
    pub fn push(
        &self,
        request: &RequestRef<'_>,
        extras: &ExtrasRef<'_>,
        entry: Arc<PushEntry>,
    ) -> Result<u64, PushError> {
        let vacant = self.vacant()?;
        let correlation = vacant.correlation;
        if vacant.holding() {
            let frame = Frame::from(Push {
                correlation,
                request: request.clone().into_owned(),
                extras: extras.into_owned(),
            });
            return Ok(vacant.hold(entry, frame));
        }
        let push = FrameRef::Push(Push {
            correlation,
            request: request.reborrow(),
            extras: extras.reborrow(),
        });
        if let Err(err) = vacant.outbound().try_send_ref(&push) {
            return Err(PushError::from_send(err));
        }
        Ok(vacant.insert(entry))
    }

    /// Hands a worker's reply, where it lies, to its push.
    pub fn reply(&self, correlation: u64, response: ResponseRef<'_>) -> ReplyFate {
        self.deliver(correlation, response)
    }
}
