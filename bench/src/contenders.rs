//! The schedulers the bench compares, started the same way: N jobs of one item with the same
//! schedule and a no-op body that reports to a [`Recorder`].
//!
//! - `shardcron`: the scheduler with its defaults (monitorExecution on: a fire marks its items
//!   running and clears them, on the in-memory registry; the runtime commits the markers of one
//!   tick together; each tick taken 50 ms ahead, its items started at its time).
//! - `shardcron-nolead`: the defaults without the fire lead (each tick taken at its time).
//! - `shardcron-lead`: the defaults with the fire lead sized for the jobs of a tick.
//! - `shardcron-observed`: the defaults plus the execution trace (a SQLite file in the temp
//!   directory) and the Prometheus metrics (recorder installed, registry wrapped), to show what
//!   observability costs on the fire path.
//! - `shardcron-nomonitor`: the same with `monitorExecution: false` (no registry write per
//!   fire), to show what the registry's share of the cost is.
//! - `tcs`: tokio-cron-scheduler as its README starts it (`JobScheduler::new()`).
//! - `tcs-sized`: tokio-cron-scheduler with its internal channels sized to the job count
//!   (`JobScheduler::new_with_channel_size`), its documented tuning for many jobs.
//! - `shardcron-mimalloc`, `tcs-sized-mimalloc`: `shardcron` and `tcs-sized` in a child
//!   process on mimalloc (`shardcron-bench-mimalloc`) instead of the system's allocator, to
//!   show what an application's choice of allocator does to a burst of fires.
//! - `baseline`: no scheduler; the bench's own process (runtime, recorder) for reference.

use std::sync::Arc;

use shardcron_core::__private::time::epoch_ms;
use shardcron_core::config::JobConfig;
use shardcron_core::handles::Handles;
use shardcron_core::job::Job;
use shardcron_core::registry::counting::CountingRegistry;
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::{Scheduler, SchedulerBuilder, SchedulerEvent};
use shardcron_observe::{Metrics, ObserveExt, Trace, TraceConfig, TraceStats};
use shardcron_registry_mem::{ConnectOptions, MemServer};

use crate::precision::{now_us, Recorder};
use crate::Error;

pub const SHARDCRON: &str = "shardcron";
pub const SHARDCRON_NOMONITOR: &str = "shardcron-nomonitor";
/// shardcron with the execution trace (SQLite) and the metrics on.
pub const SHARDCRON_OBSERVED: &str = "shardcron-observed";
/// shardcron on the ZooKeeper at `SHARDCRON_ZK` (the registry's copy of the jobs lives there).
pub const SHARDCRON_ZK: &str = "shardcron-zk";
/// shardcron on the etcd at `SHARDCRON_ETCD` (the registry's copy of the jobs lives there).
pub const SHARDCRON_ETCD: &str = "shardcron-etcd";
/// shardcron with its fire lead sized for the jobs of a tick ([`fire_lead`],
/// `Settings::fire_lead`).
pub const SHARDCRON_LEAD: &str = "shardcron-lead";
/// shardcron without a fire lead: each tick taken at its time.
pub const SHARDCRON_NOLEAD: &str = "shardcron-nolead";

