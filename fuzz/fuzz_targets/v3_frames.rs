//! The `v3_frames` target: `driver/v3_frames.rs` on each input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../driver/v3_frames.rs"]
mod driver;
#[path = "../driver/round_trip.rs"]
mod round_trip;
#[path = "../driver/values.rs"]
mod values;

fuzz_target!(|data: &[u8]| {
    driver::run(data);
});
