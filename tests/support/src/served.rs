//! The built `lintel` binary as a child process: commands free of the caller's settings, and
//! [`Served`], a `lintel serve` (or any long-running command) whose stderr is read line by line.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Instant;

use crate::lines::stderr_lines;
use crate::node::WAIT;

/// `lintel` with no `RUST_LOG` or `LINTEL_*` settings inherited from the caller's shell: the
/// node reads each `LINTEL_*` as a config key and refuses the ones it does not know.
pub fn lintel() -> Command {
    without_settings(&binary().to_string_lossy())
}

/// The `lintel` binary Cargo built beside the running test: tests run from `target/<profile>/deps`
/// and the binary is in `target/<profile>`.
fn binary() -> PathBuf {
    let name = format!("lintel{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|test| Some(test.parent()?.parent()?.join(&name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// `program` with no `RUST_LOG` or `LINTEL_*` settings inherited, for a shell that runs
/// `lintel` commands.
pub fn without_settings(program: &str) -> Command {
    let mut command = Command::new(program);
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if name_text.starts_with("LINTEL_") || name_text == "RUST_LOG" {
            command.env_remove(&name);
        }
    }
    command
}

/// A `lintel serve` child, killed on drop, with its stderr read line by line.
pub struct Served {
    child: Child,
    lines: Receiver<String>,
    /// Every stderr line read so far, in order.
    pub seen: Vec<String>,
}

impl Served {
    /// Starts `lintel serve` with `args`.
    pub fn start(args: &[&str]) -> Self {
        let mut command = lintel();
        command.arg("serve").args(args);
        Self::spawn(command)
    }

    /// Starts `command`, a `lintel serve` built by the caller (with variables, say).
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lintel serve starts");
        let lines = stderr_lines(&mut child);
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The node's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts `lintel serve --listen 127.0.0.1:0` with `extra` flags and waits until it
    /// listens; the node and its `127.0.0.1:port`.
    pub fn on_loopback(extra: &[&str]) -> (Self, String) {
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut served = Self::start(&args);
        let addr = served.listening();
        (served, addr)
    }

    /// Reads stderr until a line containing `text`, and returns it.
    pub fn wait_for(&mut self, text: &str) -> String {
        line_with(&self.lines, &mut self.seen, text)
    }

    /// Reads stderr until the `listening` line (not the admin listener's) and returns the
    /// `127.0.0.1:port` in it.
    pub fn listening(&mut self) -> String {
        let line = loop {
            let line = self.wait_for("listening");
            if !line.contains("admin listening") {
                break line;
            }
        };
        loopback_address(&line)
            .unwrap_or_else(|| panic!("no loopback address in the listening line: {line}"))
    }

    /// Reads stderr to its end, within [`WAIT`], and reaps the process: how it exited.
    ///
    /// # Panics
    /// When its stderr stays open past [`WAIT`].
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("still running after {WAIT:?}: {:?}", self.seen)
                }
            }
        }
        self.child.wait().expect("reap the process")
    }

    /// The admin listener's `127.0.0.1:port`, from its line, read already or still to come.
    pub fn admin_listening(&mut self) -> String {
        let seen = self
            .seen
            .iter()
            .find(|line| line.contains("admin listening"))
            .cloned();
        let line = seen.unwrap_or_else(|| self.wait_for("admin listening"));
        loopback_address(&line)
            .unwrap_or_else(|| panic!("no loopback address in the admin line: {line}"))
    }
}

/// Reads `lines` until one containing `text`, within [`WAIT`], keeping every line read in
/// `seen`; returns that line.
///
/// # Panics
/// When no such line comes in time or the lines end first.
pub fn line_with(lines: &Receiver<String>, seen: &mut Vec<String>, text: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {text:?} line within {WAIT:?}: {seen:?}"));
        seen.push(line.clone());
        if line.contains(text) {
            return line;
        }
    }
}

/// The first `127.0.0.1:port` in a log line, text (`addr=...`) or JSON (`"addr":"..."`).
pub fn loopback_address(line: &str) -> Option<String> {
    let start = line.find("127.0.0.1:")?;
    let address: String = line
        .get(start..)?
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    Some(address)
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
