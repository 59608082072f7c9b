//! Helpers shared by the cross-crate tests: an in-memory cluster of schedulers in virtual time
//! whose events are recorded for the tests to check, and recorded namespaces to load
//! ([`fixtures`]).

pub mod fixtures;

use std::sync::Arc;

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::__private::InlineEventSink;
use shardcron_core::guarantee::DistributeOnceListener;
use shardcron_core::handles::{Handles, KillableSpawner};
use shardcron_core::registry::counting::CountingRegistry;
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
    /// When each crashed instance died (virtual epoch ms).
    pub crashes: Arc<Mutex<BTreeMap<String, i64>>>,
}

/// A scheduler of the cluster with its registry client.
#[derive(Debug, Clone)]
pub struct TestInstance {
    pub scheduler: Scheduler,
    pub client: MemRegistry,
    /// Counts every registry operation the scheduler sends.
    pub counter: CountingRegistry,
    spawner: Arc<KillableSpawner>,
}

impl TestInstance {
    pub fn id(&self) -> String {
        self.scheduler.instance().as_str().to_owned()
    }
    pub fn client_id(&self) -> ClientId {
        self.client.client_id()
    }
}

/// How to start a test instance.
#[derive(Clone)]
pub struct InstanceOptions {
    pub settings: Settings,
    pub session_timeout: Duration,
    /// Time handles; `None` for the cluster's own.
    pub handles: Option<Handles>,
    pub once_listener: Option<Arc<dyn DistributeOnceListener>>,
}

impl std::fmt::Debug for InstanceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceOptions").field("session_timeout", &self.session_timeout).finish()
    }
}

impl Default for InstanceOptions {
    fn default() -> Self {
        InstanceOptions {
            settings: Settings::default(),
            session_timeout: Duration::from_secs(60),
            handles: None,
            once_listener: None,
        }
    }
}

impl TestCluster {
    pub fn new(seed: u64) -> Self {
        let handles = Handles::simulated(EPOCH_MS, seed);
        TestCluster {
            server: MemServer::new(handles.clone()),
            handles,
            log: Arc::default(),
            crashes: Arc::default(),
        }
    }

    /// A client of the test namespace (for operations, or to look at the registry).
    pub fn client(&self) -> MemRegistry {
        self.server
            .connect(ConnectOptions::default().namespace(NAMESPACE))
            .expect("connect to the mem server")
    }

    /// Starts a scheduler on server IP `ip` with default settings.
    pub async fn instance(&self, ip: &str) -> TestInstance {
        self.instance_opts(ip, InstanceOptions::default()).await
    }

    /// Starts a scheduler on server IP `ip` with these settings and time handles.
    pub async fn instance_with(
        &self,
        ip: &str,
        settings: Settings,
        handles: Handles,
    ) -> TestInstance {
        self.instance_opts(
            ip,
            InstanceOptions { settings, handles: Some(handles), ..Default::default() },
        )
        .await
    }

    /// Starts a scheduler on server IP `ip` (instance id `{ip}@-@1`).
    pub async fn instance_opts(&self, ip: &str, options: InstanceOptions) -> TestInstance {
        let client = self
            .server
            .connect(
                ConnectOptions::default()
                    .namespace(NAMESPACE)
                    .session_timeout(options.session_timeout),
            )
            .expect("connect to the mem server");
        let counter = CountingRegistry::new(Arc::new(client.clone()));
        let spawner = Arc::new(KillableSpawner::new());
        let base = options.handles.unwrap_or_else(|| self.handles.clone());
        let handles = Handles { spawner: spawner.clone(), ..base };
        let log = self.log.clone();
        let clock = self.handles.clock.clone();
        let registry: Arc<dyn CoordinatorRegistry> = Arc::new(counter.clone());
        let id = format!("{ip}@-@1");
        let mut builder = SchedulerBuilder::new(registry);
        if let Some(listener) = options.once_listener {
            builder = builder.distribute_once_listener(listener);
        }
        let scheduler = builder
            .handles(handles)
            .ip(ip)
            .pid(1)
            .settings(options.settings)
            // Inline: the log must hold each event at the virtual instant it happened, and keep
            // the last ones of an instance that is killed.
            .inline_event_sink(Arc::new(move |event: &SchedulerEvent| {
                log.lock().push(Recorded {
                    instance: id.clone(),
                    at_ms: clock.now_ms(),
                    event: event.clone(),
                });
            }))
            .start()
            .await
            .expect("start a scheduler");
        TestInstance { scheduler, client, counter, spawner }
    }

