//! Section 2, memory and threads per job: a child process per (scheduler, job count) registers
//! the jobs with a schedule that does not fire during the measurement, lets them settle, and
//! reports its resident memory and thread count. The cost per job is the slope between the
//! smallest and the largest count, so the runtime's and the binary's fixed cost drop out.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::contenders::{self, Schedule};
use crate::precision::Recorder;
use crate::report::{mib, Section, Verdict};
use crate::{proc, Error};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryResult {
    pub scheduler: String,
    pub jobs: u64,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
    pub threads: u64,
    pub register_ms: u64,
}

/// The child: registers `jobs` jobs on `scheduler` and prints a [`MemoryResult`].
pub fn child(scheduler: &str, jobs: u64) -> Result<(), Error> {
    let runtime = contenders::runtime()?;
    let result = runtime.block_on(async {
        let recorder = Arc::new(Recorder::new(0, 0));
        let begin = std::time::Instant::now();
        let running = contenders::start(scheduler, jobs, Schedule::Never, &recorder).await?;
        let register_ms = begin.elapsed().as_millis() as u64;
        // Let spawned tasks and the registry's watch settle.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let result = MemoryResult {
            scheduler: scheduler.to_owned(),
            jobs,
            rss_kib: proc::rss_kib(),
            peak_rss_kib: proc::peak_rss_kib(),
            threads: proc::threads(),
            register_ms,
        };
        drop(running);
        Ok::<_, Error>(result)
    })?;
    proc::child_reply(&result)?;
    std::process::exit(0);
}

const COUNTS: [u64; 3] = [1, 1_000, 10_000];

pub fn run(_quick: bool) -> Result<Section, Error> {
    let mut schedulers = vec![contenders::SHARDCRON, contenders::TCS, contenders::BASELINE];
    if std::env::var("SHARDCRON_ZK").is_ok() {
        schedulers.push(contenders::SHARDCRON_ZK);
    }
    let mut results = Vec::new();
    for jobs in COUNTS {
        for &scheduler in &schedulers {
            if scheduler == contenders::BASELINE && jobs != 1 {
                continue;
            }
            eprintln!("memory: {scheduler} with {jobs} jobs");
            let args = vec![
                "child-memory".to_owned(),
                "--scheduler".into(),
                scheduler.into(),
                "--jobs".into(),
                jobs.to_string(),
            ];
            match proc::run_child::<MemoryResult>(&args, Duration::from_secs(900)) {
                Ok(r) => results.push(r),
                Err(e) => eprintln!("memory: {e}"),
            }
        }
    }
    Ok(render(&results))
}

fn find<'a>(results: &'a [MemoryResult], s: &str, jobs: u64) -> Option<&'a MemoryResult> {
    results.iter().find(|r| r.scheduler == s && r.jobs == jobs)
}

/// KiB per job between the smallest and largest count.
fn per_job(results: &[MemoryResult], s: &str) -> Option<f64> {
    let (lo, hi) = (find(results, s, COUNTS[0])?, find(results, s, COUNTS[2])?);
    Some((hi.rss_kib as f64 - lo.rss_kib as f64) / (hi.jobs - lo.jobs) as f64)
}

