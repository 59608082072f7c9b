//! Section 4, failover latency with real processes: three `shardcron worker` processes on a real
//! ZooKeeper or etcd run one job of 6 items every 15 s with failover on; one of them (a
//! follower, not the leader) is stopped while it runs its 2 items, and the bench reads from the
//! survivors' JSON lines when those orphaned items start again (`item_start`, kind
//! `failover`).
//!
//! The victim's items run for 10 minutes, the survivors' for 200 ms (each worker's `--item-ms`
//! is its own), so the survivors are idle when the orphans appear and the figure is the
//! failover path alone, not a survivor's own run.
//!
//! - **kill -9**: SIGKILL; the registry notices when the session expires, so the delay is about
//!   the session timeout (ZooKeeper) or the lease TTL (etcd); measured from the kill.
//! - **graceful stop**: SIGTERM; the worker stops starting fires and waits for its running
//!   items up to the scheduler's shutdown timeout (30 s), cancels them, and hands them over as
//!   it leaves; measured from the victim's own report that the items ended (cancelled).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Deserialize;

use crate::precision::now_us;
use crate::registry_load::{backends, Backend};
use crate::report::{thousands, Section, Verdict};
use crate::stats::median;
use crate::Error;

const ITEMS: u32 = 6;
const CRON: &str = "0/15 * * * * ?";
/// The runtime's default `Settings::shutdown_timeout`, which the worker uses.
const SHUTDOWN_TIMEOUT_MS: i64 = 30_000;

/// One JSON line of `shardcron worker` (the fields the bench uses).
#[derive(Debug, Clone, Deserialize)]
struct Line {
    event: String,
    instance: String,
    item: Option<u32>,
    fire_ms: Option<i64>,
    at_ms: i64,
    kind: Option<String>,
    ok: Option<bool>,
}

/// A worker process and the lines it printed so far.
struct Worker {
    child: Child,
    lines: Arc<Mutex<Vec<Line>>>,
}

impl Worker {
    fn spawn(bin: &PathBuf, url: &str, item_ms: u64) -> Result<Worker, Error> {
        let mut child = Command::new(bin)
            .args(["worker", "--registry", url, "--job", "fo", "--cron", CRON])
            .args(["--total", &ITEMS.to_string(), "--item-ms", &item_ms.to_string(), "--failover"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| crate::err(format!("start {}: {e}", bin.display())))?;
        let stdout = child.stdout.take().ok_or_else(|| crate::err("worker stdout"))?;
        let lines: Arc<Mutex<Vec<Line>>> = Arc::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(parsed) = serde_json::from_str::<Line>(&line) {
                    sink.lock().push(parsed);
                }
            }
        });
        Ok(Worker { child, lines })
    }

    fn lines(&self) -> Vec<Line> {
        self.lines.lock().clone()
    }

    fn is_leader(&self) -> bool {
        self.lines().iter().any(|l| l.event == "leader")
    }

    /// Items started by a scheduled fire at `fire_ms`.
    fn started(&self, fire_ms: i64) -> Vec<u32> {
        self.lines()
            .iter()
            .filter(|l| l.event == "item_start" && l.fire_ms == Some(fire_ms))
            .filter_map(|l| l.item)
            .collect()
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, signal);
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    fn stop(mut self, grace: Duration) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let begin = Instant::now();
        while begin.elapsed() < grace {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill,
    Graceful,
}

impl Stop {
    fn name(self) -> &'static str {
        match self {
            Stop::Kill => "kill -9",
            Stop::Graceful => "graceful stop (SIGTERM)",
        }
    }
}

/// One trial's outcome, in ms from the reference moment (the kill, or the victim's release of
/// its items): the first and the last orphan's restart, and when the victim's instance node
/// disappeared from the registry as a separate client saw it.
#[derive(Debug, Clone, Copy)]
struct Trial {
    first_ms: f64,
    last_ms: f64,
    node_gone_ms: Option<f64>,
}

/// (path, epoch ms) of every deletion the observer saw.
type Deletions = Arc<Mutex<Vec<(String, i64)>>>;

