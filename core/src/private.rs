//! Not part of the public API: what the other crates of the shardcron workspace (the CLI, the
//! console, the simulator, the benchmarks, the tests) need from the core's insides. Anything
//! here may change or go in any release, without notice; applications must not use it.

/// The registry node layout of a job (`docs/registry-layout.md`), typed.
pub mod layout {
    pub use crate::layout::*;
}

/// The cluster protocol's pure part: records, decisions, the per-job state machine.
pub mod protocol {
    pub use crate::protocol::*;
}

use crate::runtime::{EventSink, SchedulerBuilder};

/// A synchronous event sink called on the emitting task itself, before the event goes anywhere
/// else: for the simulator's checker, which must see every event at the virtual instant it
/// happens, and lose none when it kills an instance. A slow inline sink delays the scheduler;
/// applications use [`SchedulerBuilder::event_sink`].
pub trait InlineEventSink {
    /// Adds `sink`, called inline for every event.
    fn inline_event_sink(self, sink: EventSink) -> Self;
}

impl InlineEventSink for SchedulerBuilder {
    fn inline_event_sink(self, sink: EventSink) -> Self {
        self.push_inline_sink(sink)
    }
}