fn render(results: &[MemoryResult]) -> Section {
    let mut body = String::from(
        "Jobs of one item registered with a schedule that does not fire during the measurement \
         (`0 0 0 1 1 ? 2099`; tokio-cron-scheduler: `0 0 0 1 1 *`), one child process per \
         point, measured 2 s after the last registration on a 2-worker tokio runtime. \
         shardcron runs on the in-memory registry, so its RSS includes the registry's copy of \
         every job's nodes (config, server, instance, sharding, leader) besides the scheduler's \
         own state and watch-fed cache; with ZooKeeper or etcd that copy lives in the server.\n\n",
    );
    body.push_str(
        "| scheduler | RSS, 1 job | 1,000 jobs | 10,000 jobs | **per job** (slope 1 → 10,000) | threads (1 / 1,000 / 10,000) | registering 10,000 |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    let shown = [contenders::SHARDCRON, contenders::SHARDCRON_ZK, contenders::TCS];
    for s in shown {
        if !results.iter().any(|r| r.scheduler == s) {
            continue;
        }
        let rss = |j: u64| find(results, s, j).map_or("failed".into(), |r| mib(r.rss_kib));
        let threads: Vec<String> = COUNTS
            .iter()
            .map(|&j| find(results, s, j).map_or("-".into(), |r| r.threads.to_string()))
            .collect();
        let register = find(results, s, COUNTS[2])
            .map_or("-".into(), |r| format!("{:.1} s", r.register_ms as f64 / 1000.0));
        body.push_str(&format!(
            "| {} | {} | {} | {} | **{}** | {} | {} |\n",
            contenders::label(s),
            rss(COUNTS[0]),
            rss(COUNTS[1]),
            rss(COUNTS[2]),
            per_job(results, s).map_or("-".into(), |k| format!("{k:.1} KiB")),
            threads.join(" / "),
            register,
        ));
    }
    if let Some(b) = find(results, contenders::BASELINE, 1) {
        body.push_str(&format!(
            "\nThe bench process alone (same runtime, no scheduler): {} RSS, {} threads. \
             shardcron on ZooKeeper holds the ZooKeeper client's state and the watch-fed cache \
             of every job's nodes, but not the registry's own copy; it registers {} jobs at a \
             time (one at a time, each registration waits for several fsynced ZooKeeper \
             writes: see section 3).\n",
            mib(b.rss_kib),
            b.threads,
            contenders::ZK_PARALLEL_REGISTRATIONS
        ));
    }
    if [contenders::SHARDCRON, contenders::SHARDCRON_ZK]
        .iter()
        .any(|s| per_job(results, s).is_some_and(|k| k >= 10.0))
    {
        body.push_str(
            "\n**Why shardcron misses 10 KiB per job.** A heap profile (heaptrack, 10,000 jobs on \
             the in-memory registry, 2026-11-27, before that day's changes) put 10.1 KiB of \
             heap on each job once registered: the in-memory registry's nodes, about 3.6 KiB \
             (some 16 nodes per job: their hash table, 262,144 slots of 81 bytes at this \
             count, 2.4 KiB; the paths, data and child lists; absent on ZooKeeper); the \
             runner's task, 2.5 KiB in one block (the `JobRunner` with its protocol inline, \
             2,240 bytes of it the protocol's own state); the view, 1.3 KiB (a tree of the \
             job's path segments and the nodes' data); registration's records, 0.5 KiB (the \
             instances seen, in a `BTreeSet` that allocates room for eleven, and the nodes it \
             ensured); the timer heap, the driver's routes and the scope's copies, about 1 KiB. \
             Since: the protocol's states that are set only during a fire or a request (the \
             fire, the run, the request and its split) are boxed, so an idle job's protocol is \
             1,840 bytes, and the instances seen are a sorted `Vec`: 0.5 KiB less per job. \
             What is left is mostly the registry's table, the view's tree and the runner; on \
             ZooKeeper the client's persistent watch per scope entry (about 70 per job at 3 \
             items) takes the registry's place. One way under 10 KiB: one copy of each node's \
             data shared by the registry and the view (the config's YAML, a few hundred bytes, \
             is held by both, besides the protocol's parsed config), which the registry \
             contract's `Node`, owning its data, does not allow yet. tokio-cron-scheduler keeps a job as a record in \
             a map (no task per job) and polls the map every 500 ms, hence its ~1 KiB (and its \
             lateness, section 1).\n\n\
             **Registering.** Each registration changes the process's watch scope twice (the \
             job's whole subtree while it registers, its narrow scope after). Until 2026-11-25 \
             every change sent the whole union of the jobs' scopes, which the driver, the view \
             and the backend each compared with the old one: registering jobs one after the \
             other was quadratic (10,000 in memory: 114 s; 1,000 / 3,000 on ZooKeeper: 11.6 / \
             61 s). A change now carries only the entries removed and added (`ScopeChange`), \
             and the driver, the view and the in-memory registry apply it entry by entry. The \
             ZooKeeper and etcd backends still apply it to the stream's whole scope (a pass \
             over it per change, tens of thousands of entries at 10,000 jobs), hence the \
             ZooKeeper column's registering time, which grows faster than the count.\n",
        );
    }
    let mut verdicts = Vec::new();
    let threads: Vec<u64> = COUNTS
        .iter()
        .filter_map(|&j| find(results, contenders::SHARDCRON, j).map(|r| r.threads))
        .collect();
    if threads.len() == COUNTS.len() {
        let constant = threads.iter().all(|&t| t == threads[0]);
        verdicts.push(Verdict::new(
            "constant thread count, 1 → 10,000 jobs",
            format!(
                "{} threads",
                threads.iter().map(u64::to_string).collect::<Vec<_>>().join(" / ")
            ),
            constant,
        ));
    } else {
        verdicts.push(Verdict::not_measured("constant thread count", "a child failed"));
    }
    for (s, what) in [
        (contenders::SHARDCRON, "in-memory registry in the process"),
        (contenders::SHARDCRON_ZK, "on ZooKeeper: the scheduler process alone"),
    ] {
        let target = format!("< 10 KiB memory per job ({what})");
        match per_job(results, s) {
            Some(k) if k >= 10.0 => {
                verdicts.push(Verdict::new(target, format!("{k:.1} KiB"), false).note(
                    "the job's nodes held by the registry (or its client), the cache and the \
                     runner's state; see the section",
                ))
            }
            Some(k) => verdicts.push(Verdict::new(target, format!("{k:.1} KiB"), true)),
            None if s == contenders::SHARDCRON_ZK && !results.iter().any(|r| r.scheduler == s) => {
                verdicts.push(Verdict::not_measured(target, "no ZooKeeper in this run"))
            }
            None => verdicts.push(Verdict::not_measured(target, "a child failed")),
        }
    }
    Section { body, verdicts }
}
