//! One agent process as the runner drives it: its stdout read as the contract's lines, each wait
//! bounded, its stdin and signals, and a transcript of everything it printed for a failure's
//! report. The process is killed when its handle drops.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lintel_test_support::processes::signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::sdks::Role;

/// The most of an agent's stderr a transcript keeps.
const STDERR_KEPT: usize = 64 * 1024;
/// The most stdout lines a transcript keeps.
const LINES_KEPT: usize = 1_000;

/// Why a run did not pass.
#[derive(Debug, Clone)]
pub enum Problem {
    /// The agent in `role` said its SDK lacks `what` (the cell shows —).
    Unsupported { role: Role, what: String },
    /// Anything else: what went wrong.
    Failed(String),
}

/// Everything an agent printed, and how it exited once known.
#[derive(Debug, Default)]
pub struct Transcript {
    pub label: String,
    pub role: Option<Role>,
    pub stdout: Vec<String>,
    pub stderr: String,
    pub exit: Option<ExitStatus>,
}

impl Transcript {
    /// What the agent said it lacks, if it printed an `unsupported:` line.
    pub fn unsupported(&self) -> Option<Problem> {
        let what = self
            .stdout
            .iter()
            .find_map(|line| line.trim().strip_prefix("unsupported:"))?;
        Some(Problem::Unsupported {
            role: self.role?,
            what: what.trim().to_owned(),
        })
    }

    /// The transcript as a failure report shows it.
    pub fn report(&self) -> String {
        let exit = self
            .exit
            .map_or_else(|| "killed or still running".to_owned(), |s| s.to_string());
        format!(
            "--- {} ({exit})\nstdout:\n{}\nstderr:\n{}",
            self.label,
            indent(&self.stdout.join("\n")),
            indent(self.stderr.trim_end())
        )
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}

/// A transcript shared by the agent's readers and the run that reports it.
pub type Shared = Arc<Mutex<Transcript>>;

pub fn lock(transcript: &Shared) -> MutexGuard<'_, Transcript> {
    transcript.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running agent, killed on drop.
pub struct Agent {
    label: String,
    role: Role,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// True once the agent's stdout has ended and every line of it is in the transcript.
    stdout_ended: watch::Receiver<bool>,
    transcript: Shared,
}

impl Agent {
    /// Starts `command` as the agent `label` in `role`; its output goes to the returned
    /// transcript as it comes, read by the returned tasks until the process's pipes close.
    pub fn spawn(
        mut command: Command,
        label: String,
        role: Role,
    ) -> Result<(Self, Shared, Vec<JoinHandle<()>>), Problem> {
        let mut child = command
            .spawn()
            .map_err(|err| Problem::Failed(format!("{label}: cannot start: {err}")))?;
        let transcript: Shared = Arc::new(Mutex::new(Transcript {
            label: label.clone(),
            role: Some(role),
            ..Transcript::default()
        }));
        let (send, lines) = mpsc::unbounded_channel();
        let (ended, stdout_ended) = watch::channel(false);
        let mut readers = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            let reading = read_lines(stdout, send, Arc::clone(&transcript));
            readers.push(tokio::spawn(async move {
                reading.await;
                ended.send_replace(true);
            }));
        }
        if let Some(stderr) = child.stderr.take() {
            readers.push(tokio::spawn(read_stderr(stderr, Arc::clone(&transcript))));
        }
        let stdin = child.stdin.take();
        let agent = Self {
            label,
            role,
            child,
            stdin,
            lines,
            stdout_ended,
            transcript: Arc::clone(&transcript),
        };
        Ok((agent, transcript, readers))
    }