/// The fire lead of `shardcron-lead` with `jobs` jobs firing together: the default 50 ms, or
/// 40 µs per job where that is more (a burst of 1,000 fires takes some 30-50 ms of a loaded
/// two-core machine, 10,000 some 400 ms), as an application sizes it for its load.
/// `SHARDCRON_BENCH_FIRE_LEAD_MS` sets it instead.
pub fn fire_lead(jobs: u64) -> std::time::Duration {
    let sized = std::time::Duration::from_micros(jobs.saturating_mul(40))
        .max(shardcron_core::runtime::DEFAULT_FIRE_LEAD);
    std::env::var("SHARDCRON_BENCH_FIRE_LEAD_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(sized, std::time::Duration::from_millis)
}
pub const TCS: &str = "tcs";
pub const TCS_SIZED: &str = "tcs-sized";
/// `shardcron` in a child on mimalloc.
pub const SHARDCRON_MIMALLOC: &str = "shardcron-mimalloc";
/// `tcs-sized` in a child on mimalloc.
pub const TCS_SIZED_MIMALLOC: &str = "tcs-sized-mimalloc";

/// The suffix of the schedulers whose child runs on mimalloc.
const ON_MIMALLOC: &str = "-mimalloc";

/// The allocator `scheduler`'s child must run on, and the scheduler it then starts.
pub fn allocator_of(scheduler: &str) -> (crate::Allocator, &str) {
    match scheduler.strip_suffix(ON_MIMALLOC) {
        Some(base) => (crate::Allocator::Mimalloc, base),
        None => (crate::Allocator::System, scheduler),
    }
}
pub const BASELINE: &str = "baseline";

/// Every second, the precision benchmark's schedule.
pub const EVERY_SECOND: Schedule = Schedule::EverySecond;

/// What the jobs' schedule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    EverySecond,
    /// Far in the future: registered, never firing during the measurement.
    Never,
}

impl Schedule {
    fn quartz(self) -> &'static str {
        match self {
            Schedule::EverySecond => "* * * * * ?",
            Schedule::Never => "0 0 0 1 1 ? 2099",
        }
    }
    /// tokio-cron-scheduler's syntax (croner with a seconds field).
    fn croner(self) -> &'static str {
        match self {
            Schedule::EverySecond => "* * * * * *",
            // Once a year: the nearest it comes to "never" without a year field.
            Schedule::Never => "0 0 0 1 1 *",
        }
    }
}

/// How the report names a scheduler.
pub fn label(scheduler: &str) -> &'static str {
    match scheduler {
        SHARDCRON => "shardcron",
        SHARDCRON_NOMONITOR => "shardcron, monitorExecution off",
        SHARDCRON_OBSERVED => "shardcron, trace (SQLite) + metrics",
        SHARDCRON_ZK => "shardcron on ZooKeeper",
        SHARDCRON_ETCD => "shardcron on etcd",
        SHARDCRON_LEAD => "shardcron, fire lead sized",
        SHARDCRON_NOLEAD => "shardcron, no fire lead",
        TCS => "tokio-cron-scheduler 0.15",
        TCS_SIZED => "tokio-cron-scheduler 0.15, channels sized",
        SHARDCRON_MIMALLOC => "shardcron, mimalloc",
        TCS_SIZED_MIMALLOC => "tokio-cron-scheduler 0.15, channels sized, mimalloc",
        BASELINE => "baseline (no scheduler)",
        _ => "unknown",
    }
}

/// The legend of the scheduler names, for the report.
pub fn legend() -> String {
    "Schedulers: **shardcron** with its defaults (monitorExecution on: each fire marks its items \
     running and clears them; the markers of every job firing in a tick go to the in-memory \
     registry in one transaction, their ends in one more; registry writes per tick are counted \
     by a `CountingRegistry` around it; the fire lead, `Settings::fire_lead`, 50 ms: each \
     tick's fire steps, start transaction and launches happen that much ahead, and its items \
     wait for the tick by the wall clock); **shardcron, no fire lead**: the defaults with \
     `fire_lead` zero, each tick taken at its time; **shardcron, fire lead sized**: the \
     defaults with the lead set to 40 µs per job where that is more than 50 ms (400 ms for \
     10,000 jobs; run only there); **shardcron, monitorExecution off** (no registry write per \
     fire); **shardcron, trace (SQLite) + metrics**: the defaults plus the execution trace \
     written to a SQLite file and the Prometheus metrics recorded (registry wrapped for its \
     series); **tokio-cron-scheduler 0.15** (latest \
     on crates.io) as its README starts it, `JobScheduler::new()`; **…, channels sized**: \
     `JobScheduler::new_with_channel_size(jobs)`, its tuning for many jobs; **…, mimalloc**: \
     the same scheduler in a process whose global allocator is mimalloc instead of the \
     system's (glibc's malloc), as an application chooses with two lines (run at 1,000 and \
     10,000 jobs).\n"
        .to_owned()
}

