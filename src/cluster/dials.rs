//! How dialling one join point goes: what its last dial came to and since when, its last
//! error and how many dials failed, for status and metrics.

use std::time::{SystemTime, UNIX_EPOCH};

use lintel_client::status::JoinState;

/// Longest error kept for a join point, in bytes; a peer's goodbye reason is its own text.
pub(super) const MAX_ERROR_LEN: usize = 512;

/// What the last dial at a join point came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Came {
    /// No dial has ended yet.
    Nothing,
    /// A node answered: a member, or one of several refusing a second link.
    Answered,
    Failed,
    /// This node itself answered.
    Myself,
}

/// The dials at one join point.
#[derive(Debug, Clone)]
pub(super) struct Dials {
    came: Came,
    since_unix_ms: u64,
    last_error: Option<(String, u64)>,
    failures: u64,
}

impl Dials {
    /// A join point added now, not dialled yet.
    pub(super) fn new() -> Self {
        Self {
            came: Came::Nothing,
            since_unix_ms: now_unix_ms(),
            last_error: None,
            failures: 0,
        }
    }

    /// A node answered a dial: this one itself when `myself`.
    pub(super) fn answered(&mut self, myself: bool) {
        self.came_to(if myself { Came::Myself } else { Came::Answered });
    }

    /// A dial failed with `error`.
    pub(super) fn failed(&mut self, error: &str) {
        self.came_to(Came::Failed);
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some((bounded(error), now_unix_ms()));
    }

    fn came_to(&mut self, came: Came) {
        if self.came != came {
            self.came = came;
            self.since_unix_ms = now_unix_ms();
        }
    }

    /// The state status shows, given whether a member that answered there is linked now.
    pub(super) fn state(&self, linked: bool) -> JoinState {
        match self.came {
            Came::Nothing => JoinState::Connecting,
            Came::Answered if linked => JoinState::Linked,
            Came::Answered => JoinState::Unlinked,
            Came::Failed => JoinState::Failing,
            Came::Myself => JoinState::Myself,
        }
    }

    pub(super) fn since_unix_ms(&self) -> u64 {
        self.since_unix_ms
    }

    /// The last error and when it happened.
    pub(super) fn last_error(&self) -> Option<(&str, u64)> {
        self.last_error
            .as_ref()
            .map(|(text, at)| (text.as_str(), *at))
    }

    pub(super) fn failures(&self) -> u64 {
        self.failures
    }
}

/// `error` cut to [`MAX_ERROR_LEN`] bytes at a character boundary.
fn bounded(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_LEN);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error.get(..end).unwrap_or_default().to_owned()
}

/// Milliseconds since the Unix epoch; 0 on a clock before it.
fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_point_reads_as_its_last_dial_came_since_it_first_came_so() {
        let mut dials = Dials::new();
        assert_eq!(dials.state(false), JoinState::Connecting);
        dials.failed("refused");
        let failing_since = dials.since_unix_ms();
        dials.failed("refused again");
        assert_eq!(dials.state(true), JoinState::Failing);
        assert_eq!(
            dials.since_unix_ms(),
            failing_since,
            "still the first failure's"
        );
        assert_eq!(dials.failures(), 2);
        assert_eq!(
            dials.last_error().map(|(text, _)| text),
            Some("refused again")
        );
        dials.answered(false);
        assert_eq!(dials.state(true), JoinState::Linked);
        assert_eq!(dials.state(false), JoinState::Unlinked);
        assert!(dials.last_error().is_some(), "the last error stays to read");
        dials.answered(true);
        assert_eq!(dials.state(false), JoinState::Myself);
    }

    #[test]
    fn a_long_error_is_cut_at_a_character() {
        let long = "é".repeat(MAX_ERROR_LEN);
        let mut dials = Dials::new();
        dials.failed(&long);
        let (kept, _) = dials.last_error().unwrap();
        assert!(kept.len() <= MAX_ERROR_LEN && kept.len() >= MAX_ERROR_LEN - 1);
        assert!(kept.chars().all(|c| c == 'é'));
    }
}
