//! The results table: one row per scenario, a worker and a producer column per SDK, and the
//! README block between `<!-- matrix -->` and `<!-- /matrix -->` that holds it.

use crate::agent::Problem;
use crate::scenarios::Scenario;
use crate::sdks::{Role, Sdk};

pub const OPEN: &str = "<!-- matrix -->";
pub const CLOSE: &str = "<!-- /matrix -->";

/// How one scenario ran for one (worker SDK, producer SDK) pair.
#[derive(Debug)]
pub struct Outcome {
    pub scenario: Scenario,
    pub worker: Sdk,
    pub producer: Sdk,
    pub result: Result<(), Problem>,
}

/// A cell of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Pass,
    /// The SDK lacks the feature in that role, or the role does not apply.
    NotApplicable,
    Failed,
}

impl Cell {
    fn text(self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::NotApplicable => "—",
            Cell::Failed => "FAILED",
        }
    }
}

/// The cell of `sdk` in `role` for `scenario`, whatever order the runs finished in: failed when
/// any run with it in that role failed; else — when it said it lacks the feature there (or
/// `no-worker`'s worker); else pass when a run with it there passed.
pub fn cell(outcomes: &[Outcome], scenario: Scenario, sdk: Sdk, role: Role) -> Cell {
    if role == Role::Worker && !scenario.has_worker() {
        return Cell::NotApplicable;
    }
    let runs = outcomes.iter().filter(|outcome| {
        outcome.scenario == scenario
            && match role {
                Role::Worker => outcome.worker == sdk,
                Role::Producer => outcome.producer == sdk,
            }
    });
    let (mut lacks, mut passed) = (false, false);
    for run in runs {
        match &run.result {
            Err(Problem::Failed(_)) => return Cell::Failed,
            Err(Problem::Unsupported { role: lacking, .. }) => lacks |= *lacking == role,
            Ok(()) => passed = true,
        }
    }
    if lacks || !passed {
        Cell::NotApplicable
    } else {
        Cell::Pass
    }
}

/// The README block's text between its markers: which pairs ran, then the table over `sdks`.
pub fn render(sdks: &[Sdk], outcomes: &[Outcome]) -> String {
    let mixed: Vec<String> = sdks
        .iter()
        .flat_map(|&worker| sdks.iter().map(move |&producer| (worker, producer)))
        .filter(|(worker, producer)| worker != producer)
        .map(|(worker, producer)| format!("{} × {}", worker.name(), producer.name()))
        .collect();
    let pairs = if mixed.is_empty() {
        "a worker and a producer of the same SDK (no mixed pair ran)".to_owned()
    } else {
        format!(
            "every worker SDK against every producer SDK, mixed pairs included ({})",
            mixed.join(", ")
        )
    };
    let mut text = format!(
        "The SDKs' feature matrix ([`tests/feature_matrix.rs`](tests/feature_matrix.rs)) runs each \
         scenario with {pairs}: a cell passes when every pair with that SDK in that role passed; \
         — where the SDK lacks the feature or the role does not apply.\n\n"
    );
    text.push_str("| scenario | checks |");
    for sdk in sdks {
        text.push_str(&format!(" {0} worker | {0} producer |", sdk.name()));
    }
    text.push_str("\n| --- | --- |");
    for _ in sdks {
        text.push_str(" --- | --- |");
    }
    text.push('\n');
    for scenario in Scenario::ALL {
        text.push_str(&format!(
            "| `{}` | {} |",
            scenario.name(),
            scenario.checks()
        ));
        for &sdk in sdks {
            for role in [Role::Worker, Role::Producer] {
                text.push_str(&format!(
                    " {} |",
                    cell(outcomes, scenario, sdk, role).text()
                ));
            }
        }
        text.push('\n');
    }
    text
}

/// The text between the markers in `readme`, if both are there in order.
pub fn block(readme: &str) -> Option<&str> {
    let start = readme.find(OPEN)? + OPEN.len();
    let end = start + readme.get(start..)?.find(CLOSE)?;
    readme.get(start..end)
}

/// `readme` with the text between its markers replaced by `table` (on lines of its own).
pub fn replace(readme: &str, table: &str) -> Option<String> {
    let start = readme.find(OPEN)? + OPEN.len();
    let end = start + readme.get(start..)?.find(CLOSE)?;
    Some(format!(
        "{}\n{table}{}",
        readme.get(..start)?,
        readme.get(end..)?
    ))
}

