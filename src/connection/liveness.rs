//! The node's side of keep-alive, the same for workers, producers and peers: a ping per
//! period, and a close after too many in a row go unanswered.

use std::time::Duration;

use lintel_wire::{ErrorCode, Ping};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::close::Close;

/// Pings sent and not yet answered on one connection.
#[derive(Debug)]
pub(super) struct Liveness {
    /// Consecutive pings without an answer.
    missed: u32,
    max_missed: u32,
    nonce: u64,
}

/// A tick every `period`, the first one `period` from now; late ticks are not bunched up.
pub(super) fn ticker(period: Duration) -> Interval {
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

impl Liveness {
    /// A connection closed after `max_missed` pings in a row go unanswered.
    pub(super) fn new(max_missed: u32) -> Self {
        Self {
            missed: 0,
            max_missed,
            nonce: 0,
        }
    }

    /// The next ping to send, counted as unanswered until heard from.
    ///
    /// # Errors
    /// The `Error{LivenessTimeout}` close once `max_missed` pings went unanswered.
    pub(super) fn next_ping(&mut self) -> Result<Ping, Close> {
        if self.missed >= self.max_missed {
            return Err(Close::error(
                ErrorCode::LivenessTimeout,
                format!("{} pings in a row went unanswered", self.max_missed),
            ));
        }
        self.missed += 1;
        self.nonce = self.nonce.wrapping_add(1);
        Ok(Ping { nonce: self.nonce })
    }

    /// The ping just taken could not be queued, so it does not count as unanswered.
    pub(super) fn unsent(&mut self) {
        self.missed = self.missed.saturating_sub(1);
    }

    /// The other side sent something: it is alive.
    pub(super) fn heard(&mut self) {
        self.missed = 0;
    }

    /// A `Pong` arrived: it answers the pings when it echoes the latest nonce.
    pub(super) fn answered(&mut self, nonce: u64) {
        if nonce == self.nonce {
            self.missed = 0;
        }
    }
}
