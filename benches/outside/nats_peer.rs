//! The NATS pieces of the outside layout (`benches/outside.sh`): a responder that answers every
//! request in a queue group with its payload, and a closed-loop requester that prints one JSON
//! line with the field names of `lintel bench --json -`.
//!
//! Written against async-nats's public API as its documentation shows it, and against nothing
//! of `benches/vs_nats`, so that a bias in the harness's NATS pieces shows as a disagreement
//! between the two layouts.
//!
//! Each role runs on a current-thread tokio runtime: `lintel serve`, `lintel worker` and
//! `lintel bench --workers 0` each run on one thread by default (src/cli/runtime.rs), and the
//! layout deploys both systems alike, every piece a one-thread process of its own.
//!
//! ```sh
//! outside_nats_peer responder --url nats://127.0.0.1:4222 --subject bench.echo --queue workers
//! outside_nats_peer requester --url nats://127.0.0.1:4222 --subject bench.echo \
//!     --concurrency 256 --payload 64 --duration 5
//! ```

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use async_nats::{client::RequestErrorKind, Client, ConnectOptions, Event, Subject};
use bytes::Bytes;
use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use hdrhistogram::{CreationError, Histogram};
use serde::Serialize;

/// How long the requester waits for its first answer (the responders subscribed).
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Most tries for that first answer, however fast each fails.
const ANSWER_TRIES: u32 = 500;

/// Between two tries that found no responder.
const ANSWER_RETRY: Duration = Duration::from_millis(20);

/// How long the requester waits for its connection to drain after the run.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Parser)]
#[command(
    name = "outside_nats_peer",
    about = "NATS responder and requester for benches/outside.sh"
)]
struct Cli {
    #[command(subcommand)]
    role: Option<Role>,
    /// Passed by `cargo bench`; without a role the binary only explains itself.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// Answer every request on SUBJECT, in queue group QUEUE, with its payload unchanged; print
    /// `subscribed` once the server holds the subscription; run until killed or disconnected.
    Responder {
        #[arg(long)]
        url: String,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        queue: String,
    },
    /// Keep CONCURRENCY requests in flight on one connection for DURATION seconds, then print
    /// one JSON line: dispatches, elapsed_s, rps, latency percentiles in us, errors.
    Requester {
        #[arg(long)]
        url: String,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        concurrency: usize,
        /// Payload bytes per request.
        #[arg(long)]
        payload: usize,
        /// Seconds to run.
        #[arg(long)]
        duration: f64,
    },
}

