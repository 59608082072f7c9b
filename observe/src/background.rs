//! The threads observability runs its own work on, at the lowest scheduling priority: the
//! trace's writer, the metrics' exporter and upkeep.
//!
//! Cron fires come in bursts on whole seconds, and a burst of fires is what the scheduler's
//! cores are for: writing the trace (turning entries into rows, SQLite's B-trees, its WAL, its
//! checkpoints), draining the metrics' histograms and rendering a scrape must not take a core
//! from a fire at that instant. On threads of their own with a niceness of 19 they get a core
//! only when the scheduler leaves one idle, and still all the idle time there is between
//! bursts. Threads these start (SQLite's connection threads, which sqlx starts from the
//! trace's thread) inherit the niceness: Linux copies it to a new thread.
//!
//! The price: on a host whose cores something else keeps busy, this work gets what is left. The
//! trace's queue then fills and drops rows (counted, as when the database is slow), and a
//! scrape takes longer; fires are not delayed by either.

use std::future::Future;

/// The nice value of the threads: the lowest priority Linux has.
const NICENESS: i32 = 19;

/// A single-threaded tokio runtime for a [`spawn`]ed thread, made first so that what needs a
/// runtime to be built (the metrics exporter) can be built in it, on the caller's thread.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Runs `work` to its end on `runtime`, on a new thread called `name` at the lowest priority.
pub(crate) fn spawn(
    name: &str,
    runtime: tokio::runtime::Runtime,
    work: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            lower_priority();
            runtime.block_on(work);
        })
        .map(drop)
}

/// Lowers the calling thread's scheduling priority (Linux: its nice value, which is per thread
/// there). Where that fails (a sandbox refusing `setpriority`) the thread keeps the normal
/// priority: it competes with the fires for the cores, and loses nothing.
#[cfg(target_os = "linux")]
fn lower_priority() {
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), NICENESS) {
        tracing::debug!(%error, "cannot lower the priority of an observability thread");
    }
}

/// Elsewhere POSIX sets the nice value of the whole process, which must not change: the thread
/// keeps the normal priority.
#[cfg(not(target_os = "linux"))]
fn lower_priority() {
    let _ = NICENESS;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_thread_runs_at_the_lowest_priority_and_the_caller_keeps_its_own() {
        let before = rustix::process::getpriority_process(None).unwrap_or(0);
        let (tx, rx) = std::sync::mpsc::channel();
        let runtime = super::runtime().expect("a runtime");
        super::spawn("test-background", runtime, async move {
            let me = rustix::thread::gettid();
            let _ = tx.send(rustix::process::getpriority_process(Some(me)));
        })
        .expect("the thread starts");
        let niceness = rx.recv().expect("the work ran").expect("getpriority");
        assert_eq!(niceness, super::NICENESS);
        assert_eq!(rustix::process::getpriority_process(None).unwrap_or(0), before);
    }
}
