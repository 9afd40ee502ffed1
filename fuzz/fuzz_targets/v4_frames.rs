//! The `v4_frames` target: `driver/v4_frames.rs` on each input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../driver/v4_frames.rs"]
mod driver;
#[path = "../driver/round_trip.rs"]
mod round_trip;
#[path = "../driver/values.rs"]
#[allow(dead_code, reason = "a routing is built by the other frame-body targets only")]
mod values;

fuzz_target!(|data: &[u8]| {
    driver::run(data);
});
