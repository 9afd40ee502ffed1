//! The signals that stop a long-running subcommand, and SIGHUP.

/// The exit code of a command left at a second Ctrl-C, abandoning its work: 128 + SIGINT.
pub(super) const INTERRUPTED: u8 = 130;

/// SIGINT and SIGTERM, each a request to stop, caught from creation on: one that comes before
/// anyone waits is kept for the next [`Stops::next`].
pub(super) struct Stops {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Stops {
    /// Starts catching SIGINT and SIGTERM (on other systems, Ctrl-C when first awaited).
    pub(super) fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Self {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Resolves at the next SIGINT or SIGTERM; never, when neither could be caught.
    pub(super) async fn next(&mut self) {
        #[cfg(unix)]
        {
            let interrupt = async {
                match &mut self.interrupt {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let terminate = async {
                match &mut self.terminate {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = interrupt => {}
                () = terminate => {}
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
pub(super) async fn shutdown_signal() {
    Stops::new().next().await;
}

/// Calls `each` on every SIGHUP; never resolves (nor, where there is no SIGHUP, calls it).
pub(super) async fn hangups(mut each: impl FnMut()) {
    #[cfg(unix)]
    if let Ok(mut signal) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        while signal.recv().await.is_some() {
            each();
        }
    }
    let _ = &mut each;
    std::future::pending::<()>().await;
}

/// `n` and the noun for it: `1 dispatch`, `3 dispatches`.
pub(super) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `duration` in seconds as people read them: `10 s`, `2.5 s`.
pub(super) fn seconds(duration: std::time::Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0} s")
    } else {
        format!("{secs:.1} s")
    }
}
