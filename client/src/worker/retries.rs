//! What the worker says while it cannot reach the node: the first failure at once, a summary
//! at most every [`SUMMARY_EVERY`] or when the cause changes, and when it gets through again.

use std::mem::Discriminant;
use std::time::Duration;

use tokio::time::Instant;

use crate::connect::ConnectError;

/// Longest silence while failures go on.
const SUMMARY_EVERY: Duration = Duration::from_secs(30);

/// Failed attempts in a row, and when they were last reported.
#[derive(Debug, Default)]
pub(super) struct Retries {
    failures: u32,
    first_at: Option<Instant>,
    said_at: Option<Instant>,
    /// What failed last time, to report a change of cause at once.
    cause: Option<(Discriminant<ConnectError>, Option<std::io::ErrorKind>)>,
}

impl Retries {
    /// Failed attempts since the last success.
    pub(super) fn failures(&self) -> u32 {
        self.failures
    }

    /// Counts a failed attempt to reach `addr` and says why, unless it said so lately.
    pub(super) fn failed(&mut self, addr: &str, err: &ConnectError, retry_in: Duration) {
        let now = Instant::now();
        self.failures = self.failures.saturating_add(1);
        let first_at = *self.first_at.get_or_insert(now);
        let cause = Some((std::mem::discriminant(err), io_kind(err)));
        let changed = self.cause != cause;
        self.cause = cause;
        let due = self
            .said_at
            .is_none_or(|said| now.duration_since(said) >= SUMMARY_EVERY);
        if !(changed || due) {
            return;
        }
        self.said_at = Some(now);
        let retry_in = format!("{:.1}s", retry_in.as_secs_f64());
        if self.failures == 1 {
            tracing::warn!(%addr, error = %err, %retry_in, "worker cannot register with the node; retrying");
        } else {
            let over = format!("{:.0}s", now.duration_since(first_at).as_secs_f64());
            tracing::warn!(
                %addr,
                error = %err,
                attempts = self.failures,
                %over,
                %retry_in,
                "worker still cannot register with the node; retrying"
            );
        }
    }

    /// The node was reached: says so if failures were reported, and starts over.
    pub(super) fn reached(&mut self, addr: &str) {
        if self.failures > 0 {
            let over = self
                .first_at
                .map(|first| format!("{:.0}s", first.elapsed().as_secs_f64()))
                .unwrap_or_default();
            tracing::info!(%addr, attempts = self.failures, %over, "worker reached the node");
        }
        *self = Self::default();
    }
}

fn io_kind(err: &ConnectError) -> Option<std::io::ErrorKind> {
    match err {
        ConnectError::Io(err) => Some(err.kind()),
        _ => None,
    }
}
