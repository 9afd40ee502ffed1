//! Version 3: the items of its lists, a request's header and a frame's tagged extension.
//!
//! Apart from the bodies that list them, so that ownership can name them without an import
//! circle.

use std::borrow::Borrow;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

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
