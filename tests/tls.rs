//! TLS over real sockets, with certificates generated at test time: SDK workers and producers,
//! the CLI against `lintel serve`, refused certificates and names, mutual TLS with identities
//! holding grants, peers linked over TLS, and plaintext meeting TLS failing promptly.

use lintel_test_support as support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use lintel::activities::BuiltIn;
use lintel::auth::{GrantConfig, GrantRole};
use lintel::sdk::{
    Client, ClientConfig, ClientTls, ConnectError, DispatchOptions, Worker, WorkerError,
    WorkerHandle,
};
use lintel::wire::channel::dispatch_channel_name;
use lintel::wire::{ActivityOutcome, DispatchResult, RefusalCode, Register};
use lintel::NodeConfig;
use support::{lintel, plain, request, within, Pki, Served, TestNode, WAIT};
use tokio::io::AsyncReadExt;

fn producer_config(tls: Option<ClientTls>) -> ClientConfig {
    {
        let mut config = ClientConfig::default();
        config.tls = tls;
        config
    }
}

async fn producer(addr: SocketAddr, tls: ClientTls) -> Client {
    within(
        "TLS producer connection",
        Client::connect(addr, producer_config(Some(tls))),
    )
    .await
    .expect("the producer connects over TLS")
}

fn worker(addr: SocketAddr, tls: ClientTls, register: Register) -> WorkerHandle {
    let mut config = support::worker_config(addr.to_string(), register);
    config.tls = Some(tls);
    Worker::spawn(config, BuiltIn)
}

/// Dispatches `echo` of `input` in `namespace` and returns the echoed text.
async fn echo(client: &Client, namespace: &str, input: &str) -> String {
    let options = DispatchOptions::default().wait_for_worker(WAIT);
    let result = within(
        "an echo dispatch",
        client.dispatch(
            &support::dispatch_of(request(namespace, "echo", input)),
            &options,
        ),
    )
    .await
    .expect("an outcome");
    match result {
        DispatchResult::Completed(response) => match response.outcome {
            ActivityOutcome::Success(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
            other => panic!("the echo failed: {other:?}"),
        },
        other => panic!("expected a completion, got {other:?}"),
    }
}

/// The connect error of a producer connecting to `addr` as `config` says.
async fn connect_error(addr: SocketAddr, config: ClientConfig) -> ConnectError {
    match within("a failing connect", Client::connect(addr, config)).await {
        Ok(_) => panic!("the connection was expected to fail"),
        Err(err) => err,
    }
}

#[tokio::test]
async fn a_worker_and_a_producer_over_tls_complete_a_dispatch() {
    let pki = Pki::new();
    let node = TestNode::with_config(pki.node_config("node")).await;
    let worker = worker(node.addr, pki.client(None), plain("demo", "echo", 4, "w"));
    within("worker registration", worker.wait_registered(WAIT))
        .await
        .expect("the worker registers over TLS");
    let client = producer(node.addr, pki.client(None)).await;
    assert_eq!(echo(&client, "demo", "over tls").await, "over tls");
}

#[tokio::test]
async fn large_dispatches_in_flight_over_tls_all_complete() {
    let pki = Pki::new();
    let node = TestNode::with_config(pki.node_config("node")).await;
    let worker = worker(node.addr, pki.client(None), plain("bulk", "echo", 64, "w"));
    within("worker registration", worker.wait_registered(WAIT))
        .await
        .expect("the worker registers over TLS");
    let client = producer(node.addr, pki.client(None)).await;
    let input = "x".repeat(256 * 1024);
    let mut dispatches = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let client = client.clone();
        let input = input.clone();
        dispatches.spawn(async move { echo(&client, "bulk", &input).await.len() });
    }
    within("64 dispatches of 256 KiB each way", async {
        while let Some(echoed) = dispatches.join_next().await {
            assert_eq!(echoed.unwrap(), input.len());
        }
    })
    .await;
}

