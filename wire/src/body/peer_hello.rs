//! `PeerHello` (kind 20) and `PeerHello3` (kind 32, the message's own serde form): the one
//! [`PeerHello`](crate::message::PeerHello).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::Chooses;
use crate::lower::Lower;
use crate::message::PeerAddress;

/// The body of kind `PeerHello`, version 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerHello {
    pub node_id: String,
    pub incarnation: u64,
    pub advertise: String,
    pub peers: Vec<PeerAddress>,
}

impl Chooses for crate::message::PeerHello {
    fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        if version >= 3 {
            return Ok(FrameKind::PeerHello3);
        }
        let refused = |field| EncodeError::Unsupported {
            kind: FrameKind::PeerHello,
            field,
            version,
        };
        if !self.features.is_empty() {
            return Err(refused("features"));
        }
        if !self.extensions.is_empty() {
            return Err(refused("extensions"));
        }
        crate::lower::in_version(FrameKind::PeerHello, version)
    }
}

impl Lower<crate::message::PeerHello> for PeerHello {
    fn lower(hello: &crate::message::PeerHello) -> Cow<'_, Self> {
        Cow::Owned(PeerHello {
            node_id: hello.node_id.clone(),
            incarnation: hello.incarnation,
            advertise: hello.advertise.clone(),
            peers: hello.peers.clone(),
        })
    }
}

impl From<PeerHello> for crate::message::PeerHello {
    fn from(hello: PeerHello) -> Self {
        crate::message::PeerHello {
            node_id: hello.node_id,
            incarnation: hello.incarnation,
            advertise: hello.advertise,
            peers: hello.peers,
            features: Vec::new(),
            extensions: Vec::new(),
        }
    }
}