/// The runtime every child runs its scheduler on: 2 workers, the cores of the target machine
/// (`SHARDCRON_BENCH_WORKERS` overrides it, to explore how a figure scales with workers).
pub fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    let workers =
        std::env::var("SHARDCRON_BENCH_WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| crate::err(format!("tokio runtime: {e}")))
}

/// A started scheduler; dropping it leaves the scheduler running until the process ends.
#[allow(dead_code)] // held only to keep the schedulers alive
pub enum Running {
    Shardcron(Scheduler, Option<MemServer>, CountingRegistry),
    Observed(Scheduler, MemServer, Trace, Metrics, std::path::PathBuf, CountingRegistry),
    Tcs(tokio_cron_scheduler::JobScheduler),
    Baseline,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Running::Shardcron(..) => "Running::Shardcron",
            Running::Observed(..) => "Running::Observed",
            Running::Tcs(_) => "Running::Tcs",
            Running::Baseline => "Running::Baseline",
        })
    }
}

/// Starts `scheduler` with `jobs` one-item jobs on `schedule`, each reporting to `recorder`.
pub async fn start(
    scheduler: &str,
    jobs: u64,
    schedule: Schedule,
    recorder: &Arc<Recorder>,
) -> Result<Running, Error> {
    let (allocator, scheduler) = allocator_of(scheduler);
    if allocator != crate::allocator() {
        return Err(crate::err(format!(
            "{scheduler} wants a process on {allocator:?}, this one runs on {:?}: run it with \
             shardcron-bench{}",
            crate::allocator(),
            if allocator == crate::Allocator::Mimalloc { ON_MIMALLOC } else { "" },
        )));
    }
    match scheduler {
        SHARDCRON => start_shardcron(jobs, schedule, recorder, Setup::DEFAULT).await,
        SHARDCRON_NOMONITOR => {
            let setup = Setup { monitor: false, ..Setup::DEFAULT };
            start_shardcron(jobs, schedule, recorder, setup).await
        }
        SHARDCRON_ZK => {
            let setup = Setup { server: Server::ZooKeeper, ..Setup::DEFAULT };
            start_shardcron(jobs, schedule, recorder, setup).await
        }
        SHARDCRON_ETCD => {
            let setup = Setup { server: Server::Etcd, ..Setup::DEFAULT };
            start_shardcron(jobs, schedule, recorder, setup).await
        }
        SHARDCRON_OBSERVED => {
            let setup = Setup { observed: true, ..Setup::DEFAULT };
            start_shardcron(jobs, schedule, recorder, setup).await
        }
        SHARDCRON_LEAD => {
            let setup = Setup { fire_lead: fire_lead(jobs), ..Setup::DEFAULT };
            start_shardcron(jobs, schedule, recorder, setup).await
        }
        SHARDCRON_NOLEAD => {
            let setup = Setup { fire_lead: std::time::Duration::ZERO, ..Setup::DEFAULT };
            start_shardcron(jobs, schedule, recorder, setup).await
        }
        TCS => start_tcs(jobs, schedule, recorder, None).await,
        TCS_SIZED => start_tcs(jobs, schedule, recorder, Some(jobs.max(200) as usize)).await,
        BASELINE => Ok(Running::Baseline),
        other => Err(crate::err(format!("unknown scheduler {other}"))),
    }
}

/// How many jobs `shardcron-zk` and `shardcron-etcd` register at once.
pub const ZK_PARALLEL_REGISTRATIONS: usize = 64;

/// How many times a registration that failed for a transient reason is tried.
const ADD_ATTEMPTS: u32 = 5;

