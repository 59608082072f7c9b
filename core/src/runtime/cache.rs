//! The view shared by the driver (which feeds it from the watch) and the job runners (which read
//! it and record their own writes in it). Nothing waits on it: the protocol's waits are states
//! it re-evaluates on every input.

use crate::protocol::view::View;

/// The view shared by the driver and the job runners.
#[derive(Debug, Clone, Default)]
pub struct SharedCache {
    inner: std::sync::Arc<parking_lot::RwLock<View>>,
}

impl SharedCache {
    /// Reads the view. Never hold the guard across an await.
    pub fn read(&self) -> parking_lot::RwLockReadGuard<'_, View> {
        self.inner.read()
    }

    /// Changes the view.
    pub fn update<R>(&self, f: impl FnOnce(&mut View) -> R) -> R {
        f(&mut self.inner.write())
    }
}
