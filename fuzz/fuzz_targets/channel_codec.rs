//! The `channel_codec` target: `driver/channel_codec.rs` on each input.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../driver/channel_codec.rs"]
mod driver;

fuzz_target!(|data: &[u8]| {
    driver::run(data);
});