/// Adds a job as an application would: a registration that failed for a transient reason (a
/// connection lost while many registrations load a server on a small machine; the session
/// lives on) is tried again a second later, up to [`ADD_ATTEMPTS`] times in all.
pub async fn add_job(
    scheduler: &Scheduler,
    config: JobConfig,
    job: Job,
) -> Result<(), shardcron_core::Error> {
    let mut attempt = 1;
    loop {
        match scheduler.add_job(config.clone(), job.clone()).await {
            Ok(()) => return Ok(()),
            Err(e) if e.is_retryable() && attempt < ADD_ATTEMPTS => {
                eprintln!("adding {} failed ({e}); trying again", config.job_name());
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// `job-17` → 17.
fn job_index(name: &str) -> Option<usize> {
    name.strip_prefix("job-")?.parse().ok()
}

/// How a shardcron contender is set up.
#[derive(Debug, Clone, Copy)]
struct Setup {
    /// monitorExecution (the `running` markers).
    monitor: bool,
    /// Which registry: in memory, or a server's.
    server: Server,
    /// With the execution trace and the metrics.
    observed: bool,
    /// `Settings::fire_lead`.
    fire_lead: std::time::Duration,
}

/// Where a shardcron contender's registry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    InMemory,
    /// The ZooKeeper at `SHARDCRON_ZK`.
    ZooKeeper,
    /// The etcd at `SHARDCRON_ETCD`.
    Etcd,
}

impl Setup {
    const DEFAULT: Setup = Setup {
        monitor: true,
        server: Server::InMemory,
        observed: false,
        fire_lead: shardcron_core::runtime::DEFAULT_FIRE_LEAD,
    };
}

async fn start_shardcron(
    jobs: u64,
    schedule: Schedule,
    recorder: &Arc<Recorder>,
    setup: Setup,
) -> Result<Running, Error> {
    let Setup { monitor, server: on, observed, fire_lead } = setup;
    let ns = format!("/bench-{}", std::process::id());
    let address = |var: &str| {
        std::env::var(var)
            .map_err(|_| crate::err(format!("{var} is not set (run scripts/bench.sh)")))
    };
    let (registry, server): (Arc<dyn CoordinatorRegistry>, _) = match on {
        Server::ZooKeeper => {
            let addr = address("SHARDCRON_ZK")?;
            (shardcron::connect(&format!("zk://{addr}{ns}?session_timeout_ms=10000")).await?, None)
        }
        Server::Etcd => {
            // The test servers' variable is an endpoint URL (`http://host:port`).
            let endpoint = address("SHARDCRON_ETCD")?;
            let addr = endpoint.trim_start_matches("http://");
            (shardcron::connect(&format!("etcd://{addr}{ns}?ttl_s=10")).await?, None)
        }
        Server::InMemory => {
            let server = MemServer::new(Handles::real());
            let client = server.connect(ConnectOptions::default().namespace("/bench"))?;
            (Arc::new(client), Some(server))
        }
    };
    // Counts what reaches the registry (the writes per tick of the report).
    let counting = CountingRegistry::new(registry);
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(counting.clone());
    let events = recorder.clone();
    let observability = if observed {
        let path =
            std::env::temp_dir().join(format!("shardcron-bench-trace-{}.db", std::process::id()));
        let trace = Trace::start(TraceConfig::new(path.to_string_lossy()))?;
        trace.ready(std::time::Duration::from_secs(30)).await?;
        Some((trace, Metrics::install()?, path))
    } else {
        None
    };
    let registry = match &observability {
        Some((_, metrics, _)) => metrics.registry(registry),
        None => registry,
    };
    let settings = shardcron_core::runtime::Settings { fire_lead, ..Default::default() };
    let mut builder = SchedulerBuilder::new(registry).settings(settings).event_sink(Arc::new(
        move |event: &SchedulerEvent| {
            if let SchedulerEvent::ItemStarted { job, fire_ms, .. } = event {
                if let Some(i) = job_index(job) {
                    events.event(i, *fire_ms, now_us());
                }
            }
        },
    ));
    if let Some((trace, metrics, _)) = &observability {
        // SHARDCRON_BENCH_OBSERVE=trace or =metrics measures one of the two alone.
        let only = std::env::var("SHARDCRON_BENCH_OBSERVE").unwrap_or_default();
        if only != "metrics" {
            builder = builder.trace(trace);
        }
        if only != "trace" {
            builder = builder.metrics(metrics);
        }
    }
    let scheduler = builder.start().await?;
    let add = |i: usize| {
        let config = JobConfig::builder(format!("job-{i}"))
            .cron(schedule.quartz())
            .monitor_execution(monitor)
            .build()
            .map_err(shardcron_core::Error::from);
        let recorder = recorder.clone();
        let job = Job::from_fn(move |ctx| {
            let recorder = recorder.clone();
            async move {
                recorder.body_started(i, epoch_ms(ctx.fire_time()), now_us());
                Ok(())
            }
        });
        let scheduler = &scheduler;
        async move { add_job(scheduler, config?, job).await }
    };
    if on != Server::InMemory {
        // Each registration waits for several writes (each one fsynced by the server):
        // register many at once, as an application starting thousands of jobs would.
        use futures::{StreamExt, TryStreamExt};
        futures::stream::iter(0..jobs as usize)
            .map(add)
            .buffer_unordered(ZK_PARALLEL_REGISTRATIONS)
            .try_collect::<Vec<()>>()
            .await?;
    } else {
        for i in 0..jobs as usize {
            add(i).await?;
        }
    }
    match (observability, server) {
        (Some((trace, metrics, path)), Some(server)) => {
            Ok(Running::Observed(scheduler, server, trace, metrics, path, counting))
        }
        (_, server) => Ok(Running::Shardcron(scheduler, server, counting)),
    }
}

impl Running {
    /// The trace's counts, for a scheduler with the trace on.
    pub fn trace_stats(&self) -> Option<TraceStats> {
        match self {
            Running::Observed(_, _, trace, ..) => Some(trace.stats()),
            _ => None,
        }
    }

    /// What the scheduler sent the registry so far, by operation (shardcron only).
    pub fn registry_ops(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        match self {
            Running::Shardcron(.., counting) | Running::Observed(.., counting) => {
                Some(counting.counts())
            }
            _ => None,
        }
    }

    /// Removes what the run left on disk (the trace's SQLite file).
    pub fn clean_up(&self) {
        if let Running::Observed(.., path, _) = self {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }
}

async fn start_tcs(
    jobs: u64,
    schedule: Schedule,
    recorder: &Arc<Recorder>,
    channel_size: Option<usize>,
) -> Result<Running, Error> {
    use tokio_cron_scheduler::{Job, JobScheduler};
    let scheduler = match channel_size {
        Some(size) => JobScheduler::new_with_channel_size(size).await,
        None => JobScheduler::new().await,
    }
    .map_err(|e| crate::err(format!("tokio-cron-scheduler: {e:?}")))?;
    for i in 0..jobs as usize {
        let recorder = recorder.clone();
        let job = Job::new_async(schedule.croner(), move |_, _| {
            let recorder = recorder.clone();
            Box::pin(async move {
                let at = now_us();
                // The whole second it started in: the fire it is for (it never fires early).
                let fire_ms = at / 1_000_000 * 1000;
                recorder.body_started(i, fire_ms, at);
            })
        })
        .map_err(|e| crate::err(format!("tokio-cron-scheduler job: {e:?}")))?;
        scheduler
            .add(job)
            .await
            .map_err(|e| crate::err(format!("tokio-cron-scheduler add: {e:?}")))?;
    }
    scheduler
        .start()
        .await
        .map_err(|e| crate::err(format!("tokio-cron-scheduler start: {e:?}")))?;
    Ok(Running::Tcs(scheduler))
}
