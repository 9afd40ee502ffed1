//! Where and how logs go: stderr through tracing, as text or one JSON object per line.
//!
//! The JSON lines are written here rather than by tracing-subscriber's JSON formatter, which
//! records every field that is not a number, a bool or a string as the string of its `Debug`:
//! a list would be `"namespaces":"[\"demo\"]"`. Here the fields [`LIST_FIELDS`] names, which
//! the node writes as JSON arrays ([`lintel::logfields::List`]), stay arrays. (tracing's
//! `valuable` support would carry the type instead, but needs `--cfg tracing_unstable` in
//! every build, which a user's own `RUSTFLAGS` silently drops.)

use std::io::IsTerminal;

use lintel::logfields::LIST_FIELDS;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// `--log-format` values: `text` lines, coloured only when stderr is a terminal, or `json`,
/// one object per line for log shippers. Variants carry no doc comment so that `--help` stays
/// one line per flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the subscriber: `RUST_LOG` when set and valid, `default_filter` otherwise.
pub(super) fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // A closed stderr costs the log lines, never a task: tracing's report of the failed write
    // would itself be a write to stderr, which panics.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.with_ansi(false).event_format(JsonLines).try_init(),
    };
}

/// One JSON object per event: `timestamp` (RFC 3339, UTC, microseconds), `level`, `fields`
/// (`message` among them) and `target`, as tracing-subscriber's JSON lines have them. The node
/// logs in no spans, so none are written.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let mut line = Map::new();
        let now = humantime::format_rfc3339_micros(std::time::SystemTime::now());
        line.insert("timestamp".into(), Value::String(now.to_string()));
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert("fields".into(), Value::Object(fields.0));
        line.insert("target".into(), Value::String(meta.target().to_owned()));
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields as JSON values.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        self.0.insert(field.name().to_owned(), value);
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        let list = LIST_FIELDS
            .contains(&field.name())
            .then(|| serde_json::from_str::<Value>(&text).ok())
            .flatten()
            .filter(Value::is_array);
        self.put(field, list.unwrap_or(Value::String(text)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}
