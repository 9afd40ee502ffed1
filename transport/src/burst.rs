//! A burst: the frame a connection's reader lent, then those already read behind it, handled
//! in one turn of the connection's loop instead of each paying a pass through its `select!`.

use crate::{Found, FrameReader};
use futures_util::FutureExt;

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

    /// The next frame of this turn, found for `reader.take` (which lends `None` at the end
    /// of the stream): each frame `reader` has without waiting, up to [`FRAMES_PER_TURN`] with
    /// the first, or to the end of the stream. `None` ends the turn.
    ///
    /// The reader is polled without a waker: a `Pending` here only ends the turn, and the loop
    /// polls the reader again, with its own waker, before the task parks.
    pub fn next(&mut self, reader: &mut FrameReader) -> Option<Found> {
        if self.taken >= FRAMES_PER_TURN {
            return None;
        }
        let found = reader.ready().now_or_never()?;
        // The end of the stream ends the turn too.
        self.taken = if found.is_end() {
            FRAMES_PER_TURN
        } else {
            self.taken + 1
        };
        Some(found)
    }
}
