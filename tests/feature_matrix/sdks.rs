//! The SDKs the matrix runs agents of: whether each can run here, and the command that starts
//! its agent in a role.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

/// Names the test's own binary as the Rust agent: set, it runs the agent with these words
/// (`ROLE --addr HOST:PORT --scenario NAME ...`) instead of the matrix.
pub const AGENT_VAR: &str = "LINTEL_MATRIX_AGENT";

/// Where the TypeScript and Python packages are, when not the repo's `clients/`: another
/// worktree's, say, to run its agents before its branch lands.
pub const CLIENTS_VAR: &str = "LINTEL_MATRIX_CLIENTS";

/// The name of the one test in this binary, which a Rust agent runs again.
pub const TEST: &str = "every_sdk_passes_every_scenario_against_every_other";

/// The oldest Python the SDK supports, and a program that prints the interpreter's version and
/// exits 0 only when it is that or newer.
const PYTHON_SUPPORTED: &str = "3.11";
const PYTHON_CHECK: &str =
    "import sys; print(sys.version.split()[0]); sys.exit(sys.version_info < (3, 11))";

/// An SDK with a matrix agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sdk {
    Rust,
    TypeScript,
    Python,
}

impl Sdk {
    /// Every SDK, in the table's column order.
    pub const ALL: [Sdk; 3] = [Sdk::Rust, Sdk::TypeScript, Sdk::Python];

    /// The SDK's name in the table and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Sdk::Rust => "rust",
            Sdk::TypeScript => "typescript",
            Sdk::Python => "python",
        }
    }
}

/// The part an agent plays in a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Worker,
    Producer,
}

impl Role {
    /// The role's word on an agent's command line.
    pub fn name(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Producer => "producer",
        }
    }
}

/// Where the agents are: the repo root the runner runs them from, and the clients' packages.
#[derive(Debug, Clone)]
pub struct Agents {
    root: PathBuf,
    clients: PathBuf,
}

impl Agents {
    /// The repo's agents, or those under [`CLIENTS_VAR`] when it is set.
    pub fn from_env() -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let clients = std::env::var_os(CLIENTS_VAR)
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("clients"));
        Self { root, clients }
    }

    /// Why `sdk`'s agent cannot run here; `None` when it can.
    pub fn unavailable(&self, sdk: Sdk) -> Option<String> {
        let (program, agent) = match sdk {
            Sdk::Rust => return None,
            Sdk::TypeScript => ("node", self.typescript_agent()),
            Sdk::Python => ("python3", self.python_agent()),
        };
        if !on_path(program) {
            return Some(format!("no `{program}` on PATH"));
        }
        if !agent.is_file() {
            return Some(format!("no agent at {}", agent.display()));
        }
        if sdk == Sdk::Python {
            let mut check = std::process::Command::new(program);
            check.args(["-c", PYTHON_CHECK]);
            return unsupported_interpreter(program, check, PYTHON_SUPPORTED);
        }
        None
    }

    /// The command that starts `sdk`'s agent with `args` (its role first), from the repo root,
    /// its standard streams piped and killed when dropped.
    pub fn command(&self, sdk: Sdk, args: &[String]) -> Command {
        let mut command = match sdk {
            Sdk::Rust => {
                let exe =
                    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("feature_matrix"));
                let mut command = Command::new(exe);
                // Quiet: the harness prints only its `running 1 test` line before the agent's.
                command
                    .args([
                        TEST,
                        "--exact",
                        "--nocapture",
                        "--test-threads=1",
                        "--quiet",
                    ])
                    .env(AGENT_VAR, args.join(" "));
                command
            }
            Sdk::TypeScript => {
                let mut command = Command::new("node");
                command.arg(self.typescript_agent()).args(args);
                command
            }
            Sdk::Python => {
                let python = self.clients.join("python");
                let path = std::env::join_paths([python.join("src"), python.join("matrix")])
                    .unwrap_or_default();
                let mut command = Command::new("python3");
                command
                    .args(["-m", "lintel_matrix"])
                    .args(args)
                    .env("PYTHONPATH", path)
                    .env("PYTHONUNBUFFERED", "1");
                command
            }
        };
        command
            .current_dir(&self.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    fn typescript_agent(&self) -> PathBuf {
        self.clients.join("typescript/dist/matrix/agent.js")
    }

    fn python_agent(&self) -> PathBuf {
        self.clients.join("python/matrix/lintel_matrix/__main__.py")
    }
}

/// Why `program` is not an interpreter the SDK supports, running `check`, which prints its
/// version and exits 0 when it is `oldest` or newer; `None` when it is.
fn unsupported_interpreter(
    program: &str,
    mut check: std::process::Command,
    oldest: &str,
) -> Option<String> {
    let output = match check.stdin(Stdio::null()).output() {
        Ok(output) => output,
        Err(err) => return Some(format!("`{program}` does not run: {err}")),
    };
    if output.status.success() {
        return None;
    }
    let version = String::from_utf8_lossy(&output.stdout);
    let version = version.trim();
    if output.status.code() == Some(1) && !version.is_empty() {
        return Some(format!(
            "`{program}` is {version}; the SDK needs {oldest} or newer"
        ));
    }
    Some(format!(
        "`{program}` failed its version check ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}

/// True when an executable file `program` is in a directory on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod behaviour {
    use super::*;

    fn sh(script: &str) -> std::process::Command {
        let mut command = std::process::Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn an_interpreter_older_than_the_sdk_needs_is_unavailable_saying_its_version() {
        let old = unsupported_interpreter("python3", sh("echo 3.9.2; exit 1"), "3.11");
        assert_eq!(
            old.as_deref(),
            Some("`python3` is 3.9.2; the SDK needs 3.11 or newer")
        );
        let new = unsupported_interpreter("python3", sh("echo 3.12.1"), "3.11");
        assert_eq!(new, None);
    }

    #[test]
    fn an_interpreter_that_cannot_run_its_check_is_unavailable_saying_why() {
        let broken = unsupported_interpreter("python3", sh("echo oops >&2; exit 2"), "3.11");
        assert!(
            broken.as_deref().is_some_and(|why| why.contains("oops")),
            "{broken:?}"
        );
        let missing = std::process::Command::new("/nonexistent/python3");
        let absent = unsupported_interpreter("python3", missing, "3.11");
        assert!(
            absent
                .as_deref()
                .is_some_and(|why| why.contains("does not run")),
            "{absent:?}"
        );
    }
}
