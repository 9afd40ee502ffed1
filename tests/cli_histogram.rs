//! `lintel demo --histogram`: an SVG file of the latency distribution, or text bars with `-`.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `lintel demo` with 500 dispatches and `extra` flags, and checks it succeeded quietly:
/// no log lines and no redrawn progress line when piped.
fn demo(extra: &[&str]) -> String {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_lintel"))
        .args(["demo", "--dispatches", "500", "--workers", "2"])
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("LINTEL_LOG_FORMAT")
        .output()
        .expect("lintel demo runs");
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    assert!(status.success(), "demo failed:\n{stdout}\n{stderr}");
    assert_eq!(stderr, "", "nothing on stderr when piped");
    assert!(
        !stdout.contains('\r'),
        "a redrawn line when piped: {stdout:?}"
    );
    assert!(stdout.ends_with("demo ok\n"), "{stdout}");
    stdout
}

#[test]
fn histogram_to_a_file_is_an_svg_with_bars() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli-histogram-{}.svg", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let path_text = path.to_str().expect("a UTF-8 temp path");
    let stdout = demo(&["--histogram", path_text]);
    assert!(
        !stdout.contains("log-scaled"),
        "no text bars with a file: {stdout}"
    );
    let svg = std::fs::read_to_string(&path).expect("the SVG was written");
    let _ = std::fs::remove_file(&path);
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
    assert!(svg.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    // The white background is one rect; the bars are the rest, and at least one is drawn.
    let bars: Vec<&str> = svg
        .split("<rect")
        .skip(2)
        .filter(|rect| !rect.contains("height=\"0\""))
        .collect();
    assert!(!bars.is_empty(), "no bar in:\n{svg}");
    assert!(svg.contains("500 dispatches"), "the title counts the run");
    assert!(
        svg.contains("dispatches</text>") && svg.contains("latency"),
        "axis labels"
    );
    assert_eq!(
        svg.matches('<').count(),
        svg.matches('>').count(),
        "balanced tags"
    );
}

#[test]
fn histogram_dash_prints_text_bars() {
    let stdout = demo(&["--histogram", "-"]);
    let after: Vec<&str> = stdout
        .lines()
        .skip_while(|line| !line.starts_with("latency (log-scaled buckets)"))
        .skip(1)
        .take_while(|line| line.contains('|'))
        .collect();
    assert!(!after.is_empty(), "no histogram in:\n{stdout}");
    assert!(
        after.iter().any(|line| line.contains('#')),
        "no bar in:\n{stdout}"
    );
    let total: u64 = after
        .iter()
        .filter_map(|line| line.rsplit('|').next())
        .filter_map(|tail| tail.split_whitespace().next())
        .filter_map(|count| count.parse::<u64>().ok())
        .sum();
    assert_eq!(total, 500, "every dispatch in a bucket:\n{stdout}");
}
