//! A fault-injecting hop on loopback: a TCP proxy in front of a node that can be partitioned
//! (bytes stop moving both ways, no FIN, as when a network drops packets) and healed, or reset
//! (every connection through it closed at once, both ways).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A proxy to one node. Dropping it stops accepting; open connections end with their pumps.
pub struct Proxy {
    pub addr: SocketAddr,
    /// `true` while partitioned.
    cut: Arc<watch::Sender<bool>>,
    /// Where connections go; until it is set, they wait.
    target: Arc<watch::Sender<Option<SocketAddr>>>,
    /// Counts resets; a connection closes when it changes.
    resets: Arc<watch::Sender<u64>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on an ephemeral loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let proxy = Self::unaimed().await;
        proxy.aim(target);
        proxy
    }

    /// A proxy on an ephemeral loopback port whose connections wait until [`Proxy::aim`]
    /// says where they go: its address can be handed out before the node behind it listens.
    pub async fn unaimed() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let cut = Arc::new(watch::channel(false).0);
        let target = Arc::new(watch::channel(None).0);
        let resets = Arc::new(watch::channel(0).0);
        let (accepting, aimed, resetting) =
            (Arc::clone(&cut), Arc::clone(&target), Arc::clone(&resets));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let reset = resetting.subscribe();
                tokio::spawn(pump(
                    client,
                    aimed.subscribe(),
                    accepting.subscribe(),
                    reset,
                ));
            }
        });
        Self {
            addr,
            cut,
            target,
            resets,
            task,
        }
    }

    /// Sends every connection, waiting or new, to `target`.
    pub fn aim(&self, target: SocketAddr) {
        self.target.send_replace(Some(target));
    }

    /// Stops every byte both ways on every connection, without closing any; connections
    /// made while cut go nowhere.
    pub fn partition(&self) {
        self.cut.send_replace(true);
    }

    /// Closes every connection open through the proxy, both ways; later ones go through.
    pub fn reset(&self) {
        self.resets.send_modify(|resets| *resets += 1);
    }

    /// Lets new connections through again; those cut stay dead and are closed now.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards between `client` and the target, once there is one, until either side closes, a
/// reset, or a partition starts; a cut connection holds its sockets open and silent until the
/// heal, then closes them.
async fn pump(
    mut client: TcpStream,
    mut target: watch::Receiver<Option<SocketAddr>>,
    mut cut: watch::Receiver<bool>,
    mut reset: watch::Receiver<u64>,
) {
    let _ = client.set_nodelay(true);
    let aimed = match target.wait_for(Option::is_some).await {
        Ok(aimed) => *aimed,
        Err(_) => return,
    };
    let Some(target) = aimed else { return };
    if !*cut.borrow_and_update() {
        if let Ok(mut server) = TcpStream::connect(target).await {
            let _ = server.set_nodelay(true);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
                _ = reset.changed() => return,
                _ = cut.wait_for(|cut| *cut) => {}
            }
            let _ = cut.wait_for(|cut| !*cut).await;
            return;
        }
        return;
    }
    let _ = cut.wait_for(|cut| !*cut).await;
}
