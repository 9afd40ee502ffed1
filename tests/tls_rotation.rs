//! Certificates that rotate: a running node takes up new TLS files for new connections (on its
//! poll, and `lintel serve` on SIGHUP), keeps connections already open, keeps the old
//! certificate when the new files do not load, and counts both in `/metrics` and `/status`;
//! an SDK client made from files reads them again when it connects.

use lintel_test_support as support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use lintel::activities::BuiltIn;
use lintel::sdk::{Client, ClientConfig, ClientTls, ConnectError, DispatchOptions, Worker};
use lintel::tls::Rotation;
use lintel::wire::{ActivityOutcome, DispatchResult};
use lintel::NodeConfig;
use support::{admin_get, plain, request, within, Pki, Served, TestNode, WAIT};

/// Writes `text` to `path` whole: a reader sees the old file or the new, never half of one.
fn replace(path: &Path, text: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).expect("write");
    std::fs::rename(&staged, path).expect("rename");
}

/// Client TLS trusting `pki`'s CA only.
fn trusting(pki: &Pki) -> ClientTls {
    ClientTls::from_pem(pki.ca_pem().as_bytes(), None).expect("a CA")
}

async fn connect(addr: SocketAddr, tls: ClientTls) -> Result<Client, ConnectError> {
    let config = {
        let mut config = ClientConfig::default();
        config.tls = Some(tls);
        config
    };
    within("a TLS connect", Client::connect(addr, config)).await
}

/// Dispatches `echo` in `demo` and checks it completes.
async fn echoes(client: &Client) {
    let options = DispatchOptions::default().wait_for_worker(WAIT);
    let result = within(
        "an echo",
        client.dispatch(
            &support::dispatch_of(request("demo", "echo", "hi")),
            &options,
        ),
    )
    .await
    .expect("an outcome");
    match result {
        DispatchResult::Completed(response) => {
            assert!(matches!(response.outcome, ActivityOutcome::Success(_)));
        }
        other => panic!("expected a completion, got {other:?}"),
    }
}

/// Waits until the node's TLS rotation satisfies `holds`, looking again after each reload.
async fn wait_rotation(node: &TestNode, what: &str, holds: impl Fn(&Rotation) -> bool) -> Rotation {
    let tls = node.node.tls();
    let changes = tls.changes().expect("TLS is on");
    within(what, async {
        loop {
            let mut seen = changes.epoch();
            let rotation = tls.rotation().expect("TLS is on");
            if holds(&rotation) {
                return rotation;
            }
            changes.changed(&mut seen).await;
        }
    })
    .await
}

