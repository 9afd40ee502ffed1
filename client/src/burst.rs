//! A burst: the frame a connection's reader handed out, then those already read behind it, handled
//! in one turn of the connection's loop instead of each paying a pass through its `select!`.

use futures_util::{FutureExt, Stream, StreamExt};

/// Most frames one turn handles; then the loop's other branches (timers, keep-alive, shutdown)
/// get their look.
pub const FRAMES_PER_TURN: usize = 64;

/// What one turn of a connection's loop reads: see the module docs.
#[derive(Debug)]
pub struct Burst<T> {
    first: Option<Option<T>>,
    taken: usize,
}

impl<T> Burst<T> {
    /// A burst that starts with `first`, what the reader's `next()` resolved to.
    pub fn new(first: Option<T>) -> Self {
        Self {
            first: Some(first),
            taken: 0,
        }
    }

    /// The next read of this turn, as `reader.next()` would give it (`None` inside at the end
    /// of the stream): the first, then each one `reader` has without waiting, up to
    /// [`FRAMES_PER_TURN`], or to the end of the stream. `None` ends the turn.
    ///
    /// The reader is polled without a waker: a `Pending` here only ends the turn, and the loop
    /// polls the reader again, with its own waker, before the task parks.
    pub fn next<S: Stream<Item = T> + Unpin>(&mut self, reader: &mut S) -> Option<Option<T>> {
        let read = match self.first.take() {
            Some(first) => first,
            None if self.taken < FRAMES_PER_TURN => reader.next().now_or_never()?,
            None => return None,
        };
        // The end of the stream ends the turn too.
        self.taken = if read.is_some() {
            self.taken + 1
        } else {
            FRAMES_PER_TURN
        };
        Some(read)
    }
}

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;

    #[test]
    fn a_burst_takes_what_is_ready_up_to_the_bound_and_leaves_the_rest() {
        let mut reader = stream::iter(1..=FRAMES_PER_TURN + 5);
        let mut burst = Burst::new(Some(0));
        let mut taken = Vec::new();
        while let Some(read) = burst.next(&mut reader) {
            taken.push(read.unwrap());
        }
        assert_eq!(taken, (0..FRAMES_PER_TURN).collect::<Vec<_>>());
        assert_eq!(reader.next().now_or_never(), Some(Some(FRAMES_PER_TURN)));
    }

    #[test]
    fn a_burst_ends_where_the_reader_would_wait_and_says_where_the_stream_ends() {
        let mut waiting = stream::pending::<u8>();
        let mut burst = Burst::new(Some(1));
        assert_eq!(burst.next(&mut waiting), Some(Some(1)));
        assert_eq!(burst.next(&mut waiting), None);
        let mut ended = stream::iter([2]);
        let mut burst = Burst::new(Some(1));
        let reads: Vec<_> = std::iter::from_fn(|| burst.next(&mut ended)).collect();
        assert_eq!(reads, [Some(1), Some(2), None]);
    }
}
