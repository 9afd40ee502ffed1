//! Built-in activities for demos, tests and benchmarks: `echo`, `sleep` and `headers`.

use std::time::Duration;

use bytes::Bytes;
use lintel_client::{Extras, Handler, Request};
use lintel_wire::ActivityOutcome;

/// Names of the built-in activities.
pub const BUILT_IN: [&str; 3] = ["echo", "sleep", "headers"];

/// Longest `sleep` accepted, so a typo cannot park a worker slot for days.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// Runs `echo` (replies with its input), `sleep` (input is milliseconds as text) and
/// `headers` (replies with the request's headers as a JSON object; see [`headers_json`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltIn;

impl Handler for BuiltIn {
    async fn handle(&self, request: Request) -> ActivityOutcome {
        self.handle_with(request, Extras::default()).await
    }

    async fn handle_with(&self, request: Request, extras: Extras) -> ActivityOutcome {
        match &*request.activity_type {
            "echo" => ActivityOutcome::Success(request.input),
            "sleep" => sleep(&request.input).await,
            "headers" => ActivityOutcome::Success(Bytes::from(headers_json(&extras))),
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
}
