//! A real node's connection state machine, driven by a scripted client over in-memory pipes:
//! the script is decoded from the input, and the driver asserts one outcome per submission, only
//! decodable frames from the node, and nothing left registered or in flight after the close.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../driver/connection_state.rs"]
mod driver;

fuzz_target!(|data: &[u8]| {
    driver::run(data);
});
