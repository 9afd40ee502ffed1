//! Write batching for a task that reads frames and answers them.
//!
//! While a [`Batched`] future is polled, frames queued on an idle connection are held instead
//! of written. They go out, one write per connection, when the task's reader is about to read
//! again after handing out frames, and when the poll ends, so a task that parks has always
//! written what it queued.
//!
//! The scope is a thread-local, and this file is the only one that touches it. The contract:
//! - [`hold`] registers a connection with the scope being polled on this thread and returns
//!   `true`; outside any scope, or while one flushes, it returns `false` and the caller writes
//!   by itself;
//! - [`flush`] empties the scope, calling [`HeldWrite::write_held`] once per registration;
//! - leaving a scope, by returning or by unwinding, flushes it and restores the outer scope,
//!   so nested [`Batched`] futures each write what they held;
//! - [`turn`] names the span between two writes of the scope polled on this thread, so a
//!   caller can send frames of one turn together on one connection.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// A connection whose frames a batching scope holds.
pub(super) trait HeldWrite: Send + Sync + std::fmt::Debug {
    /// Writes what the scope held; called once per [`hold`] that returned `true`.
    fn write_held(&self);
}

/// Connections registered with one scope.
type Held = Vec<Arc<dyn HeldWrite>>;

thread_local! {
    /// Connections with held frames, while a [`Batched`] future is polled on this thread.
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
    /// The current turn of the scope polled on this thread; 0 outside any scope.
    static TURN: Cell<u64> = const { Cell::new(0) };
}

/// Turns handed out so far, across threads, so no two turns share a number.
static TURNS: AtomicU64 = AtomicU64::new(1);

/// Starts a new turn on this thread and returns the one it replaces.
fn next_turn() -> u64 {
    let turn = TURNS.fetch_add(1, Ordering::Relaxed);
    TURN.try_with(|current| current.replace(turn)).unwrap_or(0)
}

/// The turn of the batching scope polled on this thread: frames queued during one turn go out
/// together, each connection's in one write. Unique across threads; 0 outside any scope, where
/// every frame is a turn of its own.
pub fn turn() -> u64 {
    TURN.try_with(Cell::get).unwrap_or(0)
}

pin_project_lite::pin_project! {
    /// Runs `inner` with write batching: see the module docs.
    #[derive(Debug)]
    pub struct Batched<F> {
        #[pin]
        inner: F,
        spare: Held,
    }
}

impl<F: Future> Batched<F> {
    /// Wraps `inner`.
    pub fn new(inner: F) -> Self {
        Self {
            inner,
            spare: Vec::new(),
        }
    }
}

impl<F: Future> Future for Batched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let scope = Scope::enter(std::mem::take(this.spare));
        let result = this.inner.poll(cx);
        *this.spare = scope.leave();
        result
    }
}

/// The batching scope of one poll; leaving it, even by unwinding, writes what it held.
struct Scope {
    outer: Option<Held>,
    outer_turn: u64,
    left: bool,
}

impl Scope {
    fn enter(list: Held) -> Self {
        let outer = HELD
            .try_with(|held| held.replace(Some(list)))
            .ok()
            .flatten();
        let outer_turn = next_turn();
        Self {
            outer,
            outer_turn,
            left: false,
        }
    }

    /// Writes what is held and hands back the emptied list for the next poll.
    fn leave(mut self) -> Held {
        self.left = true;
        flush();
        let outer = self.outer.take();
        let _ = TURN.try_with(|turn| turn.set(self.outer_turn));
        HELD.try_with(|held| held.replace(outer))
            .ok()
            .flatten()
            .unwrap_or_default()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if !self.left {
            flush();
            let outer = self.outer.take();
            let _ = TURN.try_with(|turn| turn.set(self.outer_turn));
            let _ = HELD.try_with(|held| held.replace(outer));
        }
    }
}

/// Registers `writer` with the batching scope polled on this thread; `false` outside one.
pub(super) fn hold<W: HeldWrite + 'static>(writer: &Arc<W>) -> bool {
    HELD.try_with(|held| match held.try_borrow_mut() {
        Ok(mut held) => match held.as_mut() {
            Some(list) => {
                list.push(Arc::clone(writer) as Arc<dyn HeldWrite>);
                true
            }
            None => false,
        },
        Err(_) => false,
    })
    .unwrap_or(false)
}

