//! A burst: the frame a connection's reader lent, then those already read behind it, handled
//! in one turn of the connection's loop instead of each paying a pass through its `select!`.

use futures_util::FutureExt;
use lintel_wire::{CodecError, FrameRef};

use crate::transport::FrameReader;

/// Most frames one turn handles; then the loop's other branches (timers, keep-alive, shutdown)
/// get their look.
pub const FRAMES_PER_TURN: usize = 64;

/// What one turn of a connection's loop reads after the frame its `select!` was lent: see the
/// module docs.
#[derive(Debug)]
pub struct Burst {
    taken: usize,
}

impl Burst {
    /// The rest of a turn whose first frame the loop has handled.
    pub fn after_first() -> Self {
        Self { taken: 1 }
    }

    /// The next read of this turn, as `reader.next_frame()` would lend it (`None` inside at
    /// the end of the stream): each frame `reader` has without waiting, up to
    /// [`FRAMES_PER_TURN`] with the first, or to the end of the stream. `None` ends the turn.
    ///
    /// The reader is polled without a waker: a `Pending` here only ends the turn, and the loop
    /// polls the reader again, with its own waker, before the task parks.
    pub fn next<'r>(
        &mut self,
        reader: &'r mut FrameReader,
    ) -> Option<Option<Result<FrameRef<'r>, CodecError>>> {
        if self.taken >= FRAMES_PER_TURN {
            return None;
        }
        let read = reader.next_frame().now_or_never()?;
        // The end of the stream ends the turn too.
        self.taken = if read.is_some() {
            self.taken + 1
        } else {
            FRAMES_PER_TURN
        };
        Some(read)
    }
}
