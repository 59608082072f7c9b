//! The gate a scheduled fire's items wait at when the scheduler took the fire ahead of its
//! time (`Settings::fire_lead`): the runtime opens it when the wall clock reaches the fire.
//!
//! It also orders a tick's work once it opens: the items of every job firing in the tick start
//! first, and only then do those that already returned report their ends. An end is the most
//! work of a fire (its report, the job's protocol step, the transaction that clears the
//! marker), and a worker runs the task an end wakes before the items queued behind it: without
//! the order, the items of a burst of 1,000 one-line jobs started over 10 ms after the gate
//! opened, each behind the ends of those before it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A flag that opens once and wakes every task waiting for it, in an order that follows from
/// the order they began to wait (one `Notify`'s list). Not a `tokio::sync::watch`: its
/// receivers park on one of several queues picked by tokio's per-process random generator, so
/// the order in which a tick's items woke (and the simulator's trace) changed from process to
/// process.
#[derive(Debug, Default)]
pub(crate) struct Latch {
    open: AtomicBool,
    opened: Notify,
}

impl Latch {
    pub(crate) fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        self.opened.notify_waiters();
    }

    /// Resolves once the latch is open.
    pub(crate) async fn wait(&self) {
        loop {
            let opened = self.opened.notified();
            tokio::pin!(opened);
            // Registered before the look, so an opening after it wakes this wait.
            opened.as_mut().enable();
            if self.open.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }
}

/// Opens a latch when dropped: the task that would open it at its time opens it too if it ends
/// before then (the scheduler stopping), so no one waits for it forever.
#[derive(Debug)]
pub(crate) struct OpenOnDrop(pub(crate) Arc<Latch>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// One launch's pass through the gate of its fire time.
#[derive(Debug, Clone)]
pub(crate) struct FireGate {
    open: Arc<Latch>,
    launch: Arc<LaunchStart>,
}

impl FireGate {
    /// A pass for one more launch through the gate `open`, counted among `tick`'s.
    pub(crate) fn new(open: Arc<Latch>, tick: &Arc<TickStarts>) -> Self {
        tick.waiting.fetch_add(1, Ordering::SeqCst);
        FireGate {
            open,
            launch: Arc::new(LaunchStart { started: AtomicBool::new(false), tick: tick.clone() }),
        }
    }

    /// Resolves once the gate opens, and counts the launch as started. A gate whose opener
    /// ended before its time (the scheduler stopping) is open too: the launch's cancellation
    /// decides whether it runs.
    pub(crate) async fn pass(&self) {
        self.open.wait().await;
        self.launch.start();
    }

    /// Resolves once every launch of the tick passed the gate.
    pub(crate) async fn all_started(&self) {
        self.launch.tick.all.wait().await;
    }
}

/// The launches of one fire time still to pass its gate.
#[derive(Debug, Default)]
pub(crate) struct TickStarts {
    waiting: AtomicUsize,
    all: Latch,
}

impl TickStarts {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(TickStarts::default())
    }
}

#[derive(Debug)]
struct LaunchStart {
    started: AtomicBool,
    tick: Arc<TickStarts>,
}

impl LaunchStart {
    fn start(&self) {
        if !self.started.swap(true, Ordering::SeqCst)
            && self.tick.waiting.fetch_sub(1, Ordering::SeqCst) == 1
        {
            self.tick.all.open();
        }
    }
}

impl Drop for LaunchStart {
    /// A launch dropped before it passed (its task ended with the scheduler) holds up no one.
    fn drop(&mut self) {
        self.start();
    }
}
