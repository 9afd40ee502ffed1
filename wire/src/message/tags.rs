//! Version 4: the extension tags allocated, and the typed fields they carry.
//!
//! Tags are numbered once across every body that carries extensions and never reused. Above
//! the codec each is a typed field, read and written through the accessors here
//! ([`RequestExtras::heartbeat_timeout`], [`RequestExtras::progress`],
//! [`PeerHello::lost_link_to`]): no caller builds a raw extension for an allocated tag. The
//! extension list stays what the wire carries, so a frame reads and writes back byte for byte.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use super::extras::{ExtrasView, RequestExtras};
use super::items::{Extension, ExtensionRef};
use super::peer::PeerHello;
use crate::cursor::{varint_len, Listed, Reader};
use crate::dialect::FeatureSet;
use crate::ownership::Compact;

/// The tags allocated, each with the body it goes in, its value and whether senders mark it
/// critical (PROTOCOL.md section 4, `Extension`).
pub mod tag {
    /// In `RequestExtras`, critical: the request's heartbeat timeout in milliseconds, a varint
    /// of 1 to [`MAX_HEARTBEAT_TIMEOUT_MS`](super::MAX_HEARTBEAT_TIMEOUT_MS).
    pub const HEARTBEAT_TIMEOUT: u32 = 1;
    /// In `RequestExtras`, not critical: the producer wants the dispatch's `Progress`; an
    /// empty value.
    pub const PROGRESS: u32 = 2;
    /// In `PeerHello3`, not critical: the receiver's incarnation the sender held a link to
    /// and lost, a varint.
    pub const LOST_LINK: u32 = 3;

    /// True for a tag this release allocated.
    pub fn is_allocated(tag: u32) -> bool {
        matches!(tag, HEARTBEAT_TIMEOUT | PROGRESS | LOST_LINK)
    }

    /// The feature a node lists when it honours `tag`; `None` for a tag of no feature or one
    /// not allocated.
    pub fn feature(tag: u32) -> Option<&'static str> {
        match tag {
            HEARTBEAT_TIMEOUT => Some(crate::feature::HEARTBEAT_TIMEOUT),
            PROGRESS => Some(crate::feature::PROGRESS),
            _ => None,
        }
    }
}

/// What a receiver refuses as `Unsupported` because it does not implement it, naming the
/// feature where one is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotImplemented {
    /// A critical extension of a tag no release allocated.
    #[error("extension {tag} is critical and unknown to this node")]
    UnknownCritical { tag: u32 },
    /// A critical extension of an allocated tag whose feature the receiver does not list.
    #[error("extension {tag} needs the feature `{feature}`, which this node does not implement")]
    Extension { tag: u32, feature: &'static str },
    /// A frame of a feature the receiver does not list.
    #[error("{kind} needs the feature `{feature}`, which this node does not implement")]
    Kind {
        kind: crate::kind::FrameKind,
        feature: &'static str,
    },
}

impl NotImplemented {
    /// The feature it needs, when one would make it implemented.
    pub fn feature(&self) -> Option<&'static str> {
        match self {
            NotImplemented::UnknownCritical { .. } => None,
            NotImplemented::Extension { feature, .. } | NotImplemented::Kind { feature, .. } => {
                Some(feature)
            }
        }
    }

    /// The first critical extension among `extensions` a receiver that implements
    /// `implemented` cannot honour: of a tag not allocated, or of a feature not implemented.
    pub fn critical<B, E: std::borrow::Borrow<Extension<B>>>(
        extensions: impl IntoIterator<Item = E>,
        implemented: FeatureSet,
    ) -> Option<Self> {
        extensions.into_iter().find_map(|extension| {
            let extension = extension.borrow();
            if !extension.critical {
                return None;
            }
            let tag = extension.tag;
            match tag::feature(tag) {
                Some(feature) if !implemented.contains(FeatureSet::named([feature])) => {
                    Some(NotImplemented::Extension { tag, feature })
                }
                Some(_) => None,
                None if tag::is_allocated(tag) => None,
                None => Some(NotImplemented::UnknownCritical { tag }),
            }
        })
    }

    /// `kind` when its feature is not among `implemented`.
    pub fn kind(kind: crate::kind::FrameKind, implemented: FeatureSet) -> Option<Self> {
        let feature = kind.feature()?;
        (!implemented.contains(FeatureSet::named([feature])))
            .then_some(NotImplemented::Kind { kind, feature })
    }
}

