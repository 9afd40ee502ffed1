//! Keep-alive, the same on every side of a connection (the node's workers, producers and peers,
//! and both SDKs): a ping per period, answers that prove the other side alive, and a close once
//! too many pings in a row go unanswered.
//!
//! Short of that close, a ping waiting longer than a timeout is *overdue*: the other side is
//! still connected but not answering now, and its next answer restores it.

use std::future::Future;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use lintel_wire::{Limits, Ping};
use tokio::time::{Instant, Interval, MissedTickBehavior};

/// Pings the other side of one connection and says when it stops answering.
#[derive(Debug)]
pub struct Keepalive {
    /// One tick per ping; `None` when keep-alive is off.
    ticks: Option<Interval>,
    max_missed: u32,
    /// Pings sent in a row without an answer.
    missed: u32,
    nonce: u64,
    /// When the oldest ping still unanswered was taken.
    waiting_since: Option<Instant>,
    /// How long a ping may wait for its answer before it is overdue; `None` is forever.
    timeout: Option<Duration>,
}

/// What a keep-alive tick asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Send this ping.
    Ping(Ping),
    /// `missed` pings in a row went unanswered: treat the connection as dead.
    Dead { missed: u32 },
}

/// What an answer to a ping changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// The latest ping was answered before it was overdue.
    InTime,
    /// The latest ping was answered after it was overdue: the other side is back.
    Restored,
    /// An echo of an earlier ping: the latest still waits.
    Stale,
}

impl Keepalive {
    /// Pings every `period`, the first one a period from now, and is dead once `max_missed`
    /// (at least one) in a row go unanswered. A zero period turns it off.
    pub fn new(period: Duration, max_missed: u32) -> Self {
        let ticks = (!period.is_zero()).then(|| {
            let now = Instant::now();
            let mut ticks =
                tokio::time::interval_at(now.checked_add(period).unwrap_or(now), period);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            ticks
        });
        Self {
            ticks,
            max_missed: max_missed.max(1),
            missed: 0,
            nonce: 0,
            waiting_since: None,
            timeout: None,
        }
    }

    /// As the node's [`Limits`] say: one ping per `ping_interval_ms`, dead after
    /// `max_missed_pings`.
    pub fn from_limits(limits: &Limits) -> Self {
        Self::new(
            Duration::from_millis(limits.ping_interval_ms),
            limits.max_missed_pings,
        )
    }

    /// A ping is overdue once it waited `timeout` for its answer.
    #[must_use]
    pub fn overdue_after(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Resolves at the next tick; never while off.
    ///
    /// Cancel-safe: nothing changes until it resolves.
    #[inline]
    pub fn tick(&mut self) -> impl Future<Output = Tick> + '_ {
        std::future::poll_fn(|cx| self.poll_tick(cx))
    }

    #[inline]
    fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Tick> {
        let Some(ticks) = &mut self.ticks else {
            return Poll::Pending;
        };
        ready!(ticks.poll_tick(cx));
        if self.missed >= self.max_missed {
            return Poll::Ready(Tick::Dead {
                missed: self.max_missed,
            });
        }
        self.missed += 1;
        self.nonce = self.nonce.wrapping_add(1);
        self.waiting_since.get_or_insert_with(Instant::now);
        Poll::Ready(Tick::Ping(Ping { nonce: self.nonce }))
    }

    /// Makes the next tick come at once and the later ones a period apart from it: the first
    /// ping goes out without waiting a period.
    pub fn ping_now(&mut self) {
        if let Some(ticks) = &mut self.ticks {
            ticks.reset_immediately();
        }
    }

    /// The ping just taken could not be sent, so no answer is waited for.
    pub fn unsent(&mut self) {
        self.missed = self.missed.saturating_sub(1);
        if self.missed == 0 {
            self.waiting_since = None;
        }
    }

    /// The other side sent something: on a connection where any frame counts, it answered.
    pub fn heard(&mut self) {
        self.missed = 0;
        self.waiting_since = None;
    }

    /// A `Pong` echoing `nonce` arrived: it answers when it echoes the latest ping.
    pub fn answered(&mut self, nonce: u64) -> Answered {
        if nonce != self.nonce {
            return Answered::Stale;
        }
        let overdue = self.is_overdue();
        self.heard();
        if overdue {
            Answered::Restored
        } else {
            Answered::InTime
        }
    }

    /// When the ping waiting now becomes overdue; `None` while none waits or with no timeout.
    pub fn overdue_at(&self) -> Option<Instant> {
        let since = self.waiting_since?;
        since.checked_add(self.timeout?)
    }

    /// True while a ping has waited longer than the timeout for its answer.
    pub fn is_overdue(&self) -> bool {
        self.overdue_at().is_some_and(|at| at <= Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(1);

    fn ping(nonce: u64) -> Tick {
        Tick::Ping(Ping { nonce })
    }

    #[tokio::test(start_paused = true)]
    async fn it_pings_once_a_period_and_is_dead_after_the_missed_limit() {
        let start = Instant::now();
        let mut keepalive = Keepalive::new(PERIOD, 2);
        assert_eq!(keepalive.tick().await, ping(1));
        assert_eq!(start.elapsed(), PERIOD, "the first ping waits a period");
        assert_eq!(keepalive.tick().await, ping(2));
        assert_eq!(keepalive.tick().await, Tick::Dead { missed: 2 });
    }

    #[tokio::test(start_paused = true)]
    async fn any_frame_heard_or_an_answer_to_the_latest_ping_resets_the_count() {
        let mut keepalive = Keepalive::new(PERIOD, 1);
        keepalive.tick().await;
        keepalive.heard();
        assert_eq!(keepalive.tick().await, ping(2));
        assert_eq!(keepalive.answered(1), Answered::Stale);
        assert_eq!(keepalive.answered(2), Answered::InTime);
        assert_eq!(keepalive.tick().await, ping(3));
        keepalive.unsent();
        assert_eq!(
            keepalive.tick().await,
            ping(4),
            "an unsent ping is not missed"
        );
        assert_eq!(keepalive.tick().await, Tick::Dead { missed: 1 });
    }

    #[tokio::test(start_paused = true)]
    async fn a_ping_waiting_past_the_timeout_is_overdue_until_answered() {
        let timeout = Duration::from_millis(300);
        let mut keepalive = Keepalive::new(PERIOD, 3).overdue_after(timeout);
        assert_eq!(keepalive.overdue_at(), None, "no ping waits");
        keepalive.tick().await;
        let sent = Instant::now();
        assert_eq!(keepalive.overdue_at(), Some(sent + timeout));
        keepalive.tick().await;
        assert_eq!(
            keepalive.overdue_at(),
            Some(sent + timeout),
            "from the oldest"
        );
        assert!(keepalive.is_overdue());
        assert_eq!(keepalive.answered(2), Answered::Restored);
        assert!(!keepalive.is_overdue());
        assert_eq!(keepalive.overdue_at(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn ping_now_sends_the_next_ping_at_once_and_a_zero_period_never_pings() {
        let start = Instant::now();
        let mut keepalive = Keepalive::new(PERIOD, 3);
        keepalive.ping_now();
        assert_eq!(keepalive.tick().await, ping(1));
        assert_eq!(start.elapsed(), Duration::ZERO);
        keepalive.tick().await;
        assert_eq!(start.elapsed(), PERIOD);
        let mut off = Keepalive::new(Duration::ZERO, 3);
        off.ping_now();
        let never = tokio::time::timeout(10 * PERIOD, off.tick()).await;
        assert!(never.is_err());
    }
}
