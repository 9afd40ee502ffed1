//! Write batching for a task that reads frames and answers them.
//!
//! While a [`Batched`] future is polled, frames queued on an idle connection are held instead
//! of written. They go out, one write per connection, when the task's reader is about to read
//! again after handing out frames, and when the poll ends, so a task that parks has always
//! written what it queued.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::outbound::Pipe;

thread_local! {
    /// Connections with held frames, while a [`Batched`] future is polled on this thread.
    static HELD: RefCell<Option<Vec<Arc<Pipe>>>> = const { RefCell::new(None) };
}

pin_project_lite::pin_project! {
    /// Runs `inner` with write batching: see the module docs.
    #[derive(Debug)]
    pub struct Batched<F> {
        #[pin]
        inner: F,
        spare: Vec<Arc<Pipe>>,
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
    outer: Option<Vec<Arc<Pipe>>>,
    left: bool,
}

impl Scope {
    fn enter(list: Vec<Arc<Pipe>>) -> Self {
        let outer = HELD
            .try_with(|held| held.replace(Some(list)))
            .ok()
            .flatten();
        Self { outer, left: false }
    }

    /// Writes what is held and hands back the emptied list for the next poll.
    fn leave(mut self) -> Vec<Arc<Pipe>> {
        self.left = true;
        flush();
        let outer = self.outer.take();
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
            let _ = HELD.try_with(|held| held.replace(outer));
        }
    }
}

/// Holds `pipe`'s frames for the running batching scope; `false` outside one.
pub(super) fn hold(pipe: &Arc<Pipe>) -> bool {
    HELD.try_with(|held| match held.try_borrow_mut() {
        Ok(mut held) => match held.as_mut() {
            Some(list) => {
                list.push(Arc::clone(pipe));
                true
            }
            None => false,
        },
        Err(_) => false,
    })
    .unwrap_or(false)
}

/// Writes every connection's held frames now; outside a batching scope it does nothing.
pub(super) fn flush() {
    let Ok(Some(mut list)) = HELD.try_with(|held| held.borrow_mut().take()) else {
        return;
    };
    for pipe in list.drain(..) {
        pipe.write_held();
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
    use std::time::Duration;

    use futures_util::StreamExt;
    use lintel_wire::{Frame, FrameCodec, Ping};
    use tokio::net::{TcpListener, TcpStream};
    use tokio_util::codec::FramedRead;

    use super::Batched;
    use crate::transport::{split, Outbound};

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

    fn ping(nonce: u64) -> Frame {
        Frame::Ping(Ping { nonce })
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
