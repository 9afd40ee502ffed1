//! Every connection between two simulated nodes, as the taps on its two write halves see it,
//! and a kill switch on each end that resets the connection on both ends at once (turmoil's
//! TCP has partitions but no reset).
//!
//! A connection is known by its pair of socket addresses; each node's end attaches to it when
//! its socket is made and counts what that node wrote on it.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The `Goodbye` reason of a link turned down for another one between the same two nodes.
pub const DUPLICATE: &str = "duplicate peer link";

/// Resets one end of a connection: its reads and writes fail from then on.
#[derive(Debug, Default)]
pub struct KillSwitch {
    killed: AtomicBool,
    /// The tasks waiting to read and to write, woken by the kill.
    wakers: Mutex<[Option<Waker>; 2]>,
}

impl KillSwitch {
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let wakers =
            std::mem::take(&mut *self.wakers.lock().unwrap_or_else(PoisonError::into_inner));
        for waker in wakers.into_iter().flatten() {
            waker.wake();
        }
    }

    /// True once killed; otherwise the task is woken by a later kill.
    fn killed(&self, slot: usize, cx: &Context<'_>) -> bool {
        if let Some(waiting) = self
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(slot)
        {
            *waiting = Some(cx.waker().clone());
        }
        self.killed.load(Ordering::SeqCst)
    }
}

fn reset() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "reset by the simulation")
}

/// A read or write half that fails once its switch is killed.
pub struct Killable<T> {
    inner: T,
    switch: Arc<KillSwitch>,
}

impl<T> Killable<T> {
    pub fn new(inner: T, switch: &Arc<KillSwitch>) -> Self {
        Self {
            inner,
            switch: Arc::clone(switch),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Killable<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.switch.killed(0, cx) {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Killable<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.switch.killed(1, cx) {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.switch.killed(1, cx) {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// One node's end of a connection: what that node wrote on it.
#[derive(Debug)]
pub struct End {
    pub node: String,
    pub relays: u64,
    /// It wrote `Presence`: it kept the link.
    pub presence: bool,
    /// It wrote `Goodbye{"duplicate peer link"}` before any presence: it turned the link down.
    pub turned_down: bool,
    /// It wrote `Goodbye`, `Error` or `Farewell`: it began to close the link.
    pub closing: bool,
    /// Its socket is still held.
    pub alive: bool,
    switch: Arc<KillSwitch>,
}

/// Where an end is: the connection's index and the end's index in it.
pub type At = (usize, usize);

/// Every connection a node's socket took part in.
#[derive(Debug, Default)]
pub struct Links {
    all: Vec<Vec<End>>,
    by_addresses: BTreeMap<(SocketAddr, SocketAddr), usize>,
}

impl Links {
    /// Attaches `node`'s end of the connection between `local` and `peer`.
    pub fn attach(
        &mut self,
        node: &str,
        local: SocketAddr,
        peer: SocketAddr,
        switch: &Arc<KillSwitch>,
    ) -> At {
        let key = (local.min(peer), local.max(peer));
        let end = End {
            node: node.to_owned(),
            relays: 0,
            presence: false,
            turned_down: false,
            closing: false,
            alive: true,
            switch: Arc::clone(switch),
        };
        if let Some(&index) = self.by_addresses.get(&key) {
            let ends = &mut self.all[index];
            if ends.len() == 1 && ends[0].node != node {
                ends.push(end);
                return (index, 1);
            }
        }
        self.all.push(vec![end]);
        let index = self.all.len() - 1;
        self.by_addresses.insert(key, index);
        (index, 0)
    }

    pub fn end_mut(&mut self, at: At) -> &mut End {
        &mut self.all[at.0][at.1]
    }

    /// Connections between two nodes whose both ends are held, by node pair.
    pub fn live(&self) -> BTreeMap<(String, String), usize> {
        let mut live = BTreeMap::new();
        for ends in &self.all {
            if let [a, b] = ends.as_slice() {
                if a.alive && b.alive {
                    let pair = (
                        a.node.clone().min(b.node.clone()),
                        a.node.clone().max(b.node.clone()),
                    );
                    *live.entry(pair).or_default() += 1;
                }
            }
        }
        live
    }

    /// Resets every connection between nodes `a` and `b` at both ends; how many there were.
    pub fn reset(&self, a: &str, b: &str) -> usize {
        let mut reset = 0;
        for ends in &self.all {
            if let [x, y] = ends.as_slice() {
                let between = (x.node == a && y.node == b) || (x.node == b && y.node == a);
                if between && (x.alive || y.alive) {
                    x.switch.kill();
                    y.switch.kill();
                    reset += 1;
                }
            }
        }
        reset
    }

    /// Connections that carried a relay although one of their ends turned them down.
    pub fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        for ends in &self.all {
            let relays: u64 = ends.iter().map(|end| end.relays).sum();
            if let Some(loser) = ends.iter().find(|end| end.turned_down) {
                if relays > 0 {
                    let nodes: Vec<&str> = ends.iter().map(|end| end.node.as_str()).collect();
                    found.push(format!(
                        "a link between {nodes:?} that {} turned down as a duplicate carried {relays} relays",
                        loser.node
                    ));
                }
            }
        }
        found
    }

    /// Links turned down as duplicates, by pair of nodes.
    pub fn turned_down_by_pair(&self) -> BTreeMap<(String, String), usize> {
        let mut by_pair = BTreeMap::new();
        for ends in &self.all {
            if let [a, b] = ends.as_slice() {
                if a.turned_down || b.turned_down {
                    let pair = (
                        a.node.clone().min(b.node.clone()),
                        a.node.clone().max(b.node.clone()),
                    );
                    *by_pair.entry(pair).or_default() += 1;
                }
            }
        }
        by_pair
    }
}
