//! Built-in activities for demos, tests and benchmarks: `echo` and `sleep`.

use std::time::Duration;

use bytes::Bytes;
use lintel_client::{Handler, Request};
use lintel_wire::ActivityOutcome;

/// Names of the built-in activities.
pub const BUILT_IN: [&str; 2] = ["echo", "sleep"];

/// Longest `sleep` accepted, so a typo cannot park a worker slot for days.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// Runs `echo` (replies with its input) and `sleep` (input is milliseconds as text).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltIn;

impl Handler for BuiltIn {
    async fn handle(&self, request: Request) -> ActivityOutcome {
        match &*request.activity_type {
            "echo" => ActivityOutcome::Success(request.input),
            "sleep" => sleep(&request.input).await,
            other => ActivityOutcome::Failure {
                message: format!("unknown activity `{other}`"),
                retryable: false,
            },
        }
    }

    fn runs_briefly(&self) -> bool {
        true
    }
}

async fn sleep(input: &[u8]) -> ActivityOutcome {
    let millis = std::str::from_utf8(input)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    let Some(millis) = millis else {
        return ActivityOutcome::Failure {
            message: "sleep wants its input as milliseconds, e.g. `250`".into(),
            retryable: false,
        };
    };
    let duration = Duration::from_millis(millis);
    if duration > MAX_SLEEP {
        return ActivityOutcome::Failure {
            message: format!("sleep is capped at {} ms", MAX_SLEEP.as_millis()),
            retryable: false,
        };
    }
    tokio::time::sleep(duration).await;
    ActivityOutcome::Success(Bytes::from(format!("slept {millis} ms")))
}