/// A TLS stream buffers what it is given like a `BufWriter` does; the transport must flush it
/// or the last frame of a burst waits for the next one.
#[tokio::test]
async fn a_buffering_write_half_delivers_each_frame_without_waiting_for_the_next() {
    use lintel::transport::{split, Socket};
    use lintel::wire::{Frame, Ping};

    let (near, far) = tokio::io::duplex(1 << 16);
    let (near_read, near_write) = tokio::io::split(near);
    let (far_read, far_write) = tokio::io::split(far);
    let near = Socket::from_io(near_read, tokio::io::BufWriter::new(near_write), None);
    let far = Socket::from_io(far_read, far_write, None);
    let (_near_reader, near_out, _near_writer) = split(near, 1 << 20, 4);
    let (mut far_reader, _far_out, _far_writer) = split(far, 1 << 20, 4);
    near_out.send(Frame::Ping(Ping { nonce: 7 })).await.unwrap();
    let frame = within("the one frame sent", far_reader.next_owned()).await;
    assert_eq!(frame.unwrap().unwrap(), Frame::Ping(Ping { nonce: 7 }));
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_with_a_tls_error() {
    let pki = Pki::new();
    let stranger = Pki::new();
    let node = TestNode::with_config(pki.node_config("node")).await;
    let err = connect_error(node.addr, producer_config(Some(stranger.client(None)))).await;
    assert!(
        matches!(
            err,
            ConnectError::Tls(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer
            ))
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("TLS"), "{err}");
}

#[tokio::test]
async fn a_certificate_for_another_name_fails_with_a_tls_error() {
    let pki = Pki::new();
    let node = TestNode::with_config(pki.node_config("node")).await;
    let tls = pki
        .client(None)
        .with_server_name("elsewhere.example")
        .unwrap();
    let err = connect_error(node.addr, producer_config(Some(tls))).await;
    assert!(
        matches!(
            err,
            ConnectError::Tls(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. }
            ))
        ),
        "{err:?}"
    );
}

fn mutual_config(pki: &Pki) -> NodeConfig {
    NodeConfig {
        tls_client_ca: Some(pki.ca_path()),
        grants: vec![GrantConfig {
            token: None,
            identity: Some("billing.workers.example".into()),
            roles: vec![GrantRole::Worker],
            namespaces: vec!["billing".into()],
            fairness_key: None,
            fairness_weights: false,
        }],
        ..pki.node_config("node")
    }
}

#[tokio::test]
async fn with_a_client_ca_a_client_without_a_certificate_is_refused() {
    let pki = Pki::new();
    let node = TestNode::with_config(mutual_config(&pki)).await;
    let err = connect_error(node.addr, producer_config(Some(pki.client(None)))).await;
    assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");
}

#[tokio::test]
async fn a_client_certificate_identity_gets_exactly_its_grants_namespaces() {
    let pki = Pki::new();
    let node = TestNode::with_config(mutual_config(&pki)).await;
    let cert = pki.leaf(&["billing.workers.example"]);

    let mixed = Register {
        namespaces: vec!["billing".into(), "payroll".into()],
        ..plain("billing", "echo", 1, "w")
    };
    let refused = worker(node.addr, pki.client(Some(&cert)), mixed);
    match within("a refusal", refused.wait_registered(WAIT)).await {
        Err(WorkerError::Refused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Unauthorized);
            assert!(refusal.reason.contains("payroll"), "{}", refusal.reason);
        }
        other => panic!("expected RegisterRefused, got {other:?}"),
    }

    let granted = worker(
        node.addr,
        pki.client(Some(&cert)),
        plain("billing", "echo", 1, "w"),
    );
    within("registration", granted.wait_registered(WAIT))
        .await
        .expect("the granted namespace is accepted");

    // The identity holds no producer role.
    let err = connect_error(node.addr, producer_config(Some(pki.client(Some(&cert))))).await;
    match err {
        ConnectError::Refused(refusal) => assert_eq!(refusal.code, RefusalCode::Unauthorized),
        other => panic!("expected Unauthorized, got {other:?}"),
    }
}