/// The longest heartbeat timeout a request states: 7 days, the bound of every wait.
pub const MAX_HEARTBEAT_TIMEOUT_MS: u64 = 604_800_000;

/// An allocated extension whose value does not read as its tag says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ExtensionError {
    /// The value is not the encoding its tag states (a canonical varint, or empty).
    #[error("extension {tag} does not hold what its tag states")]
    Malformed { tag: u32 },
    /// The value reads but lies outside its tag's bounds.
    #[error("extension {tag} holds {value}, outside its bounds")]
    OutOfRange { tag: u32, value: u64 },
}

/// The value of the first extension of `tag`.
fn value_of<'a>(
    mut extensions: impl Iterator<Item = ExtensionRef<'a>>,
    tag: u32,
) -> Option<&'a [u8]> {
    extensions
        .find(|extension| extension.tag == tag)
        .map(|extension| extension.value)
}

/// `value` read as one canonical varint and nothing else.
fn varint(value: &[u8], tag: u32) -> Result<u64, ExtensionError> {
    let mut reader = Reader::of(value);
    match reader.u64() {
        Ok(read) if reader.left() == 0 && varint_len(read) == value.len() => Ok(read),
        _ => Err(ExtensionError::Malformed { tag }),
    }
}

/// The canonical varint of `value`.
fn varint_bytes(mut value: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(varint_len(value));
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
    out.freeze()
}

/// Replaces every extension of `tag` in `extensions` with one of `value`, or none.
fn put(extensions: &mut Vec<Extension>, tag: u32, critical: bool, value: Option<Bytes>) {
    extensions.retain(|extension| extension.tag != tag);
    if let Some(value) = value {
        extensions.push(Extension {
            tag,
            critical,
            value,
        });
    }
}

fn heartbeat_timeout<'a>(
    extensions: impl Iterator<Item = ExtensionRef<'a>>,
) -> Result<Option<Duration>, ExtensionError> {
    let tag = tag::HEARTBEAT_TIMEOUT;
    let Some(value) = value_of(extensions, tag) else {
        return Ok(None);
    };
    match varint(value, tag)? {
        ms @ 1..=MAX_HEARTBEAT_TIMEOUT_MS => Ok(Some(Duration::from_millis(ms))),
        value => Err(ExtensionError::OutOfRange { tag, value }),
    }
}

fn progress<'a>(extensions: impl Iterator<Item = ExtensionRef<'a>>) -> bool {
    value_of(extensions, tag::PROGRESS).is_some()
}

impl ExtrasView<'_> {
    /// The heartbeat timeout the request states (tag 1), if any.
    ///
    /// # Errors
    /// [`ExtensionError`] for a value that is not a canonical varint of 1 to
    /// [`MAX_HEARTBEAT_TIMEOUT_MS`].
    pub fn heartbeat_timeout(&self) -> Result<Option<Duration>, ExtensionError> {
        heartbeat_timeout(self.extensions.iter())
    }

    /// True when the producer wants the dispatch's progress (tag 2).
    pub fn progress(&self) -> bool {
        progress(self.extensions.iter())
    }
}

impl RequestExtras {
    /// The heartbeat timeout the request states (tag 1), if any.
    ///
    /// # Errors
    /// As [`ExtrasView::heartbeat_timeout`].
    pub fn heartbeat_timeout(&self) -> Result<Option<Duration>, ExtensionError> {
        self.view().heartbeat_timeout()
    }

    /// States a heartbeat timeout (tag 1, critical), in whole milliseconds within 1 to
    /// [`MAX_HEARTBEAT_TIMEOUT_MS`], or none.
    pub fn set_heartbeat_timeout(&mut self, timeout: Option<Duration>) {
        let ms = timeout.map(|timeout| {
            let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            ms.clamp(1, MAX_HEARTBEAT_TIMEOUT_MS)
        });
        let tag = tag::HEARTBEAT_TIMEOUT;
        put(&mut self.extensions, tag, true, ms.map(varint_bytes));
    }

    /// True when the producer wants the dispatch's progress (tag 2).
    pub fn progress(&self) -> bool {
        self.view().progress()
    }

    /// Asks for the dispatch's progress (tag 2, not critical), or not.
    pub fn set_progress(&mut self, wanted: bool) {
        let value = wanted.then(Bytes::new);
        put(&mut self.extensions, tag::PROGRESS, false, value);
    }
}

