//! Cooperative cancellation for a run.
//!
//! A [`CancelToken`] is cheap to clone; every clone observes the same flag. The host
//! keeps one clone (e.g. bound to Ctrl-C) and hands another to the run. The engine
//! checks it between steps and races it against every model call, so a cancelled run
//! stops promptly, even in the middle of a stream.

use std::sync::Arc;

use tokio::sync::watch;

/// A shared cancellation flag.
#[derive(Debug, Clone)]
pub struct CancelToken {
    tx: Arc<watch::Sender<bool>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        let (tx, _rx) = watch::channel(false);
        CancelToken { tx: Arc::new(tx) }
    }

    /// Cancels every clone of this token. Idempotent.
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        *self.tx.borrow()
    }

    /// Completes once the token is cancelled.
    pub async fn cancelled(&self) {
        let mut rx = self.tx.subscribe();
        // The sender lives as long as `self`, so `wait_for` cannot fail here.
        let _ = rx.wait_for(|c| *c).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn clones_share_the_flag() {
        let a = CancelToken::new();
        let b = a.clone();
        assert!(!b.is_cancelled());
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.cancelled().await }
        });
        a.cancel();
        waiter.await.unwrap();
        assert!(b.is_cancelled());
        // Already cancelled: returns at once.
        b.cancelled().await;
    }
}
