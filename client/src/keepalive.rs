//! The SDKs' side of keep-alive: ping the node on its schedule, and give up after its miss limit.

use std::time::Duration;

use lintel_wire::{Limits, Ping};
use tokio::time::{Instant, Interval, MissedTickBehavior};

/// Pings the node and declares the connection dead after too many unanswered pings.
///
/// It mirrors the node's own [`Limits`]: one ping per `ping_interval_ms`, and the connection is
/// lost when `max_missed_pings` pings in a row go unanswered. Any frame from the node counts as
/// an answer. An interval of zero disables it.
#[derive(Debug)]
pub(crate) struct Keepalive {
    interval: Option<Interval>,
    max_missed: u32,
    outstanding: u32,
    nonce: u64,
}

/// What to do after a keepalive tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeepaliveTick {
    /// Send this ping.
    Ping(Ping),
    /// The node missed too many pings: treat the connection as lost.
    Dead,
}

impl Keepalive {
    pub(crate) fn new(limits: &Limits) -> Self {
        let interval = (limits.ping_interval_ms > 0).then(|| {
            let period = Duration::from_millis(limits.ping_interval_ms);
            let start = Instant::now()
                .checked_add(period)
                .unwrap_or_else(Instant::now);
            let mut interval = tokio::time::interval_at(start, period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        });
        Self {
            interval,
            max_missed: limits.max_missed_pings.max(1),
            outstanding: 0,
            nonce: 0,
        }
    }

    /// Resolves at the next tick; never when disabled.
    ///
    /// Cancel-safe: [`Interval::tick`] is, and no state changes until it resolves.
    pub(crate) async fn tick(&mut self) -> KeepaliveTick {
        match &mut self.interval {
            Some(interval) => {
                interval.tick().await;
            }
            None => std::future::pending::<()>().await,
        }
        if self.outstanding >= self.max_missed {
            return KeepaliveTick::Dead;
        }
        self.outstanding += 1;
        self.nonce = self.nonce.wrapping_add(1);
        KeepaliveTick::Ping(Ping { nonce: self.nonce })
    }

    /// The node sent something, so it is alive.
    pub(crate) fn heard(&mut self) {
        self.outstanding = 0;
    }
}
