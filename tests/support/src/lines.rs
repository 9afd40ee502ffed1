//! A child process's stderr as a channel of lines, read on a thread of its own.

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::mpsc::{self, Receiver};

/// Takes `child`'s piped stderr and sends each line on the returned channel until it ends.
///
/// # Panics
/// When `child`'s stderr was not piped.
pub fn stderr_lines(child: &mut Child) -> Receiver<String> {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    lines
}
