//! Child processes of the harness: peers (this binary started again in a [`Role`]), the lines
//! they answer with, and children that are killed when dropped.
//!
//! A peer gets its role as JSON in [`PEER_ENV`]. It prints `vs-nats-peer ready <text>` on stdout
//! once it serves (the text is its address, when it listens) and `vs-nats-peer result <json>`
//! when it has measured; other lines (a test binary's own) are ignored. A peer exits when its
//! stdin closes, so none outlives the harness that started it. Both ends of that contract are in
//! this file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::measure::{Load, Sample};

/// The environment variable that carries a peer's role.
pub const PEER_ENV: &str = "VS_NATS_PEER";

const READY: &str = "vs-nats-peer ready";
const RESULT: &str = "vs-nats-peer result ";

/// How long a child may take to say it is ready.
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// How much longer than its load a measuring child may take before it is killed.
const RESULT_GRACE: Duration = Duration::from_secs(60);

/// A closed-loop load as a peer receives it (the payload is made there, not sent).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadSpec {
    pub concurrency: usize,
    pub seconds: f64,
    pub max_count: u64,
    pub payload_bytes: usize,
}

impl LoadSpec {
    pub fn of(load: &Load) -> Self {
        Self {
            concurrency: load.concurrency,
            seconds: load.duration.as_secs_f64(),
            max_count: load.max_count,
            payload_bytes: load.payload.len(),
        }
    }

    pub fn load(&self) -> Load {
        Load::new(
            self.concurrency,
            Duration::from_secs_f64(self.seconds.max(0.0)),
            self.max_count,
            self.payload_bytes,
        )
    }
}

/// What a peer process does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Role {
    /// One NATS echo responder in the benchmark's queue group, until stopped.
    NatsResponder { url: String },
    /// One NATS requester: runs `load`, prints the result, exits.
    NatsRequester { url: String, load: LoadSpec },
    /// A floor echo server on a free loopback port, until stopped.
    FloorEcho,
    /// The floor's relay on a free loopback port: each client connection gets one connection to
    /// each of `echo` (echo servers, or the next relay), in turn.
    FloorRelay { echo: Vec<SocketAddr> },
    /// A floor client over one connection to each of `targets` in turn: runs `load`, prints the
    /// result, exits.
    FloorClient {
        targets: Vec<SocketAddr>,
        load: LoadSpec,
    },
}

impl Role {
    pub fn name(&self) -> &'static str {
        match self {
            Role::NatsResponder { .. } => "nats responder",
            Role::NatsRequester { .. } => "nats requester",
            Role::FloorEcho => "floor echo",
            Role::FloorRelay { .. } => "floor relay",
            Role::FloorClient { .. } => "floor client",
        }
    }

    /// The role this process was started in, if it was started as a peer.
    pub fn from_env() -> Option<Result<Self, String>> {
        let spec = std::env::var(PEER_ENV).ok()?;
        Some(serde_json::from_str(&spec).map_err(|err| format!("{PEER_ENV}: {err}")))
    }
}

/// Peer side: says the peer serves (at `text`, its address if it listens).
pub fn print_ready(text: &str) {
    println!("{READY} {text}");
}

/// Peer side: hands the measured sample back.
///
/// # Errors
/// The sample cannot be encoded.
pub fn print_result(sample: &Sample) -> Result<(), String> {
    let json = serde_json::to_string(sample).map_err(|err| err.to_string())?;
    println!("{RESULT}{json}");
    Ok(())
}

/// Serving peer side: exits the process when stdin closes, that is when the harness is gone.
pub fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(0);
    });
}

/// How to start this binary as a peer.
#[derive(Debug, Clone)]
pub struct Launcher {
    exe: PathBuf,
    args: Vec<String>,
}