impl RequestExtras<Compact> {
    /// The heartbeat timeout the request states (tag 1), if any.
    ///
    /// # Errors
    /// As [`ExtrasView::heartbeat_timeout`].
    pub fn heartbeat_timeout(&self) -> Result<Option<Duration>, ExtensionError> {
        heartbeat_timeout(self.extensions.iter().map(|extension| extension.lend()))
    }

    /// True when the producer wants the dispatch's progress (tag 2).
    pub fn progress(&self) -> bool {
        progress(self.extensions.iter().map(|extension| extension.lend()))
    }
}

impl PeerHello {
    /// The receiver's incarnation the sender held a link to and lost (tag 3), if it says so.
    /// Not critical: a value that does not read is no word at all.
    pub fn lost_link_to(&self) -> Option<u64> {
        let extensions = self.extensions.iter().map(|extension| extension.lend());
        let value = value_of(extensions, tag::LOST_LINK)?;
        varint(value, tag::LOST_LINK).ok()
    }

    /// Says the sender held a link to the receiver's `incarnation` and lost it (tag 3, not
    /// critical), or says nothing of it.
    pub fn set_lost_link_to(&mut self, incarnation: Option<u64>) {
        let value = incarnation.map(varint_bytes);
        put(&mut self.extensions, tag::LOST_LINK, false, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature;

    #[test]
    fn typed_fields_are_written_as_their_tags_and_read_back() {
        let mut extras = RequestExtras::default();
        extras.set_heartbeat_timeout(Some(Duration::from_millis(300)));
        extras.set_progress(true);
        assert_eq!(
            extras.extensions,
            [
                Extension {
                    tag: 1,
                    critical: true,
                    value: Bytes::from_static(&[0xac, 0x02]),
                },
                Extension {
                    tag: 2,
                    critical: false,
                    value: Bytes::new(),
                },
            ]
        );
        assert_eq!(
            extras.heartbeat_timeout(),
            Ok(Some(Duration::from_millis(300)))
        );
        assert!(extras.progress());
        extras.set_heartbeat_timeout(None);
        extras.set_progress(false);
        assert_eq!(extras, RequestExtras::default());

        let mut hello = PeerHello::default();
        hello.set_lost_link_to(Some(1_234_567_890_123));
        assert_eq!(hello.lost_link_to(), Some(1_234_567_890_123));
        hello.set_lost_link_to(None);
        assert!(hello.extensions.is_empty());
    }

    #[test]
    fn a_value_that_does_not_read_as_its_tag_says_is_named() {
        let with = |value: &'static [u8]| -> RequestExtras {
            RequestExtras {
                extensions: vec![Extension {
                    tag: 1,
                    critical: true,
                    value: Bytes::from_static(value),
                }],
                ..RequestExtras::default()
            }
        };
        let malformed = Err(ExtensionError::Malformed { tag: 1 });
        for value in [&[][..], &[0x80], &[0x80, 0x00], &[0x05, 0x00]] {
            assert_eq!(with(value).heartbeat_timeout(), malformed, "{value:?}");
        }
        assert_eq!(
            with(&[0x00]).heartbeat_timeout(),
            Err(ExtensionError::OutOfRange { tag: 1, value: 0 })
        );
        let hello = PeerHello {
            extensions: vec![Extension {
                tag: 3,
                critical: false,
                value: Bytes::from_static(&[0x80]),
            }],
            ..PeerHello::default()
        };
        assert_eq!(hello.lost_link_to(), None);
        assert_eq!(tag::feature(1), Some(feature::HEARTBEAT_TIMEOUT));
        assert_eq!(tag::feature(3), None);
        assert_eq!(
            NotImplemented::critical(&with(&[0x05]).extensions, FeatureSet::NONE),
            Some(NotImplemented::Extension {
                tag: 1,
                feature: feature::HEARTBEAT_TIMEOUT
            })
        );
        assert_eq!(
            NotImplemented::critical(&with(&[0x05]).extensions, FeatureSet::HEARTBEAT_TIMEOUT),
            None
        );
        let unknown = [Extension {
            tag: 9,
            critical: true,
            value: Bytes::new(),
        }];
        assert_eq!(
            NotImplemented::critical(&unknown, FeatureSet::ALL),
            Some(NotImplemented::UnknownCritical { tag: 9 })
        );
        let compact = with(&[0x05]).view().to_compact();
        assert_eq!(
            compact.heartbeat_timeout(),
            Ok(Some(Duration::from_millis(5)))
        );
    }
}
