//! Cancellation: a `watch` flag that turns true once, shared by the chat
//! loop, the dispatcher, the ACP client and the internal tools; and the
//! signals that ask quorum itself to end.

use tokio::sync::watch;

/// Resolves when `cancel` turns true; never, if its sender is gone first.
pub async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Waits for `SIGTERM` or `SIGHUP` and returns the conventional exit code
/// for it (128 + the signal's number: 143, 129). From the first call on,
/// these signals no longer end the process by themselves: the caller is
/// expected to cancel its work, return, and leave through
/// the session's shutdown. Never returns where they do not
/// exist, or if they cannot be listened to.
pub async fn termination_signal() -> i32 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            return tokio::select! {
                _ = term.recv() => 128 + 15,
                _ = hup.recv() => 128 + 1,
            };
        }
    }
    std::future::pending().await
}
