//! Worker sessions kept for a resume: a lost worker connection's registration, its pushes
//! still in its link, parked under a random token until a new connection of the same
//! credential resumes it or `worker_resume_grace_ms` runs out, when it is dropped (its pushes
//! end `worker-lost`).
//!
//! A resume that names a session whose connection is still up (the node has not found it lost
//! yet) closes that connection first, and takes the session once it is parked.
//!
//! One std mutex with short critical sections, never held across an `.await`; a session is
//! dropped (which takes the registry's lock) outside it. At most `worker_resume_max_sessions`
//! are parked (a superseded one makes room once the bound is reached), and one live session
//! per registered connection, keyed by tokens the node made, so nothing a socket sends grows
//! the maps.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use lintel_wire::FeatureSet;

use crate::auth::Grant;
use crate::registrations::Registered;

/// Bytes in a token this node makes: 256 random bits.
pub(crate) const TOKEN_BYTES: usize = 32;

/// A session's token.
pub(crate) type Token = [u8; TOKEN_BYTES];

/// Why a lost connection's session was not kept.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParkError {
    /// `worker_resume_max_sessions` are kept already.
    #[error("{0} sessions are kept already (worker_resume_max_sessions)")]
    Full(usize),
    /// The session holds more pushes than `worker_resume_max_pushes`.
    #[error("it holds {held} pushes, over worker_resume_max_pushes = {max}")]
    TooMany { held: usize, max: usize },
}

/// The operating system gave no random bytes for a token.
#[derive(Debug, thiserror::Error)]
#[error("no random bytes for a session token: {0}")]
pub(crate) struct TokenError(getrandom::Error);

/// The sessions kept for a resume, by token.
pub(crate) struct Sessions {
    kept: Arc<Mutex<Kept>>,
    /// Told each time a session is parked.
    parked: Notify,
    grace: Duration,
    max_sessions: usize,
    max_pushes: usize,
}

#[derive(Default)]
struct Kept {
    by_token: HashMap<Token, Parked>,
    /// Sessions whose connection is up, with what closes it.
    live: HashMap<Token, Live>,
    /// Numbers each parking, so an expiry drops only the parking it was set for.
    parkings: u64,
    tally: SessionTally,
}

/// What became of lost worker connections' sessions since the node started, for the metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionTally {
    /// Kept now, waiting for a resume.
    pub(crate) parked: usize,
    /// Kept for a resume.
    pub(crate) kept: u64,
    /// Taken over by a resuming connection.
    pub(crate) resumed: u64,
    /// Dropped once the grace ran out (or the node drained or closed) with no resume.
    pub(crate) expired: u64,
    /// Not kept: past `worker_resume_max_sessions` or `worker_resume_max_pushes`.
    pub(crate) refused: u64,
}

struct Live {
    grant: Grant,
    /// Cancelled to close the connection, so that another may resume its session.
    kick: CancellationToken,
}

/// What a resume found under its token.
pub(crate) enum Claim {
    /// The parked session, now the caller's.
    Taken(Registered),
    /// The session's connection is up: it was told to close; its session is parked soon.
    Kicked,
    /// No session for this credential.
    Unknown,
}

struct Parked {
    registered: Registered,
    /// The credential that registered it: only the same may resume it.
    grant: Grant,
    parking: u64,
}

impl Sessions {
    /// Sessions kept `grace` after their connection is lost (none when zero), at most
    /// `max_sessions` at once, each holding at most `max_pushes`.
    pub(crate) fn new(grace: Duration, max_sessions: usize, max_pushes: usize) -> Self {
        Self {
            kept: Arc::default(),
            parked: Notify::new(),
            grace,
            max_sessions,
            max_pushes,
        }
    }

    /// False when `worker_resume_grace_ms` is 0: workers are given no sessions.
    pub(crate) fn enabled(&self) -> bool {
        !self.grace.is_zero() && self.max_sessions > 0
    }

    /// What became of sessions so far, and how many are kept now.
    pub(crate) fn tally(&self) -> SessionTally {
        let kept = lock(&self.kept);
        SessionTally {
            parked: kept.by_token.len(),
            ..kept.tally
        }
    }

    /// How long a lost connection's session is kept.
    pub(crate) fn grace(&self) -> Duration {
        self.grace
    }

    /// A new token, from the operating system's random source.
    ///
    /// # Errors
    /// [`TokenError`] when the source gave nothing.
    pub(crate) fn issue() -> Result<Token, TokenError> {
        let mut token = [0; TOKEN_BYTES];
        getrandom::getrandom(&mut token).map_err(TokenError)?;
        Ok(token)
    }

    /// Notes the session of `token`, granted `grant`, as live on a connection; returns what
    /// tells that connection to close when another resumes the session.
    pub(crate) fn open(&self, token: Token, grant: Grant) -> CancellationToken {
        let kick = CancellationToken::new();
        let live = Live {
            grant,
            kick: kick.clone(),
        };
        lock(&self.kept).live.insert(token, live);
        kick
    }

    /// The connection of session `token` ended without parking it.
    pub(crate) fn closed(&self, token: &Token) {
        lock(&self.kept).live.remove(token);
        // A resume waiting for this session hears that it will not come.
        self.parked.notify_waiters();
    }