/// A client of the trial's namespace that records when instance nodes are deleted: the moment
/// the registry (not shardcron) noticed the victim was gone.
fn observe(
    runtime: &tokio::runtime::Runtime,
    url: &str,
) -> (Deletions, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    use shardcron_core::registry::WatchEvent;
    let deleted: Deletions = Arc::default();
    let sink = deleted.clone();
    let url = url.to_owned();
    let task = runtime.spawn(async move {
        let Ok(registry) = shardcron::connect(&url).await else { return };
        let Ok(mut watch) = registry.watch("/fo/instances").await else { return };
        while let Some(event) = watch.next().await {
            if let WatchEvent::Deleted { path } = event {
                sink.lock().push((path, now_ms()));
            }
        }
    });
    (deleted, task)
}

fn now_ms() -> i64 {
    now_us() / 1000
}

/// Waits until `done` returns a value or `limit` passes.
fn wait_for<T>(limit: Duration, mut done: impl FnMut() -> Option<T>) -> Option<T> {
    let begin = Instant::now();
    loop {
        if let Some(v) = done() {
            return Some(v);
        }
        if begin.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn url(backend: &Backend, ns: &str, timeout_s: u64) -> Option<String> {
    match backend {
        Backend::ZooKeeper(a) => {
            Some(format!("zk://{a}{ns}?session_timeout_ms={}", timeout_s * 1000))
        }
        Backend::Etcd(a) => Some(format!("etcd://{a}{ns}?ttl_s={timeout_s}")),
        Backend::Mem => None,
    }
}

fn trial(
    runtime: &tokio::runtime::Runtime,
    bin: &PathBuf,
    backend: &Backend,
    stop: Stop,
    timeout_s: u64,
    n: usize,
) -> Result<Trial, Error> {
    let ns = format!("/bench-failover-{}-{n}-{}", std::process::id(), now_ms());
    let url = url(backend, &ns, timeout_s).ok_or_else(|| crate::err("no server"))?;
    let survivors = [Worker::spawn(bin, &url, 200)?, Worker::spawn(bin, &url, 200)?];
    let (deleted, observer) = observe(runtime, &url);
    // Let the first two settle, so that the victim joins as a follower.
    std::thread::sleep(Duration::from_millis(1_500));
    let victim = Worker::spawn(bin, &url, 600_000)?;
    // A fire at which every worker runs its share.
    let fire = wait_for(Duration::from_secs(45), || {
        victim.lines().iter().filter(|l| l.event == "item_start").find_map(|l| {
            let f = l.fire_ms?;
            let all = survivors.iter().all(|s| !s.started(f).is_empty());
            all.then_some(f)
        })
    })
    .ok_or_else(|| crate::err("the three workers never ran one fire together"))?;
    if victim.is_leader() {
        eprintln!("failover: note: the victim is the leader in trial {n}");
    }
    let orphans = victim.started(fire);
    std::thread::sleep(Duration::from_millis((fire + 1_000 - now_ms()).max(0) as u64));
    let sent_ms = now_ms();
    let reference = match stop {
        Stop::Kill => {
            victim.signal(nix::sys::signal::Signal::SIGKILL);
            sent_ms
        }
        Stop::Graceful => {
            victim.signal(nix::sys::signal::Signal::SIGTERM);
            // The victim reports its cancelled items as it gives them up.
            let limit = Duration::from_millis(SHUTDOWN_TIMEOUT_MS as u64 + 15_000);
            wait_for(limit, || {
                let ends: Vec<i64> = victim
                    .lines()
                    .iter()
                    .filter(|l| {
                        l.event == "item_end" && l.fire_ms == Some(fire) && l.ok == Some(false)
                    })
                    .map(|l| l.at_ms)
                    .collect();
                (ends.len() >= orphans.len()).then(|| ends.into_iter().max().unwrap_or(0))
            })
            .ok_or_else(|| crate::err("the stopping victim never gave its items up"))?
        }
    };
    let restarts = wait_for(Duration::from_secs(timeout_s + 20), || {
        let starts: Vec<(u32, i64)> = survivors
            .iter()
            .flat_map(|s| s.lines())
            .filter(|l| l.event == "item_start" && l.kind.as_deref() == Some("failover"))
            .filter(|l| l.at_ms >= sent_ms)
            .filter_map(|l| Some((l.item?, l.at_ms)))
            .filter(|(i, _)| orphans.contains(i))
            .collect();
        let all = orphans.iter().all(|o| starts.iter().any(|(i, _)| i == o));
        all.then_some(starts)
    })
    .ok_or_else(|| crate::err(format!("orphans {orphans:?} not restarted in time")))?;
    let first = restarts.iter().map(|r| r.1).min().unwrap_or(0);
    let last = orphans
        .iter()
        .filter_map(|o| restarts.iter().filter(|(i, _)| i == o).map(|r| r.1).min())
        .max()
        .unwrap_or(0);
    let victim_id = victim.lines().first().map(|l| l.instance.clone()).unwrap_or_default();
    let node_gone = deleted
        .lock()
        .iter()
        .find(|(path, _)| path.ends_with(&format!("/{victim_id}")))
        .map(|(_, at)| (at - reference) as f64);
    observer.abort();
    drop(victim);
    for s in survivors {
        s.stop(Duration::from_secs(5));
    }
    Ok(Trial {
        first_ms: (first - reference) as f64,
        last_ms: (last - reference) as f64,
        node_gone_ms: node_gone,
    })
}

/// The `shardcron` binary: `SHARDCRON_WORKER_BIN`, or next to this one.
fn worker_bin() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SHARDCRON_WORKER_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.join("shardcron");
    bin.exists().then_some(bin)
}

struct Row {
    backend: &'static str,
    stop: Stop,
    timeout_s: u64,
    trials: Vec<Trial>,
    errors: Vec<String>,
}

pub fn run(quick: bool) -> Result<Section, Error> {
    let (found, missing) = backends();
    let servers: Vec<Backend> = found.into_iter().filter(|b| !matches!(b, Backend::Mem)).collect();
    let Some(bin) = worker_bin() else {
        return Ok(not_measured(
            "the `shardcron` binary was not found next to the bench binary (build it with \
             `cargo build --release -p shardcron-cli --features etcd`, or set SHARDCRON_WORKER_BIN)",
        ));
    };
    if servers.is_empty() {
        return Ok(not_measured(
            "no ZooKeeper or etcd address in this run (run `scripts/bench.sh`)",
        ));
    }
    let timeouts: &[u64] = if quick { &[2, 4] } else { &[2, 4, 8] };
    let reps = if quick { 1 } else { 3 };
    let runtime = crate::contenders::runtime()?;
    let mut rows = Vec::new();
    let mut n = 0;
    for backend in &servers {
        let name = match backend {
            Backend::ZooKeeper(_) => "ZooKeeper",
            _ => "etcd",
        };
        let mut plan: Vec<(Stop, u64, usize)> =
            timeouts.iter().map(|&t| (Stop::Kill, t, reps)).collect();
        plan.push((Stop::Graceful, 4, if quick { 1 } else { 2 }));
        for (stop, timeout_s, reps) in plan {
            let mut row =
                Row { backend: name, stop, timeout_s, trials: Vec::new(), errors: Vec::new() };
            for _ in 0..reps {
                n += 1;
                eprintln!("failover: {name}, {}, timeout {timeout_s} s, trial {n}", stop.name());
                match trial(&runtime, &bin, backend, stop, timeout_s, n) {
                    Ok(t) => row.trials.push(t),
                    Err(e) => {
                        eprintln!("failover: {e}");
                        row.errors.push(e.to_string());
                    }
                }
            }
            rows.push(row);
        }
    }
    Ok(render(&rows, &missing))
}

fn not_measured(why: &str) -> Section {
    Section {
        body: format!("Not measured: {why}.\n"),
        verdicts: vec![Verdict::not_measured("failover latency", why)],
    }
}

fn render(rows: &[Row], missing: &[&str]) -> Section {
    let mut body = format!(
        "Three `shardcron worker` processes (release build) on a real server, one job of \
         {ITEMS} items every 15 s (`{CRON}`) with failover on; a follower is stopped 1 s after a \
         fire while it runs its 2 items (10 min each; the survivors' items take 200 ms, so they \
         are idle). Delay = when the last (first) orphaned item starts again on a survivor \
         (`item_start`, kind `failover`, from the workers' JSON lines), measured from the \
         SIGKILL for kill -9, and from the victim's own `item_end` of the cancelled items for a \
         graceful stop (SIGTERM: the worker waits up to the scheduler's 30 s shutdown timeout \
         for its items, cancels them, and leaves). ZooKeeper's server allows sessions up to \
         20 s here (`scripts/bench.sh`).\n\n\
         \"Node gone\" is when a separate client of the registry saw the victim's instance node \
         deleted (the registry's own detection of the death, or the victim's own deletion on a \
         graceful stop); \"shardcron's part\" is the last orphan's restart minus that moment.\n\n\
         | backend | stop | session timeout / lease TTL | trials | last orphan restarted (median, max) | first orphan (median) | node gone (median) | shardcron's part (median) | target | verdict |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
    );
    let mut verdicts = Vec::new();
    for r in rows {
        let last: Vec<f64> = r.trials.iter().map(|t| t.last_ms).collect();
        let first: Vec<f64> = r.trials.iter().map(|t| t.first_ms).collect();
        let gone: Vec<f64> = r.trials.iter().filter_map(|t| t.node_gone_ms).collect();
        let reaction: Vec<f64> =
            r.trials.iter().filter_map(|t| t.node_gone_ms.map(|g| t.last_ms - g)).collect();
        let target_ms = match r.stop {
            Stop::Kill => r.timeout_s as f64 * 1000.0 + 250.0,
            Stop::Graceful => 250.0,
        };
        let max = last.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let met = !last.is_empty() && r.errors.is_empty() && max < target_ms;
        let ms = |v: f64| format!("{} ms", thousands(v.max(0.0).round() as u64));
        let verdict = if last.is_empty() {
            "failed".to_owned()
        } else if met {
            "met".into()
        } else {
            "**missed**".into()
        };
        let timeout = match r.stop {
            Stop::Kill => format!("{} s", r.timeout_s),
            Stop::Graceful => format!("{} s (not involved)", r.timeout_s),
        };
        body.push_str(&format!(
            "| {} | {} | {} | {}{} | {} ({}) | {} | {} | {} | < {} | {} |\n",
            r.backend,
            r.stop.name(),
            timeout,
            r.trials.len(),
            if r.errors.is_empty() {
                String::new()
            } else {
                format!(" ({} failed)", r.errors.len())
            },
            median(&last).map_or("-".into(), ms),
            if last.is_empty() { "-".into() } else { ms(max) },
            median(&first).map_or("-".into(), ms),
            median(&gone).map_or("-".into(), ms),
            median(&reaction).map_or("-".into(), ms),
            ms(target_ms),
            verdict,
        ));
        let target = match r.stop {
            Stop::Kill => format!(
                "{}: orphan restarted < session timeout + 250 ms ({} s)",
                r.backend, r.timeout_s
            ),
            Stop::Graceful => {
                format!("{}: orphan restarted < 250 ms after a graceful stop", r.backend)
            }
        };
        let figure = if last.is_empty() { "-".into() } else { format!("max {}", ms(max)) };
        let mut v = Verdict::new(target, figure, met);
        if !met && r.stop == Stop::Kill {
            if let (Some(g), Some(x)) = (median(&gone), median(&reaction)) {
                let over = g - r.timeout_s as f64 * 1000.0;
                v = v.note(format!(
                    "the registry removed the dead session's nodes {} after the timeout \
                     (median); shardcron's own part was {} (median)",
                    if over >= 0.0 { ms(over) } else { format!("-{}", ms(-over)) },
                    ms(x)
                ));
            }
        }
        if let Some(e) = r.errors.first() {
            v = v.note(format!("{} trial(s) failed: {e}", r.errors.len()));
        }
        verdicts.push(v);
    }
    for r in rows.iter().filter(|r| !r.errors.is_empty()) {
        body.push_str(&format!(
            "\n{} / {} / {} s: {}",
            r.backend,
            r.stop.name(),
            r.timeout_s,
            r.errors.join("; ")
        ));
    }
    if rows.iter().any(|r| r.backend == "etcd" && r.stop == Stop::Kill) {
        body.push_str(
            "\nOn etcd the dead instance's nodes go when the server revokes its lease: the lease \
             expires a TTL after its last keep-alive (sent every TTL/3), and etcd's lessor looks \
             for expired leases every 500 ms, so the \"node gone\" column can run past the TTL \
             by up to half a second before shardcron sees anything. On ZooKeeper the session \
             expires on the server's tick (200 ms here), and keep-alives count from the last \
             ping, so the node can go slightly before the timeout.\n",
        );
    }
    for m in missing {
        body.push_str(&format!("\n{m}: not measured (no server address in this run).\n"));
        verdicts.push(Verdict::not_measured(format!("failover on {m}"), "no server address"));
    }
    Section { body, verdicts }
}
