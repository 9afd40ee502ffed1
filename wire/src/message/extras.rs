//! Version 3: what a request carries beside its [`DispatchRequest`](super::DispatchRequest)
//! (headers, scheduling fields, a required deployment, extensions), the bounds on headers a
//! welcome states.

use serde::{Deserialize, Serialize};

use crate::ownership::{Borrowed, Owned, Ownership};

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

/// Extras read field by field where they lie, or lent field by field: what
/// [`ExtrasRef::read`] gives.
pub type ExtrasView<'a> = RequestExtras<Borrowed<'a>>;

/// A request's extras lent, in two words: as they lie in a frame (checked once when it was
/// read) or from owned extras. Read their fields with [`ExtrasRef::read`].
#[derive(Clone, Copy)]
pub struct ExtrasRef<'a>(pub(crate) LentExtras<'a>);

#[derive(Clone, Copy)]
pub(crate) enum LentExtras<'a> {
    /// Extras with a field, as postcard lays them out, read once and found well formed; no
    /// bytes at all for no extras (nearly every request).
    Wire(&'a [u8]),
    /// Owned extras with a field.
    Lent(&'a RequestExtras),
}

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
