//! Channel names: `aion.dispatch.{namespace}.{task_queue}[.{node}]`, injective and invertible.
//!
//! Inside each segment `%` becomes `%25` and `.` becomes `%2E`; nothing else changes.
//! This module encodes exactly what it is given: the node normalizes an empty task queue
//! to `default` and an empty node to none *before* naming a pool, so routing tables never
//! hold two names for one pool.

/// Every channel name starts with this.
pub const CHANNEL_PREFIX: &str = "aion.dispatch.";

/// A parsed channel name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChannelAddress {
    pub namespace: String,
    pub task_queue: String,
    pub node: Option<String>,
}

/// Why a string is not a canonical channel name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelParseError {
    /// The name does not start with `aion.dispatch.`.
    #[error("channel name does not start with `{CHANNEL_PREFIX}`")]
    MissingPrefix,
    /// After the prefix there must be two or three segments.
    #[error("channel name has {found} segments after the prefix, expected 2 or 3")]
    SegmentCount { found: usize },
    /// A `%` not followed by `25` or `2E` (uppercase).
    #[error("segment {segment} has a non-canonical escape at byte {offset}")]
    InvalidEscape { segment: usize, offset: usize },
}

/// The channel name of a pool, optionally narrowed to one node.
pub fn dispatch_channel_name(namespace: &str, task_queue: &str, node: Option<&str>) -> String {
    let segments_len = escaped_len(namespace)
        + escaped_len(task_queue)
        + node.map_or(0, |node| 1 + escaped_len(node));
    let mut name = String::with_capacity(CHANNEL_PREFIX.len() + 1 + segments_len);
    name.push_str(CHANNEL_PREFIX);
    push_escaped(&mut name, namespace);
    name.push('.');
    push_escaped(&mut name, task_queue);
    if let Some(node) = node {
        name.push('.');
        push_escaped(&mut name, node);
    }
    name
}

/// The exact inverse of [`dispatch_channel_name`], accepting only canonical names.
///
/// # Errors
/// [`ChannelParseError`] for a wrong prefix, a wrong segment count or a non-canonical escape.
pub fn parse_channel_name(name: &str) -> Result<ChannelAddress, ChannelParseError> {
    let rest = name
        .strip_prefix(CHANNEL_PREFIX)
        .ok_or(ChannelParseError::MissingPrefix)?;
    let mut segments = rest.split('.');
    let namespace = segments.next();
    let task_queue = segments.next();
    let node = segments.next();
    let extra = segments.count();
    let (Some(namespace), Some(task_queue), 0) = (namespace, task_queue, extra) else {
        let found = rest.split('.').count();
        return Err(ChannelParseError::SegmentCount { found });
    };
    Ok(ChannelAddress {
        namespace: unescape(namespace, 0)?,
        task_queue: unescape(task_queue, 1)?,
        node: node.map(|node| unescape(node, 2)).transpose()?,
    })
}

fn is_reserved(byte: u8) -> bool {
    byte == b'%' || byte == b'.'
}

fn escaped_len(segment: &str) -> usize {
    segment.len() + 2 * segment.bytes().filter(|&b| is_reserved(b)).count()
}

fn push_escaped(out: &mut String, segment: &str) {
    let mut rest = segment;
    // `%` and `.` are ASCII, so every split point is a char boundary.
    while let Some(at) = rest.bytes().position(is_reserved) {
        let (plain, tail) = rest.split_at(at);
        out.push_str(plain);
        out.push_str(if tail.starts_with('%') { "%25" } else { "%2E" });
        rest = tail.get(1..).unwrap_or_default();
    }
    out.push_str(rest);
}

