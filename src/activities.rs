//! Built-in activities for demos, tests and benchmarks: `echo`, `sleep` and `headers`.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use lintel_client::{Extras, Handler, Heartbeat, Request};
use lintel_wire::ActivityOutcome;

/// Names of the built-in activities.
pub const BUILT_IN: [&str; 3] = ["echo", "sleep", "headers"];

/// Longest `sleep` accepted, so a typo cannot park a worker slot for days.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// Runs `echo` (replies with its input), `sleep` (input is milliseconds as text; it heartbeats
/// while it sleeps, see [`heartbeat_every`]) and `headers` (replies with the request's headers
/// as a JSON object; see [`headers_json`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltIn;

impl Handler for BuiltIn {
    fn handle(&self, request: Request) -> impl Future<Output = ActivityOutcome> + Send {
        self.handle_with(request, Extras::default())
    }

    /// Reads the request before it returns, so its future holds an answer or a sleep, never
    /// the request and its extras: a small future to allocate and move for every dispatch.
    fn handle_with(
        &self,
        request: Request,
        extras: Extras,
    ) -> impl Future<Output = ActivityOutcome> + Send {
        let step = match &*request.activity_type {
            "echo" => Step::Answer(ActivityOutcome::Success(request.input)),
            "sleep" => match sleep_for(&request.input) {
                Step::Sleep(duration, _, _) => {
                    let every = heartbeat_every(&extras);
                    Step::Sleep(duration, request.heartbeater(), every)
                }
                answer => answer,
            },
            "headers" => Step::Answer(ActivityOutcome::Success(Bytes::from(headers_json(&extras)))),
            other => Step::Answer(ActivityOutcome::Failure {
                message: format!("unknown activity `{other}`"),
                retryable: false,
            }),
        };
        async move {
            match step {
                Step::Answer(outcome) => outcome,
                Step::Sleep(duration, heartbeat, every) => {
                    sleep_beating(duration, &heartbeat, every).await;
                    let slept = format!("slept {} ms", duration.as_millis());
                    ActivityOutcome::Success(Bytes::from(slept))
                }
            }
        }
    }

    fn runs_briefly(&self) -> bool {
        true
    }
}

/// The request's headers as a JSON object, name to value; a name that came more than once
/// maps to an array of its values, in order.
pub fn headers_json(extras: &Extras) -> String {
    let mut object = serde_json::Map::new();
    for header in &extras.headers {
        let value = serde_json::Value::from(header.value.as_str());
        match object.get_mut(header.name.as_str()) {
            Some(serde_json::Value::Array(values)) => values.push(value),
            Some(first) => *first = serde_json::Value::Array(vec![first.take(), value]),
            None => {
                object.insert(header.name.to_string(), value);
            }
        }
    }
    serde_json::Value::Object(object).to_string()
}

/// What a built-in activity does once its request is read.
enum Step {
    Answer(ActivityOutcome),
    /// Sleep this long, heartbeating this often.
    Sleep(Duration, Heartbeat, Duration),
}

/// How often `sleep` heartbeats: three times per heartbeat timeout when the request states
/// one, else once a second (its progress, for a producer that asked).
pub fn heartbeat_every(extras: &Extras) -> Duration {
    match extras.heartbeat_timeout() {
        Ok(Some(timeout)) => (timeout / 3).max(Duration::from_millis(1)),
        _ => Duration::from_secs(1),
    }
}

/// Sleeps `duration`, sending `heartbeat` every `every` with how long it has slept so far;
/// a heartbeat that cannot be sent is skipped.
async fn sleep_beating(duration: Duration, heartbeat: &Heartbeat, every: Duration) {
    let started = tokio::time::Instant::now();
    let until = started + duration;
    let Some(first) = started.checked_add(every) else {
        tokio::time::sleep_until(until).await;
        return;
    };
    let mut beats = tokio::time::interval_at(first, every);
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return,
            _ = beats.tick() => {
                let slept = started.elapsed().as_millis();
                let details = format!("slept {slept} of {} ms", duration.as_millis());
                let _ = heartbeat.beat(details);
            }
        }
    }
}

/// How long `sleep` waits (its input is milliseconds as text), or the failure it answers.
fn sleep_for(input: &[u8]) -> Step {
    let millis = std::str::from_utf8(input)
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    let Some(millis) = millis else {
        return Step::Answer(ActivityOutcome::Failure {
            message: "sleep wants its input as milliseconds, e.g. `250`".into(),
            retryable: false,
        });
    };
    let duration = Duration::from_millis(millis);
    if duration > MAX_SLEEP {
        return Step::Answer(ActivityOutcome::Failure {
            message: format!("sleep is capped at {} ms", MAX_SLEEP.as_millis()),
            retryable: false,
        });
    }
    Step::Sleep(duration, Heartbeat::default(), Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use lintel_wire::Header;

    use super::*;

    #[test]
    fn headers_are_an_object_and_a_repeated_name_an_array_in_order() {
        let extras = Extras {
            headers: [("traceparent", "00-t"), ("x", "1"), ("x", "2"), ("x", "3")]
                .into_iter()
                .map(|(name, value)| Header {
                    name: name.into(),
                    value: value.into(),
                })
                .collect(),
            ..Extras::default()
        };
        assert_eq!(
            headers_json(&extras),
            r#"{"traceparent":"00-t","x":["1","2","3"]}"#
        );
        assert_eq!(headers_json(&Extras::default()), "{}");
    }

    fn request(activity: &str, input: &'static [u8]) -> Request {
        Request::new("ns", activity, Bytes::from_static(input))
    }

    fn failure(outcome: ActivityOutcome) -> String {
        match outcome {
            ActivityOutcome::Failure { message, retryable } => {
                assert!(!retryable);
                message
            }
            ActivityOutcome::Success(output) => panic!("expected a failure, got {output:?}"),
        }
    }

    #[tokio::test]
    async fn echo_answers_its_input_and_sleep_answers_after_waiting() {
        let echoed = BuiltIn.handle(request("echo", b"hi")).await;
        assert_eq!(echoed, ActivityOutcome::Success(Bytes::from_static(b"hi")));
        let slept = BuiltIn.handle(request("sleep", b" 1 ")).await;
        assert_eq!(slept, ActivityOutcome::Success(Bytes::from("slept 1 ms")));
    }

    #[tokio::test]
    async fn a_bad_sleep_or_an_unknown_activity_fails_without_retry() {
        let garbled = failure(BuiltIn.handle(request("sleep", b"soon")).await);
        assert!(garbled.contains("milliseconds"), "{garbled}");
        let endless = failure(BuiltIn.handle(request("sleep", b"3600001")).await);
        assert!(endless.contains("capped"), "{endless}");
        let unknown = failure(BuiltIn.handle(request("juggle", b"")).await);
        assert_eq!(unknown, "unknown activity `juggle`");
    }
}
