//! Keep-alive, the same on every side of a connection (the node's workers, producers and peers,
//! and both SDKs): a ping per period, answers that prove the other side alive, and a close once
//! too many pings in a row go unanswered.
//!
//! Short of that close, a ping waiting longer than a timeout is *overdue*: the other side is
//! still connected but not answering now, and its next answer restores it. One timer serves
//! both: it wakes at the next ping or at the moment the waiting ping becomes overdue.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use lintel_wire::{Limits, Ping};
use tokio::time::{Instant, Sleep};

/// Pings the other side of one connection and says when it stops answering.
#[derive(Debug)]
pub struct Keepalive {
    /// Wakes at the next ping, or sooner when the waiting ping becomes overdue; `None` when
    /// keep-alive is off.
    timer: Option<Pin<Box<Sleep>>>,
    period: Duration,
    /// When the next ping is due.
    next_ping: Instant,
    max_missed: u32,
    /// Pings sent in a row without an answer.
    missed: u32,
    nonce: u64,
    /// When the oldest ping still unanswered was taken.
    waiting_since: Option<Instant>,
    /// How long a ping may wait for its answer before it is overdue; `None` is forever.
    timeout: Option<Duration>,
    /// [`Tick::Overdue`] was told for the pings waiting now.
    told_overdue: bool,
}

/// What a keep-alive tick asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Send this ping.
    Ping(Ping),
    /// `missed` pings in a row went unanswered: treat the connection as dead.
    Dead {
        /// Pings unanswered in a row.
        missed: u32,
    },
    /// The oldest ping waiting has waited past the timeout ([`Keepalive::overdue_after`]):
    /// the other side is not answering now. Told once until an answer comes.
    Overdue,
}

/// What an answer to a ping changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// The latest ping was answered, and no [`Tick::Overdue`] was told since the last answer.
    InTime,
    /// The latest ping was answered after [`Tick::Overdue`] was told: the other side is back.
    Restored,
    /// An echo of an earlier ping: the latest still waits.
    Stale,
}