/// The block as it stands between the markers, for comparing with [`block`].
pub fn framed(table: &str) -> String {
    format!("\n{table}")
}

#[cfg(test)]
mod behaviour {
    use super::*;

    fn ran(worker: Sdk, producer: Sdk, result: Result<(), Problem>) -> Outcome {
        Outcome {
            scenario: Scenario::Echo,
            worker,
            producer,
            result,
        }
    }

    fn lacks(role: Role) -> Result<(), Problem> {
        Err(Problem::Unsupported {
            role,
            what: "it".to_owned(),
        })
    }

    #[test]
    fn a_cell_fails_when_any_pair_with_that_sdk_in_that_role_failed() {
        let outcomes = [
            ran(Sdk::Rust, Sdk::Rust, Ok(())),
            ran(
                Sdk::Rust,
                Sdk::Python,
                Err(Problem::Failed("no".to_owned())),
            ),
        ];
        let echo = Scenario::Echo;
        assert_eq!(cell(&outcomes, echo, Sdk::Rust, Role::Worker), Cell::Failed);
        assert_eq!(
            cell(&outcomes, echo, Sdk::Python, Role::Producer),
            Cell::Failed
        );
        assert_eq!(cell(&outcomes, echo, Sdk::Rust, Role::Producer), Cell::Pass);
    }

    #[test]
    fn a_cell_is_a_dash_only_where_that_sdk_lacks_the_feature_in_that_role() {
        let outcomes = [
            ran(Sdk::Rust, Sdk::Rust, Ok(())),
            ran(Sdk::Python, Sdk::Rust, lacks(Role::Worker)),
            ran(Sdk::Rust, Sdk::Python, Ok(())),
            ran(Sdk::Python, Sdk::Python, lacks(Role::Worker)),
        ];
        let echo = Scenario::Echo;
        assert_eq!(
            cell(&outcomes, echo, Sdk::Python, Role::Worker),
            Cell::NotApplicable
        );
        // Its producer passed where a worker could run, and rust's producer is not blamed.
        assert_eq!(
            cell(&outcomes, echo, Sdk::Python, Role::Producer),
            Cell::Pass
        );
        assert_eq!(cell(&outcomes, echo, Sdk::Rust, Role::Producer), Cell::Pass);
        let none = Scenario::NoWorker;
        assert_eq!(
            cell(&[], none, Sdk::Rust, Role::Worker),
            Cell::NotApplicable
        );
    }

    #[test]
    fn a_failed_run_fails_the_cell_even_after_that_sdk_said_it_lacks_the_feature() {
        let failed = || Err(Problem::Failed("crashed".to_owned()));
        let echo = Scenario::Echo;
        for outcomes in [
            [
                ran(Sdk::Python, Sdk::Rust, lacks(Role::Worker)),
                ran(Sdk::Python, Sdk::Python, failed()),
            ],
            [
                ran(Sdk::Python, Sdk::Python, failed()),
                ran(Sdk::Python, Sdk::Rust, lacks(Role::Worker)),
            ],
        ] {
            assert_eq!(
                cell(&outcomes, echo, Sdk::Python, Role::Worker),
                Cell::Failed
            );
            assert_eq!(
                cell(&outcomes, echo, Sdk::Python, Role::Producer),
                Cell::Failed
            );
            assert_eq!(
                cell(&outcomes, echo, Sdk::Rust, Role::Producer),
                Cell::NotApplicable
            );
        }
    }

    #[test]
    fn the_readme_block_is_replaced_between_its_markers_and_read_back() {
        let readme = format!("intro\n{OPEN}\nold\n{CLOSE}\n## Next\n");
        let table = render(&[Sdk::Rust], &[ran(Sdk::Rust, Sdk::Rust, Ok(()))]);
        let updated = replace(&readme, &table).expect("markers");
        assert_eq!(block(&updated), Some(framed(&table).as_str()));
        assert!(
            updated.starts_with("intro\n") && updated.ends_with(&format!("{CLOSE}\n## Next\n"))
        );
        assert_eq!(replace("no markers", &table), None);
    }
}
