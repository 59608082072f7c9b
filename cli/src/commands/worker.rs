//! `shardcron worker`: one instance of a demo job on a registry, printing every event as a JSON
//! line. Several workers on one ZooKeeper or etcd form a real multi-process cluster; the
//! end-to-end tests drive them and check the cluster's invariants on their output.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use shardcron::config::JobConfig;
use shardcron::cron::CronSchedule;
use shardcron::handles::{Clock, SystemClock};
use shardcron::job::Job;
use shardcron::runtime::{EventSink, InstanceId, SchedulerBuilder, SchedulerEvent, Settings};
use shardcron::{ConnectError, RegistryUrl};
use shardcron_observe::{Metrics, ObserveExt, Trace, TraceConfig, TraceError};
use tokio::sync::mpsc;

use super::events::{EventLine, LineMaker};
use super::sharding::{job_name, total_count};
use crate::error::CliError;

/// One-line description, for `shardcron --help`.
pub const ABOUT: &str =
    "Run one instance of a demo job on a registry; print its events as JSON lines";

/// Full description, for `shardcron worker --help`.
pub const LONG_ABOUT: &str = "\
Run one instance of a demo job on a registry and print its events as JSON lines.

The job has --total items and fires on --cron; each item sleeps --item-ms milliseconds, and \
stops early when the runtime cancels it. Workers started on the same zk:// or etcd:// registry \
with the same --job form one cluster: they elect a leader, divide the items and, with \
--failover, re-run the items of a worker that dies. A worker's instance id is {ip}@-@{pid}, \
plus @-@{suffix} with --instance-suffix. With mem: the registry lives inside the process: a \
cluster of one.

Each worker publishes the job's config with overwrite on: the flags of the worker started last \
apply to the whole cluster (the others follow the change live).

OUTPUT: one JSON object per event, one per line on stdout, flushed at once. Every object has \
these seven keys, null where they do not apply:
  event     item_start, item_end, sharding, leader, failover_claim, session, skip,
            fire_failed, config_applied, config_rejected, registry_garbage, stopped or error
  job       the job (null for session: one session serves every job of an instance)
  item      the sharding item (item_start, item_end, failover_claim, fire_failed)
  instance  the id of the instance that reports the event
  fire_ms   the scheduled fire time in epoch ms, the same on every instance for one fire; for a
            failover run, the fire the crashed owner missed (item_start, item_end,
            failover_claim, skip, fire_failed)
  at_ms     when the event happened, epoch ms by this host's clock (item_start: when the item
            was marked running, up to the fire lead, 50 ms, before its code starts at fire_ms)
  token     the item's fencing token (item_start, item_end)
