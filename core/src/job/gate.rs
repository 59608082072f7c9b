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

use tokio::sync::watch;

/// One launch's pass through the gate of its fire time.
#[derive(Debug, Clone)]
pub(crate) struct FireGate {
    open: watch::Receiver<bool>,
    all_started: watch::Receiver<bool>,
    launch: Arc<LaunchStart>,
}

impl FireGate {
    /// A pass for one more launch through the gate `open`, counted among `tick`'s.
    pub(crate) fn new(open: watch::Receiver<bool>, tick: &Arc<TickStarts>) -> Self {
        tick.waiting.fetch_add(1, Ordering::SeqCst);
        FireGate {
            open,
            all_started: tick.all.subscribe(),
            launch: Arc::new(LaunchStart { started: AtomicBool::new(false), tick: tick.clone() }),
        }
    }

    /// Resolves once the gate opens, and counts the launch as started. A gate closed without
    /// opening (the scheduler stopping) lets it go: its cancellation decides whether it runs.
    pub(crate) async fn pass(&self) {
        let mut open = self.open.clone();
        let _ = open.wait_for(|open| *open).await;
        self.launch.start();
    }

    /// Resolves once every launch of the tick passed the gate.
    pub(crate) async fn all_started(&self) {
        let mut all = self.all_started.clone();
        let _ = all.wait_for(|all| *all).await;
    }
}

/// The launches of one fire time still to pass its gate.
#[derive(Debug)]
pub(crate) struct TickStarts {
    waiting: AtomicUsize,
    all: watch::Sender<bool>,
}

impl TickStarts {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(TickStarts { waiting: AtomicUsize::new(0), all: watch::Sender::new(false) })
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
            self.tick.all.send_replace(true);
        }
    }
}

impl Drop for LaunchStart {
    /// A launch dropped before it passed (its task ended with the scheduler) holds up no one.
    fn drop(&mut self) {
        self.start();
    }
}
