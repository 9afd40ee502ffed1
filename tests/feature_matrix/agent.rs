//! One agent process as the runner drives it: its stdout read as the contract's lines, each wait
//! bounded, its stdin and signals, and a transcript of everything it printed and how it exited
//! for a failure's report. The process is killed when its handle drops.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lintel_test_support::processes::signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::sdks::Role;

/// The most of an agent's stderr a transcript keeps.
const STDERR_KEPT: usize = 64 * 1024;
/// The most stdout lines a transcript keeps.
const LINES_KEPT: usize = 1_000;
/// How long an agent that said `unsupported:` may take to exit by itself before its handle's
/// drop kills it, so that its exit code is known.
pub const UNSUPPORTED_GRACE: Duration = Duration::from_secs(5);

/// Why a run did not pass.
#[derive(Debug, Clone)]
pub enum Problem {
    /// The agent in `role` said its SDK lacks `what` and exited 3 (the cell shows —).
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
    /// What the agent's SDK lacks in the agent's own role: its `unsupported:` line, when it then
    /// exited with exactly 3. `None` otherwise: a crash or a kill after that line is a failure.
    pub fn unsupported(&self) -> Option<Problem> {
        if self.exit?.code() != Some(3) {
            return None;
        }
        Some(Problem::Unsupported {
            role: self.role?,
            what: self.said_unsupported()?,
        })
    }

