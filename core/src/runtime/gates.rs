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

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::handles::{Clock, Spawner};
use crate::job::gate::{FireGate, TickStarts};

/// The open waits, by fire time (wall clock, milliseconds since the epoch).
#[derive(Debug)]
pub(crate) struct FireGates {
    wall: Arc<dyn Clock>,
    spawner: Arc<dyn Spawner>,
    waiting: Mutex<BTreeMap<i64, Tick>>,
}

/// A fire time's gate, which its sleeper opens, and the count of its launches still to pass.
type Tick = (watch::Receiver<bool>, Arc<TickStarts>);

impl FireGates {
    pub fn new(wall: Arc<dyn Clock>, spawner: Arc<dyn Spawner>) -> Self {
        FireGates { wall, spawner, waiting: Mutex::default() }
    }

    /// A launch's pass through the gate of `fire_ms`, which opens once the wall clock reads
    /// it (`None`: it already does).
    pub fn gate(&self, fire_ms: i64) -> Option<FireGate> {
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
            let (open, gate) = watch::channel(false);
            let sleep = self.wall.sleep_until_exactly(fire_ms);
            self.spawner.spawn(Box::pin(async move {
                sleep.await;
                let _ = open.send(true);
            }));
            (gate, TickStarts::new())
        });
        Some(FireGate::new(gate.clone(), tick))
    }
}
