//! A newcomer's mistakes, made on purpose against the real `lintel` binary: each one gets a
//! message (or an exit code) that says what happened and what to do.

use lintel_test_support as support;

use lintel_test_support::processes;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Output, Stdio};

use support::{line_with, lintel, plain, stderr_lines, Pki, RawWorker, Served};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Runs `lintel` with `args` to its end.
fn run(args: &[&str]) -> Output {
    lintel().args(args).output().expect("lintel runs")
}

/// Runs `lintel` with `args` and `vars` to its end.
fn run_with(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut command = lintel();
    command.args(args);
    for (name, value) in vars {
        command.env(name, value);
    }
    command.output().expect("lintel runs")
}

/// A `lintel worker` in `namespace` serving `echo`, with `extra` flags and its stderr piped.
fn worker(connect: &str, namespace: &str, extra: &[&str]) -> Child {
    lintel()
        .args(["worker", "--connect", connect, "--namespace", namespace])
        .args(["--activity", "echo"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lintel worker starts")
}

/// A node speaking TLS with a certificate from `pki`; its address.
fn tls_node(pki: &Pki) -> (Served, String) {
    let (cert, key) = pki.node_files("node");
    Served::on_loopback(&["--tls-cert", path(&cert), "--tls-key", path(&key)])
}

/// A loopback address that refuses connections for as long as the returned socket lives: bound,
/// never listening.
fn refusing_address() -> (socket2::Socket, SocketAddr) {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .expect("bind");
    let addr = socket
        .local_addr()
        .expect("its address")
        .as_socket()
        .expect("an IP address");
    (socket, addr)
}

#[test]
fn a_worker_with_no_node_to_reach_says_why_at_once_and_keeps_trying() {
    let (_held, addr) = refusing_address();
    let mut child = worker(&addr.to_string(), "nowhere", &[]);
    let lines = stderr_lines(&mut child);
    let mut seen = Vec::new();
    let said = line_with(&lines, &mut seen, "cannot register with the node");
    assert!(said.contains("Connection refused"), "{said}");
    assert!(said.contains("WARN"), "a log line like the others: {said}");
    assert!(
        matches!(child.try_wait(), Ok(None)),
        "a refused connection is retried"
    );
    let _ = child.kill();
    let _ = child.wait();
    for line in &seen {
        assert!(
            line.contains("lintel"),
            "a plain line among log lines: {line}"
        );
    }
}

#[test]
fn a_client_without_tls_at_a_tls_node_is_told_the_node_speaks_tls() {
    let pki = Pki::new();
    let (mut node, addr) = tls_node(&pki);
    assert!(
        node.seen.iter().any(|line| line.contains("tls=\"on\"")),
        "{:?}",
        node.seen
    );
    let out = run(&[
        "dispatch",
        "--connect",
        &addr,
        "--namespace",
        "n",
        "--activity",
        "echo",
        "--input",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(said.contains("it speaks TLS: pass --tls-ca"), "{said}");
    node.wait_for("plaintext frames to this TLS listener");

    // A worker makes the same mistake, is told the same, and stops: retrying cannot help.
    let out = worker(&addr, "n", &[])
        .wait_with_output()
        .expect("the worker ends");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("pass --tls-ca"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_client_with_tls_at_a_plaintext_node_is_told_and_the_node_logs_it() {
    let pki = Pki::new();
    let (mut node, addr) = Served::on_loopback(&[]);
    let ca = pki.ca_path();
    let out = run(&["status", "--connect", &addr, "--tls-ca", path(&ca)]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(said.contains("did not answer in TLS"), "{said}");
    node.wait_for("a client began TLS on this plaintext listener");
}

#[test]
fn status_at_the_admin_listener_is_told_it_is_an_http_endpoint() {
    let (mut node, _addr) = Served::on_loopback(&["--admin-listen", "127.0.0.1:0"]);
    let admin = node.admin_listening();
    let out = run(&["status", "--connect", &admin]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(said.contains("this is an HTTP endpoint"), "{said}");
}

#[test]
fn an_http_request_at_the_frame_listener_gets_a_plain_text_hint() {
    let (mut node, addr) = Served::on_loopback(&[]);
    let mut stream = TcpStream::connect(&addr).expect("connect");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send a request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request"), "{answer}");
    assert!(answer.contains("admin listener"), "{answer}");
    node.wait_for("an HTTP request on the lintel listener");
}

#[test]
fn client_tls_variables_leave_serve_alone_and_the_node_names_still_work_with_a_warning() {
    let pki = Pki::new();
    let ca = pki.ca_path();
    // Exported for the client commands, in the shell that starts the node.
    let mut command = lintel();
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("LINTEL_CLIENT_TLS_CA", &ca);
    let mut plain_node = Served::spawn(command);
    plain_node.listening();

    let (_node, addr) = tls_node(&pki);
    let status = ["status", "--connect", addr.as_str()];
    let out = run_with(&status, &[("LINTEL_CLIENT_TLS_CA", path(&ca))]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run_with(&status, &[("LINTEL_TLS_CA", path(&ca))]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("LINTEL_TLS_CA") && said.contains("set LINTEL_CLIENT_TLS_CA instead"),
        "{said}"
    );
}

#[tokio::test]
async fn a_draining_node_answers_status_and_turns_a_dispatch_away_with_exit_16() {
    let (mut node, addr) = Served::on_loopback(&["--drain-timeout-ms", "60000"]);
    let socket: SocketAddr = addr.parse().expect("an address");
    let mut held = RawWorker::start(socket, plain("drain", "echo", 1, "holder")).await;
    let mut in_flight = tokio::process::Command::from(lintel());
    in_flight
        .args(["dispatch", "--connect", &addr, "--namespace", "drain"])
        .args(["--activity", "echo", "--input", "held"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let _in_flight = in_flight.spawn().expect("lintel dispatch starts");
    held.next_push().await;
    processes::signal(node.pid(), "TERM").await;
    node.wait_for("draining");

    let out = run(&[
        "dispatch",
        "--connect",
        &addr,
        "--namespace",
        "drain",
        "--activity",
        "echo",
        "--input",
        "late",
    ]);
    assert_eq!(out.status.code(), Some(16), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).starts_with("draining"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["status", "--connect", &addr]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("DRAINING"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn verbose_says_served_by_only_when_a_worker_replied() {
    let (_node, addr) = Served::on_loopback(&["--node-id", "node-a"]);
    let mut echo = worker(&addr, "verbose", &[]);
    let lines = stderr_lines(&mut echo);
    line_with(&lines, &mut Vec::new(), "registered as worker");
    let dispatch = |namespace: &str| {
        run(&[
            "dispatch",
            "--connect",
            &addr,
            "--namespace",
            namespace,
            "--activity",
            "echo",
            "--input",
            "x",
            "--verbose",
        ])
    };
    let served = dispatch("verbose");
    assert!(served.status.success());
    assert!(
        text(&served.stderr).contains("served by node-a"),
        "{}",
        text(&served.stderr)
    );
    let decided = dispatch("nobody");
    assert_eq!(decided.status.code(), Some(11));
    let said = text(&decided.stderr);
    assert!(
        said.contains("decided by node-a") && !said.contains("served by"),
        "{said}"
    );
    let _ = echo.kill();
    let _ = echo.wait();
}

#[test]
fn a_worker_label_has_its_own_flag_and_the_old_one_warns() {
    let (_node, addr) = Served::on_loopback(&["--node-id", "node-a"]);
    let mut old = worker(&addr, "labels", &["--node", "gpu"]);
    let lines = stderr_lines(&mut old);
    let mut seen = Vec::new();
    line_with(&lines, &mut seen, "registered as worker");
    assert!(
        seen.iter()
            .any(|line| line.contains("--node is deprecated") && line.contains("--label")),
        "{seen:?}"
    );
    let pinned = run(&[
        "dispatch",
        "--connect",
        &addr,
        "--namespace",
        "labels",
        "--activity",
        "echo",
        "--input",
        "x",
        "--label",
        "gpu",
    ]);
    assert!(pinned.status.success(), "{}", text(&pinned.stderr));
    let status = text(&run(&["status", "--connect", &addr]).stdout);
    assert!(
        status.contains("label") && status.contains("gpu"),
        "{status}"
    );
    assert!(
        status.contains("state") && status.contains(" eligible "),
        "a worker that served is eligible: {status}"
    );
    let _ = old.kill();
    let _ = old.wait();
}

#[test]
fn an_observer_reads_status_and_refusals_name_the_credential() {
    let mut command = lintel();
    command.args(["serve", "--listen", "127.0.0.1:0"]).env(
        "LINTEL_GRANTS",
        r#"[{ token = "look", roles = ["observer"] },
            { token = "billing", roles = ["worker"], namespaces = ["billing"] }]"#,
    );
    let mut node = Served::spawn(command);
    let addr = node.listening();
    let status = run(&["status", "--connect", &addr, "--auth-token", "look"]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    let dispatch = run(&[
        "dispatch",
        "--connect",
        &addr,
        "--namespace",
        "billing",
        "--activity",
        "echo",
        "--input",
        "x",
        "--auth-token",
        "look",
    ]);
    assert_eq!(dispatch.status.code(), Some(14));
    assert!(
        text(&dispatch.stderr).contains("observer role"),
        "{}",
        text(&dispatch.stderr)
    );

    // A worker's token used to dispatch: refused at hello, and the node logs the reason whole.
    let wrong_role = run(&[
        "dispatch",
        "--connect",
        &addr,
        "--namespace",
        "billing",
        "--activity",
        "echo",
        "--input",
        "x",
        "--auth-token",
        "billing",
    ]);
    assert_eq!(wrong_role.status.code(), Some(1));
    let logged = node.wait_for("hello refused");
    assert!(
        logged.contains(
            "connecting as a producer needs the producer role (or observer, to read status)\""
        ),
        "{logged}"
    );

    let refused = worker(&addr, "payroll", &["--auth-token", "billing"])
        .wait_with_output()
        .expect("the worker ends");
    assert_eq!(refused.status.code(), Some(1));
    let said = text(&refused.stderr);
    assert!(
        said.contains(
            r#"namespace "payroll" is not granted to the token presented (granted: billing)"#
        ),
        "{said}"
    );
}

#[test]
fn a_worker_refused_for_good_exits_1_with_the_reason() {
    let (_node, addr) = Served::on_loopback(&["--auth-token", "right"]);
    let out = worker(&addr, "n", &["--auth-token", "wrong"])
        .wait_with_output()
        .expect("the worker ends");
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains("refused this worker (Unauthorized)"),
        "{said}"
    );
}

#[test]
fn a_bind_error_names_the_key_and_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("address").to_string();
    for (args, key) in [
        (["--listen", port.as_str(), "--node-id", "a"], "listen"),
        (
            ["--listen", "127.0.0.1:0", "--admin-listen", port.as_str()],
            "admin_listen",
        ),
    ] {
        let out = run(&[&["serve"][..], &args].concat());
        assert_eq!(out.status.code(), Some(1));
        let said = text(&out.stderr);
        assert!(
            said.contains(&format!("cannot bind {key} = {port}")),
            "{said}"
        );
    }
}

#[test]
fn tls_file_mistakes_name_the_file_and_what_does_not_match() {
    let pki = Pki::new();
    let (node_cert, node_key) = pki.node_files("node");
    let (_other_cert, other_key) = pki.node_files("other");
    let ca = pki.ca_path();

    // The node's own files: a key that is another certificate's.
    let out = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        path(&node_cert),
        "--tls-key",
        path(&other_key),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!(
            "the private key in {} does not match the certificate in {}",
            path(&other_key),
            path(&node_cert)
        )),
        "{said}"
    );

    let (_node, addr) = tls_node(&pki);
    let status = |extra: &[&str]| {
        let mut args = vec!["status", "--connect", &addr];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1));
        text(&out.stderr)
    };
    // A client's key that is not its certificate's, a certificate where the key goes, a key
    // where the CA goes.
    let said = status(&[
        "--tls-ca",
        path(&ca),
        "--tls-cert",
        path(&node_cert),
        "--tls-key",
        path(&other_key),
    ]);
    assert!(
        said.contains(&format!(
            "the private key in {} does not match the certificate in {}",
            path(&other_key),
            path(&node_cert)
        )),
        "{said}"
    );
    let said = status(&[
        "--tls-ca",
        path(&ca),
        "--tls-cert",
        path(&node_cert),
        "--tls-key",
        path(&node_cert),
    ]);
    assert!(
        said.contains(&format!(
            "no private key (PKCS#8, PKCS#1 or SEC1 PEM) in {}",
            path(&node_cert)
        )),
        "{said}"
    );
    let said = status(&["--tls-ca", path(&node_key)]);
    assert!(
        said.contains(&format!("no certificate in {}", path(&node_key))),
        "{said}"
    );
}

#[test]
fn a_name_the_node_certificate_lacks_is_answered_with_the_names_it_carries() {
    let pki = Pki::new();
    let (mut node, addr) = tls_node(&pki);
    let ca = pki.ca_path();
    let out = run(&[
        "status",
        "--connect",
        &addr,
        "--tls-ca",
        path(&ca),
        "--tls-server-name",
        "node.example",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains(
            "the node's certificate carries IP:127.0.0.1, DNS:localhost, not \"node.example\" \
             (--tls-server-name): pass one of those"
        ),
        "{said}"
    );
    // The node logs the failed handshake with the client's address.
    let logged = node.wait_for("closing a connection that failed TLS");
    assert!(logged.contains("peer=127.0.0.1:"), "{logged}");

    // A certificate for another host, dialled by the host of --connect.
    let leaf = pki.leaf(&["elsewhere.example"]);
    let cert = pki.write("elsewhere.pem", &leaf.cert);
    let key = pki.write("elsewhere.key", &leaf.key);
    let (_elsewhere, addr) =
        Served::on_loopback(&["--tls-cert", path(&cert), "--tls-key", path(&key)]);
    let out = run(&["status", "--connect", &addr, "--tls-ca", path(&ca)]);
    let said = text(&out.stderr);
    assert!(
        said.contains(
            "carries DNS:elsewhere.example, not \"127.0.0.1\" (the host of --connect): connect \
             by one of those, or pass --tls-server-name with one"
        ),
        "{said}"
    );
}