and these only on their own event:
  kind        item_start: scheduled, misfire (a catch-up run), manual or failover
  ok          item_end: true if the item completed; false if it failed or was cancelled
  assignment  sharding (reported by the leader that committed it): {\"<instance>\": [items]}
  state       session: connected, suspended, reconnected, lost, expired or closed
  session_id  session with state connected: the new session's id
  reason      skip: disconnected, job_disabled, server_disabled, no_items, misfire,
              clock_skew, sharding_timeout or registry_error; fire_failed, config_rejected,
              registry_garbage, stopped and error: a one-line text
  detail      skip with reason clock_skew or registry_error: the details
  path        registry_garbage: the node whose data could not be used (the reason says how
              it was read instead, and who repairs it)
  value       registry_garbage: what it held, quoted and shortened; (missing) if deleted
Later versions may add keys and event kinds; existing ones keep their meaning.

Example:
{\"event\":\"item_start\",\"job\":\"orders\",\"item\":0,\"instance\":\"127.0.0.1@-@4242\",\
\"fire_ms\":1700000005000,\"at_ms\":1700000005001,\"token\":3,\"kind\":\"scheduled\"}

STOPPING: SIGTERM or Ctrl-C stops the worker gracefully: no new fire starts, running items \
finish (for up to --shutdown-timeout-ms, 30 s by default, then they are cancelled and, with \
--failover, re-run on the other workers), the instance leaves the registry, and the worker \
exits with status 0. A second signal stops it at once, with status 1. An operator's \
shutdown (deleting the instance node) stops it gracefully too.

DIAGNOSTICS: stderr gets the log, one line per message: warnings and errors, and the progress \
of connecting to ZooKeeper or etcd (each attempt, each failure; when every attempt failed, the \
error names every host with what a TCP connection to it finds, and the time spent). Set \
RUST_LOG (e.g. RUST_LOG=debug) to see more or less.

OBSERVABILITY: --trace records every item run and fire state in a SQLite file or a PostgreSQL \
database (ElasticJob's JOB_EXECUTION_LOG and JOB_STATUS_TRACE_LOG tables), off the fire path: \
while the database is slow or down, rows queue up to a bound and are then dropped and counted; \
the worker reconnects by itself. --metrics serves Prometheus metrics (GET /metrics) of fires, \
items, skips, failovers, reshards, registry operations and the session.

Invalid input (a malformed registry URL, a bad cron expression, a total outside 1..1000000, a \
job name, IP or suffix that cannot be a registry path segment) exits with status 2 and a \
one-line reason on stderr; a registry that cannot be reached, with status 1.";

/// How long a stopping worker waits for its trace rows to be written.
const TRACE_FLUSH: Duration = Duration::from_secs(5);

/// The default schedule: every 5 seconds.
pub const DEFAULT_CRON: &str = "0/5 * * * * ?";

/// Arguments of `shardcron worker`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Registry: mem:[/namespace], zk://host:port[,host:port]/namespace[?session_timeout_ms=N]
    /// or etcd://host:port[,host:port]/namespace[?ttl_s=N]
    #[arg(long, value_name = "URL")]
    pub registry: String,

    /// Job name; workers with the same job on the same registry share its items. May be left
    /// out with --serve-jobs.
    #[arg(long, value_name = "NAME", required_unless_present = "serve_jobs")]
    pub job: Option<String>,

    /// Quartz cron expression of the job (quote it).
    #[arg(long, value_name = "EXPR", default_value = DEFAULT_CRON)]
    pub cron: String,

    /// Sharding total count: the job has items 0..N-1 (1 to 1000000).
    #[arg(long, value_name = "N", default_value_t = 3, allow_negative_numbers = true)]
    pub total: i64,

    /// How long each item runs, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub item_ms: u64,

    /// Re-run the items a crashed instance was running, on the survivors (the job's `failover`).
    #[arg(long)]
    pub failover: bool,

    /// Appended to the instance id ({ip}@-@{pid}@-@{suffix}), e.g. to tell apart workers of
    /// several hosts or containers that share an IP and a pid.
    #[arg(long, value_name = "S")]
    pub instance_suffix: Option<String>,

    /// The server IP this instance registers under (operators disable servers by IP).
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    pub ip: String,

    /// On a graceful stop, how long running items may still run before they are cancelled.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub shutdown_timeout_ms: u64,

    /// How long a `servers/{ip}` node that no live instance has the IP of stays before the
    /// job's leader removes it (IPs that change with every restart would pile up); 0 keeps
    /// them all, as ElasticJob does. A server an operator disabled always stays.
    #[arg(long, value_name = "MS", default_value_t = 600_000)]
    pub stale_server_grace_ms: u64,

    /// Also run the namespace's script jobs (`props: script.command.line`), including ones
    /// added later with `shardcron add` or the console, if their program is allowed.
    #[arg(long)]
    pub serve_jobs: bool,

    /// A program script jobs may run (repeat for several); any other is refused.
    #[arg(long, value_name = "PATH", requires = "serve_jobs")]
    pub allow_command: Vec<std::path::PathBuf>,

    /// Record every item run and fire state into an execution trace: a SQLite file path, or a
    /// postgres://user:password@host:port/database URL (ElasticJob's JOB_EXECUTION_LOG and
    /// JOB_STATUS_TRACE_LOG tables, created at start).
    #[arg(long, value_name = "URL")]
    pub trace: Option<String>,

    /// Trace rows older than this many days are removed (0 keeps everything).
    #[arg(long, value_name = "DAYS", default_value_t = 7)]
    pub trace_retention_days: u64,

    /// Serve Prometheus metrics on this address (GET /metrics), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,

    /// These items fail instead of sleeping (comma-separated), to see failures in the events,
    /// the trace and the metrics.
    #[arg(long, value_name = "ITEMS", value_delimiter = ',')]
    pub fail_items: Vec<u32>,
}

/// What a validated command line asks for.
#[derive(Debug)]
struct Plan {
    url: String,
    ip: String,
    suffix: Option<String>,
    /// The id the scheduler will register under, for the event lines.
    instance: InstanceId,
    /// The demo job (`None` with --serve-jobs and no --job).
    config: Option<JobConfig>,
    handlers: Option<shardcron::runtime::JobHandlers>,
    item: Duration,
    shutdown_timeout: Duration,
    stale_server_grace: Option<Duration>,
    trace: Option<TraceConfig>,
    metrics: Option<std::net::SocketAddr>,
    fail_items: Vec<u32>,
}

impl Plan {
    fn from_args(args: &Args) -> Result<Self, CliError> {
        let job = args.job.as_deref();
        job.map(job_name).transpose()?;
        let total = total_count(args.total)?;
        CronSchedule::parse(&args.cron, "")
            .map_err(|e| CliError::InvalidInput(format!("--cron {:?}: {e}", args.cron)))?;
        check_url(&args.registry)?;
        let pid = std::process::id();
        InstanceId::new(&args.ip, pid, None)
            .map_err(|e| CliError::InvalidInput(format!("--ip {:?}: {e}", args.ip)))?;
        let suffix = args.instance_suffix.as_deref();
        let instance = InstanceId::new(&args.ip, pid, suffix).map_err(|e| {
            let suffix = suffix.unwrap_or_default();
            CliError::InvalidInput(format!("--instance-suffix {suffix:?}: {e}"))
        })?;
        let config = match job {
            Some(name) => Some(
                JobConfig::builder(name)
                    .cron(args.cron.clone())
                    .sharding_total_count(total)
                    .failover(args.failover)
                    .overwrite(true)
                    .description("shardcron worker demo job")
                    .build()
                    .map_err(|e| CliError::InvalidInput(e.to_string()))?,
            ),
            None => None,
        };
        let handlers = match args.serve_jobs {
            true => Some(super::serve_jobs::script_handlers(&args.allow_command)?),
            false => None,
        };
        let trace = args.trace.as_ref().map(|url| {
            let days = args.trace_retention_days;
            let retention = (days > 0).then(|| Duration::from_secs(days.saturating_mul(86_400)));
            TraceConfig { retention, ..TraceConfig::new(url) }
        });
        if let Some(trace) = &trace {
            trace.check().map_err(|e| CliError::InvalidInput(format!("--trace: {e}")))?;
        }
        if let Some(bad) = args.fail_items.iter().find(|&&item| item >= total) {
            return Err(CliError::InvalidInput(format!(
                "--fail-items: item {bad} is not below --total {total}"
            )));
        }
        Ok(Plan {
            url: args.registry.clone(),
            ip: args.ip.clone(),
            suffix: args.instance_suffix.clone(),
            instance,
            config,
            handlers,
            item: Duration::from_millis(args.item_ms),
            shutdown_timeout: Duration::from_millis(args.shutdown_timeout_ms),
            stale_server_grace: (args.stale_server_grace_ms > 0)
                .then(|| Duration::from_millis(args.stale_server_grace_ms)),
            trace,
            metrics: args.metrics,
            fail_items: args.fail_items.clone(),
        })
    }
}

/// Rejects a malformed URL before any connection attempt, with the backend's own reasons.
fn check_url(url: &str) -> Result<(), CliError> {
    let invalid = |e: &dyn std::fmt::Display| CliError::InvalidInput(format!("--registry: {e}"));
    match RegistryUrl::parse(url).map_err(|e| invalid(&e))? {
        RegistryUrl::Mem { .. } => Ok(()),
        RegistryUrl::ZooKeeper { .. } => {
            shardcron::zk::ZkOptions::from_url(url).map(drop).map_err(|e| invalid(&e))
        }
        #[cfg(feature = "etcd")]
        RegistryUrl::Etcd { .. } => {
            shardcron::etcd::EtcdOptions::from_url(url).map(drop).map_err(|e| invalid(&e))
        }
        #[cfg(not(feature = "etcd"))]
        RegistryUrl::Etcd { .. } => {
            Err(invalid(&shardcron::ConnectError::Unsupported { scheme: "etcd", feature: "etcd" }))
        }
        other => Err(invalid(&format!("unsupported registry URL {other:?}"))),
    }
}

/// A job whose items sleep `item`, or less when the runtime cancels them.
pub fn sleeping_job(item: Duration) -> Job {
    failing_job(item, Vec::new())
}

/// [`sleeping_job`], except that the items of `fail` fail at once.
fn failing_job(item: Duration, fail: Vec<u32>) -> Job {
    let fail = Arc::new(fail);
    Job::from_fn(move |ctx| {
        let fails = fail.contains(&ctx.item);
        async move {
            if fails {
                return Err(format!("item {} fails (--fail-items)", ctx.item).into());
            }
            tokio::select! {
                () = tokio::time::sleep(item) => Ok(()),
                () = ctx.cancellation.cancelled() => Err("cancelled".into()),
            }
        }
    })
}

/// What stderr shows unless RUST_LOG says otherwise: warnings, and how connecting goes.
const DEFAULT_LOG: &str = "warn,shardcron_registry_zk=info,shardcron_registry_etcd=info";

/// Sends `tracing` events to stderr, filtered by RUST_LOG or [`DEFAULT_LOG`].
fn log_to_stderr() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    // Fails only if a subscriber is already installed: then that one logs.
    let _ = tracing_subscriber::fmt()
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .with_target(false)
        .with_env_filter(filter)
        .try_init();
}

/// Runs the worker until a signal, then stops it gracefully.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let plan = Plan::from_args(args)?;
    log_to_stderr();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(work(plan, out));
    // A closed registry client may leave a background task behind: do not wait for it long.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn work(plan: Plan, out: &mut dyn Write) -> Result<(), CliError> {
    let mut signals = Signals::new()?;
    // The trace and the metrics start first: a bad trace URL or a taken address is an input
    // error, found before any registry work.
    let trace = match &plan.trace {
        Some(config) => Some(Trace::start(config.clone()).map_err(|e| match e {
            TraceError::InvalidUrl { .. } => CliError::InvalidInput(format!("--trace: {e}")),
            other => CliError::Failed(format!("--trace: {other}")),
        })?),
        None => None,
    };
    let metrics = match plan.metrics {
        Some(addr) => Some(Metrics::serve(addr).map_err(|e| CliError::Failed(e.to_string()))?),
        None => None,
    };
    let registry = tokio::select! {
        biased;
        () = signals.recv() => return Ok(()),
        registry = shardcron::connect(&plan.url) => registry.map_err(connect_error)?,
    };
    let registry = match &metrics {
        Some(metrics) => metrics.registry(registry),
        None => registry,
    };

    let (tx, mut lines) = mpsc::unbounded_channel::<EventLine>();
    let maker = LineMaker::new(plan.instance.as_str());
    let sink: EventSink = Arc::new(move |event: &SchedulerEvent| {
        if let Some(line) = maker.line(event, SystemClock.now_ms()) {
            let _ = tx.send(line);
        }
    });
    let settings = Settings {
        shutdown_timeout: plan.shutdown_timeout,
        stale_server_grace: plan.stale_server_grace,
        ..Settings::default()
    };
    // The items' wait, then the time to leave the registry.
    let deadline = plan.shutdown_timeout + Duration::from_secs(10);
    let mut builder =
        SchedulerBuilder::new(registry).ip(&plan.ip).settings(settings).event_sink(sink);
    let serving = plan.handlers.is_some();
    if let Some(handlers) = plan.handlers {
        builder = builder.job_handlers(handlers);
    }
    if let Some(suffix) = &plan.suffix {
        builder = builder.instance_suffix(suffix);
    }
    if let Some(trace) = &trace {
        builder = builder.trace(trace).event_sink(trace.skip_sink(plan.instance.as_str()));
    }
    if let Some(metrics) = &metrics {
        builder = builder.metrics(metrics);
    }
    let scheduler = builder
        .start()
        .await
        .map_err(|e| CliError::Failed(format!("cannot start the scheduler: {e}")))?;
    let mut printer = Printer { out, failed: None };
    let demo = match plan.config {
        Some(config) => {
            scheduler.add_job(config, failing_job(plan.item, plan.fail_items.clone())).await
        }
        None => Ok(()),
    };
    if let Err(e) = demo {
        let _ = scheduler.shutdown(deadline).await;
        while let Ok(line) = lines.try_recv() {
            printer.print(&line);
        }
        return Err(CliError::Failed(format!("cannot schedule the job: {e}")));
    }

    // Print until a signal, an operator's shutdown or a closed stdout.
    loop {
        tokio::select! {
            biased;
            line = lines.recv() => {
                let Some(line) = line else { break };
                printer.print(&line);
                // A worker serving jobs keeps serving when an operator stops one of them.
                if (line.event == "stopped" && !serving) || printer.failed.is_some() {
                    break;
                }
            }
            () = signals.recv() => break,
        }
    }

    // Stop gracefully, still printing what the stop reports.
    let shutdown = scheduler.shutdown(deadline);
    tokio::pin!(shutdown);
    let stopped = loop {
        tokio::select! {
            biased;
            Some(line) = lines.recv() => printer.print(&line),
            result = &mut shutdown => break result,
            () = signals.recv() => {
                printer.flush();
                return Err(CliError::Failed(
                    "stopped by a second signal before the running items finished".into(),
                ));
            }
        }
    };
    while let Ok(line) = lines.try_recv() {
        printer.print(&line);
    }
    printer.flush();
    if let Some(trace) = &trace {
        // What the stop recorded is written before the process ends.
        trace.shutdown(TRACE_FLUSH).await;
    }
    stopped.map_err(|e| CliError::Failed(format!("stopping the scheduler: {e}")))?;
    match printer.failed {
        Some(e) => Err(CliError::Io(e)),
        None => Ok(()),
    }
}

