//! The README pastes: every command block runs as written, top to bottom, in one scratch
//! directory, and every sample of output it shows is what the binary prints. And the
//! configuration reference, `docs/configuration.md`, names every key the node reads.
//!
//! How the README's fenced blocks run, in order:
//! - a ```` ```sh ```` block is split into terminals at its `# terminal N` comments (a block
//!   without them is one terminal). Every terminal but the last runs in the background, as a
//!   user leaves it open, and the test waits for the line a user would see before going on
//!   (`listening` from `serve`, `registered as worker` from `worker`). The last runs to its end
//!   under `sh -e`: every command must succeed, or the block's fence names its exit code
//!   (```` ```sh exit=11 ````). Each terminal is a process group of its own, killed when the
//!   README's `##` section ends, or when the test fails (on drop).
//! - a ```` ```toml file=NAME ```` block is written to `NAME` for the commands after it.
//! - a ```` ```text ```` block is what the last terminal of the `sh` block before it prints,
//!   stdout and stderr together.
//! - a ```` ```sh no-run: REASON ```` block is not run: the test lists it and its reason, and
//!   fails if any block but the set-up commands is so marked.
//!
//! Replaced before running: `cargo run --release --` by `lintel`, the built binary, first on
//! `PATH`; each port the README names by a free loopback port, and `0.0.0.0` by `127.0.0.1`;
//! `LINTEL_*` and `RUST_LOG` are taken out of the environment. Normalised before comparing
//! output: those ports (mapped back), uptimes (`up 1.7s`), the process id in a worker's default
//! identity, the count of open connections (a dispatch's may still be closing), runs of spaces.

use lintel_test_support as support;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use lintel::activities::BuiltIn;
use lintel::sdk::{Client, ClientConfig, ClientTls, DispatchOptions, Worker, WorkerError};
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResult, RefusalCode, RefusedReason, Register,
};
use lintel::NodeConfig;

/// The bound on every wait: a debug build on a busy machine.
const WAIT: Duration = Duration::from_secs(60);

const README: &str = include_str!("../README.md");

const CONFIGURATION: &str = include_str!("../docs/configuration.md");

/// The one block that may be left out, by the start of its reason.
const SKIPPABLE: &str = "the set-up commands";

/// One fenced block of a document: its info string (`sh exit=11`), its text, the line its
/// fence opens on and the `##` section it is in.
#[derive(Debug, Clone)]
struct Block {
    info: String,
    body: String,
    line: usize,
    section: String,
}

impl Block {
    fn lang(&self) -> &str {
        self.info.split_whitespace().next().unwrap_or_default()
    }

    /// The value of `name=VALUE` in the info string.
    fn attr(&self, name: &str) -> Option<&str> {
        self.info
            .split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
    }

    /// The reason of `no-run: REASON`.
    fn no_run(&self) -> Option<&str> {
        self.info.split_once("no-run:").map(|(_, why)| why.trim())
    }
}

/// Every fenced block of `text`, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for (index, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    body: String::new(),
                    line: index + 1,
                    section: section.clone(),
                });
            }
            (Some(_), Some("")) => found.extend(open.take()),
            (Some(block), _) => {
                block.body.push_str(line);
                block.body.push('\n');
            }
            (None, None) => {
                if let Some(heading) = line.strip_prefix("## ") {
                    section = heading.to_owned();
                }
            }
        }
    }
    found
}

/// The first block of `lang` in `text` whose body contains `containing`.
fn block(text: &str, lang: &str, containing: &str) -> Block {
    blocks(text)
        .into_iter()
        .find(|block| block.lang() == lang && block.body.contains(containing))
        .unwrap_or_else(|| panic!("no {lang} block containing {containing:?}"))
}

// ---- the configuration reference ----

/// The reference's list of keys, parsed as TOML and as the node's config.
fn reference() -> (toml::Table, NodeConfig) {
    let text = block(CONFIGURATION, "toml", "listen").body;
    let table: toml::Table = toml::from_str(&text).expect("the key list is TOML");
    let config: NodeConfig = toml::from_str(&text).expect("the key list is a node config");
    (table, config)
}