#[tokio::test]
async fn rotated_files_serve_new_clients_keep_open_ones_and_a_bad_file_keeps_the_old() {
    let old_ca = Pki::new();
    let new_ca = Pki::new();
    let (cert, key) = old_ca.node_files("node");
    let (node, admin) = TestNode::with_admin(NodeConfig {
        tls_cert: Some(cert.clone()),
        tls_key: Some(key.clone()),
        tls_poll_ms: 20,
        ..NodeConfig::default()
    })
    .await;
    let mut worker = support::worker_config(node.addr.to_string(), plain("demo", "echo", 4, "w"));
    worker.tls = Some(trusting(&old_ca));
    let worker = Worker::spawn(worker, BuiltIn);
    within("worker registration", worker.wait_registered(WAIT))
        .await
        .expect("the worker registers");
    let before = connect(node.addr, trusting(&old_ca))
        .await
        .expect("a client trusting the first CA connects");
    assert!(matches!(
        connect(node.addr, trusting(&new_ca)).await,
        Err(ConnectError::Tls(_))
    ));
    let first = node.node.tls().rotation().expect("TLS is on");
    assert_eq!(first.reloads, 0);
    assert!(first.not_after_unix_s.is_some());

    let leaf = new_ca.leaf(&["127.0.0.1", "localhost"]);
    replace(&key, &leaf.key);
    replace(&cert, &leaf.cert);
    let rotated = wait_rotation(&node, "the new files in use", |r| {
        r.reloads >= 1 && r.last_error.is_none()
    })
    .await;

    let after = connect(node.addr, trusting(&new_ca))
        .await
        .expect("a new client sees the new certificate, with no restart");
    echoes(&after).await;
    echoes(&before).await;
    assert!(
        matches!(
            connect(node.addr, trusting(&old_ca)).await,
            Err(ConnectError::Tls(_))
        ),
        "the old certificate is served no more"
    );

    replace(&cert, "-----BEGIN CERTIFICATE-----\nnot a certificate\n");
    let failed = wait_rotation(&node, "the bad file refused", |r| {
        r.failures > rotated.failures
    })
    .await;
    assert_eq!(failed.reloads, rotated.reloads);
    assert!(failed.last_error.is_some());
    let still = connect(node.addr, trusting(&new_ca))
        .await
        .expect("with a bad file the certificate in use stays");
    echoes(&still).await;

    let (_, metrics) = admin_get(admin, "/metrics").await;
    for line in [
        format!("lintel_tls_reloads_total {}", failed.reloads),
        format!("lintel_tls_reload_failures_total {}", failed.failures),
        format!(
            "lintel_tls_cert_not_after_seconds {}",
            failed.not_after_unix_s.expect("an expiry")
        ),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    let (_, status) = admin_get(admin, "/status").await;
    let status: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(status["tls"]["reloads"], failed.reloads);
    assert_eq!(status["tls"]["failures"], failed.failures);
    assert!(status["tls"]["last_error"].is_string());
}

#[tokio::test]
async fn a_client_made_from_files_reads_them_again_when_it_connects() {
    let old_ca = Pki::new();
    let new_ca = Pki::new();
    let (cert, key) = old_ca.node_files("node");
    let node = TestNode::with_config(NodeConfig {
        tls_cert: Some(cert.clone()),
        tls_key: Some(key.clone()),
        tls_poll_ms: 20,
        ..NodeConfig::default()
    })
    .await;
    let ca_file = old_ca.write("trusted.pem", &old_ca.ca_pem());
    let tls = ClientTls::from_files(&ca_file, None).expect("the CA file loads");
    drop(connect(node.addr, tls.clone()).await.expect("connects"));

    let leaf = new_ca.leaf(&["127.0.0.1"]);
    replace(&key, &leaf.key);
    replace(&cert, &leaf.cert);
    wait_rotation(&node, "the new files in use", |r| {
        r.reloads >= 1 && r.last_error.is_none()
    })
    .await;
    assert!(matches!(
        connect(node.addr, tls.clone()).await,
        Err(ConnectError::Tls(_))
    ));
    replace(&ca_file, &new_ca.ca_pem());
    drop(
        connect(node.addr, tls.clone())
            .await
            .expect("the same ClientTls trusts the CA file's new content"),
    );
    replace(&ca_file, "garbage");
    drop(
        connect(node.addr, tls)
            .await
            .expect("a CA file that no longer loads leaves the CA read before"),
    );
}

#[tokio::test]
async fn a_rotated_peer_ca_is_trusted_by_the_next_dial() {
    let old_ca = Pki::new();
    let new_ca = Pki::new();
    // c serves a certificate of the new CA; a dials it trusting only the old CA at first.
    let (c_cert, c_key) = new_ca.node_files("c");
    let c = TestNode::with_config(NodeConfig {
        node_id: "c".into(),
        tls_cert: Some(c_cert),
        tls_key: Some(c_key),
        peer_ping_interval_ms: 100,
        ..NodeConfig::default()
    })
    .await;
    let (a_cert, a_key) = old_ca.node_files("a");
    let peer_ca = old_ca.write("peers.pem", &old_ca.ca_pem());
    let a = TestNode::with_config(NodeConfig {
        node_id: "a".into(),
        tls_cert: Some(a_cert),
        tls_key: Some(a_key),
        tls_ca: Some(peer_ca.clone()),
        tls_poll_ms: 20,
        peers: vec![c.addr.to_string()],
        peer_ping_interval_ms: 100,
        ..NodeConfig::default()
    })
    .await;
    assert!(
        a.peers().iter().all(|peer| peer.node_id.is_empty()),
        "not linked yet"
    );

    replace(&peer_ca, &new_ca.ca_pem());
    wait_rotation(&a, "the new peer CA in use", |r| r.reloads >= 1).await;
    a.wait_linked(&["c"]).await;
}

#[test]
fn lintel_serve_takes_up_rotated_files_on_sighup() {
    let old_ca = Pki::new();
    let new_ca = Pki::new();
    let (cert, key) = old_ca.node_files("node");
    let mut command = support::lintel();
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        // No polling: only the signal reloads.
        .env("LINTEL_TLS_POLL_MS", "0");
    let mut served = Served::spawn(command);
    let addr = served.listening();
    let status = |ca: &Path| {
        support::lintel()
            .args(["status", "--connect", &addr, "--tls-ca"])
            .arg(ca)
            .output()
            .expect("lintel status runs")
    };
    let new_ca_file = new_ca.ca_path();
    assert!(!status(&new_ca_file).status.success());

    let leaf = new_ca.leaf(&["127.0.0.1"]);
    replace(&key, &leaf.key);
    replace(&cert, &leaf.cert);
    let hup = Command::new("kill")
        .args(["-HUP", &served.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(hup.success());
    served.wait_for("TLS files reloaded");
    let out = status(&new_ca_file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!status(&old_ca.ca_path()).status.success());
}
