//! Every subcommand's `--help`: a help line for each argument and at most one default each.

use std::process::Command;

/// The built binary's help output for `args`, in the layout `flag` (`-h` or `--help`) asks for.
fn help(args: &[&str], flag: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_lintel"))
        .args(args)
        .arg(flag)
        .env_remove("RUST_LOG")
        .output()
        .unwrap_or_else(|err| panic!("cannot run lintel {args:?} {flag}: {err}"));
    assert!(output.status.success(), "lintel {args:?} {flag} failed");
    String::from_utf8(output.stdout).expect("help is UTF-8")
}

/// The subcommands the top-level help lists, without clap's own `help`.
fn subcommands() -> Vec<String> {
    let top = help(&[], "--help");
    let listed: Vec<String> = top
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    assert!(listed.len() >= 6, "too few subcommands found in:\n{top}");
    listed
}

/// One option's entry in a help page: its flag line and the lines under it, joined.
struct Entry {
    flags: String,
    help: String,
}

/// The option entries of a help page, short (`-h`) or long (`--help`) layout alike.
fn entries(page: &str) -> Vec<Entry> {
    let is_entry = |line: &str| {
        let indent = line.len() - line.trim_start().len();
        (1..=6).contains(&indent) && line.trim_start().starts_with('-')
    };
    let lines: Vec<&str> = page.lines().collect();
    let mut entries = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if !is_entry(line) {
            continue;
        }
        let trimmed = line.trim();
        let (flags, inline) = match trimmed.split_once("  ") {
            Some((flags, rest)) => (flags.to_owned(), rest.trim().to_owned()),
            None => (trimmed.to_owned(), String::new()),
        };
        let below: Vec<&str> = lines[index + 1..]
            .iter()
            .take_while(|next| !is_entry(next) && !next.starts_with(|c: char| !c.is_whitespace()))
            .map(|next| next.trim())
            .collect();
        let help = std::iter::once(inline.as_str())
            .chain(below)
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        entries.push(Entry { flags, help });
    }
    entries
}

#[test]
fn every_argument_has_a_help_line() {
    for sub in subcommands() {
        for flag in ["-h", "--help"] {
            let page = help(&[&sub], flag);
            let found = entries(&page);
            assert!(
                !found.is_empty(),
                "no options parsed from {sub} --help:\n{page}"
            );
            for entry in found {
                assert!(
                    !entry.help.is_empty() && !entry.help.starts_with('['),
                    "`lintel {sub} {flag}` {} has no help line:\n{page}",
                    entry.flags
                );
            }
        }
    }
}

#[test]
fn no_argument_shows_two_defaults() {
    for sub in subcommands() {
        let page = help(&[&sub], "--help");
        for entry in entries(&page) {
            assert!(
                entry.help.matches("[default:").count() <= 1,
                "`lintel {sub}` {} shows more than one default: {}",
                entry.flags,
                entry.help
            );
            assert!(
                !entry.help.contains("[default: \"\"]"),
                "`lintel {sub}` {} shows an empty default: {}",
                entry.flags,
                entry.help
            );
        }
    }
}

#[test]
fn every_serve_flag_names_its_variable() {
    let page = help(&["serve"], "--help");
    for entry in entries(&page) {
        // Flags of the command line itself, not config keys.
        let own = [
            "--config",
            "--print-config",
            "--threads",
            "--log-format",
            "-h, --help",
        ];
        if own.iter().any(|flag| entry.flags.starts_with(flag)) {
            continue;
        }
        let key = entry
            .flags
            .trim_start_matches("--")
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .replace('-', "_")
            .to_ascii_uppercase();
        let variable = if key == "PEER" {
            "LINTEL_PEERS".to_owned()
        } else {
            format!("LINTEL_{key}")
        };
        assert!(
            entry.help.contains(&variable),
            "`lintel serve` {} does not name {variable}: {}",
            entry.flags,
            entry.help
        );
    }
}

#[test]
fn a_usage_error_shows_only_what_is_required() {
    let output = Command::new(env!("CARGO_BIN_EXE_lintel"))
        .args([
            "dispatch",
            "--connect",
            "127.0.0.1:1",
            "--namespace",
            "n",
            "--activity",
            "a",
        ])
        .output()
        .expect("lintel runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    let usage = said
        .lines()
        .find(|line| line.starts_with("Usage:"))
        .unwrap_or_else(|| panic!("no usage line: {said}"));
    assert!(
        usage.contains("[OPTIONS]") && !usage.contains("--connect"),
        "{usage}"
    );
}
