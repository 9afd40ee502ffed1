//! A fault-injecting hop on loopback: a TCP proxy in front of a node that can be partitioned
//! (bytes stop moving both ways, no FIN, as when a network drops packets) and healed, reset
//! (every connection through it closed at once, both ways), or cut on one side only (the
//! target's side closed, the client's held open and silent, as when a middlebox forgets a
//! connection and only one end hears of it).

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
    /// Counts one-sided cuts; a connection's target side closes when it changes.
    one_sided: Arc<watch::Sender<u64>>,
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
        let one_sided = Arc::new(watch::channel(0).0);
        let (accepting, aimed, resetting, severing) = (
            Arc::clone(&cut),
            Arc::clone(&target),
            Arc::clone(&resets),
            Arc::clone(&one_sided),
        );
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let faults = Faults {
                    cut: accepting.subscribe(),
                    reset: resetting.subscribe(),
                    one_sided: severing.subscribe(),
                };
                tokio::spawn(pump(client, aimed.subscribe(), faults));
            }
        });
        Self {
            addr,
            cut,
            target,
            resets,
            one_sided,
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

    /// Closes the target's side of every open connection, while the client's side stays open
    /// and hears nothing (what it sends is dropped) until it closes; new connections go through.
    pub fn cut_target_side(&self) {
        self.one_sided.send_modify(|cuts| *cuts += 1);
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

/// What a connection through the proxy watches for.
struct Faults {
    cut: watch::Receiver<bool>,
    reset: watch::Receiver<u64>,
    one_sided: watch::Receiver<u64>,
}

/// Forwards between `client` and the target, once there is one, until either side closes, a
/// reset, a partition or a one-sided cut starts; a partitioned connection holds its sockets
/// open and silent until the heal, a one-sided cut only the client's.
async fn pump(
    mut client: TcpStream,
    mut target: watch::Receiver<Option<SocketAddr>>,
    faults: Faults,
) {
    let Faults {
        mut cut,
        mut reset,
        mut one_sided,
    } = faults;
    let _ = client.set_nodelay(true);
    let aimed = match target.wait_for(Option::is_some).await {
        Ok(aimed) => *aimed,
        Err(_) => return,
    };
    let Some(target) = aimed else { return };
    if !*cut.borrow_and_update() {
        if let Ok(mut server) = TcpStream::connect(target).await {
            let _ = server.set_nodelay(true);
            let one_sided = tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
                _ = reset.changed() => return,
                _ = one_sided.changed() => true,
                _ = cut.wait_for(|cut| *cut) => false,
            };
            if one_sided {
                drop(server);
                let _ = tokio::io::copy(&mut client, &mut tokio::io::sink()).await;
                return;
            }
            let _ = cut.wait_for(|cut| !*cut).await;
            return;
        }
        return;
    }
    let _ = cut.wait_for(|cut| !*cut).await;
}