fn unescape(segment: &str, index: usize) -> Result<String, ChannelParseError> {
    let mut out = String::with_capacity(segment.len());
    let mut rest = segment;
    while let Some(at) = rest.find('%') {
        let (plain, tail) = rest.split_at(at);
        out.push_str(plain);
        if tail.starts_with("%25") {
            out.push('%');
        } else if tail.starts_with("%2E") {
            out.push('.');
        } else {
            return Err(ChannelParseError::InvalidEscape {
                segment: index,
                offset: segment.len() - tail.len(),
            });
        }
        rest = tail.get(3..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn pinned_names_match_the_engine() {
        assert_eq!(
            dispatch_channel_name("remote", "gpu", None),
            "aion.dispatch.remote.gpu"
        );
        assert_eq!(
            dispatch_channel_name("local", "norn", None),
            "aion.dispatch.local.norn"
        );
        assert_eq!(
            dispatch_channel_name("remote", "gpu", Some("box-7")),
            "aion.dispatch.remote.gpu.box-7"
        );
    }

    #[test]
    fn reserved_characters_are_escaped_per_segment() {
        assert_eq!(
            dispatch_channel_name("a.b", "%", None),
            "aion.dispatch.a%2Eb.%25"
        );
        assert_eq!(
            dispatch_channel_name("%2E", "x", None),
            "aion.dispatch.%252E.x"
        );
        assert_eq!(dispatch_channel_name(".", "x", None), "aion.dispatch.%2E.x");
    }

    #[test]
    fn segment_counts_cannot_collide() {
        let names = [
            dispatch_channel_name("a", "b", Some("c")),
            dispatch_channel_name("a", "b.c", None),
            dispatch_channel_name("a.b", "c", None),
        ];
        let distinct: HashSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), 3);
    }

    #[test]
    fn the_exhaustive_sweep_is_injective_and_round_trips() {
        let fields = ["a", "a.b", "a.", ".a", ".", "", "%", "%2E", "a%b", "%2."];
        let nodes = [
            None,
            Some("a"),
            Some("a.b"),
            Some("."),
            Some(""),
            Some("%2E"),
        ];
        let mut seen = HashSet::new();
        for namespace in fields {
            for task_queue in fields {
                for node in nodes {
                    let name = dispatch_channel_name(namespace, task_queue, node);
                    assert!(seen.insert(name.clone()), "collision on {name}");
                    let parsed = parse_channel_name(&name);
                    assert_eq!(
                        parsed,
                        Ok(ChannelAddress {
                            namespace: namespace.to_owned(),
                            task_queue: task_queue.to_owned(),
                            node: node.map(str::to_owned),
                        })
                    );
                }
            }
        }
        assert_eq!(seen.len(), fields.len() * fields.len() * nodes.len());
    }

    #[test]
    fn non_canonical_names_are_refused() {
        use ChannelParseError::*;
        let cases: [(&str, ChannelParseError); 8] = [
            (
                "aion.dispatch.a%2eb.c",
                InvalidEscape {
                    segment: 0,
                    offset: 1,
                },
            ),
            (
                "aion.dispatch.a.b%",
                InvalidEscape {
                    segment: 1,
                    offset: 1,
                },
            ),
            (
                "aion.dispatch.a.b.%41",
                InvalidEscape {
                    segment: 2,
                    offset: 0,
                },
            ),
            (
                "aion.dispatch.a.%2",
                InvalidEscape {
                    segment: 1,
                    offset: 0,
                },
            ),
            ("aion.dispatch.a", SegmentCount { found: 1 }),
            ("aion.dispatch.a.b.c.d", SegmentCount { found: 4 }),
            ("aion.dispatcha.b", MissingPrefix),
            ("AION.dispatch.a.b", MissingPrefix),
        ];
        for (name, expected) in cases {
            assert_eq!(parse_channel_name(name), Err(expected), "{name}");
        }
    }

    #[test]
    fn empty_segments_are_kept() {
        let parsed = parse_channel_name("aion.dispatch...");
        assert_eq!(
            parsed,
            Ok(ChannelAddress {
                namespace: String::new(),
                task_queue: String::new(),
                node: Some(String::new()),
            })
        );
    }
}
