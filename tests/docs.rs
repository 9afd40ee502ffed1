//! The project's documents: the README stays a front door, and every relative link in the
//! documents names a file, and a heading in it, that exist.

use std::path::{Path, PathBuf};

/// The README's bound, in lines.
const README_MAX_LINES: usize = 450;

/// The documents whose links are checked, relative to the repository root.
const DOCUMENTS: [&str; 15] = [
    "CHANGELOG.md",
    "README.md",
    "docs/configuration.md",
    "docs/sdk.md",
    "ARCHITECTURE.md",
    "tests/README.md",
    "bench-results/PERFORMANCE.md",
    "fuzz/README.md",
    "examples/python/README.md",
    "deploy/README.md",
    "docs/metrics.md",
    "docs/admin.md",
    "deploy/autoscaling/README.md",
    "clients/typescript/README.md",
    "clients/python/README.md",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The lines outside fenced code blocks, with their line numbers from 1.
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fenced = false;
    text.lines()
        .enumerate()
        .filter(move |(_, line)| {
            if line.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .map(|(index, line)| (index + 1, line))
}

/// The anchor a Markdown renderer gives a heading: lower case, spaces as hyphens, and only
/// letters, digits, hyphens and underscores kept.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .filter_map(|(_, line)| line.strip_prefix('#'))
        .map(|heading| anchor(heading.trim_start_matches('#')))
        .collect()
}

/// The targets of the inline links `[text](target)` in `line`.
fn links(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = line.get(at + 2..)?;
            rest.find(')').and_then(|end| rest.get(..end))
        })
        .collect()
}

#[test]
fn the_readme_stays_under_its_bound() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines < README_MAX_LINES,
        "the README has {lines} lines; move detail to docs/, ARCHITECTURE.md, tests/README.md or \
         bench-results/PERFORMANCE.md"
    );
}

#[test]
fn every_relative_link_in_the_documents_names_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for document in DOCUMENTS {
        let path = root().join(document);
        let text = read(&path);
        let dir = path.parent().unwrap_or(root());
        for (number, line) in prose(&text) {
            for target in links(line) {
                if target.contains("://") {
                    continue;
                }
                checked += 1;
                let (file, heading) = target.split_once('#').unwrap_or((target, ""));
                let linked: PathBuf = if file.is_empty() {
                    path.clone()
                } else {
                    dir.join(file)
                };
                if !linked.exists() {
                    broken.push(format!("{document}:{number}: {target}: no such file"));
                } else if !heading.is_empty()
                    && !anchors(&read(&linked)).iter().any(|a| a == heading)
                {
                    broken.push(format!("{document}:{number}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: the parser is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_heading_anchor_is_what_a_markdown_renderer_makes() {
    assert_eq!(anchor(" Securing a node"), "securing-a-node");
    assert_eq!(anchor("What TLS costs"), "what-tls-costs");
    assert_eq!(anchor("`lintel-wire`: the wire"), "lintel-wire-the-wire");
}