/// Writes every connection's held frames now, and starts the scope's next turn; outside a
/// batching scope it does nothing.
pub(super) fn flush() {
    let Ok(Some(mut list)) = HELD.try_with(|held| held.borrow_mut().take()) else {
        return;
    };
    next_turn();
    for writer in list.drain(..) {
        writer.write_held();
    }
    let _ = HELD.try_with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() {
            *held = Some(list);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::future::{poll_fn, Future};
    use std::panic::AssertUnwindSafe;
    use std::pin::pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use futures_util::{FutureExt, StreamExt};
    use lintel_wire::FrameCodec;
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::codec::FramedRead;

    use super::{flush, hold, turn, Batched, HeldWrite};
    use crate::fixtures::ping;
    use crate::{split, Outbound};

    /// Counts the writes a scope asks of it.
    #[derive(Debug, Default)]
    struct Counter(AtomicUsize);

    impl HeldWrite for Counter {
        fn write_held(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Counter {
        fn writes(&self) -> usize {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn a_turn_lasts_from_one_write_of_the_scope_to_the_next() {
        assert_eq!(turn(), 0, "no turn outside a scope");
        let mut seen = Vec::new();
        let mut scoped = pin!(Batched::new(poll_fn(|_| {
            let first = turn();
            assert_ne!(first, 0);
            assert_eq!(turn(), first, "the same turn until the scope writes");
            flush();
            let second = turn();
            assert_ne!(second, first, "a write starts the next turn");
            let mut inner = pin!(Batched::new(poll_fn(|_| Poll::Ready(turn()))));
            let Poll::Ready(nested) = inner.as_mut().poll(&mut Context::from_waker(Waker::noop()))
            else {
                unreachable!("the inner scope is ready at once");
            };
            assert_ne!(nested, second, "a nested scope has turns of its own");
            assert_eq!(
                turn(),
                second,
                "the outer turn goes on after the nested scope"
            );
            seen.push(first);
            Poll::Ready(())
        })));
        assert!(scoped
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_ready());
        assert_eq!(turn(), 0, "no turn once the scope is left");
        let mut again = pin!(Batched::new(poll_fn(|_| Poll::Ready(turn()))));
        let Poll::Ready(later) = again.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        else {
            unreachable!("ready at once");
        };
        assert!(!seen.contains(&later), "a later poll is a new turn");
    }

    #[test]
    fn outside_a_scope_nothing_is_held() {
        let writer = Arc::new(Counter::default());
        assert!(!hold(&writer));
        flush();
        assert_eq!(writer.writes(), 0);
    }

    #[test]
    fn a_scope_writes_what_it_held_when_its_poll_ends_and_not_before() {
        let writer = Arc::new(Counter::default());
        let mut polls = 0;
        let mut scoped = pin!(Batched::new(poll_fn(|_| {
            polls += 1;
            if polls == 1 {
                assert!(hold(&writer));
                assert_eq!(writer.writes(), 0, "held, not written, inside the poll");
                return Poll::Pending;
            }
            Poll::Ready(())
        })));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(scoped.as_mut().poll(&mut cx).is_pending());
        assert_eq!(writer.writes(), 1, "a pending poll writes what it held");
        assert!(scoped.as_mut().poll(&mut cx).is_ready());
        assert_eq!(writer.writes(), 1, "nothing held, nothing written");
        assert!(!hold(&writer), "the scope ended with its poll");
    }

    #[test]
    fn a_flush_inside_a_scope_writes_once() {
        let writer = Arc::new(Counter::default());
        let done = Batched::new(async {
            assert!(hold(&writer));
            flush();
            assert_eq!(writer.writes(), 1);
        })
        .now_or_never();
        assert!(done.is_some());
        assert_eq!(writer.writes(), 1, "the flush emptied the scope");
    }

    #[test]
    fn nested_scopes_each_write_their_own() {
        let (inner, outer) = (Arc::new(Counter::default()), Arc::new(Counter::default()));
        let done = Batched::new(async {
            assert!(hold(&outer));
            Batched::new(async { assert!(hold(&inner)) }).await;
            assert_eq!((inner.writes(), outer.writes()), (1, 0));
            assert!(hold(&outer), "the outer scope is back");
        })
        .now_or_never();
        assert!(done.is_some());
        assert_eq!((inner.writes(), outer.writes()), (1, 2));
    }

    #[test]
    fn a_scope_left_by_unwinding_writes_what_it_held() {
        let writer = Arc::new(Counter::default());
        let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| {
            Batched::new(async {
                assert!(hold(&writer));
                panic!("handler failed");
            })
            .now_or_never()
        }));
        assert!(unwound.is_err());
        assert_eq!(writer.writes(), 1);
        assert!(!hold(&writer), "no scope is left behind");
    }

    async fn pair() -> (Outbound, FramedRead<TcpStream, FrameCodec>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (_reader, outbound, _writer) = split(accepted.unwrap().0, 1 << 20, 16);
        (
            outbound,
            FramedRead::new(client.unwrap(), FrameCodec::default()),
        )
    }

    #[tokio::test]
    async fn frames_held_by_a_batching_scope_go_out_once_it_waits() {
        let (outbound, mut peer) = pair().await;
        let scoped = Batched::new(async {
            outbound.try_send(ping(1)).unwrap();
            outbound.try_send(ping(2)).unwrap();
            // Waiting on the peer parks this future, which writes what it held first.
            let first = peer.next().await.unwrap().unwrap();
            let second = peer.next().await.unwrap().unwrap();
            (first, second)
        });
        let (first, second) = tokio::time::timeout(Duration::from_secs(10), scoped)
            .await
            .expect("held frames were never written");
        assert_eq!((first, second), (ping(1), ping(2)));
    }

    #[tokio::test]
    async fn frames_sent_outside_any_scope_are_written_without_one() {
        let (outbound, mut peer) = pair().await;
        outbound.try_send(ping(3)).unwrap();
        let frame = tokio::time::timeout(Duration::from_secs(10), peer.next())
            .await
            .expect("frame never written");
        assert_eq!(frame.unwrap().unwrap(), ping(3));
    }
}
