//! A fault-injecting hop on loopback: a TCP proxy in front of a node that can be partitioned
//! (bytes stop moving both ways, no FIN, as when a network drops packets) and healed, reset
//! (every connection through it closed at once, both ways), or cut on one side only (the
//! target's side closed, the client's held open and silent, as when a middlebox forgets a
//! connection and only one end hears of it). With [`Weather`] it also delays every chunk it
//! forwards, now and then stalls one (as a lost segment waits for its retransmission: TCP turns
//! loss into delay) and now and then cuts a connection both ways.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Latency and loss on every connection through a proxy, drawn per forwarded chunk from a
/// generator seeded with `seed` and the connection's number.
#[derive(Debug, Clone, Copy)]
pub struct Weather {
    /// The delay before each chunk is forwarded, drawn from this range of milliseconds.
    pub delay_ms: (u64, u64),
    /// Chunks per million that first stall their direction for a time drawn from `stall_ms`.
    pub stall_per_million: u32,
    pub stall_ms: (u64, u64),
    /// Chunks per million that cut their connection instead, both ways.
    pub cut_per_million: u32,
    pub seed: u64,
}

/// What the weather did so far.
#[derive(Debug, Default)]
pub struct WeatherCounts {
    pub connections: AtomicU64,
    pub chunks: AtomicU64,
    pub stalls: AtomicU64,
    pub cuts: AtomicU64,
}

impl WeatherCounts {
    /// Connections, chunks, stalls and cuts, as read now.
    pub fn read(&self) -> [u64; 4] {
        [
            self.connections.load(Ordering::Relaxed),
            self.chunks.load(Ordering::Relaxed),
            self.stalls.load(Ordering::Relaxed),
            self.cuts.load(Ordering::Relaxed),
        ]
    }
}

/// The weather of a proxy and what it did.
#[derive(Debug, Clone)]
struct Forecast {
    weather: Weather,
    counts: Arc<WeatherCounts>,
}

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
    /// What the weather did, when there is weather.
    counts: Arc<WeatherCounts>,
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
        Self::serve(listener, None)
    }

    /// A proxy on `listen` forwarding to `target` through `weather`; see [`Proxy::counts`].
    ///
    /// # Panics
    /// When `listen` cannot be bound.
    pub async fn weathered(listen: SocketAddr, target: SocketAddr, weather: Weather) -> Self {
        let listener = TcpListener::bind(listen).await.expect("bind proxy");
        let forecast = Forecast {
            weather,
            counts: Arc::new(WeatherCounts::default()),
        };
        let proxy = Self::serve(listener, Some(forecast));
        proxy.aim(target);
        proxy
    }

    /// What the weather did so far (all zero without weather).
    pub fn counts(&self) -> &WeatherCounts {
        &self.counts
    }

    fn serve(listener: TcpListener, forecast: Option<Forecast>) -> Self {
        let counts = forecast
            .as_ref()
            .map_or_else(Arc::default, |forecast| Arc::clone(&forecast.counts));
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
                    forecast: forecast.clone(),
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
            counts,
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
    forecast: Option<Forecast>,
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
        forecast,
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
                () = forward(&mut client, &mut server, forecast.as_ref()) => return,
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

/// Forwards both ways until both sides closed, or one failed; through the weather when there is
/// one, until it cuts the connection.
async fn forward(client: &mut TcpStream, server: &mut TcpStream, forecast: Option<&Forecast>) {
    let Some(forecast) = forecast else {
        let _ = tokio::io::copy_bidirectional(client, server).await;
        return;
    };
    let number = forecast.counts.connections.fetch_add(1, Ordering::Relaxed);
    let seed = forecast.weather.seed ^ number.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let (mut client_in, mut client_out) = client.split();
    let (mut server_in, mut server_out) = server.split();
    let up = carry(&mut client_in, &mut server_out, forecast, seed);
    let down = carry(&mut server_in, &mut client_out, forecast, !seed);
    tokio::pin!(up, down);
    tokio::select! {
        carried = &mut up => if carried == Carried::Closed { let _ = (&mut down).await; },
        carried = &mut down => if carried == Carried::Closed { let _ = (&mut up).await; },
    }
}

/// How one direction of a weathered connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carried {
    /// Its sender closed, and the close was passed on.
    Closed,
    /// Reading or writing failed.
    Failed,
    /// The weather cut the connection.
    Cut,
}

/// Forwards `from` to `to` chunk by chunk, each after its delay (and stall), until `from` closes
/// or the weather cuts the connection.
async fn carry(
    from: &mut ReadHalf<'_>,
    to: &mut WriteHalf<'_>,
    forecast: &Forecast,
    seed: u64,
) -> Carried {
    let Forecast { weather, counts } = forecast;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) => {
                let _ = to.shutdown().await;
                return Carried::Closed;
            }
            Ok(read) => read,
            Err(_) => return Carried::Failed,
        };
        counts.chunks.fetch_add(1, Ordering::Relaxed);
        if rng.u32(0..1_000_000) < weather.cut_per_million {
            counts.cuts.fetch_add(1, Ordering::Relaxed);
            return Carried::Cut;
        }
        let mut pause = draw(&mut rng, weather.delay_ms);
        if rng.u32(0..1_000_000) < weather.stall_per_million {
            counts.stalls.fetch_add(1, Ordering::Relaxed);
            pause += draw(&mut rng, weather.stall_ms);
        }
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let Some(chunk) = buffer.get(..read) else {
            return Carried::Failed;
        };
        if to.write_all(chunk).await.is_err() {
            return Carried::Failed;
        }
    }
}

/// A number of milliseconds in `range` (its start when it is empty).
fn draw(rng: &mut fastrand::Rng, (low, high): (u64, u64)) -> u64 {
    if high > low {
        rng.u64(low..=high)
    } else {
        low
    }
}
