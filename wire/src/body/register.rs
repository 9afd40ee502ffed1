//! `Register` (kind 3) and `Register3` (kind 29, the message's own serde form): the one
//! [`Register`](crate::message::Register).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::EncodeError;
use crate::kind::FrameKind;
use crate::lower::Chooses;
use crate::lower::Lower;

/// The body of kind `Register`: a registration with no deployment identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Register {
    pub namespaces: Vec<String>,
    pub task_queue: String,
    pub node: Option<String>,
    pub activity_types: Vec<String>,
    pub identity: String,
    pub max_concurrency: u32,
}

impl Chooses for crate::message::Register {
    /// `Register` when there is nothing of version 3 to carry, whatever the version (so a
    /// version-3 worker without a deployment identity registers as an earlier one does).
    fn kind_at(&self, version: u16) -> Result<FrameKind, EncodeError> {
        let later = [
            ("deployment", self.deployment.is_some()),
            ("instance_id", self.instance_id.is_some()),
            ("extensions", !self.extensions.is_empty()),
        ];
        match later.into_iter().find(|(_, held)| *held) {
            None => Ok(FrameKind::Register),
            Some(_) if version >= 3 => Ok(FrameKind::Register3),
            Some((field, _)) => Err(EncodeError::Unsupported {
                kind: FrameKind::Register,
                field,
                version,
            }),
        }
    }
}

impl Lower<crate::message::Register> for Register {
    fn lower(register: &crate::message::Register) -> Cow<'_, Self> {
        Cow::Owned(Register {
            namespaces: register.namespaces.clone(),
            task_queue: register.task_queue.clone(),
            node: register.node.clone(),
            activity_types: register.activity_types.clone(),
            identity: register.identity.clone(),
            max_concurrency: register.max_concurrency,
        })
    }
}

impl From<Register> for crate::message::Register {
    fn from(register: Register) -> Self {
        crate::message::Register {
            namespaces: register.namespaces,
            task_queue: register.task_queue,
            node: register.node,
            activity_types: register.activity_types,
            identity: register.identity,
            max_concurrency: register.max_concurrency,
            deployment: None,
            instance_id: None,
            extensions: Vec::new(),
        }
    }
}
