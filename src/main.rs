//! The `lintel` command: serve, worker, dispatch, status, demo, bench.
#![deny(unreachable_pub)]

mod cli;

/// Every dispatch decodes and frees a handful of small strings and buffers; mimalloc's
/// thread-local size classes make that measurably cheaper than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::run()
}