#[tokio::test]
async fn two_nodes_peer_over_tls_and_relay_a_dispatch() {
    let pki = Pki::new();
    let a = TestNode::with_config(NodeConfig {
        node_id: "a".into(),
        peer_ping_interval_ms: 100,
        tls_ca: Some(pki.ca_path()),
        ..pki.node_config("a")
    })
    .await;
    let b = TestNode::with_config(NodeConfig {
        node_id: "b".into(),
        peers: vec![a.addr.to_string()],
        peer_ping_interval_ms: 100,
        tls_ca: Some(pki.ca_path()),
        ..pki.node_config("b")
    })
    .await;
    b.wait_linked(&["a"]).await;
    let worker = worker(a.addr, pki.client(None), plain("relay", "echo", 2, "w"));
    within("worker registration", worker.wait_registered(WAIT))
        .await
        .expect("the worker registers on a");
    b.wait_announced("a", &dispatch_channel_name("relay", "default", None))
        .await;
    let client = producer(b.addr, pki.client(None)).await;
    let dispatched = within(
        "a relayed dispatch",
        client.submit(
            &support::dispatch_of(request("relay", "echo", "hop")),
            &DispatchOptions::default(),
        ),
    )
    .await
    .expect("an outcome");
    assert_eq!(dispatched.served_by.as_deref(), Some("a"));
    assert!(
        matches!(dispatched.result, DispatchResult::Completed(_)),
        "{:?}",
        dispatched.result
    );
}

#[tokio::test]
async fn peers_that_require_client_certificates_link_with_their_node_certificates() {
    let pki = Pki::new();
    let mutual = |id: &str, peers: Vec<String>| NodeConfig {
        node_id: id.into(),
        peers,
        peer_ping_interval_ms: 100,
        // No tls_ca: peers are checked against the client CA.
        tls_client_ca: Some(pki.ca_path()),
        ..pki.node_config(id)
    };
    let a = TestNode::with_config(mutual("a", Vec::new())).await;
    let b = TestNode::with_config(mutual("b", vec![a.addr.to_string()])).await;
    b.wait_linked(&["a"]).await;
    a.wait_linked(&["b"]).await;
}

#[test]
fn a_missing_certificate_file_is_a_config_error_naming_it() {
    let pki = Pki::new();
    let missing = pki.dir.join("absent.pem");
    let config = NodeConfig {
        tls_cert: Some(missing.clone()),
        ..pki.node_config("node")
    };
    let err = match lintel::Node::new(config) {
        Ok(_) => panic!("a node without its certificate file started"),
        Err(err) => err,
    };
    assert!(
        matches!(err, lintel::config::ConfigError::Tls(_)),
        "{err:?}"
    );
    assert!(err.to_string().contains("absent.pem"), "{err}");
}

#[tokio::test]
async fn a_plaintext_client_against_a_tls_listener_fails_promptly() {
    let pki = Pki::new();
    let node = TestNode::with_config(NodeConfig {
        handshake_timeout_ms: 60_000,
        ..pki.node_config("node")
    })
    .await;
    let config = {
        let mut config = producer_config(None);
        config.handshake_timeout = Duration::from_secs(60);
        config
    };
    let err = connect_error(node.addr, config).await;
    assert!(!matches!(err, ConnectError::Timeout(_)), "{err:?}");
}

#[tokio::test]
async fn a_tls_client_against_a_plaintext_listener_fails_promptly_with_a_tls_error() {
    let pki = Pki::new();
    let node = TestNode::with_config(NodeConfig {
        handshake_timeout_ms: 60_000,
        ..NodeConfig::default()
    })
    .await;
    let config = {
        let mut config = producer_config(Some(pki.client(None)));
        config.handshake_timeout = Duration::from_secs(60);
        config
    };
    let err = connect_error(node.addr, config).await;
    assert!(matches!(err, ConnectError::Tls(_)), "{err:?}");
}

