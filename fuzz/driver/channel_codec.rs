//! Channel names: `parse_channel_name` accepts exactly the image of `dispatch_channel_name`,
//! and the two are inverse.
//!
//! The input is read twice: as a candidate name (lossy UTF-8), and through `arbitrary` as a
//! `(namespace, task_queue, node)` triple. Any violated invariant panics, which is a finding.
use arbitrary::{Arbitrary, Unstructured};
use lintel_wire::channel::{
    dispatch_channel_name, parse_channel_name, ChannelAddress, ChannelParseError, CHANNEL_PREFIX,
};

#[derive(Debug, Arbitrary)]
struct Triple {
    namespace: String,
    task_queue: String,
    node: Option<String>,
}

/// Checks every invariant above on the input `data`; a violated one panics.
pub fn run(data: &[u8]) {
    check_name(&String::from_utf8_lossy(data));
    if let Ok(triple) = Triple::arbitrary_take_rest(Unstructured::new(data)) {
        check_triple(triple);
    }
}

/// A name that parses re-encodes to itself; a refused name is refused for the stated reason.
fn check_name(name: &str) {
    match parse_channel_name(name) {
        Ok(address) => {
            let again = dispatch_channel_name(
                &address.namespace,
                &address.task_queue,
                address.node.as_deref(),
            );
            assert_eq!(again, name, "accepted a non-canonical name: {address:?}");
        }
        Err(ChannelParseError::MissingPrefix) => {
            assert!(!name.starts_with(CHANNEL_PREFIX));
        }
        Err(ChannelParseError::SegmentCount { found }) => {
            let rest = name.strip_prefix(CHANNEL_PREFIX).expect("has the prefix");
            assert_eq!(found, rest.split('.').count());
            assert!(found != 2 && found != 3);
        }
        Err(ChannelParseError::InvalidEscape { segment, offset }) => {
            let rest = name.strip_prefix(CHANNEL_PREFIX).expect("has the prefix");
            let bad = rest.split('.').nth(segment).expect("segment exists");
            let tail = bad.get(offset..).expect("offset on a char boundary");
            assert!(
                tail.starts_with('%'),
                "{name:?}: no % at {segment}/{offset}"
            );
            assert!(!tail.starts_with("%25") && !tail.starts_with("%2E"));
        }
    }
}

/// Every triple names a channel that parses back to exactly that triple.
fn check_triple(triple: Triple) {
    let name = dispatch_channel_name(
        &triple.namespace,
        &triple.task_queue,
        triple.node.as_deref(),
    );
    let expected = ChannelAddress {
        namespace: triple.namespace,
        task_queue: triple.task_queue,
        node: triple.node,
    };
    assert_eq!(parse_channel_name(&name), Ok(expected), "name {name:?}");
}
