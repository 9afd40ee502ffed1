//! The `frame_decode` target: `driver/frame_decode.rs` on each input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../driver/frame_decode.rs"]
mod driver;

fuzz_target!(|data: &[u8]| {
    driver::run(data);
});
