//! Helpers shared by the cross-crate tests: an in-memory cluster of schedulers in virtual time
//! whose events are recorded for the tests to check.

use std::sync::Arc;

use parking_lot::Mutex;
use shardcron_core::handles::Handles;
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::{Scheduler, SchedulerBuilder, SchedulerEvent, Settings};
use shardcron_registry_mem::{ClientId, ConnectOptions, MemRegistry, MemServer};

/// Virtual time starts here: 2023-11-14T22:13:20Z, a whole multiple of 10 seconds.
pub const EPOCH_MS: i64 = 1_700_000_000_000;

/// The namespace every test instance uses.
pub const NAMESPACE: &str = "/shardcron-test";

/// One recorded event: which instance, when (virtual epoch ms), what.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub instance: String,
    pub at_ms: i64,
    pub event: SchedulerEvent,
}

/// An in-memory server and the schedulers on it, recording every event. Create it inside a
/// paused-time tokio runtime (`#[tokio::test(start_paused = true)]`).
#[derive(Debug, Clone)]
pub struct TestCluster {
    pub server: MemServer,
    pub handles: Handles,
    pub log: Arc<Mutex<Vec<Recorded>>>,
}

/// A scheduler of the cluster with its registry client.
#[derive(Debug, Clone)]
pub struct TestInstance {
    pub scheduler: Scheduler,
    pub client: MemRegistry,
}

impl TestInstance {
    pub fn id(&self) -> String {
        self.scheduler.instance().as_str().to_owned()
    }
    pub fn client_id(&self) -> ClientId {
        self.client.client_id()
    }
}

impl TestCluster {
    pub fn new(seed: u64) -> Self {
        let handles = Handles::simulated(EPOCH_MS, seed);
        TestCluster { server: MemServer::new(handles.clone()), handles, log: Arc::default() }
    }

    /// A client of the test namespace (for operations, or to look at the registry).
    pub fn client(&self) -> MemRegistry {
        self.server
            .connect(ConnectOptions::default().namespace(NAMESPACE))
            .expect("connect to the mem server")
    }

    /// Starts a scheduler on server IP `ip` with default settings.
    pub async fn instance(&self, ip: &str) -> TestInstance {
        self.instance_with(ip, Settings::default(), self.handles.clone()).await
    }

    /// Starts a scheduler on server IP `ip`.
    pub async fn instance_with(
        &self,
        ip: &str,
        settings: Settings,
        handles: Handles,
    ) -> TestInstance {
        let client = self.client();
        let log = self.log.clone();
        let clock = self.handles.clock.clone();
        let registry: Arc<dyn CoordinatorRegistry> = Arc::new(client.clone());
        let id = format!("{ip}@-@1");
        let scheduler = SchedulerBuilder::new(registry)
            .handles(handles)
            .ip(ip)
            .pid(1)
            .settings(settings)
            .events(Arc::new(move |event: &SchedulerEvent| {
                log.lock().push(Recorded {
                    instance: id.clone(),
                    at_ms: clock.now_ms(),
                    event: event.clone(),
                });
            }))
            .start()
            .await
            .expect("start a scheduler");
        TestInstance { scheduler, client }
    }

    /// Every recorded event so far.
    pub fn events(&self) -> Vec<Recorded> {
        self.log.lock().clone()
    }

    /// `(instance, item, fire_ms, virtual start ms)` of every item start of `job`.
    pub fn starts(&self, job: &str) -> Vec<(String, u32, i64, i64)> {
        self.events()
            .into_iter()
            .filter_map(|r| match r.event {
                SchedulerEvent::ItemStarted { job: j, item, fire_ms, .. } if j == job => {
                    Some((r.instance, item, fire_ms, r.at_ms))
                }
                _ => None,
            })
            .collect()
    }

    /// The ephemeral nodes on the server (paths with the namespace).
    pub fn ephemerals(&self) -> Vec<String> {
        self.server.snapshot().into_iter().filter(|(_, n)| n.ephemeral).map(|(p, _)| p).collect()
    }
}