/// The keys of `value`, a JSON object.
fn json_keys(value: &serde_json::Value) -> Vec<String> {
    value
        .as_object()
        .map(|object| object.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_configuration_reference_names_every_key_the_node_reads_and_nothing_else() {
    let (table, config) = reference();
    config.validate().expect("the key list is a usable config");
    let node_keys = json_keys(&serde_json::to_value(NodeConfig::default()).expect("JSON"));
    let missing: Vec<&String> = node_keys
        .iter()
        .filter(|key| !table.contains_key(key.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md lacks {missing:?}"
    );
    // Each table's entries, together, show every field an entry has.
    let entries = serde_json::to_value(&config).expect("JSON");
    for list in ["grants", "fairness", "pools"] {
        let shown: Vec<String> = table
            .get(list)
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_table)
            .flat_map(|entry| entry.keys().cloned())
            .collect();
        let fields: Vec<String> = entries[list]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(json_keys)
            .collect();
        assert!(!fields.is_empty(), "no {list} entry in the reference");
        let unshown: Vec<&String> = fields.iter().filter(|f| !shown.contains(f)).collect();
        assert!(
            unshown.is_empty(),
            "no example of {list} fields {unshown:?}"
        );
    }
}

#[test]
fn the_reference_fairness_entries_are_the_two_tenants_the_readme_describes() {
    let (_, config) = reference();
    assert!(!config.grants.is_empty() && !config.peers.is_empty());
    assert!(config.tls_enabled());
    // `a` weighs 3, `b` runs at most 4.
    let tenants: Vec<(&str, Option<u32>, Option<u32>)> = config
        .fairness
        .iter()
        .map(|entry| {
            (
                entry.key.as_str(),
                entry.max_in_flight,
                entry.weight.map(|w| w.0),
            )
        })
        .collect();
    assert_eq!(tenants, [("a", None, Some(3_000)), ("b", Some(4), None)]);
}

/// The "Securing a node" config example, exactly as the README shows it.
fn secure_example() -> String {
    block(README, "toml", "tls_cert").body
}

#[test]
fn the_securing_a_node_example_is_a_tls_config_with_identity_grants() {
    let config: NodeConfig = toml::from_str(&secure_example()).expect("the example parses");
    config.validate().expect("the example is a usable config");
    assert!(config.tls_enabled() && config.tls_client_ca.is_some());
    assert_eq!(
        config.max_frame_len - 16_384,
        1_032_192,
        "the comment's sum"
    );
    assert!(config.grants.iter().all(|grant| grant.identity.is_some()));
}

// ---- running the README ----

/// A directory for one test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "readme-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes, with rcgen, the files the README's openssl commands make.
fn rcgen_files(dir: &Scratch) {
    let pki = support::Pki::new();
    dir.write("ca.crt", &pki.ca_pem());
    for (name, san) in [
        ("node", &["localhost", "127.0.0.1"][..]),
        ("billing-worker", &["billing-worker"][..]),
        ("billing-producer", &["billing-producer"][..]),
    ] {
        let leaf = pki.leaf(san);
        dir.write(&format!("{name}.crt"), &leaf.cert);
        dir.write(&format!("{name}.key"), &leaf.key);
    }
}

/// The README's ports, each with the free loopback port that stands in for it.
struct Ports(BTreeMap<u16, u16>);

/// The hosts an address in the README is written with.
const HOSTS: [&str; 3] = ["127.0.0.1:", "localhost:", "0.0.0.0:"];

impl Ports {
    /// A free loopback port for every port `text` names after one of [`HOSTS`].
    fn for_text(text: &str) -> Self {
        let mut held = Vec::new();
        let mut ports = BTreeMap::new();
        for host in HOSTS {
            for (at, _) in text.match_indices(host) {
                let digits: String = text[at + host.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let Ok(port) = digits.parse::<u16>() else {
                    continue;
                };
                ports.entry(port).or_insert_with(|| {
                    // Held until every port is chosen, so no two are the same.
                    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                    let free = listener.local_addr().expect("address").port();
                    held.push(listener);
                    free
                });
            }
        }
        Self(ports)
    }

    /// `text` with each README port replaced and `0.0.0.0` made loopback.
    fn apply(&self, text: &str) -> String {
        let mut out = text.replace("0.0.0.0:", "127.0.0.1:");
        for (readme, free) in &self.0 {
            for host in ["127.0.0.1:", "localhost:"] {
                out = replace_number(&out, &format!("{host}{readme}"), &format!("{host}{free}"));
            }
        }
        out
    }

    /// `output` with each free port written back as the README's.
    fn unapply(&self, output: &str) -> String {
        let mut out = output.to_owned();
        for (readme, free) in &self.0 {
            out = replace_number(&out, &free.to_string(), &readme.to_string());
        }
        out
    }
}

/// `text` with `from` replaced by `to` where `from` does not run on into more digits.
fn replace_number(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        let before_digit = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit());
        let whole = !after.starts_with(|c: char| c.is_ascii_digit()) && !before_digit;
        out.push_str(&rest[..at]);
        out.push_str(if whole { to } else { from });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Output as the README's samples show it: see the module docs.
fn normalise(output: &str) -> Vec<String> {
    let mut lines: Vec<String> = output
        .lines()
        .map(|line| {
            let words: Vec<String> = line
                .split_whitespace()
                .map(|word| {
                    if word.starts_with("lintel-worker-") {
                        "lintel-worker-PID".to_owned()
                    } else if word.starts_with(|c: char| c.is_ascii_digit()) && word.ends_with('s')
                    {
                        // An uptime, `1.7s`; `0/8` and counts have no `s`.
                        "TIME".to_owned()
                    } else {
                        word.to_owned()
                    }
                })
                .collect();
            let mut line = words.join(" ");
            if let Some(at) = line.find(" connections ") {
                let tail = &line[at + " connections ".len()..];
                let count_len = tail.chars().take_while(char::is_ascii_digit).count();
                line = format!("{} connections N{}", &line[..at], &tail[count_len..]);
            }
            line
        })
        .collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// Kills a process group, and reaps its leader, on drop.
struct Group {
    child: Option<Child>,
    pgid: u32,
}

impl Group {
    /// Runs `script` under `sh -e` in `dir`, with `path` first on `PATH`, as the leader of a
    /// process group of its own, stdout and stderr to `output`.
    fn start(script: &str, dir: &Path, path: &std::ffi::OsStr, output: Stdio) -> Self {
        use std::os::unix::process::CommandExt;
        let mut command = support::without_settings("sh");
        let child = command
            .args(["-e", "-c", &format!("exec 2>&1\n{script}")])
            .current_dir(dir)
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("sh starts");
        let pgid = child.id();
        Self {
            child: Some(child),
            pgid,
        }
    }

    /// Waits, within [`WAIT`], for the leader to exit; the group's other processes stay.
    fn wait(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("a leader to wait for");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(WAIT) {
            Ok(status) => status.expect("reap sh"),
            Err(_) => panic!("a README terminal still runs after {WAIT:?}"),
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.pgid)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }
}

/// A terminal left running: its process group and the lines it printed.
struct Background {
    _group: Group,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Background {
    /// Reads its output until a line containing `text` that does not contain `but_not`.
    fn wait_for(&mut self, text: &str, but_not: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) && (but_not.is_empty() || !line.contains(but_not)) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {text:?} within {WAIT:?}: {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the terminal ended before {text:?}: {:#?}", self.seen)
                }
            }
        }
    }

    /// Every line it printed so far, those not read yet included.
    fn output(&mut self) -> Vec<String> {
        self.seen.extend(self.lines.try_iter());
        self.seen.clone()
    }
}

/// What the README run saw: the output of each block's terminals, by the block's line.
#[derive(Default)]
struct Seen {
    /// Background terminals' output, by the line of their block and their index in it.
    background: BTreeMap<(usize, usize), Vec<String>>,
    /// The last terminal's output, by its block's line.
    foreground: BTreeMap<usize, String>,
}

/// Runs the README in `dir`; what each block printed, and the blocks left out with why.
struct Run {
    ports: Ports,
    path: std::ffi::OsString,
    /// The terminals of the current `##` section, left running.
    open: Vec<((usize, usize), Background)>,
    /// The last terminals of the section's blocks, whose background jobs (`&`) run on.
    finished: Vec<Group>,
    seen: Seen,
    skipped: Vec<(usize, String)>,
    /// Removed once the processes above are killed: fields drop in this order.
    dir: Scratch,
}

impl Run {
    fn new() -> Self {
        let dir = Scratch::new();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_lintel"), dir.path("bin/lintel"))
            .expect("lintel on the scratch PATH");
        let mut path = dir.path("bin").into_os_string();
        if let Some(rest) = std::env::var_os("PATH") {
            path.push(":");
            path.push(rest);
        }
        let commands: String = blocks(README)
            .iter()
            .filter(|block| block.lang() != "text")
            .map(|block| block.body.as_str())
            .collect();
        Self {
            ports: Ports::for_text(&commands),
            dir,
            path,
            open: Vec::new(),
            finished: Vec::new(),
            seen: Seen::default(),
            skipped: Vec::new(),
        }
    }

    /// Ends the section's terminals, keeping what they printed.
    fn close_section(&mut self) {
        for (at, mut terminal) in self.open.drain(..) {
            let output = terminal.output();
            self.seen.background.insert(at, output);
        }
        self.finished.clear();
    }

    fn script(&self, text: &str) -> String {
        self.ports
            .apply(text)
            .replace("cargo run --release -- ", "lintel ")
    }

    fn sh(&mut self, block: &Block) {
        if let Some(reason) = block.no_run() {
            self.skipped.push((block.line, reason.to_owned()));
            return;
        }
        if block.body.contains("openssl") && !openssl_installed() {
            self.skipped.push((
                block.line,
                "openssl is not installed: rcgen made the same files".to_owned(),
            ));
            rcgen_files(&self.dir);
            return;
        }
        let terminals = terminals(&block.body);
        let Some((last, before)) = terminals.split_last() else {
            return;
        };
        for (index, text) in before.iter().enumerate() {
            let script = self.script(text);
            let mut group = Group::start(&script, &self.dir.0, &self.path, Stdio::piped());
            let stdout = group
                .child
                .as_mut()
                .and_then(|child| child.stdout.take())
                .expect("stdout is piped");
            let (tx, lines) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            let mut terminal = Background {
                _group: group,
                lines,
                seen: Vec::new(),
            };
            // What a user waits to see before going to the next terminal.
            let command = last_command(text);
            if command.contains(" serve ") {
                terminal.wait_for("listening", "admin listening");
            } else if command.contains(" worker ") {
                terminal.wait_for("registered as worker", "");
            }
            self.open.push(((block.line, index), terminal));
        }
        let output_path = self.dir.path(&format!("output-{}.txt", block.line));
        let output = File::create(&output_path).expect("an output file");
        let mut group = Group::start(&self.script(last), &self.dir.0, &self.path, output.into());
        let status = group.wait();
        let printed = std::fs::read_to_string(&output_path).unwrap_or_default();
        let expected = block
            .attr("exit")
            .map_or(0, |code| code.parse().expect("a numeric exit code"));
        assert_eq!(
            status.code(),
            Some(expected),
            "README block at line {} exited {status}:\n{printed}",
            block.line
        );
        // The group's background jobs (`&`) live on until the section ends.
        self.finished.push(group);
        self.seen.foreground.insert(block.line, printed);
    }
}

/// The terminals of a `sh` block: its text split at `# terminal N` comments.
fn terminals(body: &str) -> Vec<String> {
    let mut terminals = vec![String::new()];
    for line in body.lines() {
        if line.starts_with("# terminal ") && terminals.last().is_some_and(|t| !t.trim().is_empty())
        {
            terminals.push(String::new());
        }
        if let Some(current) = terminals.last_mut() {
            current.push_str(line);
            current.push('\n');
        }
    }
    terminals
}

/// The last command of a terminal's text, continuation lines joined.
fn last_command(text: &str) -> String {
    let joined = text.replace("\\\n", " ");
    joined
        .lines()
        .rfind(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map_or_else(String::new, |line| format!("{line} "))
}

fn openssl_installed() -> bool {
    Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Samples of output in the README's prose, each with the block (by a text in it) whose
/// terminal printed it, or the test file that checks it.
const INLINE: [(&str, Source); 9] = [
    (
        "registered as worker 1 (connection 1) on 127.0.0.1:7400",
        Source::Terminal("--namespace demo --activity echo --activity sleep"),
    ),
    (
        "tls=\"off\"",
        Source::Terminal("serve --listen 127.0.0.1:7400"),
    ),
    (
        "\"on, client certificates required\"",
        Source::Terminal("lintel serve --config secure.toml"),
    ),
    ("served by c", Source::Terminal("--node-id c")),
    ("it speaks TLS: pass --tls-ca FILE", Source::ThisTest),
    ("certificate identity \"billing-worker\"", Source::ThisTest),
    ("PLAINTEXT ON THE NETWORK", Source::ThisTest),
    (
        "DRAINING",
        Source::Test("cli_mistakes.rs", include_str!("cli_mistakes.rs")),
    ),
    (
        "truncated: ",
        Source::Test("status.rs", include_str!("status.rs")),
    ),
];

/// Where a sample of the README's prose is checked.
enum Source {
    /// In the output of the terminal of a block whose text holds this.
    Terminal(&'static str),
    /// By a command this test runs beside the README's.
    ThisTest,
    /// By the named test file, whose text holds the sample.
    Test(&'static str, &'static str),
}

/// The README with its line breaks as spaces, as it renders.
fn rendered() -> String {
    README.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_readme_pastes_from_top_to_bottom() {
    let mut run = Run::new();
    let mut section = String::new();
    let mut last_sh: Option<Block> = None;
    for block in blocks(README) {
        if block.section != section {
            run.close_section();
            section.clone_from(&block.section);
        }
        match (block.lang(), block.attr("file")) {
            ("sh", _) => {
                run.sh(&block);
                // With the secure node of this section still up, the samples it answers.
                if section == "Securing a node" && block.body.contains("lintel dispatch") {
                    secure_samples(&run);
                }
                last_sh = Some(block);
            }
            ("toml", Some(name)) => {
                let text = run.ports.apply(&block.body);
                run.dir.write(name, &text);
            }
            ("text", _) => {
                let of = last_sh.as_ref().expect("a sample follows a command block");
                let printed = run
                    .seen
                    .foreground
                    .get(&of.line)
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(
                    normalise(&run.ports.unapply(&printed)),
                    normalise(&block.body),
                    "the sample at README line {} is not what the block at line {} printed",
                    block.line,
                    of.line
                );
            }
            _ => {}
        }
    }
    run.close_section();

    for (line, reason) in &run.skipped {
        eprintln!("README block at line {line} not run: {reason}");
    }
    let unexpected: Vec<&(usize, String)> = run
        .skipped
        .iter()
        .filter(|(_, reason)| !reason.starts_with(SKIPPABLE) && !reason.contains("openssl"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "blocks left out beyond the set-up commands: {unexpected:?}"
    );

    let rendered = rendered();
    for (sample, source) in INLINE {
        assert!(
            rendered.contains(sample),
            "the README no longer shows {sample:?}"
        );
        match source {
            Source::Terminal(marker) => {
                let printed = terminal_output(&run, marker);
                assert!(
                    run.ports.unapply(&printed).contains(sample),
                    "{sample:?} is not what the terminal of {marker:?} printed:\n{printed}"
                );
            }
            Source::Test(file, text) => {
                assert!(
                    text.contains(sample),
                    "tests/{file} no longer checks {sample:?}"
                );
            }
            Source::ThisTest => {}
        }
    }
    plaintext_warning();
}

/// Everything the terminal of the README block holding `marker` printed.
fn terminal_output(run: &Run, marker: &str) -> String {
    let sh_blocks: Vec<Block> = blocks(README)
        .into_iter()
        .filter(|block| block.lang() == "sh")
        .collect();
    let block = sh_blocks
        .iter()
        .find(|block| block.body.contains(marker))
        .unwrap_or_else(|| panic!("no README block holds {marker:?}"));
    let index = terminals(&block.body)
        .iter()
        .position(|text| text.contains(marker))
        .unwrap_or_default();
    let mut printed = run
        .seen
        .background
        .get(&(block.line, index))
        .map(|lines| lines.join("\n"))
        .unwrap_or_default();
    if let Some(last) = run.seen.foreground.get(&block.line) {
        printed.push('\n');
        printed.push_str(last);
    }
    printed
}

/// With the secure node of the README's last block still up: a plaintext client is told to
/// pass `--tls-ca`, and a worker refused a namespace hears its certificate's identity.
fn secure_samples(run: &Run) {
    let addr = run.ports.apply("localhost:7400");
    let lintel = || {
        let mut command = support::lintel();
        command.current_dir(&run.dir.0);
        command
    };
    let out = lintel()
        .args(["status", "--connect", &addr])
        .output()
        .expect("lintel status runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("it speaks TLS: pass --tls-ca FILE"), "{said}");
    let out = lintel()
        .args(["worker", "--connect", &addr, "--namespace", "payroll"])
        .args(["--activity", "echo", "--tls-ca", "ca.crt"])
        .args([
            "--tls-cert",
            "billing-worker.crt",
            "--tls-key",
            "billing-worker.key",
        ])
        .output()
        .expect("lintel worker runs");
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("certificate identity \"billing-worker\""),
        "{said}"
    );
}

/// A node listening beyond loopback in plaintext warns at start.
fn plaintext_warning() {
    let mut node = support::Served::start(&["--listen", "0.0.0.0:0"]);
    node.wait_for("PLAINTEXT ON THE NETWORK");
}

// ---- the secure example through the SDKs ----

/// `lintel serve --config secure.toml` in `dir`, on a free loopback port, killed on drop.
struct Served {
    child: Child,
    port: u16,
    /// Kept, so the node's stderr is read for as long as it runs.
    _lines: Receiver<String>,
}

impl Served {
    fn start(dir: &Path) -> Self {
        let mut child = support::lintel()
            .current_dir(dir)
            .args([
                "serve",
                "--config",
                "secure.toml",
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("lintel serve starts");
        let lines = support::stderr_lines(&mut child);
        let mut seen = Vec::new();
        let line = support::line_with(&lines, &mut seen, "listening");
        let port = support::loopback_address(&line)
            .and_then(|addr| addr.rsplit_once(':').map(|(_, port)| port.to_owned()))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("a port in {line}"));
        Self {
            child,
            port,
            _lines: lines,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client_tls(dir: &Scratch, name: &str) -> ClientTls {
    let (cert, key) = (
        dir.path(&format!("{name}.crt")),
        dir.path(&format!("{name}.key")),
    );
    ClientTls::from_files(&dir.path("ca.crt"), Some((&cert, &key))).unwrap()
}

fn echo_request(namespace: &str, input: Vec<u8>) -> DispatchRequest {
    DispatchRequest {
        namespace: namespace.into(),
        task_queue: String::new(),
        activity_type: "echo".into(),
        node: None,
        workflow_id: "readme".into(),
        ordinal: 1,
        run_id: None,
        attempt: 1,
        input: input.into(),
        deadline_unix_ms: None,
    }
}

/// The README's secure example with rcgen's certificates: the billing worker and producer get
/// their grants and nothing more, and the largest input its comment names goes through.
#[tokio::test]
async fn the_securing_a_node_example_serves_tls_with_rcgen_certificates() {
    let dir = Scratch::new();
    rcgen_files(&dir);
    dir.write("secure.toml", &secure_example());
    let served = Served::start(&dir.0);
    let addr = format!("localhost:{}", served.port);
    let register = |namespace: &str| Register {
        namespaces: vec![namespace.into()],
        task_queue: String::new(),
        node: None,
        activity_types: vec!["echo".into()],
        identity: "readme-worker".into(),
        max_concurrency: 4,
        ..Default::default()
    };
    let worker_in = |namespace: &str| {
        let mut config = support::worker_config(addr.clone(), register(namespace));
        config.tls = Some(client_tls(&dir, "billing-worker"));
        Worker::spawn(config, BuiltIn)
    };
    let refused = worker_in("payroll");
    match tokio::time::timeout(WAIT, refused.wait_registered(WAIT)).await {
        Ok(Err(WorkerError::Refused(refusal))) => {
            assert_eq!(refusal.code, RefusalCode::Unauthorized);
            assert!(refusal.reason.contains("payroll"), "{}", refusal.reason);
        }
        other => panic!("expected RegisterRefused, got {other:?}"),
    }
    let worker = worker_in("billing");
    tokio::time::timeout(WAIT, worker.wait_registered(WAIT))
        .await
        .expect("in time")
        .expect("the billing worker registers");

    let config = {
        let mut config = ClientConfig::default();
        config.tls = Some(
            client_tls(&dir, "billing-producer")
                .with_server_name("localhost")
                .unwrap(),
        );
        config
    };
    let client = tokio::time::timeout(WAIT, Client::connect(addr.as_str(), config))
        .await
        .expect("in time")
        .expect("the producer connects");
    // The largest input the example's comment names goes through, and a byte more does not.
    let workflow_id = echo_request("billing", Vec::new()).workflow_id;
    let largest = vec![b'x'; 1_032_192 - workflow_id.len()];
    let dispatch = |input: Vec<u8>, namespace: &'static str| {
        let client = client.clone();
        async move {
            tokio::time::timeout(
                WAIT,
                client.dispatch(
                    &support::dispatch_of(echo_request(namespace, input)),
                    &DispatchOptions::default(),
                ),
            )
            .await
            .expect("in time")
            .expect("an outcome")
        }
    };
    let over = dispatch(vec![b'x'; largest.len() + 1], "billing").await;
    assert!(
        matches!(&over, DispatchResult::Refused(refused) if refused.reason == RefusedReason::InvalidRequest),
        "{over:?}"
    );
    match dispatch(largest.clone(), "billing").await {
        DispatchResult::Completed(response) => {
            assert!(
                matches!(response.outcome, ActivityOutcome::Success(bytes) if bytes.len() == largest.len())
            );
        }
        other => panic!("expected a completion, got {other:?}"),
    }
    let payroll = dispatch(b"x".to_vec(), "payroll").await;
    assert!(matches!(payroll, DispatchResult::Refused(_)), "{payroll:?}");
    worker.shutdown().await;
}

#[test]
fn normalising_leaves_out_only_what_varies() {
    assert_eq!(
        normalise(
            "node lintel-7400  up 1.7s  connections 3\n  1     1 lintel-worker-42   -  0/8\n\n"
        ),
        [
            "node lintel-7400 up TIME connections N",
            "1 1 lintel-worker-PID - 0/8"
        ]
    );
    assert_eq!(replace_number("a:7400 b:74001", "7400", "1"), "a:1 b:74001");
    let text = "# terminal 1: a\nlintel serve x\n\n# terminal 2: b\nlintel worker \\\n  --y\n";
    let split = terminals(text);
    assert_eq!(split.len(), 2);
    assert_eq!(last_command(&split[1]), "lintel worker    --y ");
}