    /// `kill -9`: every task of the instance stops at once and its link goes dead, so its session
    /// expires after the session timeout, as a crashed process's would.
    pub fn crash(&self, instance: &TestInstance) {
        instance.spawner.kill();
        self.server.cut(instance.client_id());
        self.crashes.lock().insert(instance.id(), self.handles.clock.now_ms());
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

/// One run of an item on one instance, from its start to its end (finish, crash or the loss of
/// the instance's session, whichever came first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub instance: String,
    pub item: u32,
    pub fire_ms: i64,
    pub start_ms: i64,
    pub end_ms: Option<i64>,
    pub completed: bool,
}

impl TestCluster {
    /// Every run of `job`'s items, in start order.
    pub fn runs(&self, job: &str) -> Vec<Run> {
        let crashes = self.crashes.lock().clone();
        let mut runs: Vec<Run> = Vec::new();
        for r in self.events() {
            match r.event {
                SchedulerEvent::ItemStarted { job: ref j, item, fire_ms, .. } if j == job => runs
                    .push(Run {
                        instance: r.instance.clone(),
                        item,
                        fire_ms,
                        start_ms: r.at_ms,
                        end_ms: None,
                        completed: false,
                    }),
                SchedulerEvent::ItemFinished { job: ref j, item, fire_ms, ok } if j == job => {
                    if let Some(run) = runs.iter_mut().rev().find(|run| {
                        run.instance == r.instance
                            && run.item == item
                            && run.fire_ms == fire_ms
                            && run.end_ms.is_none()
                    }) {
                        run.end_ms = Some(r.at_ms);
                        run.completed = ok;
                    }
                }
                // A lost session ends the instance's runs as far as exclusivity goes: its items
                // are told to stop and may be taken over.
                SchedulerEvent::Session(shardcron_core::registry::SessionEvent::Expired) => {
                    for run in runs
                        .iter_mut()
                        .filter(|run| run.instance == r.instance && run.end_ms.is_none())
                    {
                        run.end_ms = Some(r.at_ms);
                    }
                }
                _ => {}
            }
        }
        for run in &mut runs {
            if let Some(&crashed) = crashes.get(&run.instance) {
                if run.end_ms.is_none_or(|end| end > crashed) && run.start_ms <= crashed {
                    run.end_ms = Some(crashed);
                    run.completed = false;
                }
            }
        }
        runs
    }

    /// Prints the recorded events when `SHARDCRON_TEST_TRACE` is set (for a failing test).
    pub fn dump(&self) {
        if std::env::var("SHARDCRON_TEST_TRACE").is_ok() {
            for r in self.events() {
                eprintln!("{:>7} {:<14} {:?}", r.at_ms - EPOCH_MS, r.instance, r.event);
            }
        }
    }

    /// The first guarantee of `GUARANTEES.md`: no item runs on two instances at once while both hold
    /// valid sessions.
    pub fn assert_exclusive(&self, job: &str) {
        let runs = self.runs(job);
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                if a.item != b.item || a.instance == b.instance {
                    continue;
                }
                let a_end = a.end_ms.unwrap_or(i64::MAX);
                let b_end = b.end_ms.unwrap_or(i64::MAX);
                let overlap = a.start_ms < b_end && b.start_ms < a_end;
                assert!(
                    !overlap,
                    "item {} of {job} ran on two instances at once: {a:?} and {b:?}",
                    a.item
                );
            }
        }
    }

    /// Invariant 2 over the given fires: each item below `total` completed exactly once per fire.
    pub fn assert_each_item_once(&self, job: &str, fires_after_epoch_s: &[i64], total: u32) {
        let runs = self.runs(job);
        for &fire_s in fires_after_epoch_s {
            let fire_ms = EPOCH_MS + fire_s * 1000;
            for item in 0..total {
                let done: Vec<&Run> = runs
                    .iter()
                    .filter(|r| r.fire_ms == fire_ms && r.item == item && r.completed)
                    .collect();
                if done.len() != 1 {
                    self.dump();
                }
                assert_eq!(
                    done.len(),
                    1,
                    "item {item} of the fire at +{fire_s}s completed {} times: {done:?}",
                    done.len()
                );
            }
        }
    }

    /// Invariants 3 and 4 once membership is stable: one live leader among `live`, no sharding
    /// flag left, and the assignment is the strategy's for the live instances.
    pub async fn assert_settled(&self, job: &str, live: &[&TestInstance], total: u32) {
        let registry = self.client();
        let node = |p: String| {
            let registry = registry.clone();
            async move {
                registry.get(&p).await.expect("read the registry").map(|n| n.text().into_owned())
            }
        };
        let leader = node(format!("/{job}/leader/election/instance")).await;
        let ids: Vec<String> = live.iter().map(|i| i.id()).collect();
        assert!(
            leader.as_ref().is_some_and(|l| ids.contains(l)),
            "leader {leader:?} is not among {ids:?}"
        );
        assert_eq!(
            node(format!("/{job}/leader/sharding/necessary")).await,
            None,
            "necessary flag left"
        );
        assert_eq!(
            node(format!("/{job}/leader/sharding/processing")).await,
            None,
            "processing flag left"
        );
        let mut sorted = ids.clone();
        shardcron_core::sharding::sort_for_sharding(&mut sorted);
        let refs: Vec<&str> = sorted.iter().map(String::as_str).collect();
        let expected = shardcron_core::sharding::ShardingStrategies::default()
            .shard(None, job, &refs, total)
            .expect("the strategy shards");
        for item in 0..total {
            let owner = node(format!("/{job}/sharding/{item}/instance")).await;
            let want = expected.owners().get(&item).map(|s| s.to_string());
            assert_eq!(owner, want, "owner of item {item}");
        }
        registry.close().await.expect("close the probe client");
    }
}
