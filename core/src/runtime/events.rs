//! Delivering the scheduler's events: the `tracing` line every event gets, the bounded broadcast
//! behind [`Scheduler::events`](super::Scheduler::events), and the application's synchronous
//! sinks, each called on a task of its own. Emitting never waits for a consumer, so a slow
//! subscriber or sink cannot delay a fire. The events themselves are [`crate::events`].

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use parking_lot::Mutex;
use tokio::sync::{broadcast, mpsc};

pub use crate::events::{FireKind, SchedulerEvent, SkipReason};
use crate::handles::Spawner;

/// Receives scheduler events, one call per event, in the order they happen, on a task of its
/// own (never on the scheduler's tasks): a slow sink delays only itself. Its queue is unbounded
/// so that a sink misses nothing; a sink that stays slower than the events come makes it grow.
/// For a bounded, lossy subscription use [`Scheduler::events`](super::Scheduler::events).
pub type EventSink = Arc<dyn Fn(&SchedulerEvent) + Send + Sync>;

/// Which events a sink wants (see
/// [`SchedulerBuilder::event_sink_for`](super::SchedulerBuilder::event_sink_for)); the others
/// are never copied to it.
pub type EventFilter = fn(&SchedulerEvent) -> bool;

/// Every event.
pub(crate) fn every_event(_: &SchedulerEvent) -> bool {
    true
}

/// How many events [`Scheduler::events`](super::Scheduler::events) buffers for a subscriber
/// before the oldest are dropped (and the subscriber told how many): the default of
/// [`SchedulerBuilder::event_capacity`](super::SchedulerBuilder::event_capacity).
pub const DEFAULT_EVENT_CAPACITY: usize = 1024;

/// A subscriber of [`Scheduler::events`](super::Scheduler::events) fell behind: the bounded
/// buffer dropped this many of the oldest events it had not read yet. The stream goes on with
/// the oldest event still buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event subscriber fell behind and missed {missed} events")]
pub struct EventsLagged {
    /// How many events this subscriber missed.
    pub missed: u64,
}

/// The events of one scheduler as an async [`Stream`], from
/// [`Scheduler::events`](super::Scheduler::events): each item is an event, or
/// [`EventsLagged`] when the subscriber fell behind. It ends when the scheduler has shut down
/// or was dropped.
///
/// ```no_run
/// # async fn demo(scheduler: shardcron_core::runtime::Scheduler) {
/// use futures::StreamExt;
/// let mut events = scheduler.events();
/// while let Some(event) = events.next().await {
///     match event {
///         Ok(event) => println!("{event:?}"),
///         Err(lagged) => eprintln!("missed {} events", lagged.missed),
///     }
/// }
/// # }
/// ```
pub struct EventStream {
    inner: Pin<Box<dyn Stream<Item = Result<SchedulerEvent, EventsLagged>> + Send>>,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    fn new(receiver: Option<broadcast::Receiver<SchedulerEvent>>) -> Self {
        let inner = futures::stream::unfold(receiver, |receiver| async move {
            let mut receiver = receiver?;
            match receiver.recv().await {
                Ok(event) => Some((Ok(event), Some(receiver))),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    Some((Err(EventsLagged { missed }), Some(receiver)))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
        EventStream { inner: Box::pin(inner) }
    }
}

impl Stream for EventStream {
    type Item = Result<SchedulerEvent, EventsLagged>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Where a scheduler's events go. Cheap to clone; every clone feeds the same outlets.
#[derive(Clone)]
pub(crate) struct Events {
    inner: Arc<EventsInner>,
}

struct EventsInner {
    instance: String,
    /// Called on the emitting task (the simulator's checker only; see `__private`).
    inline: Vec<EventSink>,
    /// `None` once closed: the streams and sink tasks then drain what they have and end.
    outlets: Mutex<Option<Outlets>>,
}

struct Outlets {
    broadcast: broadcast::Sender<SchedulerEvent>,
    sinks: Vec<(EventFilter, mpsc::UnboundedSender<SchedulerEvent>)>,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events").field("instance", &self.inner.instance).finish()
    }
}

/// Resolves when every sink task has delivered its last event (all its senders dropped).
pub(crate) struct SinksDrained(mpsc::Receiver<()>);

impl SinksDrained {
    pub async fn wait(mut self) {
        let _ = self.0.recv().await;
    }
}

impl Events {
    /// The outlets of one scheduler; each sink gets its task on `spawner`.
    pub fn start(
        instance: String,
        capacity: usize,
        sinks: Vec<(EventFilter, EventSink)>,
        inline: Vec<EventSink>,
        spawner: &dyn Spawner,
    ) -> (Self, SinksDrained) {
        let (broadcast, _) = broadcast::channel(capacity.max(1));
        let (drained_tx, drained_rx) = mpsc::channel::<()>(1);
        let sinks = sinks
            .into_iter()
            .map(|(wanted, sink)| {
                let (tx, mut rx) = mpsc::unbounded_channel::<SchedulerEvent>();
                let alive = drained_tx.clone();
                spawner.spawn(Box::pin(async move {
                    while let Some(event) = rx.recv().await {
                        sink(&event);
                    }
                    drop(alive);
                }));
                (wanted, tx)
            })
            .collect();
        let outlets = Mutex::new(Some(Outlets { broadcast, sinks }));
        let events = Events { inner: Arc::new(EventsInner { instance, inline, outlets }) };
        (events, SinksDrained(drained_rx))
    }

    /// A new subscriber, seeing the events emitted from now on; an ended stream once closed.
    pub fn subscribe(&self) -> EventStream {
        let receiver = self.inner.outlets.lock().as_ref().map(|o| o.broadcast.subscribe());
        EventStream::new(receiver)
    }

    /// No more events: subscribers and sinks get what was emitted, then their end.
    pub fn close(&self) {
        self.inner.outlets.lock().take();
    }

    pub fn emit(&self, event: SchedulerEvent) {
        let instance = &self.inner.instance;
        match &event {
            SchedulerEvent::Error { job, message } => {
                tracing::warn!(instance = %instance, job, message, "registry operation failed")
            }
            SchedulerEvent::FireFailed { job, item, error, .. } => {
                tracing::error!(instance = %instance, job, item, error, "job failed");
                crate::stderr_fallback::eprint_if_unobserved(tracing::Level::ERROR, || {
                    format!("job {job:?} item {item} failed (raised by its error handler): {error}")
                });
            }
            SchedulerEvent::RegistryGarbage { job, path, value, reason } => {
                tracing::warn!(instance = %instance, job, path, value, reason, "unreadable registry node")
            }
            SchedulerEvent::ConfigRejected { job, reason } => {
                tracing::error!(instance = %instance, job, reason, "config in the registry rejected")
            }
            other => tracing::debug!(instance = %instance, event = ?other, "scheduler event"),
        }
        for sink in &self.inner.inline {
            sink(&event);
        }
        if let Some(outlets) = &*self.inner.outlets.lock() {
            for (wanted, sink) in &outlets.sinks {
                if wanted(&event) {
                    let _ = sink.send(event.clone());
                }
            }
            // No subscriber is not an error: the event is simply not kept.
            let _ = outlets.broadcast.send(event);
        }
    }
}
