//! Version 3: what a request carries beside its [`DispatchRequest`](super::DispatchRequest)
//! (headers, scheduling fields, a required deployment), and the tagged extensions a frame may
//! grow by.

use std::borrow::Borrow;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::ownership::{Borrowed, Owned, Ownership};

/// One name/value pair of a request's headers; `S` holds the texts (`&str` when read in place).
///
/// The name is lowercase ASCII token characters (see [`is_header_name`]); the value any UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Header<S = String> {
    pub name: S,
    pub value: S,
}

impl Header {
    /// A header named `name` (written lowercase, as it travels) with `value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into().to_ascii_lowercase(),
            value: value.into(),
        }
    }
}

/// A header read in place or lent.
pub type HeaderRef<'a> = Header<&'a str>;

/// True when `name` is a header name: one or more lowercase ASCII letters, digits or
/// `! # $ % & ' * + - . ^ _ ` | ~`. Its length is bounded by the node's `max_name_len`.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&byte)
        })
}

/// A tagged value a frame may carry; `B` holds the value (`&[u8]` when read in place).
///
/// A receiver ignores an extension whose tag it does not know unless it is `critical`, and
/// refuses a frame with an unknown critical one. No tag is allocated in version 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Extension<B = Bytes> {
    pub tag: u32,
    pub critical: bool,
    pub value: B,
}

/// An extension read in place or lent.
pub type ExtensionRef<'a> = Extension<&'a [u8]>;

/// The tag of the first critical extension among `extensions` that `known` does not accept.
pub fn unknown_critical<B, E: Borrow<Extension<B>>>(
    extensions: impl IntoIterator<Item = E>,
    known: impl Fn(u32) -> bool,
) -> Option<u32> {
    extensions
        .into_iter()
        .map(|extension| {
            let extension = extension.borrow();
            (extension.tag, extension.critical)
        })
        .find(|&(tag, critical)| critical && !known(tag))
        .map(|(tag, _)| tag)
}

/// The fields a version-3 request carries after its `DispatchRequest`, in wire order. All
/// absent (the [`Default`]) is what a version-2 request means.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "O::Str: Serialize, O::Headers: Serialize, O::Extensions: Serialize",
    deserialize = "O::Str: Deserialize<'de>, O::Headers: Deserialize<'de>, O::Extensions: Deserialize<'de>"
))]
pub struct RequestExtras<O: Ownership = Owned> {
    /// In order; a name may repeat, and its values stay in order.
    pub headers: O::Headers,
    /// 1 (highest) to 5 (lowest); `None` is 3.
    pub priority: Option<u8>,
    /// The key whose share of a full pool the dispatch draws on; `None` is the shared key.
    pub fairness_key: Option<O::Str>,
    /// The key's weight in thousandths (1000 is 1.0), 1 to 1,000,000; `None` is 1000.
    pub fairness_weight: Option<u32>,
    /// Only workers registered with this deployment are eligible.
    pub deployment: Option<O::Str>,
    pub extensions: O::Extensions,
}

/// Extras read in place or lent.
pub type ExtrasRef<'a> = RequestExtras<Borrowed<'a>>;

/// Bounds on a request's headers, sent in `Welcome3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderLimits {
    /// Most headers in one request.
    pub max_headers: u32,
    /// Most bytes of header names plus values in one request.
    pub max_header_bytes: u32,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        Self {
            max_headers: 32,
            max_header_bytes: 8192,
        }
    }
}

/// The names a `Welcome3` or `PeerHello3` lists in `features`: what its sender implements. A
/// client must not rely on one its node does not list.
pub mod feature {
    /// Requests carry headers to the worker, across a relay too.
    pub const HEADERS: &str = "headers";
    /// Waiters are ordered by a request's priority.
    pub const PRIORITY: &str = "priority";
    /// Capacity is shared among fairness keys by weight.
    pub const FAIRNESS: &str = "fairness";
    /// Workers register a deployment and a request may require one.
    pub const DEPLOYMENTS: &str = "deployments";
    /// `Subscribe` is answered with the node's lifecycle events.
    pub const EVENTS: &str = "events";
    /// `StatusQuery` is answered with a `StatusDocument`.
    pub const STATUS_DOCUMENT: &str = "status-document";
    /// A new worker is selected only once it has answered pings.
    pub const PROBATION: &str = "probation";
    /// A peer retiring a link says `Farewell`.
    pub const FAREWELL: &str = "farewell";
    /// Relays survive a link's replacement (`RelayAck`, `Resume`, `Resumed`).
    pub const RELAY_RESUME: &str = "relay-resume";
    /// A pool's current deployment is shared across the mesh (`PoolSettings`).
    pub const POOL_SETTINGS: &str = "pool-settings";

    /// Every feature name of version 3.
    pub const ALL: [&str; 10] = [
        HEADERS,
        PRIORITY,
        FAIRNESS,
        DEPLOYMENTS,
        EVENTS,
        STATUS_DOCUMENT,
        PROBATION,
        FAREWELL,
        RELAY_RESUME,
        POOL_SETTINGS,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_lowercase_tokens() {
        for name in ["traceparent", "x-b3-traceid", "a.b", "~!#$%&'*+-^_`|"] {
            assert!(is_header_name(name), "{name}");
        }
        for name in ["", "Traceparent", "a b", "a:b", "é", "a\"b", "(x)"] {
            assert!(!is_header_name(name), "{name}");
        }
        assert_eq!(Header::new("TraceParent", "v").name, "traceparent");
    }

    #[test]
    fn an_unknown_critical_extension_is_named_and_a_known_or_plain_one_passes() {
        let extensions = [
            Extension {
                tag: 1,
                critical: false,
                value: Bytes::new(),
            },
            Extension {
                tag: 2,
                critical: true,
                value: Bytes::new(),
            },
        ];
        assert_eq!(unknown_critical(&extensions, |_| false), Some(2));
        assert_eq!(unknown_critical(&extensions, |tag| tag == 2), None);
    }
}
