//! `lintel serve` layers its config: file, then variables, then flags, and says where each
//! value came from; an unknown key or a bad value stops it, naming the key and the source.

use std::process::Command;

fn serve(args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lintel"));
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
        printed.contains("peers = [\"127.0.0.1:1\",\"127.0.0.1:2\"]  # variable LINTEL_PEERS"),
        "{printed}"
    );
    assert!(
        !printed.contains("hunter2"),
        "secrets are masked: {printed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
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
