//! Hosts of their own for tests that need several addresses, or a name that resolves to
//! several: network namespaces joined by a bridge, each with an address in 198.18.0.0/15 and
//! its own `/etc/hosts`.
//!
//! [`Netns::create`] makes a switch namespace holding a bridge and one namespace per host,
//! joined to the bridge by a veth pair; nothing is added to the caller's own namespace. A
//! host's commands run under `ip netns exec`, which mounts `/etc/netns/NAME/` over `/etc/`,
//! so each host reads the `hosts` file the test writes for it ([`Netns::write_hosts`]), with
//! `multi on` in its `host.conf` so that a name listed on several lines resolves to every
//! address. Every name is unique to the process and the [`Netns`] (`lintel-PID-N-...`);
//! dropping it kills what still runs inside, then removes every namespace (their veths and the
//! bridge go with them) and every `/etc/netns` directory, also when the test failed.
//! Namespaces left by a process that was killed before it could clean up are removed by the
//! next [`Netns::create`].
//!
//! It needs root and `ip netns`; [`Netns::create_or_skip`] says why it skips where they are
//! missing, unless `CI_REQUIRE_NETNS` is set, which makes it fail instead.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The variable that turns a skip for want of namespaces into a failure (set by `.ci/run`).
pub const REQUIRE: &str = "CI_REQUIRE_NETNS";

/// Where `ip netns exec` finds a namespace's own files.
const ETC_NETNS: &str = "/etc/netns";

/// What every name made here starts with.
const PREFIX: &str = "lintel-";

/// Namespaces made by this process so far, for unique names.
static MADE: AtomicU32 = AtomicU32::new(0);

/// One host: its namespace and its address on the bridge.
#[derive(Debug, Clone)]
pub struct Host {
    pub namespace: String,
    pub ip: Ipv4Addr,
}

/// A switch and its hosts; everything removed on drop.
#[derive(Debug)]
pub struct Netns {
    switch: String,
    hosts: Vec<Host>,
}

