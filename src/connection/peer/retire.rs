//! Retiring a peer link: every relay this node handled on it is answered, then a farewell says
//! so, and the link closes without a reset.
//!
//! The steps, each bounded:
//! 1. The link takes no relay of this node's any more, and the relays the peer sends from now
//!    on are not run. Frames are still read: answers to this node's own relays, cancels,
//!    pings and the peer's own farewell.
//! 2. Once every relay handled here has its `RelayOutcome` queued ([`Flights::settled`]) and
//!    every frame queued before is written, the last frame is queued: `Farewell` when the
//!    peer reads it (a version-3 link whose peer lists `farewell`), `Goodbye` otherwise. An
//!    outcome that cannot be queued (the node closes and it does not come within a grace, or
//!    the queue refused it at its ceiling) means no last frame: the origin treats the close as
//!    a lost link.
//! 3. The write side is shut after it, and the link no longer stands for its peer in the mesh.
//!    What the peer still sends is read until it closes its side or [`LINGER`] passes, so the
//!    farewell is not destroyed by the reset a close with unread input sends, and answers to
//!    this node's relays (and the peer's farewell) are still heard.
//!
//! A peer that closes meanwhile ends the retirement at once: there is nobody left to tell.

use std::sync::Arc;
use std::time::Duration;

use lintel_wire::{Farewell, Frame, FrameRef, Goodbye, Pong};
use tokio::time::{sleep_until, Instant};

use super::super::close::Close;
use super::super::flights::{Flights, ReplyTimer};
use super::hello::DUPLICATE;
use crate::cluster::Remote;
use crate::shared::Shared;
use lintel_transport::keepalive::Keepalive;
use lintel_transport::{FrameReader, Outbound};

/// Longest a retired link reads, after its last frame, for the peer to close its side.
const LINGER: Duration = Duration::from_secs(5);

/// Longest the outcomes of what still runs for the peer may take to be queued once the node
/// closes and ends them.
const SHUT_DOWN_GRACE: Duration = Duration::from_secs(5);

/// Why a link is retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// Another link to the same peer stays.
    Duplicate,
    /// This node drains.
    Draining,
    /// This node closes: what still runs for the peer ends now.
    ShuttingDown,
    /// The peer said farewell.
    PeerLeft,
}

impl Why {
    /// The reason the last frame gives.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Why::Duplicate => DUPLICATE,
            Why::Draining => "draining",
            Why::ShuttingDown => "node shutting down",
            Why::PeerLeft => "the peer said farewell",
        }
    }
}

/// One link being retired.
pub(super) struct Retirement<'a> {
    pub(super) shared: &'a Arc<Shared>,
    pub(super) remote: &'a Arc<Remote>,
    pub(super) outbound: &'a Outbound,
    /// What this node runs for the peer.
    pub(super) served: &'a Arc<Flights>,
    pub(super) keepalive: &'a mut Keepalive,
    /// The last frame is a `Farewell`: the link speaks version 3 and the peer lists it.
    pub(super) farewell: bool,
}

