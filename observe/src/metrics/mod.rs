//! Prometheus metrics of a scheduler, through the `metrics` crate and
//! `metrics-exporter-prometheus`.
//!
//! [`Metrics::serve`] installs the process's recorder and serves `GET /metrics` on an address;
//! [`Metrics::install`] installs it without a listener (render with [`Metrics::render`]). The
//! series come from three places: the [`listener`](Metrics::listener) (fires and items, as the
//! executor runs them: counted per job and published into the recorder at each render, so that
//! a hook on the fire path is a few additions; see `tally.rs`), the
//! [`event_sink`](Metrics::event_sink) (skips, failovers, reshards, elections, sessions) and
//! the [`registry`](Metrics::registry) wrapper (registry operations and errors). [`ObserveExt::metrics`](crate::ObserveExt::metrics) wires the first two.
//!
//! Labels are bounded: `job` (at most [`MAX_JOB_LABELS`] distinct jobs, the rest as
//! `job="_other"`), `kind`, `reason`, `outcome`, `op`, `state`; never an item or a fire time.
//!
//! | series | type | labels |
//! |---|---|---|
//! | `shardcron_fires_total` | counter | job, kind (`scheduled`, `misfire`, `manual`, `failover`) |
//! | `shardcron_misfire_catchups_total` | counter | job |
//! | `shardcron_fires_skipped_total` | counter | job, reason |
//! | `shardcron_items_started_total` | counter | job |
//! | `shardcron_items_finished_total` | counter | job, outcome (`succeeded`, `failed`, `cancelled`) |
//! | `shardcron_item_duration_seconds` | histogram | job |
//! | `shardcron_trigger_lateness_seconds` | histogram | job (scheduled fires: item start − fire time) |
//! | `shardcron_failovers_total` | counter | job (orphaned items this instance claimed) |
//! | `shardcron_reshards_total` | counter | job (assignments this instance committed as leader) |
//! | `shardcron_reshard_duration_seconds` | histogram | job (fire due → assignment committed; 0 when committed before the fire was due, a fire taken ahead) |
//! | `shardcron_leader_elections_total` | counter | job |
//! | `shardcron_fire_failures_raised_total` | counter | job (failures the error handler raised) |
//! | `shardcron_scheduler_errors_total` | counter | job (background registry failures) |
//! | `shardcron_config_rejected_total` | counter | job |
//! | `shardcron_session_connected` | gauge | (1 while the registry session is usable) |
//! | `shardcron_session_transitions_total` | counter | state |
//! | `shardcron_registry_operations_total` | counter | op |
//! | `shardcron_registry_errors_total` | counter | op, kind |
//! | `shardcron_registry_operation_duration_seconds` | histogram | op |
//! | `shardcron_trace_queue_depth` | gauge | |
//! | `shardcron_trace_dropped_total`, `_written_total`, `_rejected_total`, `_write_errors_total` | counter | |

mod listener;
mod registry;
mod tally;

use std::net::SocketAddr;
use std::sync::Arc;

use metrics::Unit;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use shardcron_core::job::JobListener;
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::EventSink;

pub use listener::{JobLabels, MetricsListener, MAX_JOB_LABELS};
pub use registry::MeteredRegistry;

/// The histogram buckets of every `_seconds` series: 1 ms to 5 minutes.
pub const SECONDS_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The metrics could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The listener could not start (e.g. the address is taken).
    #[error("metrics on {addr}: {source}; pick a free address (e.g. --metrics 127.0.0.1:9464)")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The exporter could not be built.
    #[error("metrics: {0}")]
    Build(#[source] metrics_exporter_prometheus::BuildError),
    /// Another metrics recorder is installed in this process already.
    #[error(
        "metrics: a recorder is already installed in this process; install shardcron's once \
         and share the Metrics handle"
    )]
    AlreadyInstalled,
    /// The thread of the listener and the upkeep could not start.
    #[error(
        "metrics: cannot start their thread: {source}; the process is out of threads, memory or \
         file descriptors (check its limits: ulimit -u, ulimit -n)"
    )]
    Thread {
        #[source]
        source: std::io::Error,
    },
}

/// The process's metrics: the installed recorder and what feeds it. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    listener: Arc<MetricsListener>,
    addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// The content type of Prometheus's text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Drains the recorder's histograms into their buckets every `every`, forever.
async fn upkeep_every(handle: PrometheusHandle, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        handle.run_upkeep();
    }
}

fn builder() -> Result<PrometheusBuilder, MetricsError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .map_err(MetricsError::Build)
}

