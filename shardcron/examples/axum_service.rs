//! Embedding shardcron in a web service: the scheduler lives next to an axum HTTP server, the
//! handlers reach it through the router's state, and one stop signal stops both, gracefully.
//!
//! ```sh
//! cargo run -p shardcron --example axum_service                  # on 127.0.0.1:3000, until Ctrl-C
//! cargo run -p shardcron --example axum_service -- --listen 127.0.0.1:0 --stop-after 30
//! curl -s 127.0.0.1:3000/jobs
//! curl -s -X POST 127.0.0.1:3000/jobs/rebuild-index/trigger
//! curl -s 127.0.0.1:3000/stats
//! ```
//!
//! No server: the in-memory registry. In production, connect to `zk://` or `etcd://` instead
//! and run the same service on several hosts; they divide the jobs' items among themselves.
//!
//! The order of a graceful stop (Ctrl-C, SIGTERM as `docker stop` or Kubernetes send, or the
//! `--stop-after` deadline) matters: first the HTTP server stops accepting requests and
//! finishes the ones in flight (so no handler triggers a job on a scheduler that is going
//! away), then the scheduler lets its running items finish and leaves the registry, and last
//! the registry connection, which is the application's, is closed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use shardcron::prelude::*;

/// What the HTTP handlers share: the scheduler (cheap to clone) and the jobs' counters.
#[derive(Clone)]
struct AppState {
    scheduler: Scheduler,
    stats: Arc<Stats>,
}

/// Counters the jobs update, through the extension registered on the scheduler.
#[derive(Debug, Default)]
struct Stats {
    heartbeats: AtomicU64,
    rebuilds: AtomicU64,
}

struct Options {
    listen: SocketAddr,
    stop_after: Option<Duration>,
}

fn options() -> Result<Options, String> {
    let usage = "usage: axum_service [--listen ADDR:PORT] [--stop-after SECONDS]";
    let mut options =
        Options { listen: SocketAddr::from(([127, 0, 0, 1], 3000)), stop_after: None };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value; {usage}"))?;
        match arg.as_str() {
            "--listen" => {
                options.listen =
                    value.parse().map_err(|e| format!("--listen {value:?}: {e}; {usage}"))?;
            }
            "--stop-after" => {
                let seconds: u64 =
                    value.parse().map_err(|e| format!("--stop-after {value:?}: {e}; {usage}"))?;
                options.stop_after = Some(Duration::from_secs(seconds));
            }
            _ => return Err(format!("unknown argument {arg:?}; {usage}")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    let stats = Arc::new(Stats::default());

    let registry = shardcron::connect("mem:/web").await?;
    let scheduler =
        SchedulerBuilder::new(registry.clone()).extension(stats.clone()).start().await?;

    // A scheduled job, and a one-off job the HTTP API triggers.
    let heartbeat = JobConfig::builder("heartbeat").cron("0/2 * * * * ?").build()?;
    scheduler
        .add_job(
            heartbeat,
            Job::from_fn(|ctx| async move {
                let stats = ctx.extension::<Arc<Stats>>().ok_or("no stats registered")?;
                stats.heartbeats.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }),
        )
        .await?;
    let rebuild = JobConfig::builder("rebuild-index").one_off().sharding_total_count(2).build()?;
    scheduler
        .add_job(
            rebuild,
            Job::from_fn(|ctx| async move {
                let stats = ctx.extension::<Arc<Stats>>().ok_or("no stats registered")?;
                stats.rebuilds.fetch_add(1, Ordering::Relaxed);
                println!(
                    "rebuild-index: item {} of {} rebuilt",
                    ctx.item, ctx.sharding_total_count
                );
                Ok(())
            }),
        )
        .await?;

    let state = AppState { scheduler: scheduler.clone(), stats };
    let app = Router::new()
        .route("/jobs", get(list_jobs))
        .route("/jobs/{name}/trigger", post(trigger_job))
        .route("/stats", get(stats_of))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    println!("listening on http://{}", listener.local_addr()?);

    // 1. The HTTP server: stops taking requests at the signal, finishes those in flight.
    axum::serve(listener, app).with_graceful_shutdown(stop_requested(options.stop_after)).await?;
    println!("HTTP server stopped; stopping the scheduler");
    // 2. The scheduler: running items finish (up to 30 s here), then the instance leaves.
    scheduler.shutdown(Duration::from_secs(30)).await?;
    // 3. The registry connection, which we opened.
    registry.close().await?;
    println!("stopped");
    Ok(())
}

/// `GET /jobs`: the jobs this instance schedules, one per line.
async fn list_jobs(State(state): State<AppState>) -> String {
    state.scheduler.jobs().iter().map(|job| format!("{job}\n")).collect()
}

/// `POST /jobs/{name}/trigger`: runs the job now on every instance that has it.
async fn trigger_job(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> (StatusCode, String) {
    match state.scheduler.trigger(&name).await {
        Ok(instances) => {
            (StatusCode::ACCEPTED, format!("triggered {name} on {instances} instance(s)\n"))
        }
        Err(shardcron::Error::NoSuchJob { job, .. }) => {
            (StatusCode::NOT_FOUND, format!("no job named {job:?}\n"))
        }
        // A registry outage is worth retrying; anything else is final.
        Err(error) if error.is_retryable() => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{error}; try again\n"))
        }
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")),
    }
}

/// `GET /stats`: what the jobs counted.
async fn stats_of(State(state): State<AppState>) -> String {
    format!(
        "heartbeats {}\nrebuilt items {}\n",
        state.stats.heartbeats.load(Ordering::Relaxed),
        state.stats.rebuilds.load(Ordering::Relaxed)
    )
}

/// Resolves at Ctrl-C, at SIGTERM (Unix), or once `stop_after` has passed.
async fn stop_requested(stop_after: Option<Duration>) {
    let deadline = async {
        match stop_after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            // Without the handler SIGTERM ends the process as usual; Ctrl-C still works.
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        biased;
        Ok(()) = tokio::signal::ctrl_c() => println!("Ctrl-C: stopping gracefully"),
        () = terminate => println!("SIGTERM: stopping gracefully"),
        () = deadline => println!("--stop-after reached: stopping gracefully"),
    }
}
