//! The spawner each simulated instance gets: it runs tasks on the simulation's one runtime and
//! remembers them, so that a crash (kill -9) can abort every task of that instance at once.

use std::future::Future;
use std::pin::Pin;

use parking_lot::Mutex;
use shardcron_core::handles::Spawner;
use tokio::task::AbortHandle;

/// Spawns on the ambient (single-threaded, paused-time) runtime and records an abort handle per
/// task. Blocking work runs inline: the simulation has no threads.
#[derive(Debug, Default)]
pub struct InstanceSpawner {
    tasks: Mutex<Tracked>,
}

#[derive(Debug, Default)]
struct Tracked {
    handles: Vec<AbortHandle>,
    /// Finished tasks are forgotten when the list reaches this length (then it doubles), so the
    /// list stays proportional to the live tasks without a scan per spawn.
    prune_at: usize,
}

impl InstanceSpawner {
    pub fn new() -> Self {
        InstanceSpawner::default()
    }

    /// Aborts every task spawned so far: the process died. Returns how many were still live.
    /// Tasks spawned afterwards (by a restart) are tracked afresh.
    pub fn kill(&self) -> usize {
        let handles = std::mem::take(&mut self.tasks.lock().handles);
        let live = handles.iter().filter(|h| !h.is_finished()).count();
        for handle in handles {
            handle.abort();
        }
        live
    }

    /// Tasks of this instance not finished yet.
    pub fn live(&self) -> usize {
        self.tasks.lock().handles.iter().filter(|h| !h.is_finished()).count()
    }

    /// Spawns `task` as one of this instance's tasks.
    pub fn run(&self, task: impl Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task).abort_handle();
        let mut tracked = self.tasks.lock();
        if tracked.handles.len() >= tracked.prune_at.max(64) {
            tracked.handles.retain(|h| !h.is_finished());
            tracked.prune_at = tracked.handles.len() * 2;
        }
        tracked.handles.push(handle);
    }
}

impl Spawner for InstanceSpawner {
    fn spawn(&self, task: Pin<Box<dyn Future<Output = ()> + Send + 'static>>) {
        self.run(task);
    }

    fn spawn_blocking(&self, task: Box<dyn FnOnce() + Send + 'static>) {
        task();
    }
}