    /// Reads lines until `word` alone, within `bound`. An `unsupported:` or `fail:` line, the
    /// output's end or the bound passing first is the [`Problem`] it says.
    pub async fn expect(&mut self, word: &str, bound: Duration) -> Result<(), Problem> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => line,
                Ok(None) => {
                    let exit = self.exit_within(Duration::from_secs(5)).await;
                    return Err(Problem::Failed(format!(
                        "{}: its output ended before `{word}` ({exit})",
                        self.label
                    )));
                }
                Err(_) => {
                    return Err(Problem::Failed(format!(
                        "{}: no `{word}` within {bound:?}",
                        self.label
                    )))
                }
            };
            let line = line.trim();
            if line == word {
                return Ok(());
            }
            if let Some(what) = line.strip_prefix("unsupported:") {
                let what = what.trim().to_owned();
                return match self.exit_code_within(Duration::from_secs(5)).await {
                    Some(3) => Err(Problem::Unsupported {
                        role: self.role,
                        what,
                    }),
                    code => Err(Problem::Failed(format!(
                        "{}: said `unsupported: {what}` but did not exit 3 ({code:?})",
                        self.label
                    ))),
                };
            }
            if line.starts_with("fail:") {
                let exit = self.exit_within(Duration::from_secs(5)).await;
                return Err(Problem::Failed(format!("{}: {line} ({exit})", self.label)));
            }
        }
    }

    /// Waits, within `bound`, for the agent to exit by itself; fails unless it exits 0.
    pub async fn exits_cleanly(&mut self, bound: Duration) -> Result<(), Problem> {
        match tokio::time::timeout(bound, self.child.wait()).await {
            Ok(Ok(status)) => {
                lock(&self.transcript).exit = Some(status);
                if status.success() {
                    Ok(())
                } else {
                    Err(Problem::Failed(format!("{}: exited {status}", self.label)))
                }
            }
            Ok(Err(err)) => Err(Problem::Failed(format!("{}: wait: {err}", self.label))),
            Err(_) => Err(Problem::Failed(format!(
                "{}: still running {bound:?} after it was done",
                self.label
            ))),
        }
    }

    /// A producer's verdict: `pass` and exit 0, within `bound`.
    pub async fn passes(&mut self, bound: Duration) -> Result<(), Problem> {
        self.expect("pass", bound).await?;
        self.exits_cleanly(Duration::from_secs(10)).await
    }

    /// Waits until the agent has exited and its output is read, and tells what that ended:
    /// its `unsupported:` or `fail:` line, or how it exited. Cancel-safe, for `select!`.
    pub async fn ended(&mut self) -> Problem {
        let status = match self.child.wait().await {
            Ok(status) => status,
            Err(err) => return Problem::Failed(format!("{}: wait: {err}", self.label)),
        };
        lock(&self.transcript).exit = Some(status);
        let read = tokio::time::timeout(
            Duration::from_secs(5),
            self.stdout_ended.wait_for(|ended| *ended),
        );
        let _ = read.await;
        let transcript = lock(&self.transcript);
        if let Some(unsupported) = transcript.unsupported() {
            return unsupported;
        }
        let said = transcript
            .stdout
            .iter()
            .find(|line| line.trim().starts_with("fail:"))
            .map_or_else(
                || "no `fail:` line".to_owned(),
                |line| line.trim().to_owned(),
            );
        Problem::Failed(format!("{}: exited {status} early: {said}", self.label))
    }

    /// Writes `line` to the agent's stdin.
    pub async fn send(&mut self, line: &str) -> Result<(), Problem> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| Problem::Failed(format!("{}: stdin closed", self.label)))?;
        let written = async {
            stdin.write_all(format!("{line}\n").as_bytes()).await?;
            stdin.flush().await
        };
        written
            .await
            .map_err(|err| Problem::Failed(format!("{}: write `{line}`: {err}", self.label)))
    }

    /// Sends the agent `name` (a `kill -s` name such as `TERM`).
    pub async fn signal(&self, name: &str) -> Result<(), Problem> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| Problem::Failed(format!("{}: exited before SIG{name}", self.label)))?;
        signal(pid, name).await;
        Ok(())
    }

    /// SIGKILLs the agent and reaps it.
    pub async fn kill(&mut self) -> Result<(), Problem> {
        self.child
            .kill()
            .await
            .map_err(|err| Problem::Failed(format!("{}: kill: {err}", self.label)))
    }

    /// The agent's exit code, waiting at most `bound`; `None` when it is still running or was
    /// ended by a signal.
    async fn exit_code_within(&mut self, bound: Duration) -> Option<i32> {
        let status = tokio::time::timeout(bound, self.child.wait())
            .await
            .ok()?
            .ok()?;
        lock(&self.transcript).exit = Some(status);
        status.code()
    }

    /// How the agent exited, waiting at most `bound`; for messages.
    async fn exit_within(&mut self, bound: Duration) -> String {
        match tokio::time::timeout(bound, self.child.wait()).await {
            Ok(Ok(status)) => {
                lock(&self.transcript).exit = Some(status);
                status.to_string()
            }
            Ok(Err(err)) => format!("wait: {err}"),
            Err(_) => format!("still running {bound:?} later"),
        }
    }
}

/// Sends each stdout line on `send` and keeps it in the transcript.
async fn read_lines(
    stdout: impl AsyncRead + Unpin,
    send: mpsc::UnboundedSender<String>,
    transcript: Shared,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        {
            let mut kept = lock(&transcript);
            if kept.stdout.len() < LINES_KEPT {
                kept.stdout.push(line.clone());
            }
        }
        let _ = send.send(line);
    }
}

/// Keeps the first [`STDERR_KEPT`] bytes of stderr in the transcript, reading it all.
async fn read_stderr(mut stderr: impl AsyncRead + Unpin, transcript: Shared) {
    let mut chunk = [0u8; 4096];
    while let Ok(read) = stderr.read(&mut chunk).await {
        let Some(bytes) = chunk.get(..read).filter(|bytes| !bytes.is_empty()) else {
            break;
        };
        let mut kept = lock(&transcript);
        let room = STDERR_KEPT.saturating_sub(kept.stderr.len());
        let text = String::from_utf8_lossy(bytes);
        kept.stderr.extend(text.chars().take(room));
    }
}