impl Metrics {
    /// Installs the recorder and serves `GET /metrics` (Prometheus text format) on `addr`.
    ///
    /// The listener and the recorder's upkeep (draining the histograms' samples into their
    /// buckets every [`UPKEEP_EVERY`](Self::UPKEEP_EVERY)) run on a thread of their own at the
    /// lowest scheduling priority, not on the application's runtime: rendering a scrape of
    /// every job's series must not take a core from a burst of fires.
    pub fn serve(addr: SocketAddr) -> Result<Metrics, MetricsError> {
        // Bound now, so that a taken address is an error of this call.
        let listen = |source| MetricsError::Listen { addr, source };
        let socket = std::net::TcpListener::bind(addr).map_err(listen)?;
        socket.set_nonblocking(true).map_err(listen)?;
        let runtime =
            crate::background::runtime().map_err(|source| MetricsError::Thread { source })?;
        let socket = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(socket).map_err(listen)?
        };
        let metrics = Self::install_recorder(Some(addr))?;
        let served = metrics.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = served.clone();
                async move { ([(axum::http::header::CONTENT_TYPE, TEXT_FORMAT)], metrics.render()) }
            }),
        );
        let upkeep = metrics.handle.clone();
        let serving = async move {
            tokio::spawn(upkeep_every(upkeep, Self::UPKEEP_EVERY));
            if let Err(error) = axum::serve(socket, app).await {
                tracing::error!(%error, "the /metrics listener stopped");
            }
        };
        crate::background::spawn("shardcron-metrics", runtime, serving)
            .map_err(|source| MetricsError::Thread { source })?;
        Ok(metrics)
    }

    /// Installs the recorder without a listener: [`render`](Self::render) gives the text a
    /// scrape would.
    ///
    /// A low-priority thread drains the histograms' samples into their buckets every
    /// [`UPKEEP_EVERY`](Self::UPKEEP_EVERY), as [`serve`](Self::serve)'s does: otherwise every
    /// sample recorded would be kept until the next render, memory growing without bound when
    /// nobody renders.
    pub fn install() -> Result<Metrics, MetricsError> {
        let runtime =
            crate::background::runtime().map_err(|source| MetricsError::Thread { source })?;
        let metrics = Self::install_recorder(None)?;
        let draining = upkeep_every(metrics.handle.clone(), Self::UPKEEP_EVERY);
        crate::background::spawn("shardcron-metrics", runtime, draining)
            .map_err(|source| MetricsError::Thread { source })?;
        Ok(metrics)
    }

    /// How often the recorder's histograms are drained (the exporter's default).
    pub const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    fn install_recorder(addr: Option<SocketAddr>) -> Result<Metrics, MetricsError> {
        let recorder = builder()?.build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).map_err(|_| MetricsError::AlreadyInstalled)?;
        describe();
        Ok(Metrics { handle, listener: Arc::new(MetricsListener::default()), addr })
    }

    /// Reads the time from `clock` (the scheduler's, e.g. a virtual one in tests) instead of
    /// the system clock: for this handle, its clones, and the listener and sink they hand out.
    pub fn with_clock(self, clock: Arc<dyn shardcron_core::handles::Clock>) -> Metrics {
        self.listener.set_clock(clock);
        self
    }

    /// Where `/metrics` is served, if it is.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The current values in Prometheus's text format (what the hooks counted since the last
    /// render published first: see [`MetricsListener::publish`]).
    pub fn render(&self) -> String {
        self.listener.publish();
        self.handle.render()
    }

    /// The listener to register on the scheduler: fires, items, durations, lateness.
    pub fn listener(&self) -> Arc<dyn JobListener> {
        self.listener.clone()
    }

    /// The event sink to register on the scheduler: skips, failovers, reshards, sessions.
    pub fn event_sink(&self) -> EventSink {
        let listener = self.listener.clone();
        Arc::new(move |event| listener.on_event(event))
    }

    /// `inner`, counting its operations and errors into the metrics.
    pub fn registry(&self, inner: Arc<dyn CoordinatorRegistry>) -> Arc<dyn CoordinatorRegistry> {
        Arc::new(MeteredRegistry::new(inner))
    }
}

/// Help texts and units, shown by Prometheus.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!("shardcron_fires_total", "Fires that ran items on this instance, by kind");
    describe_counter!("shardcron_misfire_catchups_total", "Catch-up runs of misfired items");
    describe_counter!("shardcron_fires_skipped_total", "Fires that ran nothing here, by reason");
    describe_counter!("shardcron_items_started_total", "Items started");
    describe_counter!("shardcron_items_finished_total", "Items ended, by outcome");
    describe_histogram!("shardcron_item_duration_seconds", Unit::Seconds, "How long items ran");
    describe_histogram!(
        "shardcron_trigger_lateness_seconds",
        Unit::Seconds,
        "Scheduled fires: when the item started minus the fire time"
    );
    describe_counter!("shardcron_failovers_total", "Orphaned items this instance claimed");
    describe_counter!("shardcron_reshards_total", "Assignments this instance committed as leader");
    describe_histogram!(
        "shardcron_reshard_duration_seconds",
        Unit::Seconds,
        "From the due time of the fire that needed a reshard to its commit"
    );
    describe_counter!("shardcron_leader_elections_total", "Times this instance became leader");
    describe_counter!("shardcron_fire_failures_raised_total", "Item failures the handler raised");
    describe_counter!("shardcron_scheduler_errors_total", "Background registry failures");
    describe_counter!("shardcron_config_rejected_total", "Unusable configs found in the registry");
    describe_gauge!("shardcron_session_connected", "1 while the registry session is usable");
    describe_counter!("shardcron_session_transitions_total", "Registry session changes, by state");
    describe_counter!("shardcron_registry_operations_total", "Registry operations, by operation");
    describe_counter!("shardcron_registry_errors_total", "Failed registry operations, by kind");
    describe_histogram!(
        "shardcron_registry_operation_duration_seconds",
        Unit::Seconds,
        "How long registry operations took"
    );
    describe_gauge!("shardcron_trace_queue_depth", "Trace rows waiting for the database");
    describe_counter!("shardcron_trace_dropped_total", "Trace rows dropped: queue full");
    describe_counter!("shardcron_trace_written_total", "Trace rows written");
    describe_counter!("shardcron_trace_rejected_total", "Trace rows the database refused");
    describe_counter!("shardcron_trace_write_errors_total", "Failed trace writes (retried)");
}