impl Netns {
    /// Why namespaces cannot be made here, if they cannot: not root, or `ip netns` missing
    /// or refused.
    pub fn unavailable() -> Option<String> {
        if !root() {
            return Some("network namespaces need root".to_owned());
        }
        match Command::new("ip").args(["netns", "list"]).output() {
            Err(err) => Some(format!("`ip` (iproute2) is not available: {err}")),
            Ok(out) if !out.status.success() => Some(format!(
                "`ip netns list` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Ok(_) => None,
        }
    }

    /// Namespaces for `count` hosts, or `None` after printing why they cannot be made here.
    ///
    /// # Panics
    /// When they cannot be made and [`REQUIRE`] is set, or making them fails.
    pub fn create_or_skip(test: &str, count: usize) -> Option<Self> {
        if let Some(why) = Self::unavailable() {
            assert!(
                std::env::var_os(REQUIRE).is_none(),
                "{test}: {why}, and {REQUIRE} is set"
            );
            // Straight to stderr, past the test harness's capture, so that the skip is seen.
            let _ = writeln!(
                std::io::stderr(),
                "skipping {test}: {why}; it runs as root with `ip` (scripts/install-iproute2.sh)"
            );
            return None;
        }
        Some(Self::create(count).unwrap_or_else(|err| panic!("{test}: {err}")))
    }

    /// A switch and `count` hosts at 198.18.0.11, 198.18.0.12, ... on a /24, each with its
    /// loopback up and a `hosts` file naming only `localhost`.
    ///
    /// # Errors
    /// The command that failed and what it said; what was made so far is removed.
    pub fn create(count: usize) -> Result<Self, String> {
        remove_stale();
        let made = MADE.fetch_add(1, Ordering::Relaxed);
        let base = format!("{PREFIX}{}-{made}", std::process::id());
        let mut netns = Self {
            switch: format!("{base}-s"),
            hosts: Vec::new(),
        };
        ip(&["netns", "add", &netns.switch])?;
        let switch = netns.switch.clone();
        ip(&["-n", &switch, "link", "set", "lo", "up"])?;
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        for index in 0..count {
            let last = u8::try_from(11 + index).map_err(|_| "too many hosts".to_owned())?;
            let host = Host {
                namespace: format!("{base}-h{index}"),
                ip: Ipv4Addr::new(198, 18, 0, last),
            };
            ip(&["netns", "add", &host.namespace])?;
            netns.hosts.push(host.clone());
            let port = format!("v{index}");
            let ns = host.namespace.as_str();
            ip(&[
                "link", "add", &port, "netns", &switch, "type", "veth", "peer", "name", "eth0",
                "netns", ns,
            ])?;
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"])?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{}/24", host.ip),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            let etc = etc_of(ns);
            // Once more if another harness removed an empty /etc/netns meanwhile.
            std::fs::create_dir_all(&etc)
                .or_else(|_| std::fs::create_dir_all(&etc))
                .map_err(|err| format!("{}: {err}", etc.display()))?;
            // Several lines for one name give every address, whatever the machine's own says.
            write(&etc.join("host.conf"), "multi on\n")?;
            // No name server: a name not in `hosts` fails at once rather than leaving the host.
            write(&etc.join("resolv.conf"), "options timeout:1 attempts:1\n")?;
            netns.write_hosts(index, "")?;
        }
        Ok(netns)
    }

    /// Host `index`.
    ///
    /// # Panics
    /// When there is no such host.
    pub fn host(&self, index: usize) -> &Host {
        self.hosts
            .get(index)
            .unwrap_or_else(|| panic!("no host {index}"))
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// Makes host `index`'s `/etc/hosts` `localhost` and then `lines`. Written in place, so a
    /// process already running there reads the new lines at its next lookup.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_hosts(&self, index: usize, lines: &str) -> Result<(), String> {
        let host = self
            .hosts
            .get(index)
            .ok_or_else(|| format!("no host {index}"))?;
        let text = format!("127.0.0.1 localhost\n{lines}");
        write(&etc_of(&host.namespace).join("hosts"), &text)
    }

    /// Cuts host `index` off the bridge (`up` false) or joins it again: its packets are lost,
    /// as when a machine's network fails, while its processes run on.
    ///
    /// # Errors
    /// The command that failed and what it said.
    pub fn set_link(&self, index: usize, up: bool) -> Result<(), String> {
        if index >= self.hosts.len() {
            return Err(format!("no host {index}"));
        }
        let state = if up { "up" } else { "down" };
        ip(&[
            "-n",
            &self.switch,
            "link",
            "set",
            &format!("v{index}"),
            state,
        ])
        .map(|_| ())
    }

    /// `program` to run in host `index`'s namespace, with its `/etc` files.
    pub fn command(&self, index: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.host(index).namespace])
            .arg(program);
        command
    }

    /// Every namespace made, the switch's last.
    fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.hosts
            .iter()
            .map(|host| host.namespace.as_str())
            .chain(std::iter::once(self.switch.as_str()))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let namespaces: Vec<String> = self.namespaces().map(str::to_owned).collect();
        for namespace in &namespaces {
            remove(namespace);
        }
    }
}

/// Kills what runs in `namespace`, deletes it (its veths and bridge with it) and its `/etc`.
fn remove(namespace: &str) {
    if let Ok(out) = Command::new("ip")
        .args(["netns", "pids", namespace])
        .output()
    {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", namespace])
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_dir_all(etc_of(namespace));
    let _ = std::fs::remove_dir(ETC_NETNS);
}

/// Removes the namespaces of processes of this harness that are gone.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let owner = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if owner.is_some_and(|pid| !alive(pid)) {
            remove(name);
        }
    }
}

/// True while process `pid` runs: it exists and is not a zombie waiting to be reaped.
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

fn etc_of(namespace: &str) -> PathBuf {
    PathBuf::from(ETC_NETNS).join(namespace)
}

fn write(path: &std::path::Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|err| format!("{}: {err}", path.display()))
}

/// Runs `ip ARGS`; its stderr as the error when it fails.
fn ip(args: &[&str]) -> Result<Output, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|err| format!("ip {}: {err}", args.join(" ")))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// True when this process runs as root: its effective user id, from `/proc/self/status`.
fn root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}
