//! The view shared by the driver (which feeds it from the watch) and the job runners (which read
//! it and record their own writes in it), with a way to wait for a condition on it.

use crate::protocol::view::View;

/// The cache shared by the driver (which feeds it) and the job runners (which read it), with a
/// way to wait for a condition on it.
///
/// Waiters are woken through a [`tokio::sync::Notify`], which wakes them in the order they
/// started waiting. (`tokio::sync::watch` parks receivers on one of several notifiers picked at
/// random, which made the simulator's traces differ between runs of the same seed.)
#[derive(Debug, Clone, Default)]
pub struct SharedCache {
    inner: std::sync::Arc<parking_lot::RwLock<View>>,
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl SharedCache {
    /// Reads the cache. Never hold the guard across an await.
    pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, View> {
        self.inner.read()
    }

    /// Changes the cache and wakes the waiters.
    pub fn update<R>(&self, f: impl FnOnce(&mut View) -> R) -> R {
        let result = f(&mut self.inner.write());
        self.changed.notify_waiters();
        result
    }

    /// Waits until `condition` holds on the cache; `false` if `timeout` passed first.
    pub async fn wait_until(
        &self,
        timeout: std::time::Duration,
        condition: impl Fn(&View) -> bool,
    ) -> bool {
        let wait = async {
            loop {
                // Register for the next change before looking, so that no change slips between
                // the look and the wait.
                let notified = self.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if condition(&self.inner.read()) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}
