//! Where a dispatch's outcome goes: the one thing that differs between dispatch sources.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lintel_wire::{DispatchResult, ResultRef};
use tokio::sync::oneshot;

/// How a source names one of its dispatches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tag {
    /// The caller's own id for it, such as a producer's correlation id.
    pub(crate) correlation: u64,
    /// Tells apart two dispatches that reused one correlation id.
    pub(crate) ticket: u64,
}

/// A dispatch source: hands each outcome to whoever asked.
pub(crate) trait Sink: Send + Sync {
    /// Delivers the outcome of dispatch `tag`, lent: a source that keeps it takes a copy.
    /// Called exactly once per dispatch. `served_by` names the peer that served it, `None`
    /// when this node did.
    fn deliver(&self, tag: Tag, result: ResultRef<'_>, served_by: Option<&str>);

    /// Passes on what the worker says of dispatch `tag` while it runs, before its outcome.
    fn progress(&self, _tag: Tag, _details: &Bytes) {}
}

/// A dispatch's source and its name there.
pub(crate) struct Caller {
    sink: Arc<dyn Sink>,
    tag: Tag,
}

impl Caller {
    pub(crate) fn new(sink: Arc<dyn Sink>, tag: Tag) -> Self {
        Self { sink, tag }
    }

    /// The source's own id for the dispatch.
    pub(crate) fn correlation(&self) -> u64 {
        self.tag.correlation
    }

    pub(crate) fn deliver(self, result: ResultRef<'_>, served_by: Option<&str>) {
        self.sink.deliver(self.tag, result, served_by);
    }

    /// Passes on `details` of the dispatch's progress.
    pub(crate) fn progress(&self, details: &Bytes) {
        self.sink.progress(self.tag, details);
    }
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

/// The in-process source: one outcome through a oneshot.
pub(crate) struct Oneshot(Mutex<Option<oneshot::Sender<DispatchResult>>>);

impl Oneshot {
    /// A caller whose outcome arrives on the returned receiver.
    pub(crate) fn caller() -> (Caller, oneshot::Receiver<DispatchResult>) {
        let (tx, rx) = oneshot::channel();
        let sink = Arc::new(Self(Mutex::new(Some(tx))));
        (Caller::new(sink, Tag::default()), rx)
    }
}

impl Sink for Oneshot {
    fn deliver(&self, _tag: Tag, result: ResultRef<'_>, _served_by: Option<&str>) {
        let tx = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(tx) = tx {
            // A caller that stopped listening has given up on the outcome; it is still counted.
            let _ = tx.send(result.into_owned());
        }
    }
}
