//! The signals that stop a long-running subcommand, and SIGHUP.

/// Resolves on SIGINT or SIGTERM.
pub(super) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
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