    /// Keeps `registered`, whose connection was lost, under `token` for the grace, for a
    /// connection granted `grant` to resume; then drops it, or at once when the node starts
    /// draining (no worker may connect then) or `closing` fires (its pushes abandoned).
    ///
    /// # Errors
    /// The registration given back, and why, when the bounds leave no room for it.
    pub(crate) fn park(
        &self,
        token: Token,
        registered: Registered,
        grant: Grant,
        (draining, closing): (&CancellationToken, &CancellationToken),
    ) -> Result<(), (Registered, ParkError)> {
        let held = registered.link.in_flight();
        // Sessions whose worker was superseded meanwhile, let go once the lock is released.
        let mut superseded = Vec::new();
        let parking = {
            let mut kept = lock(&self.kept);
            kept.live.remove(&token);
            if kept.by_token.len() >= self.max_sessions {
                let closed: Vec<Token> = kept
                    .by_token
                    .iter()
                    .filter(|(_, parked)| parked.registered.link.is_closed())
                    .map(|(token, _)| *token)
                    .collect();
                superseded.extend(
                    closed
                        .iter()
                        .filter_map(|token| kept.by_token.remove(token)),
                );
            }
            let refused = if held > self.max_pushes {
                Some(ParkError::TooMany {
                    held,
                    max: self.max_pushes,
                })
            } else if kept.by_token.len() >= self.max_sessions {
                Some(ParkError::Full(self.max_sessions))
            } else {
                None
            };
            match refused {
                Some(err) => {
                    kept.tally.refused += 1;
                    drop(kept);
                    // A resume waiting for this session hears that it will not come.
                    self.parked.notify_waiters();
                    return Err((registered, err));
                }
                None => {
                    kept.tally.kept += 1;
                    kept.parkings += 1;
                    let parking = kept.parkings;
                    let parked = Parked {
                        registered,
                        grant,
                        parking,
                    };
                    kept.by_token.insert(token, parked);
                    parking
                }
            }
        };
        self.parked.notify_waiters();
        let kept = Arc::clone(&self.kept);
        let (draining, closing) = (draining.clone(), closing.clone());
        let grace = self.grace;
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = draining.cancelled() => {}
                () = closing.cancelled() => {}
            }
            let expired = {
                let mut kept = lock(&kept);
                match kept.by_token.get(&token) {
                    Some(parked) if parked.parking == parking => {
                        kept.tally.expired += 1;
                        kept.by_token.remove(&token)
                    }
                    _ => None,
                }
            };
            if let Some(mut expired) = expired {
                expired.registered.shutting_down = closing.is_cancelled();
                tracing::info!(
                    worker_id = expired.registered.worker_id,
                    pushes = expired.registered.link.in_flight(),
                    "worker session not resumed within worker_resume_grace_ms: its pushes end worker-lost"
                );
            }
        });
        Ok(())
    }

    /// What a resume by a connection granted `grant` and listing `listed` finds under `token`:
    /// a parked session is taken, a live one's connection told to close. One made for another
    /// credential, or whose worker listed a feature `listed` lacks, stays.
    pub(crate) fn claim(&self, token: &Token, (grant, listed): (&Grant, FeatureSet)) -> Claim {
        let taken = {
            let mut kept = lock(&self.kept);
            match (kept.by_token.get(token), kept.live.get(token)) {
                (Some(parked), _)
                    if parked.grant == *grant
                        && listed.contains(parked.registered.link.listed()) =>
                {
                    let taken = kept.by_token.remove(token);
                    if taken
                        .as_ref()
                        .is_some_and(|taken| !taken.registered.link.is_closed())
                    {
                        kept.tally.resumed += 1;
                    }
                    taken
                }
                (None, Some(live)) if live.grant == *grant => {
                    live.kick.cancel();
                    return Claim::Kicked;
                }
                _ => return Claim::Unknown,
            }
        };
        match taken {
            // Dropped outside the lock when its worker was superseded meanwhile.
            Some(taken) if !taken.registered.link.is_closed() => Claim::Taken(taken.registered),
            _ => Claim::Unknown,
        }
    }

    /// As [`Sessions::claim`], waiting until `deadline` for a live session's connection to
    /// close and park it; `None` when there is no session for `grant`, or none parked in time.
    pub(crate) async fn take(
        &self,
        token: &Token,
        claimant: (&Grant, FeatureSet),
        deadline: Instant,
    ) -> Option<Registered> {
        loop {
            // Subscribed before looking, so a parking in between is not missed.
            let parked = self.parked.notified();
            tokio::pin!(parked);
            parked.as_mut().enable();
            match self.claim(token, claimant) {
                Claim::Taken(registered) => return Some(registered),
                Claim::Unknown => return None,
                Claim::Kicked => {}
            }
            tokio::time::timeout_at(deadline, parked).await.ok()?;
        }
    }
}

fn lock(kept: &Mutex<Kept>) -> MutexGuard<'_, Kept> {
    // Every update leaves the map consistent before anything that could panic.
    kept.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
