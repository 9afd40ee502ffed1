//! [`Dispatch`]: one unit of work as a producer describes it, checked against the node's
//! limits before anything is sent.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use lintel_wire::{DispatchRequest, Welcome};

use crate::options::DispatchOptions;

/// One unit of work to dispatch: what to run, in which namespace, with what input, and the
/// ids the node hands the worker and echoes in the reply.
///
/// Only the namespace and the activity type are required; the ids serve a workflow engine
/// that correlates replies with its own history, and may be left at their defaults otherwise.
///
/// # Examples
/// ```
/// use lintel_client::Dispatch;
///
/// let dispatch = Dispatch::new("billing", "charge")
///     .input(r#"{"order": 17}"#)
///     .workflow("order-17", 3)
///     .attempt(2);
/// assert_eq!(dispatch.namespace(), "billing");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    request: DispatchRequest,
    /// The length of its longest name (namespace, task queue, activity type, node), kept by
    /// the builders: the per-call check compares it alone when nothing is amiss.
    longest_name: usize,
}

/// Why a [`Dispatch`] was not sent: it breaks a limit the node stated at the handshake, or
/// one every node holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidDispatch {
    /// The namespace is empty.
    #[error("the namespace is empty")]
    EmptyNamespace,
    /// The activity type is empty.
    #[error("the activity type is empty")]
    EmptyActivityType,
    /// A name (`field`: namespace, task queue, activity type or node) is longer than the
    /// node's `max_name_len`.
    #[error("the {field} is {len} bytes, over the node's limit of {max}")]
    NameTooLong {
        /// Which name.
        field: &'static str,
        /// Its length, in bytes.
        len: usize,
        /// The node's `max_name_len`.
        max: usize,
    },
    /// More headers than the node's `max_headers`. (A node before version 3 carries no
    /// headers at all: that is [`ClientError::Unsupported`](crate::ClientError::Unsupported).)
    #[error("{count} headers, over the node's limit of {max}")]
    TooManyHeaders {
        /// Headers given.
        count: usize,
        /// The node's `max_headers`.
        max: usize,
    },
    /// Header names and values together longer than the node's `max_header_bytes`.
    #[error("headers of {bytes} bytes, over the node's limit of {max}")]
    HeadersTooLarge {
        /// Bytes of header names and values given.
        bytes: usize,
        /// The node's `max_header_bytes`.
        max: usize,
    },
}

impl Dispatch {
    /// Work of `activity_type` in `namespace`, both required. Defaults: no input, the default
    /// task queue, any node, empty workflow id, ordinal 0, no run id, attempt 1, no deadline.
    pub fn new(namespace: impl Into<String>, activity_type: impl Into<String>) -> Self {
        Self {
            longest_name: 0,
            request: DispatchRequest {
                namespace: namespace.into(),
                task_queue: String::new(),
                activity_type: activity_type.into(),
                node: None,
                workflow_id: String::new(),
                ordinal: 0,
                run_id: None,
                attempt: 1,
                input: Bytes::new(),
                deadline_unix_ms: None,
            },
        }
        .names_changed()
    }

    /// Recomputes [`Self::longest_name`] after a name was set.
    fn names_changed(mut self) -> Self {
        let request = &self.request;
        self.longest_name = request
            .namespace
            .len()
            .max(request.task_queue.len())
            .max(request.activity_type.len())
            .max(request.node.as_deref().map_or(0, str::len));
        self
    }

    /// The input the worker receives; opaque to the node. Default: empty.
    pub fn input(mut self, input: impl Into<Bytes>) -> Self {
        self.request.input = input.into();
        self
    }

    /// The task queue within the namespace: only workers registered for it are chosen.
    /// Default: empty, the `default` queue.
    pub fn task_queue(mut self, task_queue: impl Into<String>) -> Self {
        self.request.task_queue = task_queue.into();
        self.names_changed()
    }

