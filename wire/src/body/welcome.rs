//! `Welcome` (kind 1) and `Welcome3` (kind 30): the one [`Welcome`](crate::message::Welcome).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::Chooses;
use crate::lower::Lower;
use crate::message::{HeaderLimits, Limits};

/// The body of kind `Welcome`, versions 1 and 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: u16,
    pub node_id: String,
    pub pid: u64,
    pub limits: Limits,
}

/// The body of kind `Welcome3`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome3 {
    pub version: u16,
    pub node_id: String,
    pub pid: u64,
    pub limits: Limits,
    pub header_limits: HeaderLimits,
    pub features: Vec<String>,
}

/// What a version-3 welcome that states no header limits says: no room for a header.
const NO_HEADERS: HeaderLimits = HeaderLimits {
    max_headers: 0,
    max_header_bytes: 0,
};

impl Chooses for crate::message::Welcome {
    fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        if version >= 3 {
            return Ok(FrameKind::Welcome3);
        }
        let refused = |field| EncodeError::Unsupported {
            kind: FrameKind::Welcome,
            field,
            version,
        };
        if self.header_limits.is_some() {
            return Err(refused("header_limits"));
        }
        if !self.features.is_empty() {
            return Err(refused("features"));
        }
        Ok(FrameKind::Welcome)
    }
}

impl Lower<crate::message::Welcome> for Welcome {
    fn lower(welcome: &crate::message::Welcome) -> Cow<'_, Self> {
        Cow::Owned(Welcome {
            version: welcome.version,
            node_id: welcome.node_id.clone(),
            pid: welcome.pid,
            limits: welcome.limits.clone(),
        })
    }
}

impl Lower<crate::message::Welcome> for Welcome3 {
    fn lower(welcome: &crate::message::Welcome) -> Cow<'_, Self> {
        Cow::Owned(Welcome3 {
            version: welcome.version,
            node_id: welcome.node_id.clone(),
            pid: welcome.pid,
            limits: welcome.limits.clone(),
            header_limits: welcome.header_limits.unwrap_or(NO_HEADERS),
            features: welcome.features.clone(),
        })
    }
}

impl From<Welcome> for crate::message::Welcome {
    fn from(welcome: Welcome) -> Self {
        crate::message::Welcome {
            version: welcome.version,
            node_id: welcome.node_id,
            pid: welcome.pid,
            limits: welcome.limits,
            header_limits: None,
            features: Vec::new(),
        }
    }
}

impl From<Welcome3> for crate::message::Welcome {
    fn from(welcome: Welcome3) -> Self {
        crate::message::Welcome {
            version: welcome.version,
            node_id: welcome.node_id,
            pid: welcome.pid,
            limits: welcome.limits,
            header_limits: Some(welcome.header_limits),
            features: welcome.features,
        }
    }
}
