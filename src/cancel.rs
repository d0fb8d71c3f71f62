//! Cancellation: a `watch` flag that turns true once, shared by the chat
//! loop, the dispatcher, the ACP client and the internal tools.

use tokio::sync::watch;

/// Resolves when `cancel` turns true; never, if its sender is gone first.
pub async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}
