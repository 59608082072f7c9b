//! Holding the items of a scheduled fire until the wall clock reaches the fire
//! ([`Settings::fire_lead`](super::Settings::fire_lead)).
//!
//! With a lead, the scheduler's clock reads ahead of the wall clock: a tick's fire steps, its
//! start transaction and its launches happen before the tick, and each launched item waits
//! here. One task per fire time sleeps until the wall clock reaches it (the precise sleep a
//! fire deadline gets, see [`Clock::sleep_until_exactly`]) and opens the gate for every item of
//! every job firing then; an item whose fire time the wall clock already passed (a burst longer
//! than the lead, a catch-up) does not wait.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::handles::{Clock, Spawner};
use crate::job::gate::{FireGate, Latch, OpenOnDrop, TickStarts};

/// The open waits, by fire time (wall clock, milliseconds since the epoch).
#[derive(Debug)]
pub(crate) struct FireGates {
    wall: Arc<dyn Clock>,
    spawner: Arc<dyn Spawner>,
    /// `Settings::fire_lead`, in milliseconds (0: no fire waits).
    lead_ms: i64,
    waiting: Mutex<BTreeMap<i64, Tick>>,
}

/// A fire time's gate, which its sleeper opens, and the count of its launches still to pass.
type Tick = (Arc<Latch>, Arc<TickStarts>);

impl FireGates {
    pub fn new(wall: Arc<dyn Clock>, spawner: Arc<dyn Spawner>, lead: Duration) -> Self {
        let lead_ms = i64::try_from(lead.as_millis()).unwrap_or(i64::MAX / 4);
        FireGates { wall, spawner, lead_ms, waiting: Mutex::default() }
    }

    /// How far the scheduler's clock reads ahead of the wall clock.
    pub fn lead_ms(&self) -> i64 {
        self.lead_ms
    }

    /// A launch's pass through the gate of `fire_ms`, which opens once the wall clock reads
    /// it (`None`: without a lead, or once the wall clock reads it), with when its items start
    /// by the scheduler's clock (the fire's time plus the lead).
    pub fn gate(&self, fire_ms: i64) -> Option<(FireGate, i64)> {
        if self.lead_ms == 0 {
            return None;
        }
        let now = self.wall.now_ms();
        if now >= fire_ms {
            return None;
        }
        let mut waiting = self.waiting.lock();
        // The gates of past fire times are open: their sleepers are done with them.
        while waiting.first_key_value().is_some_and(|(&at, _)| at <= now) {
            waiting.pop_first();
        }
        let (gate, tick) = waiting.entry(fire_ms).or_insert_with(|| {
            let gate = Arc::new(Latch::default());
            let open = OpenOnDrop(gate.clone());
            let sleep = self.wall.sleep_until_exactly(fire_ms);
            self.spawner.spawn(Box::pin(async move {
                sleep.await;
                drop(open);
            }));
            (gate, TickStarts::new())
        });
        Some((FireGate::new(gate.clone(), tick), fire_ms.saturating_add(self.lead_ms)))
    }
}