impl Keepalive {
    /// Pings every `period`, the first one a period from now, and is dead once `max_missed`
    /// (at least one) in a row go unanswered. A zero period turns it off.
    pub fn new(period: Duration, max_missed: u32) -> Self {
        let now = Instant::now();
        let next_ping = now.checked_add(period).unwrap_or(now);
        let timer = (!period.is_zero()).then(|| Box::pin(tokio::time::sleep_until(next_ping)));
        Self {
            timer,
            period,
            next_ping,
            max_missed: max_missed.max(1),
            missed: 0,
            nonce: 0,
            waiting_since: None,
            timeout: None,
            told_overdue: false,
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

    /// A ping is overdue once it waited `timeout` for its answer; ticks then say
    /// [`Tick::Overdue`].
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
        loop {
            let Some(timer) = &mut self.timer else {
                return Poll::Pending;
            };
            ready!(timer.as_mut().poll(cx));
            let now = Instant::now();
            let tick = if self.overdue_untold().is_some_and(|at| at <= now) {
                self.told_overdue = true;
                Some(Tick::Overdue)
            } else if self.next_ping <= now {
                Some(self.ping_due(now))
            } else {
                // Woken for an overdue moment an answer took away: wait for the next ping.
                None
            };
            self.rearm();
            if let Some(tick) = tick {
                return Poll::Ready(tick);
            }
        }
    }

    /// The tick of a ping due now; the next one is a period after this one was due, or after
    /// now when this one came late.
    fn ping_due(&mut self, now: Instant) -> Tick {
        let on_time = self
            .next_ping
            .checked_add(self.period)
            .filter(|at| *at > now);
        self.next_ping = on_time.unwrap_or_else(|| now.checked_add(self.period).unwrap_or(now));
        if self.missed >= self.max_missed {
            return Tick::Dead {
                missed: self.max_missed,
            };
        }
        Tick::Ping(self.take_ping(now))
    }

    /// A new ping, waited for from `now`.
    fn take_ping(&mut self, now: Instant) -> Ping {
        self.missed = self.missed.saturating_add(1);
        self.nonce = self.nonce.wrapping_add(1);
        self.waiting_since.get_or_insert(now);
        Ping { nonce: self.nonce }
    }

    /// When the pings waiting become overdue, while that is still to be told.
    fn overdue_untold(&self) -> Option<Instant> {
        self.overdue_at().filter(|_| !self.told_overdue)
    }

    /// Sets the timer to the next thing due: a ping, or an overdue moment still to be told.
    fn rearm(&mut self) {
        let due = match self.overdue_untold() {
            Some(at) => at.min(self.next_ping),
            None => self.next_ping,
        };
        if let Some(timer) = &mut self.timer {
            if timer.deadline() != due {
                timer.as_mut().reset(due);
            }
        }
    }

    /// A ping to send now, waited for and counted as a tick's is; the next tick's ping comes a
    /// period after it.
    pub fn ping_now(&mut self) -> Ping {
        let now = Instant::now();
        self.next_ping = now.checked_add(self.period).unwrap_or(now);
        let ping = self.take_ping(now);
        self.rearm();
        ping
    }

    /// The ping just taken could not be sent, so no answer is waited for.
    pub fn unsent(&mut self) {
        self.missed = self.missed.saturating_sub(1);
        if self.missed == 0 {
            self.waiting_since = None;
        }
    }

    /// The other side sent something: on a connection where any frame counts, it answered.
    /// Cheap enough for every frame: the timer is left as it is.
    pub fn heard(&mut self) {
        self.missed = 0;
        self.waiting_since = None;
        self.told_overdue = false;
    }

    /// A `Pong` echoing `nonce` arrived: it answers when it echoes the latest ping.
    pub fn answered(&mut self, nonce: u64) -> Answered {
        if nonce != self.nonce {
            return Answered::Stale;
        }
        let overdue = self.told_overdue;
        self.heard();
        // Nothing waits now: the timer wakes for the next ping only.
        self.rearm();
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
    async fn a_ping_waiting_past_the_timeout_is_told_overdue_once_until_answered() {
        let timeout = Duration::from_millis(300);
        let mut keepalive = Keepalive::new(PERIOD, 3).overdue_after(timeout);
        assert_eq!(keepalive.overdue_at(), None, "no ping waits");
        assert_eq!(keepalive.tick().await, ping(1));
        let sent = Instant::now();
        assert_eq!(keepalive.overdue_at(), Some(sent + timeout));
        assert_eq!(keepalive.tick().await, Tick::Overdue);
        assert_eq!(
            Instant::now(),
            sent + timeout,
            "told the moment it is overdue"
        );
        assert!(keepalive.is_overdue());
        assert_eq!(keepalive.tick().await, ping(2), "told once");
        assert_eq!(
            keepalive.overdue_at(),
            Some(sent + timeout),
            "from the oldest"
        );
        assert_eq!(keepalive.answered(1), Answered::Stale);
        assert_eq!(keepalive.answered(2), Answered::Restored);
        assert!(!keepalive.is_overdue());
        assert_eq!(keepalive.overdue_at(), None);
        assert_eq!(keepalive.tick().await, ping(3));
        assert_eq!(keepalive.answered(3), Answered::InTime);
    }

    #[tokio::test(start_paused = true)]
    async fn a_ping_answered_in_time_is_never_told_overdue() {
        let start = Instant::now();
        let mut keepalive = Keepalive::new(PERIOD, 3).overdue_after(PERIOD / 4);
        assert_eq!(keepalive.tick().await, ping(1));
        assert_eq!(keepalive.answered(1), Answered::InTime);
        assert_eq!(keepalive.tick().await, ping(2));
        assert_eq!(start.elapsed(), 2 * PERIOD);
    }

    #[tokio::test(start_paused = true)]
    async fn a_ping_taken_now_is_waited_for_like_a_ticks_and_the_next_comes_a_period_later() {
        let start = Instant::now();
        let timeout = PERIOD / 4;
        let mut keepalive = Keepalive::new(PERIOD, 2).overdue_after(timeout);
        assert_eq!(keepalive.ping_now(), Ping { nonce: 1 });
        assert_eq!(keepalive.overdue_at(), Some(start + timeout));
        assert_eq!(keepalive.tick().await, Tick::Overdue);
        assert_eq!(keepalive.tick().await, ping(2));
        assert_eq!(start.elapsed(), PERIOD);
        assert_eq!(
            keepalive.tick().await,
            Tick::Dead { missed: 2 },
            "it counts as missed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_period_never_ticks() {
        let mut off = Keepalive::new(Duration::ZERO, 3);
        let never = tokio::time::timeout(10 * PERIOD, off.tick()).await;
        assert!(never.is_err());
    }
}
