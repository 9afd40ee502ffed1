//! The live line a load run draws on a terminal: rate and outcomes so far, redrawn in place.
//!
//! Nothing is drawn when stderr is not a terminal or the run ends within [`QUIET_FOR`], so
//! piped output holds only the summary.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// How often the line is redrawn.
const REFRESH: Duration = Duration::from_millis(250);

/// Runs that end sooner draw no line at all.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// Outcomes so far, shared by every dispatch loop of a run.
#[derive(Debug, Default)]
pub(super) struct Tally {
    done: AtomicU64,
    failed: AtomicU64,
}

impl Tally {
    /// Counts one ended dispatch; `completed` when it completed successfully.
    pub(super) fn record(&self, completed: bool) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if !completed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A live line being redrawn; [`Live::finish`] stops it and clears what it drew.
pub(super) struct Live {
    task: JoinHandle<()>,
    drawn: Arc<AtomicBool>,
}

/// Starts redrawing the line for `tally` on stderr, if stderr is a terminal.
pub(super) fn start(tally: Arc<Tally>, started: Instant) -> Option<Live> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let drawn = Arc::new(AtomicBool::new(false));
    let marked = Arc::clone(&drawn);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval_at((started + QUIET_FOR).into(), REFRESH);
        loop {
            tick.tick().await;
            let text = line(
                started.elapsed(),
                tally.done.load(Ordering::Relaxed),
                tally.failed.load(Ordering::Relaxed),
            );
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r{text}\x1b[K").and_then(|()| stderr.flush());
            marked.store(true, Ordering::Relaxed);
        }
    });
    Some(Live { task, drawn })
}

impl Live {
    /// Stops redrawing and erases the line, so the summary starts on a clean line.
    pub(super) async fn finish(self) {
        self.task.abort();
        let _ = self.task.await;
        if self.drawn.load(Ordering::Relaxed) {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K").and_then(|()| stderr.flush());
        }
    }
}

/// The progress text after `elapsed`, with `done` dispatches ended and `failed` of them not
/// completed successfully.
fn line(elapsed: Duration, done: u64, failed: u64) -> String {
    let seconds = elapsed.as_secs_f64();
    let rate = if seconds > 0.0 {
        done as f64 / seconds
    } else {
        0.0
    };
    format!(
        "  {seconds:>6.1}s  {done:>10} dispatches  {rate:>9.0} /s  completed {}  failed {failed}",
        done - failed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_rate_so_far_and_outcomes() {
        let text = line(Duration::from_secs(2), 1_000, 10);
        assert!(text.contains("2.0s"), "{text}");
        assert!(text.contains("1000 dispatches"), "{text}");
        assert!(text.contains("500 /s"), "{text}");
        assert!(text.contains("completed 990  failed 10"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }

    #[test]
    fn tally_counts_failures_apart() {
        let tally = Tally::default();
        tally.record(true);
        tally.record(false);
        tally.record(true);
        assert_eq!(tally.done.load(Ordering::Relaxed), 3);
        assert_eq!(tally.failed.load(Ordering::Relaxed), 1);
    }
}
