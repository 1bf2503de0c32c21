//! The signals that stop a daemon.

/// Resolves on SIGINT or SIGTERM (logged). If the handlers cannot be
/// installed it never resolves, and the signals keep their default action
/// (the process ends without a drain).
pub async fn signals() {
    use tokio::signal::unix::{signal, SignalKind};
    let (mut int, mut term) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot install SIGINT/SIGTERM handlers");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn sigterm_resolves() {
        let mut s = Box::pin(signals());
        // one poll installs the handlers
        tokio::select! {
            biased;
            _ = &mut s => panic!("resolved before any signal"),
            _ = std::future::ready(()) => {}
        }
        // SAFETY: signalling ourselves; the handler above is installed.
        unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
        tokio::time::timeout(Duration::from_secs(10), s).await.expect("SIGTERM seen");
    }
}
