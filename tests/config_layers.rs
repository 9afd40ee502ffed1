//! `lintel serve` layers its config: file, then variables, then flags, and says where each
//! value came from; an unknown key or a bad value stops it, naming the key and the source.

use lintel_test_support as support;

use support::lintel;

fn serve(args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let mut command = lintel();
    command.arg("serve").args(args);
    for (name, value) in vars {
        command.env(name, value);
    }
    command.output().expect("run lintel serve")
}

#[test]
fn print_config_shows_each_layer_winning_and_masks_secrets() {
    let dir = std::env::temp_dir().join(format!("lintel-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("node.toml");
    std::fs::write(
        &file,
        "backlog = 11\nmax_connections = 12\nauth_token = \"hunter2\"\n",
    )
    .expect("write config");
    let out = serve(
        &[
            "--config",
            file.to_str().expect("utf-8 path"),
            "--print-config",
            "--max-connections",
            "14",
        ],
        &[
            ("LINTEL_MAX_CONNECTIONS", "13"),
            ("LINTEL_PEERS", "127.0.0.1:1,127.0.0.1:2"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("backlog = 11  # file "), "{printed}");
    assert!(
        printed.contains("max_connections = 14  # flag --max-connections"),
        "{printed}"
    );
    assert!(
        printed.contains("peers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]  # variable LINTEL_PEERS"),
        "{printed}"
    );
    assert!(
        !printed.contains("hunter2"),
        "secrets are masked: {printed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_worker_liveness_settings_layer_like_the_rest() {
    let out = serve(
        &["--print-config", "--worker-ping-timeout-ms", "250"],
        &[("LINTEL_WORKER_PROBATION_PINGS", "0")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("worker_probation_pings = 0  # variable LINTEL_WORKER_PROBATION_PINGS"),
        "{printed}"
    );
    assert!(
        printed.contains("worker_ping_timeout_ms = 250  # flag --worker-ping-timeout-ms"),
        "{printed}"
    );
    let zero = serve(&["--print-config", "--worker-ping-timeout-ms", "0"], &[]);
    assert!(!zero.status.success());
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("worker_ping_timeout_ms"),
        "{}",
        String::from_utf8_lossy(&zero.stderr)
    );
}

#[test]
fn an_unknown_key_or_a_bad_value_is_an_error_naming_the_key_and_its_source() {
    for (vars, key, source) in [
        (
            &[("LINTEL_MAX_CONECTIONS", "1")][..],
            "max_conections",
            "LINTEL_MAX_CONECTIONS",
        ),
        (
            &[("LINTEL_BACKLOG", "lots")][..],
            "backlog",
            "LINTEL_BACKLOG",
        ),
    ] {
        let out = serve(&["--print-config"], vars);
        assert!(!out.status.success());
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(key) && said.contains(source), "{said}");
    }
}

#[test]
fn print_config_writes_a_file_that_loads_back_with_secrets_and_unset_keys_commented_out() {
    let dir = std::env::temp_dir().join(format!("lintel-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("printed.toml");
    let printed = serve(
        &["--print-config", "--listen", "127.0.0.1:7499"],
        &[("LINTEL_AUTH_TOKEN", "hunter2")],
    );
    assert!(printed.status.success());
    let text = String::from_utf8_lossy(&printed.stdout).into_owned();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("# auth_token = <set, hidden>  # variable LINTEL_AUTH_TOKEN"),
        "{text}"
    );
    assert!(
        text.contains("# admin_listen = (unset)  # default"),
        "{text}"
    );
    std::fs::write(&file, &text).expect("write the printed config");

    let reloaded = serve(
        &[
            "--config",
            file.to_str().expect("utf-8 path"),
            "--print-config",
        ],
        &[],
    );
    let said = String::from_utf8_lossy(&reloaded.stderr);
    assert!(reloaded.status.success(), "the printed file loads: {said}");
    let again = String::from_utf8_lossy(&reloaded.stdout);
    assert!(
        again.contains("listen = \"127.0.0.1:7499\"  # file "),
        "{again}"
    );
    assert!(
        again.contains("# auth_token = (unset)  # default"),
        "a hidden secret stays unset when loaded back: {again}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mistyped_key_gets_a_did_you_mean() {
    let out = serve(&["--print-config"], &[("LINTEL_MAX_CONECTIONS", "1")]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("did you mean LINTEL_MAX_CONNECTIONS?"),
        "{said}"
    );
}

#[test]
fn a_listen_address_may_name_a_host() {
    let out = serve(&["--print-config", "--listen", "localhost:7498"], &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
}

#[test]
fn a_tls_setting_alone_says_what_it_needs_and_where_it_came_from() {
    let out = serve(&["--print-config", "--tls-cert", "node.crt"], &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("tls_cert: needs tls_key") && said.contains("flag --tls-cert"),
        "{said}"
    );
    // A CA exported for the client commands under the node's name says which name they read.
    let out = serve(&["--print-config"], &[("LINTEL_TLS_CA", "ca.crt")]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("variable LINTEL_TLS_CA") && said.contains("LINTEL_CLIENT_TLS_CA"),
        "{said}"
    );
}
