//! W3C trace context in a dispatch's headers: a producer attaches a [`TraceContext`] to its
//! [`DispatchOptions`], a worker reads it back from the request's [`Extras`](crate::Extras).
//!
//! The headers are `traceparent` (`00-{trace id}-{parent id}-{flags}`, lowercase hex) and
//! `tracestate` (vendor entries, passed on as they are), as the W3C Trace Context
//! recommendation names them. With the `opentelemetry` feature, `otel` moves them to and
//! from an OpenTelemetry `Context` through a `TextMapPropagator`.

use std::fmt;
use std::str::FromStr;

use lintel_wire::Header;

use crate::options::DispatchOptions;

/// The header naming the trace and the caller's span.
pub const TRACEPARENT: &str = "traceparent";
/// The header of vendor-specific trace state.
pub const TRACESTATE: &str = "tracestate";

/// Why a `traceparent` value is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TraceParentError {
    /// Not the `00-...` shape.
    #[error("a traceparent is 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>")]
    Malformed,
    /// Version `ff`, which is not one.
    #[error("version ff is not a traceparent version")]
    InvalidVersion,
    /// A trace id of all zeros.
    #[error("a trace id of all zeros is invalid")]
    ZeroTraceId,
    /// A parent id of all zeros.
    #[error("a parent id of all zeros is invalid")]
    ZeroParentId,
    /// More than one `traceparent` header.
    #[error("more than one traceparent header")]
    Repeated,
}

/// A `traceparent`: the trace, the caller's span within it, and the trace flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace's id.
    pub trace_id: [u8; 16],
    /// The caller's span within the trace.
    pub parent_id: [u8; 8],
    /// Bit 0 is `sampled`.
    pub flags: u8,
}

impl TraceParent {
    /// True when the caller may have recorded its span (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id as the 32 lowercase hex digits it travels as.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }
}

impl FromStr for TraceParent {
    type Err = TraceParentError;

    /// Parses version 00 exactly; a later version by its first four fields, as the
    /// recommendation asks of a reader that knows only 00.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let head = text.get(..55).ok_or(TraceParentError::Malformed)?;
        let mut fields = head.split('-');
        let (Some(version), Some(trace), Some(parent), Some(flags), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err(TraceParentError::Malformed);
        };
        let [version] = unhex::<1>(version)?;
        if version == 0xff {
            return Err(TraceParentError::InvalidVersion);
        }
        let rest = text.get(55..).unwrap_or_default();
        if (version == 0 && !rest.is_empty()) || (!rest.is_empty() && !rest.starts_with('-')) {
            return Err(TraceParentError::Malformed);
        }
        let trace_id = unhex::<16>(trace)?;
        let parent_id = unhex::<8>(parent)?;
        let [flags] = unhex::<1>(flags)?;
        if trace_id == [0; 16] {
            return Err(TraceParentError::ZeroTraceId);
        }
        if parent_id == [0; 8] {
            return Err(TraceParentError::ZeroParentId);
        }
        Ok(Self {
            trace_id,
            parent_id,
            flags,
        })
    }
}

impl fmt::Display for TraceParent {
    /// The version-00 header value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.parent_id),
            self.flags
        )
    }
}

/// `N` bytes from exactly `2 * N` lowercase hex digits.
fn unhex<const N: usize>(text: &str) -> Result<[u8; N], TraceParentError> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return Err(TraceParentError::Malformed);
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        let nibble = |digit: u8| match digit {
            b'0'..=b'9' => Ok(digit - b'0'),
            b'a'..=b'f' => Ok(digit - b'a' + 10),
            _ => Err(TraceParentError::Malformed),
        };
        let (high, low) = match pair {
            [high, low] => (nibble(*high)?, nibble(*low)?),
            _ => return Err(TraceParentError::Malformed),
        };
        *byte = high << 4 | low;
    }
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut text, byte| {
            let _ = write!(text, "{byte:02x}");
            text
        })
}

/// A trace context as it travels: the `traceparent` and the `tracestate` that goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The `traceparent`.
    pub parent: TraceParent,
    /// The vendor entries, as they came; `None` when absent or empty.
    pub state: Option<String>,
}

impl TraceContext {
    /// A context of `parent` with no trace state.
    pub fn new(parent: TraceParent) -> Self {
        Self {
            parent,
            state: None,
        }
    }