#[tokio::test]
async fn a_silent_connection_to_a_tls_listener_is_closed_at_the_handshake_timeout() {
    let pki = Pki::new();
    let node = TestNode::with_config(NodeConfig {
        handshake_timeout_ms: 200,
        ..pki.node_config("node")
    })
    .await;
    let mut silent = tokio::net::TcpStream::connect(node.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let read = within(
        "the node closing a silent connection",
        silent.read(&mut buf),
    )
    .await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn past_the_connection_limit_a_tls_client_is_refused_too_many_connections() {
    let pki = Pki::new();
    let node = TestNode::with_config(NodeConfig {
        max_connections: 1,
        ..pki.node_config("node")
    })
    .await;
    let _first = producer(node.addr, pki.client(None)).await;
    let err = connect_error(node.addr, producer_config(Some(pki.client(None)))).await;
    match err {
        ConnectError::Refused(refusal) => {
            assert_eq!(refusal.code, RefusalCode::TooManyConnections)
        }
        other => panic!("expected TooManyConnections, got {other:?}"),
    }
}

/// Runs `command` to its end, bounded by three [`WAIT`]s; its success, stdout and stderr.
fn finish(mut command: Command) -> (bool, String, String) {
    let (send, done) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(command.output());
    });
    let output = done
        .recv_timeout(WAIT * 3)
        .expect("the command finishes")
        .expect("the command runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn the_cli_worker_dispatch_and_bench_speak_tls_to_lintel_serve() {
    let pki = Pki::new();
    let (cert, key) = pki.node_files("node");
    let mut served = Served::start(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        path(&cert),
        "--tls-key",
        path(&key),
    ]);
    let connect = served.listening();
    let ca = pki.ca_path();
    let mut worker = lintel()
        .args(["worker", "--connect", &connect, "--namespace", "cli"])
        .args(["--activity", "echo", "--tls-ca", path(&ca)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintel worker starts");
    let worker_err = worker.stderr.take().unwrap();
    let registered = std::thread::spawn(move || {
        BufReader::new(worker_err)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("registered as worker"))
    });
    let mut dispatch = lintel();
    dispatch
        .args(["dispatch", "--connect", &connect, "--namespace", "cli"])
        .args([
            "--activity",
            "echo",
            "--input",
            "secured",
            "--wait-ms",
            "10000",
        ])
        .args(["--tls-ca", path(&ca)]);
    let (ok, out, err) = finish(dispatch);
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(ok, "dispatch failed: {err}");
    assert_eq!(out.trim(), "secured");
    assert!(registered.join().unwrap(), "the worker registered");

    let mut bench = lintel();
    bench
        .args([
            "bench",
            "--connect",
            &connect,
            "--workers",
            "1",
            "--count",
            "50",
        ])
        .args(["--concurrency", "4", "--tls-ca", path(&ca)])
        .args(["--tls-server-name", "localhost"]);
    let (ok, out, err) = finish(bench);
    assert!(ok, "bench failed: {out}{err}");
    assert!(out.contains("50 dispatches"), "{out}");

    // Plaintext against the TLS listener fails, and says so.
    let mut plain = lintel();
    plain.args(["dispatch", "--connect", &connect, "--namespace", "cli"]);
    plain.args(["--activity", "echo", "--input", "x"]);
    let (ok, _, err) = finish(plain);
    assert!(!ok && err.contains("cannot connect"), "{err}");
}

#[test]
fn listening_beyond_loopback_without_tls_warns_at_start() {
    let mut exposed = Served::start(&["--listen", "0.0.0.0:0"]);
    let warning = exposed.wait_for("without TLS");
    assert!(warning.contains("WARN"), "{warning}");
    exposed.wait_for("listening");

    let mut loopback = Served::start(&["--listen", "127.0.0.1:0"]);
    loopback.wait_for("listening");
    assert!(
        !loopback
            .seen
            .iter()
            .any(|line| line.contains("without TLS")),
        "{:?}",
        loopback.seen
    );
}
