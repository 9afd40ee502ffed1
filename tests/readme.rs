//! The README's config examples are configs the node accepts, key for key; the "Securing a
//! node" example starts a TLS node that a worker and a producer with certificates use.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lintel::activities::BuiltIn;
use lintel::sdk::{
    Client, ClientConfig, ClientTls, DispatchOptions, Worker, WorkerConfig, WorkerError,
};
use lintel::wire::{
    ActivityOutcome, DispatchRequest, DispatchResult, RefusalCode, RefusedReason, Register,
};
use lintel::NodeConfig;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(20);

const README: &str = include_str!("../README.md");

/// The first fenced block of `lang` after `heading` (or from the top without one).
fn block<'a>(heading: Option<&str>, lang: &str, containing: &str) -> &'a str {
    let from = heading.map_or(0, |heading| {
        README
            .find(heading)
            .unwrap_or_else(|| panic!("the README has {heading}"))
    });
    let fence = format!("```{lang}\n");
    let mut rest = &README[from..];
    loop {
        let start = rest.find(&fence).expect("a fenced block") + fence.len();
        let length = rest[start..].find("```").expect("the block ends");
        let body = &rest[start..start + length];
        if body.contains(containing) {
            return body;
        }
        rest = &rest[start + length + 3..];
    }
}

#[test]
fn the_readme_config_example_is_a_valid_node_config() {
    let config: NodeConfig =
        toml::from_str(block(None, "toml", "")).expect("the example parses, key for key");
    config.validate().expect("the example is a usable config");
    assert!(!config.grants.is_empty() && !config.peers.is_empty());
    assert!(config.tls_enabled());
    // The two tenants of "When no worker is free": `a` weighs 3, `b` runs at most 4.
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
fn secure_example() -> &'static str {
    block(Some("## Securing a node"), "toml", "tls_cert")
}

#[test]
fn the_securing_a_node_example_is_a_tls_config_with_identity_grants() {
    let config: NodeConfig = toml::from_str(secure_example()).expect("the example parses");
    config.validate().expect("the example is a usable config");
    assert!(config.tls_enabled() && config.tls_client_ca.is_some());
    assert_eq!(
        config.max_frame_len - 16_384,
        1_032_192,
        "the comment's sum"
    );
    assert!(config.grants.iter().all(|grant| grant.identity.is_some()));
}

/// A directory for one test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lintel-readme-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
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

/// `lintel serve --config secure.toml` in `dir`, on a free loopback port, killed on drop.
struct Served {
    child: Child,
    port: u16,
    /// Kept, so the node's stderr is read for as long as it runs.
    _lines: std::sync::mpsc::Receiver<String>,
}

impl Served {
    fn start(dir: &Path) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_lintel"));
        for (name, _) in std::env::vars() {
            if name.starts_with("LINTEL_") || name == "RUST_LOG" {
                command.env_remove(name);
            }
        }
        let mut child = command
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
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        let port = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines.recv_timeout(left) else {
                let _ = child.kill();
                panic!("no listening line within {WAIT:?}: {seen:?}");
            };
            if let Some(at) = line
                .find("127.0.0.1:")
                .filter(|_| line.contains("listening"))
            {
                let digits: String = line[at + "127.0.0.1:".len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                break digits.parse().expect("a port");
            }
            seen.push(line);
        };
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

/// Starts the README's secure example in `dir` (which holds its certificates), and checks that
/// the billing worker and producer certificates get their grants and nothing more.
async fn run_secure_example(dir: &Scratch) {
    dir.write("secure.toml", secure_example());
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
        let mut config = WorkerConfig::new(addr.clone(), register(namespace));
        config.tls = Some(client_tls(dir, "billing-worker"));
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

    let config = ClientConfig {
        tls: Some(
            client_tls(dir, "billing-producer")
                .with_server_name("localhost")
                .unwrap(),
        ),
        ..ClientConfig::default()
    };
    let client = tokio::time::timeout(WAIT, Client::connect(addr.as_str(), config))
        .await
        .expect("in time")
        .expect("the producer connects");
    // The largest input the example's comment names goes through, and a byte more does not.
    let workflow_id = echo_request("billing", Vec::new()).workflow_id;
    let largest = vec![b'x'; 1_032_192 - workflow_id.len()];
    let over = tokio::time::timeout(
        WAIT,
        client.dispatch(
            echo_request("billing", vec![b'x'; largest.len() + 1]),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("in time")
    .expect("an outcome");
    assert!(
        matches!(&over, DispatchResult::Refused(refused) if refused.reason == RefusedReason::InvalidRequest),
        "{over:?}"
    );
    let result = tokio::time::timeout(
        WAIT,
        client.dispatch(
            echo_request("billing", largest.clone()),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("in time")
    .expect("an outcome");
    match result {
        DispatchResult::Completed(response) => {
            assert!(
                matches!(response.outcome, ActivityOutcome::Success(bytes) if bytes.len() == largest.len())
            );
        }
        other => panic!("expected a completion, got {other:?}"),
    }
    let payroll = tokio::time::timeout(
        WAIT,
        client.dispatch(
            echo_request("payroll", b"x".to_vec()),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("in time")
    .expect("an outcome");
    assert!(matches!(payroll, DispatchResult::Refused(_)), "{payroll:?}");
    worker.shutdown().await;
}

#[tokio::test]
async fn the_securing_a_node_example_serves_tls_with_rcgen_certificates() {
    let dir = Scratch::new();
    rcgen_files(&dir);
    run_secure_example(&dir).await;
}

#[tokio::test]
async fn the_readme_openssl_commands_make_certificates_the_example_node_accepts() {
    let found = Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .status();
    if !found.is_ok_and(|status| status.success()) {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let dir = Scratch::new();
    dir.write("gen.sh", block(Some("## Securing a node"), "sh", "openssl"));
    let made = Command::new("sh")
        .args(["-e", "gen.sh"])
        .current_dir(&dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("sh runs");
    assert!(made.success(), "the README's openssl commands fail");
    run_secure_example(&dir).await;
}
