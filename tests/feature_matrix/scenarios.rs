//! The scenarios and the runner's steps for each: which agents it starts, in what order, what
//! it waits for and what it does to them, for one worker SDK and one producer SDK on a node
//! of their own.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::agent::{lock, Agent, Problem, Trace, Transcript, UNSUPPORTED_GRACE};
use crate::sdks::{Agents, Role, Sdk};

/// How long an agent may take to start and say `ready`.
const READY: Duration = Duration::from_secs(20);
/// How long a producer may take to its verdict: agents give up by themselves within 30 s.
const VERDICT: Duration = Duration::from_secs(35);
/// How long a handler may take to start once the producer runs.
const STARTED: Duration = Duration::from_secs(20);
/// How long a worker may take to see its cancellation.
const CANCELLED: Duration = Duration::from_secs(10);
/// How long a drained worker may take to say so and exit.
const DRAINED: Duration = Duration::from_secs(15);
/// How long a failed run waits for its agents' exits, to tell an unsupported feature (exit 3)
/// from a crash.
const EXITS: Duration = UNSUPPORTED_GRACE.saturating_add(Duration::from_secs(5));

/// A scenario of the contract; each uses namespace `matrix`, its name as the task queue and
/// activity type `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    Echo,
    NoWorker,
    WorkerLost,
    Timeout,
    Cancel,
    Drain,
    Headers,
    Deployment,
    Events,
    Heartbeat,
}

impl Scenario {
    /// Every scenario, in the table's row order.
    pub const ALL: [Scenario; 10] = [
        Scenario::Echo,
        Scenario::NoWorker,
        Scenario::WorkerLost,
        Scenario::Timeout,
        Scenario::Cancel,
        Scenario::Drain,
        Scenario::Headers,
        Scenario::Deployment,
        Scenario::Events,
        Scenario::Heartbeat,
    ];

    /// The scenario's name: on agents' command lines, and its task queue.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Echo => "echo",
            Scenario::NoWorker => "no-worker",
            Scenario::WorkerLost => "worker-lost",
            Scenario::Timeout => "timeout",
            Scenario::Cancel => "cancel",
            Scenario::Drain => "drain",
            Scenario::Headers => "headers",
            Scenario::Deployment => "deployment",
            Scenario::Events => "events",
            Scenario::Heartbeat => "heartbeat",
        }
    }

    /// The scenario named `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|scenario| scenario.name() == name)
    }

    /// What a pass shows, in a few words, for the table.
    pub fn checks(self) -> &'static str {
        match self {
            Scenario::Echo => "input back as output",
            Scenario::NoWorker => "no-worker outcome and its census",
            Scenario::WorkerLost => "worker killed mid-request: worker-lost",
            Scenario::Timeout => "reply timeout: timeout outcome",
            Scenario::Cancel => "producer cancels, handler sees it",
            Scenario::Drain => "SIGTERM drains: in-flight request completes",
            Scenario::Headers => "headers and traceparent reach the handler",
            Scenario::Deployment => "a dispatch picks its deployment",
            Scenario::Events => "subscription sees the worker register",
            Scenario::Heartbeat => "heartbeat details reach the producer in order",
        }
    }

    /// False for `no-worker`, which runs a producer alone.
    pub fn has_worker(self) -> bool {
        self != Scenario::NoWorker
    }

    /// The node's settings (`LINTEL_*` variables) the scenario needs.
    pub fn node_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Scenario::WorkerLost => &[("LINTEL_WORKER_RESUME_GRACE_MS", "300")],
            _ => &[],
        }
    }
}

/// One scenario for one (worker SDK, producer SDK) pair, against the node at `addr`: the
/// agents it started and their traces.
pub struct Run<'a> {
    pub scenario: Scenario,
    pub worker: Sdk,
    pub producer: Sdk,
    addr: SocketAddr,
    agents: &'a Agents,
    traces: Vec<Trace>,
    /// The tasks that read each agent's output and reap it.
    tasks: Vec<JoinHandle<()>>,
}

