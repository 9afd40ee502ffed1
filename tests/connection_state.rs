//! The connection-state fuzz driver (`fuzz/driver/connection_state.rs`) under `cargo test`: its
//! committed seed scripts replayed, then random scripts from proptest. Each script drives one
//! connection of a real node over in-memory pipes in paused time and asserts the driver's
//! invariants: one outcome per submission, frames that decode, nothing left after the close.

#[path = "../fuzz/driver/connection_state.rs"]
mod driver;

use proptest::prelude::*;

#[test]
fn every_committed_seed_script_keeps_the_connection_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/connection_state");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .expect("the seed corpus")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("seed-"))
        })
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seed-* scripts in {}", dir.display());
    for seed in seeds {
        let script = std::fs::read(&seed).expect("read a seed");
        let report = driver::run(&script);
        eprintln!("{}: {report:?}", seed.display());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_script_keeps_the_connection_invariants(script in proptest::collection::vec(any::<u8>(), 0..160)) {
        driver::run(&script);
    }
}
