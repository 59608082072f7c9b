//! One simulated instance: a server IP, a clock of its own (which can be skewed), a spawner
//! whose tasks a crash aborts, and, while it runs, a `Scheduler` with its own registry client.
//! The instance id stays the same across restarts, like a process restarted on the same host.

use std::sync::Arc;

use parking_lot::Mutex;
use shardcron_core::handles::{SeededRandom, TokioClock};
use shardcron_core::runtime::Scheduler;
use shardcron_registry_mem::ClientId;

use crate::spawner::InstanceSpawner;
use crate::trace::EPOCH_MS;
use crate::workload::ip_of;

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Never started, or stopped gracefully.
    Down,
    /// Connecting, starting its scheduler, adding its jobs.
    Starting,
    Up,
    /// Shutting down gracefully.
    Stopping,
    /// Killed; a restart brings it back.
    Crashed,
}

/// The mutable part of an instance.
#[derive(Debug)]
pub(crate) struct State {
    pub status: Status,
    pub scheduler: Option<Scheduler>,
    pub client: Option<ClientId>,
    /// A restart or stop is running.
    pub busy: bool,
}

#[derive(Debug)]
pub(crate) struct Instance {
    /// 1-based.
    pub index: usize,
    pub ip: String,
    /// The instance id every scheduler of this instance registers under.
    pub id: String,
    pub clock: Arc<TokioClock>,
    pub spawner: Arc<InstanceSpawner>,
    pub random: Arc<SeededRandom>,
    /// Held by a start or a stop in progress, so that they run one after the other.
    pub lifecycle: Arc<tokio::sync::Mutex<()>>,
    pub state: Mutex<State>,
}

impl Instance {
    /// Instance `index`; call inside the simulation's runtime (the clock starts now).
    pub fn new(index: usize, seed: u64) -> Self {
        let ip = ip_of(index);
        Instance {
            index,
            id: format!("{ip}@-@1"),
            ip,
            clock: Arc::new(TokioClock::starting_at(EPOCH_MS)),
            spawner: Arc::new(InstanceSpawner::new()),
            random: Arc::new(SeededRandom::new(seed ^ (index as u64).wrapping_mul(0x9E37_79B9))),
            lifecycle: Arc::new(tokio::sync::Mutex::new(())),
            state: Mutex::new(State {
                status: Status::Down,
                scheduler: None,
                client: None,
                busy: false,
            }),
        }
    }

    pub fn status(&self) -> Status {
        self.state.lock().status
    }

    pub fn client(&self) -> Option<ClientId> {
        self.state.lock().client
    }
}