/// Why a role stopped short.
#[derive(Debug, thiserror::Error)]
enum PeerError {
    #[error("cannot start the tokio runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot connect to {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: async_nats::ConnectError,
    },
    #[error("cannot subscribe: {0}")]
    Subscribe(#[from] async_nats::SubscribeError),
    #[error("cannot flush the subscription: {0}")]
    Flush(#[from] async_nats::client::FlushError),
    #[error("cannot answer a request: {0}")]
    Publish(#[from] async_nats::PublishError),
    #[error("the connection to the server ended")]
    Disconnected,
    #[error("no request was answered within {ANSWER_WAIT:?} and {ANSWER_TRIES} tries (last: {0})")]
    NoAnswer(String),
    #[error("cannot record latencies: {0}")]
    Histogram(#[from] CreationError),
    #[error("cannot write the report: {0}")]
    Report(#[from] serde_json::Error),
    #[error("--duration must be a finite number of seconds this clock can reach, not {0}")]
    Duration(f64),
}

/// What the requester prints, named as `lintel bench --json -` names the same things.
#[derive(Debug, Serialize)]
struct Report {
    concurrency: usize,
    payload_bytes: usize,
    /// Requests that ended, answered or not.
    dispatches: u64,
    elapsed_s: f64,
    /// `dispatches` per second of `elapsed_s`.
    rps: f64,
    /// Latency percentiles over every request that ended, in microseconds (recorded in ns).
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    p999_us: f64,
    /// Requests not answered with their own payload: timed out, no responders, a lost
    /// connection or a reply of another length.
    errors: u64,
    /// What the first of them was.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_error: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(role) = cli.role else {
        println!(
            "outside_nats_peer is a piece of benches/outside.sh: run `bash benches/outside.sh`, \
             or `outside_nats_peer --help` for its roles"
        );
        return ExitCode::SUCCESS;
    };
    // One thread, as `lintel serve`, `lintel worker` and `lintel bench --workers 0` by default.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return failed(&PeerError::Runtime(err)),
    };
    let ran = runtime.block_on(async {
        match role {
            Role::Responder {
                url,
                subject,
                queue,
            } => respond(&url, subject, queue).await.map(|()| true),
            Role::Requester {
                url,
                subject,
                concurrency,
                payload,
                duration,
            } => {
                let seconds = duration;
                let Ok(duration) = Duration::try_from_secs_f64(seconds) else {
                    return Err(PeerError::Duration(seconds));
                };
                let report = request(&url, subject, concurrency, payload, duration).await?;
                println!("{}", serde_json::to_string(&report)?);
                Ok(report.errors == 0)
            }
        }
    });
    let _ = std::io::stdout().flush();
    match ran {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("outside_nats_peer: some requests were not answered");
            ExitCode::FAILURE
        }
        Err(err) => failed(&err),
    }
}

fn failed(err: &PeerError) -> ExitCode {
    eprintln!("outside_nats_peer: {err}");
    ExitCode::FAILURE
}

async fn connect(url: &str, options: ConnectOptions) -> Result<Client, PeerError> {
    options
        .connect(url)
        .await
        .map_err(|source| PeerError::Connect {
            url: url.to_owned(),
            source,
        })
}

/// Echoes every request on `subject` in `queue` until the connection ends.
///
/// # Errors
/// The connection could not be made, the subscription not taken, or the connection ended.
async fn respond(url: &str, subject: String, queue: String) -> Result<(), PeerError> {
    let (ended, mut on_end) = tokio::sync::mpsc::channel::<()>(1);
    let options = ConnectOptions::new().event_callback(move |event| {
        let ended = ended.clone();
        async move {
            if matches!(event, Event::Disconnected | Event::Closed) {
                let _ = ended.try_send(());
            }
        }
    });
    let client = connect(url, options).await?;
    let mut requests = client.queue_subscribe(subject, queue).await?;
    // A flush is a PING answered by a PONG: the server has processed the SUB before it.
    client.flush().await?;
    println!("subscribed");
    let _ = std::io::stdout().flush();
    // The echo loop runs as its own task, so watching for the end adds nothing per request.
    let echo = tokio::spawn(async move {
        while let Some(message) = requests.next().await {
            if let Some(reply) = message.reply {
                client.publish(reply, message.payload).await?;
            }
        }
        Ok::<(), PeerError>(())
    });
    tokio::select! {
        echoed = echo => match echoed {
            Ok(result) => result,
            Err(_) => Err(PeerError::Disconnected),
        },
        _ = on_end.recv() => Err(PeerError::Disconnected),
    }
}

/// Keeps `concurrency` requests of `payload` bytes in flight on one connection for `duration`,
/// once a first request is answered.
///
/// # Errors
/// The connection could not be made, or no first request was answered.
async fn request(
    url: &str,
    subject: String,
    concurrency: usize,
    payload: usize,
    duration: Duration,
) -> Result<Report, PeerError> {
    let client = connect(url, ConnectOptions::new()).await?;
    let subject = Subject::from(subject);
    wait_until_answered(&client, &subject).await?;
    // Latencies in nanoseconds from 1 ns to an hour, to three significant digits.
    let histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let input = Bytes::from(vec![b'x'; payload]);
    let concurrency = concurrency.max(1);
    let started = Instant::now();
    let deadline = started
        .checked_add(duration)
        .ok_or(PeerError::Duration(duration.as_secs_f64()))?;
    let lanes: Vec<_> = (0..concurrency)
        .map(|_| {
            let lane = Lane {
                client: client.clone(),
                subject: subject.clone(),
                input: input.clone(),
                latencies: histogram.clone(),
            };
            tokio::spawn(lane.run(deadline))
        })
        .collect();
    let mut latencies = histogram;
    let mut errors = 0;
    let mut first_error = None;
    for lane in lanes {
        match lane.await {
            Ok(seen) => {
                // Every lane's histogram has the same bounds, so adding cannot fail.
                let _ = latencies.add(&seen.latencies);
                errors += seen.errors;
                if first_error.is_none() {
                    first_error = seen.first_error;
                }
            }
            Err(err) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("a request lane failed: {err}"));
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // The report stands whether or not the server acknowledges the goodbye in time.
    let _ = tokio::time::timeout(DRAIN_WAIT, client.drain()).await;
    let dispatches = latencies.len();
    let micros = |q: f64| latencies.value_at_quantile(q) as f64 / 1_000.0;
    Ok(Report {
        concurrency,
        payload_bytes: payload,
        dispatches,
        elapsed_s: elapsed,
        rps: if elapsed > 0.0 {
            dispatches as f64 / elapsed
        } else {
            0.0
        },
        p50_us: micros(0.50),
        p90_us: micros(0.90),
        p99_us: micros(0.99),
        p999_us: micros(0.999),
        errors,
        first_error,
    })
}

/// Sends requests until one is answered with its payload, within [`ANSWER_WAIT`] and
/// [`ANSWER_TRIES`].
///
/// # Errors
/// None was.
async fn wait_until_answered(client: &Client, subject: &Subject) -> Result<(), PeerError> {
    let probe = Bytes::from_static(b"ping");
    let deadline = Instant::now() + ANSWER_WAIT;
    let mut last = String::from("no try");
    for _ in 0..ANSWER_TRIES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let tried = Instant::now();
        match tokio::time::timeout(left, client.request(subject.clone(), probe.clone())).await {
            Ok(Ok(reply)) if reply.payload == probe => return Ok(()),
            Ok(Ok(reply)) => last = format!("a reply of {} bytes", reply.payload.len()),
            Ok(Err(err)) => last = err.to_string(),
            Err(_) => last = "timed out".to_owned(),
        }
        // Paced even when the server says at once that no one listens.
        let took = tried.elapsed();
        if took < ANSWER_RETRY {
            tokio::time::sleep(ANSWER_RETRY - took).await;
        }
    }
    Err(PeerError::NoAnswer(last))
}

/// One request loop: send, wait for the reply, record, again until the deadline.
struct Lane {
    client: Client,
    subject: Subject,
    input: Bytes,
    latencies: Histogram<u64>,
}

/// What one lane saw.
struct Seen {
    latencies: Histogram<u64>,
    errors: u64,
    first_error: Option<String>,
}

impl Lane {
    async fn run(mut self, deadline: Instant) -> Seen {
        let mut errors = 0;
        let mut first_error = None;
        while Instant::now() < deadline {
            let sent = Instant::now();
            let answered = self
                .client
                .request(self.subject.clone(), self.input.clone())
                .await;
            let nanos = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.latencies.saturating_record(nanos.max(1));
            let (error, fatal) = match answered {
                Ok(reply) if reply.payload.len() == self.input.len() => continue,
                Ok(reply) => (format!("a reply of {} bytes", reply.payload.len()), false),
                // Client or I/O trouble: the next request on this connection would fare alike.
                Err(err) => (err.to_string(), err.kind() == RequestErrorKind::Other),
            };
            errors += 1;
            first_error.get_or_insert(error);
            if fatal {
                break;
            }
        }
        Seen {
            latencies: self.latencies,
            errors,
            first_error,
        }
    }
}
