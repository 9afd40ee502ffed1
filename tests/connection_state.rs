//! The connection-state fuzz driver (`fuzz/driver/connection_state.rs`) under `cargo test` on
//! random scripts from proptest (its committed seeds replay in `tests/fuzz_seeds.rs`). Each
//! script drives one connection of a real node over in-memory pipes in paused time and asserts
//! the driver's invariants: one outcome per submission, frames that decode, nothing left after
//! the close.

#[path = "../fuzz/driver/connection_state.rs"]
mod driver;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_script_keeps_the_connection_invariants(script in proptest::collection::vec(any::<u8>(), 0..160)) {
        driver::run(&script);
    }
}