    /// The trace context among `headers` (names lowercase, as they travel): `Ok(None)` with
    /// no `traceparent`; several `tracestate` headers are joined with commas.
    ///
    /// # Errors
    /// A [`TraceParentError`] when the `traceparent` is malformed or repeated.
    pub fn from_headers<'h, S: AsRef<str> + 'h>(
        headers: impl IntoIterator<Item = &'h Header<S>>,
    ) -> Result<Option<Self>, TraceParentError> {
        let mut parent = None;
        let mut state: Option<String> = None;
        for header in headers {
            let value = header.value.as_ref();
            match header.name.as_ref() {
                TRACEPARENT if parent.is_some() => return Err(TraceParentError::Repeated),
                TRACEPARENT => parent = Some(value.parse::<TraceParent>()?),
                TRACESTATE if value.trim().is_empty() => {}
                TRACESTATE => match &mut state {
                    Some(joined) => {
                        joined.push(',');
                        joined.push_str(value);
                    }
                    None => state = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        Ok(parent.map(|parent| Self { parent, state }))
    }
}

impl DispatchOptions {
    /// Attaches `context` as the `traceparent` and `tracestate` headers, replacing any the
    /// options already had.
    pub fn trace_context(mut self, context: &TraceContext) -> Self {
        self.extras
            .headers
            .retain(|header| header.name != TRACEPARENT && header.name != TRACESTATE);
        self = self.header(TRACEPARENT, context.parent.to_string());
        match &context.state {
            Some(state) if !state.is_empty() => self.header(TRACESTATE, state.clone()),
            _ => self,
        }
    }
}

/// The trace context to and from OpenTelemetry: [`inject`](otel::inject) a `Context` into a
/// dispatch's options, [`extract`](otel::extract) one from a pushed request's extras, through
/// the globally registered `TextMapPropagator` or one given.
#[cfg(feature = "opentelemetry")]
pub mod otel {
    use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
    use opentelemetry::{global, Context};

    use crate::{DispatchOptions, Extras};

    /// Headers to write into, through a propagator.
    struct Writer<'o>(&'o mut DispatchOptions);

    impl Injector for Writer<'_> {
        fn set(&mut self, key: &str, value: String) {
            let name = key.to_ascii_lowercase();
            let headers = &mut self.0.extras.headers;
            headers.retain(|header| header.name != name);
            headers.push(lintel_wire::Header::new(name, value));
        }
    }

    /// Headers to read from, through a propagator.
    struct Reader<'e>(&'e Extras);

    impl Extractor for Reader<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            let name = key.to_ascii_lowercase();
            self.0
                .headers
                .iter()
                .find(|header| header.name == name)
                .map(|header| header.value.as_str())
        }

        fn keys(&self) -> Vec<&str> {
            self.0
                .headers
                .iter()
                .map(|header| header.name.as_str())
                .collect()
        }
    }

    /// `options` carrying `context` as the global propagator writes it (W3C trace context
    /// with `opentelemetry_sdk`'s `TraceContextPropagator`).
    pub fn inject(mut options: DispatchOptions, context: &Context) -> DispatchOptions {
        global::get_text_map_propagator(|propagator| {
            propagator.inject_context(context, &mut Writer(&mut options));
        });
        options
    }

    /// `options` carrying the current context, as [`inject`] writes it.
    pub fn inject_current(options: DispatchOptions) -> DispatchOptions {
        inject(options, &Context::current())
    }

    /// As [`inject`], through `propagator`.
    pub fn inject_with(
        propagator: &dyn TextMapPropagator,
        mut options: DispatchOptions,
        context: &Context,
    ) -> DispatchOptions {
        propagator.inject_context(context, &mut Writer(&mut options));
        options
    }

    /// The context a pushed request carries, as the global propagator reads it; the current
    /// context's values with no remote span when it carries none.
    pub fn extract(extras: &Extras) -> Context {
        global::get_text_map_propagator(|propagator| extract_with(propagator, extras))
    }

    /// As [`extract`], through `propagator`.
    pub fn extract_with(propagator: &dyn TextMapPropagator, extras: &Extras) -> Context {
        propagator.extract(&Reader(extras))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_recommendations_example_parses_and_prints_back() {
        let parent: TraceParent = EXAMPLE.parse().expect("valid");
        assert_eq!(parent.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            parent.parent_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(parent.sampled());
        assert_eq!(parent.to_string(), EXAMPLE);
    }

    #[test]
    fn a_malformed_traceparent_is_refused_with_its_reason() {
        let cases = [
            ("", TraceParentError::Malformed),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
                TraceParentError::Malformed,
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                TraceParentError::Malformed,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
                TraceParentError::Malformed,
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceParentError::Malformed,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceParentError::InvalidVersion,
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                TraceParentError::ZeroTraceId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                TraceParentError::ZeroParentId,
            ),
        ];
        for (text, error) in cases {
            assert_eq!(text.parse::<TraceParent>(), Err(error), "{text:?}");
        }
        // A later version is read by its first four fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future";
        assert!(later.parse::<TraceParent>().is_ok());
    }

    #[test]
    fn a_context_attached_to_options_is_read_back_from_the_headers() {
        let context = TraceContext {
            parent: EXAMPLE.parse().expect("valid"),
            state: Some("congo=t61rcWkgMzE".into()),
        };
        let options = DispatchOptions::default()
            .header("traceparent", "00-stale")
            .header("x-tenant", "a")
            .trace_context(&context);
        let headers = &options.extras.headers;
        assert_eq!(headers.iter().filter(|h| h.name == TRACEPARENT).count(), 1);
        assert_eq!(TraceContext::from_headers(headers), Ok(Some(context)));
    }

    #[test]
    fn tracestate_headers_are_joined_and_a_repeated_traceparent_is_refused() {
        let headers = [
            Header::new("tracestate", "a=1"),
            Header::new("traceparent", EXAMPLE),
            Header::new("tracestate", "b=2"),
        ];
        let read = TraceContext::from_headers(&headers).expect("valid");
        assert_eq!(read.and_then(|c| c.state).as_deref(), Some("a=1,b=2"));
        let twice = [
            Header::new("traceparent", EXAMPLE),
            Header::new("traceparent", EXAMPLE),
        ];
        assert_eq!(
            TraceContext::from_headers(&twice),
            Err(TraceParentError::Repeated)
        );
        assert_eq!(
            TraceContext::from_headers(&[Header::new("x", "y")]),
            Ok(None)
        );
    }
}