impl<'a> Run<'a> {
    pub fn new(
        scenario: Scenario,
        worker: Sdk,
        producer: Sdk,
        addr: SocketAddr,
        agents: &'a Agents,
    ) -> Self {
        Self {
            scenario,
            worker,
            producer,
            addr,
            agents,
            traces: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// Starts the pair's agent in `role` with `extra` arguments (`--deployment`, ...).
    fn spawn(&mut self, role: Role, extra: &[&str]) -> Result<Agent, Problem> {
        let sdk = match role {
            Role::Worker => self.worker,
            Role::Producer => self.producer,
        };
        let mut args = vec![
            role.name().to_owned(),
            "--addr".to_owned(),
            self.addr.to_string(),
            "--scenario".to_owned(),
            self.scenario.name().to_owned(),
        ];
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        let mut label = format!("{} {}", sdk.name(), role.name());
        if !extra.is_empty() {
            label = format!("{label} {}", extra.join(" "));
        }
        let command = self.agents.command(sdk, &args);
        let (agent, trace, tasks) = Agent::spawn(command, label, role)?;
        self.traces.push(trace);
        self.tasks.extend(tasks);
        Ok(agent)
    }

    /// Runs the scenario's steps. A failure is an agent's unsupported feature instead when that
    /// agent said `unsupported:` and exited 3 (see [`explain`]).
    pub async fn steps(&mut self) -> Result<(), Problem> {
        let result = self.run_steps().await;
        match result {
            Err(Problem::Failed(why)) => {
                // The steps' agents are dropped, so being killed: wait for how each ended.
                let deadline = tokio::time::Instant::now() + EXITS;
                for trace in &mut self.traces {
                    trace.ended_by(deadline).await;
                }
                let transcripts: Vec<_> = self
                    .traces
                    .iter()
                    .map(|trace| lock(&trace.transcript))
                    .collect();
                Err(explain(why, transcripts.iter().map(|kept| &**kept)))
            }
            other => other,
        }
    }

    async fn run_steps(&mut self) -> Result<(), Problem> {
        match self.scenario {
            Scenario::Echo | Scenario::Timeout | Scenario::Headers | Scenario::Heartbeat => {
                let mut worker = self.spawn(Role::Worker, &[])?;
                worker.expect("ready", READY).await?;
                let mut producer = self.spawn(Role::Producer, &[])?;
                producer.passes(VERDICT).await
            }
            Scenario::NoWorker => {
                let mut producer = self.spawn(Role::Producer, &[])?;
                producer.passes(VERDICT).await
            }
            Scenario::WorkerLost => {
                let mut worker = self.spawn(Role::Worker, &[])?;
                worker.expect("ready", READY).await?;
                let mut producer = self.spawn(Role::Producer, &[])?;
                unless_ended(worker.expect("started", STARTED), &mut producer).await?;
                worker.kill().await?;
                producer.passes(VERDICT).await
            }
            Scenario::Cancel => {
                let mut worker = self.spawn(Role::Worker, &[])?;
                worker.expect("ready", READY).await?;
                let mut producer = self.spawn(Role::Producer, &[])?;
                producer.expect("ready", READY).await?;
                unless_ended(worker.expect("started", STARTED), &mut producer).await?;
                producer.send("go").await?;
                worker.expect("cancelled", CANCELLED).await?;
                producer.passes(VERDICT).await
            }
            Scenario::Drain => {
                let mut worker = self.spawn(Role::Worker, &[])?;
                worker.expect("ready", READY).await?;
                let mut producer = self.spawn(Role::Producer, &[])?;
                unless_ended(worker.expect("started", STARTED), &mut producer).await?;
                worker.signal("TERM").await?;
                producer.passes(VERDICT).await?;
                worker.expect("drained", DRAINED).await?;
                worker.exits_cleanly(DRAINED).await
            }
            Scenario::Deployment => {
                let mut blue = self.spawn(
                    Role::Worker,
                    &["--deployment", "blue", "--identity", "matrix-blue"],
                )?;
                let mut green = self.spawn(
                    Role::Worker,
                    &["--deployment", "green", "--identity", "matrix-green"],
                )?;
                blue.expect("ready", READY).await?;
                green.expect("ready", READY).await?;
                let mut producer = self.spawn(Role::Producer, &[])?;
                producer.passes(VERDICT).await
            }
            Scenario::Events => {
                let mut producer = self.spawn(Role::Producer, &[])?;
                producer.expect("ready", READY).await?;
                let _worker = self.spawn(Role::Worker, &["--identity", "matrix-events"])?;
                producer.passes(VERDICT).await
            }
        }
    }

    /// Every agent's transcript, once its output has ended and it is reaped (its process is
    /// killed by now; bounded all the same).
    pub async fn report(self) -> String {
        for task in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        self.traces
            .iter()
            .map(|trace| lock(&trace.transcript).report())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `waiting` (on one agent), unless `other` ends first: then what ended it is the problem.
async fn unless_ended(
    waiting: impl Future<Output = Result<(), Problem>>,
    other: &mut Agent,
) -> Result<(), Problem> {
    tokio::select! {
        result = waiting => result,
        ended = other.ended() => Err(ended),
    }
}

/// Why a run failed: `why`, unless one of its agents said `unsupported:` and exited 3 (the only
/// way [`Transcript::unsupported`] answers), which blames the feature on that agent's own role.
fn explain<'t>(why: String, transcripts: impl IntoIterator<Item = &'t Transcript>) -> Problem {
    transcripts
        .into_iter()
        .find_map(Transcript::unsupported)
        .unwrap_or(Problem::Failed(why))
}

#[cfg(test)]
mod behaviour {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    fn agent(role: Role, stdout: &[&str], exit: Option<ExitStatus>) -> Transcript {
        Transcript {
            role: Some(role),
            stdout: stdout.iter().map(|line| (*line).to_owned()).collect(),
            exit,
            ..Transcript::default()
        }
    }

    fn exited(code: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(code << 8))
    }

    #[test]
    fn a_failed_run_is_unsupported_only_when_the_agent_that_said_so_exited_3() {
        let why = || "the producer saw no registration".to_owned();
        let producer = agent(Role::Producer, &["ready"], exited(1));
        let crashed = agent(Role::Worker, &["unsupported: events"], exited(1));
        let killed = agent(Role::Worker, &["unsupported: events"], None);
        for worker in [crashed, killed] {
            let problem = explain(why(), [&worker, &producer]);
            assert!(matches!(problem, Problem::Failed(_)), "{problem:?}");
        }
        let lacking = agent(Role::Worker, &["unsupported: events"], exited(3));
        let problem = explain(why(), [&producer, &lacking]);
        assert!(
            matches!(&problem, Problem::Unsupported { role: Role::Worker, what } if what == "events"),
            "{problem:?}"
        );
        // Exit 3 without the line is a failure too.
        let silent = agent(Role::Worker, &["ready"], exited(3));
        let problem = explain(why(), [&silent, &producer]);
        assert!(matches!(problem, Problem::Failed(_)), "{problem:?}");
    }
}