fn connect_error(e: ConnectError) -> CliError {
    match e {
        ConnectError::Registry(e) => {
            CliError::Failed(format!("cannot connect to the registry: {e}"))
        }
        other => CliError::InvalidInput(format!("--registry: {other}")),
    }
}

/// Writes event lines to stdout, each flushed at once; remembers the first write failure and
/// prints nothing after it.
struct Printer<'a> {
    out: &'a mut dyn Write,
    failed: Option<io::Error>,
}

impl Printer<'_> {
    fn print(&mut self, line: &EventLine) {
        if self.failed.is_some() {
            return;
        }
        let written = writeln!(self.out, "{}", line.to_json()).and_then(|()| self.out.flush());
        if let Err(e) = written {
            self.failed = Some(e);
        }
    }

    fn flush(&mut self) {
        if self.failed.is_none() {
            if let Err(e) = self.out.flush() {
                self.failed = Some(e);
            }
        }
    }
}

/// SIGTERM and SIGINT (Ctrl-C), as one stream of "stop" requests.
pub(crate) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; from now on these signals no longer kill the process.
    pub(crate) fn new() -> Result<Self, CliError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let failed = |e: io::Error| CliError::Failed(format!("cannot handle signals: {e}"));
            Ok(Signals {
                term: signal(SignalKind::terminate()).map_err(failed)?,
                int: signal(SignalKind::interrupt()).map_err(failed)?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Waits for the next signal.
    pub(crate) async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
