//! The `lintel` command: serve, worker, dispatch, status, demo.

fn main() -> std::process::ExitCode {
    lintel::cli::run()
}
