//! How a scheduler's tasks end when the application drops it: every task the scheduler spawns
//! (the driver, the job runners, the items, the event sinks) goes through a spawner that ends
//! it when the scheduler's stop token is cancelled, and the last [`Scheduler`](super::Scheduler)
//! handle cancels that token when it is dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::events::Events;
use crate::handles::Spawner;

/// Spawns on `inner`, but ends each task (drops its future) once `stop` is cancelled. Blocking
/// tasks cannot be interrupted and run to their end.
pub(crate) struct StoppableSpawner {
    pub inner: Arc<dyn Spawner>,
    pub stop: CancellationToken,
}

impl fmt::Debug for StoppableSpawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoppableSpawner").field("inner", &self.inner).finish()
    }
}

impl Spawner for StoppableSpawner {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        let stop = self.stop.clone();
        self.inner.spawn(Box::pin(async move {
            tokio::select! {
                biased;
                () = stop.cancelled() => {}
                () = task => {}
            }
        }));
    }

    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>) {
        self.inner.spawn_blocking(task);
    }
}

/// Held by every [`Scheduler`](super::Scheduler) handle the application has; dropping the last
/// one stops the scheduler's tasks at once and ends its event streams.
pub(crate) struct StopOnDrop {
    pub stop: CancellationToken,
    pub events: Events,
}

impl fmt::Debug for StopOnDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopOnDrop").finish_non_exhaustive()
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.events.close();
        self.stop.cancel();
    }
}