    /// The words of the agent's first `unsupported:` line, however it exited.
    pub fn said_unsupported(&self) -> Option<String> {
        self.stdout
            .iter()
            .find_map(|line| line.trim().strip_prefix("unsupported:"))
            .map(|what| what.trim().to_owned())
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

/// How an agent's process ended once it has: its status, or why it could not be waited on.
pub type Exit = Option<Result<ExitStatus, String>>;

/// What the run keeps of an agent after its handle is gone: its transcript and its exit.
pub struct Trace {
    pub transcript: Shared,
    exit: watch::Receiver<Exit>,
}

impl Trace {
    /// Waits until the agent's process has ended and been reaped, until `deadline` at most.
    pub async fn ended_by(&mut self, deadline: tokio::time::Instant) {
        let _ = tokio::time::timeout_at(deadline, self.exit.wait_for(Option::is_some)).await;
    }
}

/// What an [`Agent`] asks of the task that owns its process.
enum Order {
    /// Send the process this signal (a `kill -s` name), then answer.
    Signal(&'static str, oneshot::Sender<()>),
    /// SIGKILL the process.
    Kill,
}

/// A running agent, killed on drop.
pub struct Agent {
    label: String,
    role: Role,
    /// To the task that owns the process; dropping it kills the process.
    orders: mpsc::Sender<Order>,
    exit: watch::Receiver<Exit>,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// True once the agent's stdout has ended and every line of it is in the transcript.
    stdout_ended: watch::Receiver<bool>,
    transcript: Shared,
}

impl Agent {
    /// Starts `command` as the agent `label` in `role`; its output and exit go to the returned
    /// trace as they come, kept by the returned tasks until the process has ended.
    pub fn spawn(
        mut command: Command,
        label: String,
        role: Role,
    ) -> Result<(Self, Trace, Vec<JoinHandle<()>>), Problem> {
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
        let mut tasks = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            let reading = read_lines(stdout, send, Arc::clone(&transcript));
            tasks.push(tokio::spawn(async move {
                reading.await;
                ended.send_replace(true);
            }));
        }
        if let Some(stderr) = child.stderr.take() {
            tasks.push(tokio::spawn(read_stderr(stderr, Arc::clone(&transcript))));
        }
        let stdin = child.stdin.take();
        let (orders, ordered) = mpsc::channel(4);
        let (exited, exit) = watch::channel(None);
        tasks.push(tokio::spawn(keep(
            child,
            ordered,
            exited,
            Arc::clone(&transcript),
        )));
        let agent = Self {
            label,
            role,
            orders,
            exit: exit.clone(),
            stdin,
            lines,
            stdout_ended,
            transcript: Arc::clone(&transcript),
        };
        Ok((agent, Trace { transcript, exit }, tasks))
    }

    /// Reads lines until `word` alone, within `bound`. An `unsupported:` line (with exit 3), a
    /// `fail:` line, the output's end or the bound passing first is the [`Problem`] it says.
    pub async fn expect(&mut self, word: &str, bound: Duration) -> Result<(), Problem> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let line = match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(line)) => line,
                Ok(None) => {
                    let exit = describe(&self.exit_within(Duration::from_secs(5)).await);
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
                return match self.exit_within(UNSUPPORTED_GRACE).await {
                    Ok(status) if status.code() == Some(3) => Err(Problem::Unsupported {
                        role: self.role,
                        what,
                    }),
                    exit => Err(Problem::Failed(format!(
                        "{}: said `unsupported: {what}` but did not exit 3 ({})",
                        self.label,
                        describe(&exit)
                    ))),
                };
            }
            if line.starts_with("fail:") {
                let exit = describe(&self.exit_within(Duration::from_secs(5)).await);
                return Err(Problem::Failed(format!("{}: {line} ({exit})", self.label)));
            }
        }
    }

    /// Waits, within `bound`, for the agent to exit by itself; fails unless it exits 0.
    pub async fn exits_cleanly(&mut self, bound: Duration) -> Result<(), Problem> {
        match self.exit_within(bound).await {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(Problem::Failed(format!("{}: exited {status}", self.label))),
            Err(why) => Err(Problem::Failed(format!(
                "{}: {why} (when it was done)",
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
    /// its `unsupported:` line (with exit 3), its `fail:` line, or how it exited. Cancel-safe,
    /// for `select!`.
    pub async fn ended(&mut self) -> Problem {
        let exit = match self.exit.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone(),
            Err(_) => Some(Err("its process's keeper is gone".to_owned())),
        };
        let status = match exit {
            Some(Ok(status)) => status,
            other => return Problem::Failed(format!("{}: {}", self.label, describe_exit(&other))),
        };
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
            .find(|line| {
                let line = line.trim();
                line.starts_with("fail:") || line.starts_with("unsupported:")
            })
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

    /// Sends the agent `name` (a `kill -s` name such as `TERM`), unless it has been reaped.
    pub async fn signal(&self, name: &'static str) -> Result<(), Problem> {
        let gone = || Problem::Failed(format!("{}: exited before SIG{name}", self.label));
        let (done, answered) = oneshot::channel();
        self.orders
            .send(Order::Signal(name, done))
            .await
            .map_err(|_| gone())?;
        answered.await.map_err(|_| gone())
    }

    /// SIGKILLs the agent and waits until it is reaped.
    pub async fn kill(&mut self) -> Result<(), Problem> {
        // Already gone is fine: the wait below says how it ended.
        let _ = self.orders.send(Order::Kill).await;
        match self.exit_within(Duration::from_secs(10)).await {
            Ok(_) => Ok(()),
            Err(why) => Err(Problem::Failed(format!("{}: kill: {why}", self.label))),
        }
    }

    /// How the agent exited, waiting at most `bound`.
    async fn exit_within(&mut self, bound: Duration) -> Result<ExitStatus, String> {
        match tokio::time::timeout(bound, self.exit.wait_for(Option::is_some)).await {
            Ok(Ok(exit)) => exit
                .clone()
                .unwrap_or_else(|| Err("no exit recorded".to_owned())),
            Ok(Err(_)) => Err("its process's keeper is gone".to_owned()),
            Err(_) => Err(format!("still running {bound:?} later")),
        }
    }
}

/// How an exit reads in a message.
fn describe(exit: &Result<ExitStatus, String>) -> String {
    match exit {
        Ok(status) => status.to_string(),
        Err(why) => why.clone(),
    }
}

fn describe_exit(exit: &Exit) -> String {
    exit.as_ref()
        .map_or_else(|| "still running".to_owned(), describe)
}

/// Owns an agent's process: reaps it when it exits and records how; signals it on order (never
/// once reaped, so never a reused pid); kills it on order or once its [`Agent`] is dropped, an
/// agent that said `unsupported:` first given [`UNSUPPORTED_GRACE`] to exit by itself.
async fn keep(
    mut child: Child,
    mut orders: mpsc::Receiver<Order>,
    exited: watch::Sender<Exit>,
    transcript: Shared,
) {
    let status = loop {
        tokio::select! {
            biased;
            // Cancel-safe: `Child::wait` only reaps once it completes.
            status = child.wait() => break status,
            order = orders.recv() => match order {
                Some(Order::Signal(name, done)) => {
                    if let Some(pid) = child.id() {
                        signal(pid, name).await;
                    }
                    let _ = done.send(());
                }
                Some(Order::Kill) => break kill(&mut child).await,
                None => {
                    let said = lock(&transcript).said_unsupported().is_some();
                    if said {
                        if let Ok(status) =
                            tokio::time::timeout(UNSUPPORTED_GRACE, child.wait()).await
                        {
                            break status;
                        }
                    }
                    break kill(&mut child).await;
                }
            },
        }
    };
    let status = status.map_err(|err| format!("wait: {err}"));
    if let Ok(status) = &status {
        lock(&transcript).exit = Some(*status);
    }
    exited.send_replace(Some(status));
}

async fn kill(child: &mut Child) -> std::io::Result<ExitStatus> {
    child.start_kill()?;
    child.wait().await
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

#[cfg(test)]
mod behaviour {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;

    use super::*;

    /// An agent that runs `script` under `sh`, in `role`.
    fn sh(script: &str, role: Role) -> (Agent, Trace) {
        let mut command = Command::new("sh");
        command
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let (agent, trace, _tasks) =
            Agent::spawn(command, "sh".to_owned(), role).expect("start sh");
        (agent, trace)
    }

    fn said_unsupported_then(exit: Option<ExitStatus>) -> Transcript {
        Transcript {
            role: Some(Role::Worker),
            stdout: vec!["ready".to_owned(), "unsupported: events".to_owned()],
            exit,
            ..Transcript::default()
        }
    }

    #[test]
    fn an_unsupported_line_counts_only_when_the_agent_then_exits_3() {
        let exited = |code: i32| Some(ExitStatus::from_raw(code << 8));
        let unsupported = said_unsupported_then(exited(3)).unsupported();
        assert!(
            matches!(&unsupported, Some(Problem::Unsupported { role: Role::Worker, what }) if what == "events"),
            "{unsupported:?}"
        );
        for exit in [exited(0), exited(1), Some(ExitStatus::from_raw(9)), None] {
            let transcript = said_unsupported_then(exit);
            assert!(transcript.unsupported().is_none(), "{exit:?}");
            assert_eq!(transcript.said_unsupported().as_deref(), Some("events"));
        }
    }

    #[tokio::test]
    async fn an_agent_that_crashes_after_saying_unsupported_has_failed() {
        let (mut agent, _trace) = sh("echo 'unsupported: it'; exit 1", Role::Producer);
        let problem = agent.ended().await;
        assert!(matches!(problem, Problem::Failed(_)), "{problem:?}");

        let (mut agent, _trace) = sh("echo 'unsupported: it'; exit 1", Role::Producer);
        let problem = agent.expect("ready", Duration::from_secs(20)).await;
        assert!(matches!(problem, Err(Problem::Failed(_))), "{problem:?}");
    }

    #[tokio::test]
    async fn an_agent_that_says_unsupported_and_exits_3_lacks_the_feature_in_its_role() {
        let (mut agent, _trace) = sh("echo 'unsupported: it'; exit 3", Role::Producer);
        let problem = agent.ended().await;
        assert!(
            matches!(
                problem,
                Problem::Unsupported {
                    role: Role::Producer,
                    ..
                }
            ),
            "{problem:?}"
        );

        let (mut agent, _trace) = sh("echo 'unsupported: it'; exit 3", Role::Worker);
        let problem = agent.expect("ready", Duration::from_secs(20)).await;
        assert!(
            matches!(
                problem,
                Err(Problem::Unsupported {
                    role: Role::Worker,
                    ..
                })
            ),
            "{problem:?}"
        );
    }

    #[tokio::test]
    async fn a_dropped_agent_that_said_unsupported_may_still_exit_3_by_itself() {
        // The pause stands for an interpreter's shutdown after its last line.
        let (mut agent, mut trace) = sh("echo 'unsupported: it'; sleep 0.3; exit 3", Role::Worker);
        let line = tokio::time::timeout(Duration::from_secs(20), agent.lines.recv()).await;
        assert!(matches!(line, Ok(Some(_))), "{line:?}");
        drop(agent);
        trace
            .ended_by(tokio::time::Instant::now() + Duration::from_secs(20))
            .await;
        let transcript = lock(&trace.transcript);
        assert_eq!(transcript.exit.and_then(|exit| exit.code()), Some(3));
        assert!(transcript.unsupported().is_some());
    }

    #[tokio::test]
    async fn a_dropped_agent_is_killed_at_once() {
        let (mut agent, mut trace) = sh("echo ready; exec sleep 60", Role::Worker);
        agent
            .expect("ready", Duration::from_secs(20))
            .await
            .expect("ready");
        let dropped = tokio::time::Instant::now();
        drop(agent);
        trace
            .ended_by(tokio::time::Instant::now() + Duration::from_secs(20))
            .await;
        let exit = lock(&trace.transcript).exit;
        assert_eq!(exit.and_then(|exit| exit.signal()), Some(9), "{exit:?}");
        assert!(
            dropped.elapsed() < UNSUPPORTED_GRACE,
            "{:?}",
            dropped.elapsed()
        );
    }
}