impl Launcher {
    /// The running binary itself; its `main` runs the role before anything else.
    ///
    /// # Errors
    /// The binary's path is unknown.
    pub fn this_binary() -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|err| format!("no current_exe: {err}"))?;
        Ok(Self {
            exe,
            args: Vec::new(),
        })
    }

    /// The running libtest binary, told to run only the test `entry`, which runs the role.
    ///
    /// # Errors
    /// The binary's path is unknown.
    #[allow(dead_code)] // tests/bench_harness.rs starts its peers this way
    pub fn test_entry(entry: &str) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|err| format!("no current_exe: {err}"))?;
        let args = [
            entry,
            "--exact",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ];
        Ok(Self {
            exe,
            args: args.map(str::to_owned).to_vec(),
        })
    }

    /// A serving peer gets a stdin pipe it watches; a measuring one, which ends by itself,
    /// gets none.
    fn command(&self, role: &Role, stdin: Stdio) -> Result<Command, String> {
        let spec = serde_json::to_string(role).map_err(|err| err.to_string())?;
        let mut command = Command::new(&self.exe);
        command
            .args(&self.args)
            .env(PEER_ENV, spec)
            .stdin(stdin)
            .stderr(Stdio::inherit());
        Ok(command)
    }

    /// Starts a serving peer and waits, bounded, until it is ready; returns it with the text of
    /// its ready line.
    ///
    /// # Errors
    /// It could not start or was not ready in time.
    pub async fn serve(&self, role: &Role) -> Result<(Proc, String), String> {
        let command = self.command(role, Stdio::piped())?;
        Proc::start_ready(command, role.name(), READY, Stream::Stdout).await
    }

    /// Runs a measuring peer to its end and returns its sample.
    ///
    /// # Errors
    /// It failed, took far too long or printed no result.
    pub async fn measure(&self, role: &Role, load: &LoadSpec) -> Result<Sample, String> {
        let command = self.command(role, Stdio::null())?;
        let limit = Duration::from_secs_f64(load.seconds.max(0.0)) + RESULT_GRACE;
        let (status, stdout, stderr) = output_within(command, role.name(), limit).await?;
        let result = stdout
            .lines()
            .find_map(|line| line.strip_prefix(RESULT))
            .ok_or_else(|| failed(role.name(), status, &stderr))?;
        serde_json::from_str(result).map_err(|err| format!("{}: bad result: {err}", role.name()))
    }
}

/// Which output stream a child's ready line comes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A child process, killed when stopped or dropped.
pub struct Proc {
    child: Child,
    /// Held open: a peer exits when it closes.
    _stdin: Option<ChildStdin>,
}

impl Proc {
    /// Spawns `command` with `stream` piped, and waits until a line there starts with `ready`;
    /// returns the rest of that line, trimmed. Later lines on a piped stderr are passed on to
    /// the harness's stderr, tagged with `name`; later lines on stdout are dropped.
    ///
    /// # Errors
    /// It could not start, exited first or was not ready within [`READY_WAIT`].
    pub async fn start_ready(
        mut command: Command,
        name: &str,
        ready: &str,
        stream: Stream,
    ) -> Result<(Self, String), String> {
        match stream {
            Stream::Stdout => command.stdout(Stdio::piped()),
            Stream::Stderr => command.stderr(Stdio::piped()),
        };
        let mut child = command
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("cannot start {name}: {err}"))?;
        let stdin = child.stdin.take();
        let text = match stream {
            Stream::Stdout => {
                let out = child.stdout.take().ok_or("no stdout")?;
                wait_for_line(out, name, ready, false).await
            }
            Stream::Stderr => {
                let out = child.stderr.take().ok_or("no stderr")?;
                wait_for_line(out, name, ready, true).await
            }
        };
        let mut proc = Self {
            child,
            _stdin: stdin,
        };
        match text {
            Ok(text) => Ok((proc, text)),
            Err(err) => {
                let exit = proc.child.try_wait().ok().flatten();
                proc.stop().await;
                Err(match exit {
                    Some(status) => format!("{err} ({name} exited: {status})"),
                    None => err,
                })
            }
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the process and reaps it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Reads `stream` until a line starts with `ready` and returns the rest of it. Lines before it
/// are kept for the error only; lines after it are read on (so the child never blocks on a full
/// pipe) and, when `forward`, passed on to stderr tagged with `name`.
async fn wait_for_line(
    stream: impl AsyncRead + Unpin + Send + 'static,
    name: &str,
    ready: &str,
    forward: bool,
) -> Result<String, String> {
    let mut lines = BufReader::new(stream).lines();
    let mut before = Vec::new();
    let found = tokio::time::timeout(READY_WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            // Anywhere in the line: a log line starts with its time and level.
            if let Some((_, rest)) = line.split_once(ready) {
                return Some(rest.trim().to_owned());
            }
            if before.len() == 5 {
                before.remove(0);
            }
            before.push(line);
        }
        None
    })
    .await;
    let text = match found {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(format!(
                "{name} ended before it was ready; it said: {}",
                before.join(" | ")
            ))
        }
        Err(_) => {
            return Err(format!(
                "{name} was not ready within {READY_WAIT:?}; it said: {}",
                before.join(" | ")
            ))
        }
    };
    let name = name.to_owned();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if forward {
                eprintln!("  {name}: {line}");
            }
        }
    });
    Ok(text)
}

/// Runs `command` to its end within `limit` (killing it after), with stdout and stderr
/// captured.
///
/// # Errors
/// It could not start or ran past `limit`.
pub async fn output_within(
    mut command: Command,
    name: &str,
    limit: Duration,
) -> Result<(ExitStatus, String, String), String> {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("cannot start {name}: {err}"))?;
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| format!("{name} ran past {limit:?} and was killed"))?
        .map_err(|err| format!("{name}: {err}"))?;
    Ok((
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// Why a measuring child gave no result: its exit status and the end of its stderr.
pub fn failed(name: &str, status: ExitStatus, stderr: &str) -> String {
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    format!(
        "{name} gave no result ({status}); stderr ends: {}",
        tail.join(" | ")
    )
}
