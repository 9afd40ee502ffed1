//! The `peer_frames` target: `driver/peer_frames.rs` on each input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../driver/peer_frames.rs"]
mod driver;
#[path = "../driver/round_trip.rs"]
mod round_trip;
#[path = "../driver/values.rs"]
mod values;

fuzz_target!(|data: &[u8]| {
    driver::run(data);
});
