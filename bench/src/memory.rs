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
    if std::env::var("SHARDCRON_ETCD").is_ok() {
        schedulers.push(contenders::SHARDCRON_ETCD);
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
    let shown = [
        contenders::SHARDCRON,
        contenders::SHARDCRON_ZK,
        contenders::SHARDCRON_ETCD,
        contenders::TCS,
    ];
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
            per_job(results, s).map_or("-".into(), |k| format!("{k:.2} KiB")),
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
    if per_job(results, contenders::SHARDCRON).is_some() {
        body.push_str(
            "\n**Where a job's memory goes.** Heap profiles (heaptrack, 2026-11-27, after that \
             day's changes; heap live once every job registered, per job). In memory (2,000 \
             jobs): 9.2 KiB. The in-memory registry's nodes, about 3.4 KiB (some 16 nodes per \
             job: their hash table, slots of 72 bytes at 7/8 load at most, and the paths, data \
             and child lists; absent on ZooKeeper and etcd); the runner's task, 2.1 KiB in one \
             block (the `JobRunner` with its protocol inline, 1,656 bytes of it the protocol's \
             own state: the states set only during a fire or a request are boxed); the view, \
             1.6 KiB (a tree of the job's path segments and the nodes' data); the timer heap, \
             the driver's routes and watch entries, the mailbox, about 0.7 KiB. 2026-11-27 took \
             about 1.2 KiB off (this section's slope was 10.7 KiB per job before them): \
             registration's list of the nodes it made sure of, kept for the job's life, is \
             dropped once the view \
             shows them; the narrow scope a job builds to check its watch is kept only while \
             it waits for it; the scope's own copies of five paths are gone; the registry's \
             child lists are boxed slices (8 bytes less in every slot of its table). The \
             protocol's state grew back to 2,040 bytes with the correctness fixes of \
             2026-11-28 and 29 (race fences, catch-up memos, departures a raise is owed for); \
             on 2026-11-30 it went to 1,544: what a job holds only after something went wrong \
             (the last error, lost races, garbage reported and the repairs it owes, a \
             catch-up held back by the clock) sits behind one pointer allocated the first \
             time it is needed, the instance's id and IP are shared by the process's jobs \
             rather than copied into each, and so are the protocol's settings; the failover \
             state (the queue's entries seen, the items claimed, a claim's lost race) joined \
             the boxed one after that (this section's slope went from 9.8 to 9.4 KiB in \
             memory, from 10.2 to 10.0 on ZooKeeper, before that last step; figures to two \
             decimals since, the ZooKeeper one being that close to the target).\n",
        );
    }
    if let Some(k) = per_job(results, contenders::SHARDCRON_ZK) {
        body.push_str(
            "\n**Where a job's memory goes on ZooKeeper.** The process holds no copy of the \
             registry. The ZooKeeper backend's event feed keeps, per watched node, which change \
             its subscribers were shown (zxids: to tell its own writes' events from others' and \
             drop a read that shows nothing new; `registry-zk/src/watch/`), and since \
             2026-11-28 not the data, which the subscribers (the core's view) hold: a \
             subscriber shown nodes that another subscriber's watch already covered gets them \
             read again. A heap profile of 1,000 jobs (heaptrack, 2026-11-28, 7.5 KiB of heap \
             per job, 9.1 the day before): the runner, 2.1 KiB; the core's view, 1.7 KiB; the \
             ZooKeeper client's persistent watches, one per narrow-scope entry (some 20 per job \
             of one item), 0.9 KiB; the feed's view, 0.9 KiB (1.8 before: its entries are \
             grouped by job in sorted vectors without spare room, 40 bytes each besides the \
             rest of their path, in place of a B-tree of 72-byte entries about half full); the \
             feed's bookkeeping of its watchers, 0.2 KiB; the client's receive buffer, the \
             driver's routes and timers, the mailboxes, the rest. This section's slope was \
             12.2 KiB per job on 2026-11-27 morning and 10.9 in the evening.\n",
        );
        if k >= 10.0 {
            body.push_str(
                "\n**Why shardcron on ZooKeeper misses 10 KiB per job.** What is left besides \
                 the core's own state (the runner, the view) is the client's: its watches and \
                 the feed's record of each watched node; see above. Until 2026-11-30 about \
                 1 KiB per job more was memory freed but kept by glibc, from the feed's copies \
                 of its whole watch at every change of scope; the feed now applies a change's \
                 own entries (see Registering, below). A figure at or above 10 KiB now means \
                 the client's or the core's state grew: compare a heap profile with the one \
                 above.\n",
            );
        } else {
            body.push_str(
                "\n**How close to 10 KiB.** Per job the ZooKeeper client's watches and the \
                 feed's record of each watched node cost about as much as the runner. The \
                 figure read 9.9-10.4 KiB on 2026-11-30 before the feed stopped copying its \
                 whole watch at every change of scope (vectors of over 100,000 paths at \
                 10,000 jobs, whose freed memory glibc kept: 8.84 KiB with \
                 `GLIBC_TUNABLES=glibc.malloc.trim_threshold=0`), and 8.49 in the first child \
                 after it. The table's figure is one run of each child.\n",
            );
        }
    }
    if per_job(results, contenders::SHARDCRON_ETCD).is_some() {
        body.push_str(
            "\n**On etcd** the process holds, besides the core's state, the watch task's \
             ranges: one etcd watch per entry of the minimal form of the process's scope, some \
             20 per job of one item, all on one gRPC stream (`registry-etcd/src/watch.rs`). \
             Until 2026-11-30 this section's slope was about 20 KiB per job from 1,000 to \
             3,000 jobs (32 KiB per job at 1,000), the registrations slowing down faster than \
             the count grew: every change of scope cloned the whole scope and rebuilt the \
             list of ranges, every response looked its watch up in that list, and a resync \
             (etcd holds back a watch of a stream whose buffer is full, and its events then \
             come out of the registry's order: the task reads its scope again) read every \
             range at once, tens of thousands of concurrent requests whose buffers glibc kept \
             afterwards. A change of scope now costs what it changes (the scope kept as its \
             minimal form plus the few entries that form leaves out, a range found by its \
             watch id, which is its slot, or by a hash of its entry; a property test holds the \
             form to the scope's, and debug builds check it at every change), a resync reads \
             32 ranges at a time (a job's ranges as one read of its subtree since session \
             44; the jobs here never fire, so they keep one range each), and the stream is \
             read on while a change's new ranges are read. The etcd server does most of the registering's work: 15 `Txn` and 13 \
             `Range` requests per registered job, and its CPU per job grows with the count \
             (14 ms of CPU at 1,000 jobs, 22 ms at 3,000 on this machine, against 4 ms \
             of the process's); the registering column is mostly its time.\n\n\
             **The etcd figure moves from run to run**, more than the others: three runs of \
             the 10,000-job child on 2026-11-30, the same code, read 84.5 MiB (the table of \
             that day), 121.0 and 122.5 MiB: 7.3 to 10.9 KiB per job. What moves it is the \
             resyncs. One run of 10,000 registrations resynced 68 times, once every 3 s, each \
             time reading the whole scope (some 200,000 ranges) into one snapshot that the \
             core's view then takes in whole; how many come, and when, changes from run to \
             run, and so does the memory glibc keeps after them. They come from etcd: a watch \
             created while the registrations' own writes land starts in the past, and etcd \
             catches it up in its sync loop (every 100 ms) while the stream's other watches go \
             on; a watch whose stream buffer is full (128 responses in etcd 3.4) is held back \
             likewise. That watch's events then come out of the registry's order, which the \
             task does not deliver. The client's HTTP/2 flow-control windows were part of it: tonic's \
             defaults (64 KiB per stream and per connection, which `etcd-client` does not \
             expose) stall etcd's sending under a burst of events. With 4 MiB per stream and \
             16 MiB per connection (`registry-etcd/src/channel.rs`, after the table's run), \
             registering 1,000 and 3,000 jobs resynced 11, 2, 1 and 6 times against 16, 13, 1 \
             and 24 without (the two builds alternated on one etcd): fewer, not none. On \
             2026-12-01 (session 45) two changes, measured on the 10,000-job child, each run \
             on a fresh etcd, the builds alternated: such an event makes the task read the \
             scope again on the same stream, its watches kept, instead of opening every watch \
             afresh (which started some of the new watches in the past again); and the core's \
             view takes a snapshot in place, a node that did not change keeping its memory, \
             where it used to free and allocate every node and path segment again, interleaved \
             with the snapshot's own strings. Before: 121.3 and 121.1 MiB (11.0 KiB per \
             job with this table's 1-job figure; 92 and 100 resyncs); the first change alone: \
             120.6 MiB (105 reads); both: 106.2, 105.1, 108.8 and 106.4 MiB (112, 98, 118 and \
             95 reads), 9.38 to 9.76 KiB per job, and the table's own run 9.65: under 10 KiB, \
             by little. The reads still come, about one every 1.6 s while \
             registering, each a snapshot of the whole scope (150,000 nodes at the end) that \
             sets the heap's high-water mark; most are for a watch just added for a \
             registering job, whose own registration writes come late.\n",
        );
    }
    body.push_str(
        "\ntokio-cron-scheduler keeps a job as a record in a map (no task per job) and polls the \
         map every 500 ms, hence its ~1 KiB (and its lateness, section 1).\n\n\
             **Registering.** Each registration changes the process's watch scope twice (the \
             job's whole subtree while it registers, its narrow scope after). Until 2026-11-25 \
             every change sent the whole union of the jobs' scopes, which the driver, the view \
             and the backend each compared with the old one: registering jobs one after the \
             other was quadratic (10,000 in memory: 114 s; 1,000 / 3,000 on ZooKeeper: 11.6 / \
             61 s). A change now carries only the entries removed and added (`ScopeChange`), \
             and the driver, the view and the in-memory registry apply it entry by entry. The \
             ZooKeeper and etcd backends still apply it to the stream's whole scope (a pass \
             over it per change, tens of thousands of entries at 10,000 jobs), hence the \
             ZooKeeper column's registering time, which grows faster than the count; the \
             ZooKeeper feed's part of it was quadratic until 2026-11-28 (the watches to add and \
             remove were found by a linear search of one scope per entry of the other) and is \
             one pass now. That pass was still the process's main cost on 2026-11-30: a CPU \
             profile of 4,000 registrations on ZooKeeper put 52 % of the process's time in \
             the feed's change of scope, most of it the union of its watch with the \
             subscriber's scope (an insertion and a binary search per entry), that union's \
             minimal form (a binary search per ancestor of every entry) and the check that the \
             watch includes the new scope. The union is now one merge of the two sorted \
             lists, and the minimal form and the inclusion look the roots up in a hash set: \
             at 115,000 entries (10,000 jobs, half of them in narrow scopes) union and minimal \
             form took 119 ms and take 20, the inclusion 34-41 ms and 17 (property tests hold \
             each to the answers of the old form). Later that day the feed stopped computing \
             the union at all: it widens its watch by the entries a change adds that the watch \
             does not cover (and drops the watches those make redundant, found as one range of \
             sorted entries below each), then narrows it by the entries the change removes \
             that no subscriber still has (bringing back the subscribers' entries below a \
             dropped subtree), and applies both to its sorted lists in one pass that moves \
             rather than copies them; a property test holds the result to the union computed \
             whole, and debug builds check it at every change. 2,000 registrations on \
             ZooKeeper: 11.1 s of CPU and 42.8 s before, 6.4 s and 34.7 s after (the rest is \
             waiting for the server's fsynced writes). Registering 10,000 every-second jobs \
             in memory (section 1's child, whose jobs fire as they register) fell that day \
             from 21.1 s to 8.2 s: at each change of scope the core's view forgot every value it had derived from a node under the \
             job's root, by a pass over all of them (a hash table of one entry per job and \
             more); it now forgets those of the nodes the change dropped, added or settled.\n",
    );
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
        (contenders::SHARDCRON_ETCD, "on etcd: the scheduler process alone"),
    ] {
        let target = format!("< 10 KiB memory per job ({what})");
        match per_job(results, s) {
            Some(k) if k >= 10.0 => {
                verdicts.push(Verdict::new(target, format!("{k:.2} KiB"), false).note(
                    "the job's nodes held by the registry (or its client), the cache and the \
                     runner's state; see the section",
                ))
            }
            Some(k) if s == contenders::SHARDCRON_ETCD => {
                verdicts.push(Verdict::new(target, format!("{k:.2} KiB"), true).note(
                    "one run; on etcd the figure moves with the reads of the scope from run to \
                     run (four more runs on 2026-12-01: 9.38 to 9.76 KiB): see the section",
                ))
            }
            Some(k) => verdicts.push(Verdict::new(target, format!("{k:.2} KiB"), true)),
            None if s != contenders::SHARDCRON && !results.iter().any(|r| r.scheduler == s) => {
                verdicts.push(Verdict::not_measured(target, "no server in this run"))
            }
            None => verdicts.push(Verdict::not_measured(target, "a child failed")),
        }
    }
    Section { body, verdicts }
}