impl Retirement<'_> {
    /// Retires the link; returns how the connection then closes (its last frame already
    /// queued, or none owed).
    pub(super) async fn run(mut self, reader: &mut FrameReader, why: Why) -> Close {
        self.remote.link.retire();
        let mut shutting_down = false;
        if why == Why::ShuttingDown {
            self.shut_down();
            shutting_down = true;
        }
        tracing::debug!(peer = %self.remote.node_id, ?why, "retiring a peer link");
        if let Err(close) = self.settle(reader, shutting_down).await {
            return close;
        }
        let reason = why.reason().to_owned();
        let last = if self.farewell {
            Frame::Farewell(Farewell { reason })
        } else {
            Frame::Goodbye(Goodbye { reason })
        };
        if self.outbound.send_owed(last).is_err() {
            return Close::Quietly;
        }
        // Flushes what is queued, the last frame included, then shuts the write side.
        self.outbound.close();
        self.shared.dispatcher.mesh().forget(self.remote);
        self.linger(reader).await;
        Close::Quietly
    }

    /// Waits, reading, until every relay handled here has its outcome queued and every frame
    /// queued is written.
    ///
    /// # Errors
    /// The close owed when the peer went away, stopped answering pings, or an outcome could
    /// not be queued (in time, or at all): no last frame then.
    async fn settle(
        &mut self,
        reader: &mut FrameReader,
        mut shutting_down: bool,
    ) -> Result<(), Close> {
        let mut timer = ReplyTimer::default();
        let timer_sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer_sleep);
        timer.arm(self.served.expire(Instant::now()), timer_sleep.as_mut());
        let mut give_up = shutting_down.then(|| Instant::now() + SHUT_DOWN_GRACE);
        let closing = self.shared.closing.clone();
        let (served, outbound) = (Arc::clone(self.served), self.outbound);
        let settled = async {
            served.settled().await;
            // Behind every frame queued before it: the outcomes, and any relay of ours.
            outbound.below(1).await;
        };
        tokio::pin!(settled);
        // Every branch is cancel-safe: a token wait, sleeps, a keep-alive tick, the settled
        // wait (a tracker and a queue wait, checked again when polled) and
        // `FrameReader::next_frame` lose nothing when another branch wins.
        loop {
            tokio::select! {
                biased;
                () = closing.cancelled(), if !shutting_down => {
                    self.shut_down();
                    shutting_down = true;
                    give_up = Some(Instant::now() + SHUT_DOWN_GRACE);
                }
                () = &mut settled => {
                    if self.outbound.overflowed() {
                        // An outcome was refused at the queue's ceiling: no farewell can be true.
                        return Err(Close::Quietly);
                    }
                    return Ok(());
                }
                () = sleep_until(give_up.unwrap_or_else(Instant::now)), if give_up.is_some() => {
                    tracing::warn!(
                        peer = %self.remote.node_id,
                        "relay outcomes not queued in time; closing the link without a farewell"
                    );
                    return Err(Close::Quietly);
                }
                () = &mut timer_sleep, if timer.armed.is_some() => {
                    timer.armed = None;
                    timer.arm(self.served.expire(Instant::now()), timer_sleep.as_mut());
                }
                tick = self.keepalive.tick() => {
                    if let Some(ping) = Close::unless_pinged(tick)? {
                        let _ = self.outbound.send_owed(Frame::Ping(ping));
                    }
                }
                frame = reader.next_frame() => match frame {
                    Some(Ok(frame)) => self.read(frame),
                    None | Some(Err(_)) => return Err(Close::Quietly),
                },
            }
        }
    }

    /// Reads what the peer still sends until it closes its side, or [`LINGER`] passes.
    async fn linger(&mut self, reader: &mut FrameReader) {
        let until = Instant::now() + LINGER;
        loop {
            tokio::select! {
                biased;
                () = sleep_until(until) => return,
                frame = reader.next_frame() => match frame {
                    Some(Ok(frame)) => self.read(frame),
                    None | Some(Err(_)) => return,
                },
            }
        }
    }

    /// Handles a frame read while retiring: answers to this node's relays and the peer's
    /// farewell are heard, cancels reach what runs here, pings are answered while the write
    /// side is open; a relay is not run (its origin hears of it from the farewell), and
    /// anything else is dropped.
    fn read(&mut self, frame: FrameRef<'_>) {
        self.keepalive.heard();
        let link = &self.remote.link;
        match frame {
            FrameRef::RelayOutcome(outcome) => {
                link.answer(outcome.correlation, outcome.result);
            }
            // Read only on a link whose version knows it: the reader refuses it elsewhere.
            FrameRef::Frame(Frame::Farewell(_)) => {
                link.close_unhandled();
            }
            FrameRef::Frame(Frame::Cancel(cancel)) => self.served.cancel(cancel.correlation),
            FrameRef::Frame(Frame::Ping(ping)) => {
                let _ = self
                    .outbound
                    .send_owed(Frame::Pong(Pong { nonce: ping.nonce }));
            }
            _ => {}
        }
    }

    /// The node closes: what still runs for the peer ends `ShutDown`, and so do this node's
    /// relays still unanswered on the link.
    fn shut_down(&self) {
        self.served.shut_down();
        self.remote.link.close_abandoning();
    }
}