    /// Pins it to the node `node`, as [`DispatchOptions::pin`] does; this pin takes precedence
    /// over the options' routing. Default: none, the options' routing decides.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.request.node = Some(node.into());
        self.names_changed()
    }

    /// The workflow it belongs to and its step number there. The node does not interpret
    /// them: the worker receives them and the reply echoes them, so a caller can match a
    /// reply to its history. Outside a workflow engine, any id of the business operation (an
    /// order id) and 0, or leave the defaults (empty, 0).
    pub fn workflow(mut self, workflow_id: impl Into<String>, ordinal: u64) -> Self {
        self.request.workflow_id = workflow_id.into();
        self.request.ordinal = ordinal;
        self
    }

    /// The run of the workflow, for engines that run a workflow more than once; handed to the
    /// worker and echoed like the workflow id. Default: none.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.request.run_id = Some(run_id.into());
        self
    }

    /// The caller's one-based attempt number, handed to the worker so a handler can tell a
    /// retry of its own; the SDK's retries ([`crate::RetryPolicy`]) do not change it.
    /// Default: 1.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.request.attempt = attempt;
        self
    }

    /// A wall-clock deadline handed to the worker, whose handler's
    /// [`CancelSignal`](crate::CancelSignal) fires at it; the node bounds the wait by
    /// [`DispatchOptions::reply_timeout`] instead. Default: none.
    pub fn deadline(mut self, at: SystemTime) -> Self {
        let ms = at.duration_since(UNIX_EPOCH).map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
        self.request.deadline_unix_ms = Some(ms);
        self
    }

    /// Sets the step number within the workflow in place, keeping everything else: a caller
    /// sending many dispatches that differ only there (a load generator, say) keeps one
    /// `Dispatch` and submits it by reference, copying nothing per dispatch.
    ///
    /// # Examples
    /// ```
    /// use lintel_client::Dispatch;
    ///
    /// let mut dispatch = Dispatch::new("load", "echo").workflow("lane-0", 0);
    /// for ordinal in 1..=3 {
    ///     dispatch.set_ordinal(ordinal);
    ///     // client.submit(&dispatch, &options).await?;
    /// }
    /// assert_eq!(dispatch.ordinal(), 3);
    /// ```
    pub fn set_ordinal(&mut self, ordinal: u64) {
        self.request.ordinal = ordinal;
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.request.namespace
    }

    /// The activity type.
    pub fn activity_type(&self) -> &str {
        &self.request.activity_type
    }

    /// The workflow id; empty by default.
    pub fn workflow_id(&self) -> &str {
        &self.request.workflow_id
    }

    /// The step number within the workflow; 0 by default.
    pub fn ordinal(&self) -> u64 {
        self.request.ordinal
    }

    /// The request as the wire carries it.
    pub(crate) fn request(&self) -> &DispatchRequest {
        &self.request
    }

    /// Checks the dispatch and `options` against what the node stated in `welcome`.
    ///
    /// # Errors
    /// The first limit broken.
    pub(crate) fn check(
        &self,
        welcome: &Welcome,
        options: &DispatchOptions,
    ) -> Result<(), InvalidDispatch> {
        let request = &self.request;
        let max = usize::try_from(welcome.limits.max_name_len).unwrap_or(usize::MAX);
        // What a caller sends many times over passes on comparisons of lengths it already has.
        if self.longest_name <= max
            && options.extras.headers.is_empty()
            && !request.namespace.is_empty()
            && !request.activity_type.is_empty()
        {
            return Ok(());
        }
        if request.namespace.is_empty() {
            return Err(InvalidDispatch::EmptyNamespace);
        }
        if request.activity_type.is_empty() {
            return Err(InvalidDispatch::EmptyActivityType);
        }
        let names = [
            ("namespace", request.namespace.as_str()),
            ("task queue", request.task_queue.as_str()),
            ("activity type", request.activity_type.as_str()),
            ("node", request.node.as_deref().unwrap_or_default()),
        ];
        for (field, name) in names {
            if name.len() > max {
                return Err(InvalidDispatch::NameTooLong {
                    field,
                    len: name.len(),
                    max,
                });
            }
        }
        let headers = &options.extras.headers;
        // Before version 3 there are no header limits, and no headers: the submission's kind
        // check refuses them as unsupported, naming them.
        let Some(limits) = welcome.header_limits else {
            return Ok(());
        };
        if headers.is_empty() {
            return Ok(());
        }
        let max = usize::try_from(limits.max_headers).unwrap_or(usize::MAX);
        if headers.len() > max {
            return Err(InvalidDispatch::TooManyHeaders {
                count: headers.len(),
                max,
            });
        }
        let bytes: usize = headers
            .iter()
            .map(|header| header.name.len() + header.value.len())
            .sum();
        let max = usize::try_from(limits.max_header_bytes).unwrap_or(usize::MAX);
        if bytes > max {
            return Err(InvalidDispatch::HeadersTooLarge { bytes, max });
        }
        Ok(())
    }
}
