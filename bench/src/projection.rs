//! Section 3b, the registry load of large clusters, measured in the simulator and projected to
//! 100 instances × 10,000 jobs (issue #15).
//!
//! Real servers on this machine take clusters up to 30 instances (section 3). The simulator
//! runs the unchanged core of every instance against one in-memory registry server, which
//! counts what it receives from each client (every operation, a transaction being one) and
//! what it sends them (the change events it queues to their watches): the counterparts of
//! ZooKeeper's `srvr` "Received" and "Sent", without session pings (the in-memory registry has
//! none). A cluster of N instances runs J jobs without faults; the load is taken over the
//! steady part of the run (from the quiet phase to the final one: every job registered and
//! fired several times before it starts), per unit of work: per tick in which an instance
//! starts items (requests) and per item run (events). Whether those are flat in N is the
//! question; the projection scales the figures measured at the largest cluster to the work of
//! 10,000 jobs.

use std::collections::BTreeSet;
use std::time::Duration;

use shardcron_core::runtime::SchedulerEvent;
use shardcron_sim::trace::{Phase, What};
use shardcron_sim::{Builder, FaultProfile, JobSpec, LoadSample, Report};

use crate::report::{thousands, Section, Verdict};
use crate::Error;

/// Items per job: ten, spread over the instances by job name (`ROUND_ROBIN`), so that a large
/// cluster's instances each hold a few items instead of the first ten holding them all.
const ITEMS: u32 = 10;
/// Every job fires every `PERIOD_S` seconds, the jobs spread evenly over the period.
const PERIOD_S: u32 = 5;
/// Virtual time before the measured window: every instance starts, registers every job and
/// the jobs fire a few times.
const WARM_UP: Duration = Duration::from_secs(30);
/// The projection: this many instances and jobs, each job firing once a minute, the jobs
/// spread over the minute.
const PROJECTED_INSTANCES: u64 = 100;
const PROJECTED_JOBS: u64 = 10_000;
const PROJECTED_PERIOD_S: u64 = 60;

/// (instances, jobs) of each point.
fn points(quick: bool) -> Vec<(usize, usize)> {
    if quick {
        vec![(3, 50), (10, 50), (30, 50), (10, 250)]
    } else {
        vec![(3, 50), (10, 50), (30, 50), (50, 50), (100, 50), (10, 250)]
    }
}

/// What one run measured over its steady window.
#[derive(Debug, Clone)]
struct Point {
    instances: usize,
    jobs: usize,
    window_s: f64,
    /// Items started in the window.
    item_runs: usize,
    /// Distinct (instance, fire time) with at least one item started: the ticks in which an
    /// instance had work.
    busy_ticks: usize,
    operations: u64,
    events: u64,
    wall_s: f64,
    violations: usize,
}

impl Point {
    /// Requests per tick in which an instance started items: the batcher's unit of work.
    fn received_per_busy_tick(&self) -> f64 {
        ratio(self.operations, self.busy_ticks)
    }
    fn received_per_item_run(&self) -> f64 {
        ratio(self.operations, self.item_runs)
    }
    /// Watch events per item run: the fan-out of the writes.
    fn sent_per_item_run(&self) -> f64 {
        ratio(self.events, self.item_runs)
    }
}

fn ratio(n: u64, of: usize) -> f64 {
    n as f64 / of.max(1) as f64
}

fn workload(jobs: usize) -> Vec<JobSpec> {
    (0..jobs)
        .map(|j| {
            let offset = j as u32 % PERIOD_S;
            JobSpec::new(format!("p{j}"), format!("{offset}/{PERIOD_S} * * * * ?"), ITEMS)
                .item_ms(100)
                .failover(true)
                .strategy("ROUND_ROBIN")
        })
        .collect()
}

pub fn run(quick: bool) -> Result<Section, Error> {
    let mut results = Vec::new();
    for (instances, jobs) in points(quick) {
        eprintln!("projection: {instances} instances × {jobs} jobs");
        let report = Builder {
            seed: 1,
            instances,
            specs: workload(jobs),
            profile: FaultProfile::None,
            duration: WARM_UP,
            ..Builder::default()
        }
        .build()
        .run();
        results.push(measure(instances, jobs, &report)?);
    }
    Ok(render(&results))
}

/// The load of the window from the quiet phase to the final one.
fn measure(instances: usize, jobs: usize, report: &Report) -> Result<Point, Error> {
    let sample = |phase: Phase| -> Result<LoadSample, Error> {
        report.load.iter().find(|s| s.phase == phase).copied().ok_or_else(|| {
            crate::err(format!(
                "the simulation of {instances} × {jobs} never reached its {phase:?} phase"
            ))
        })
    };
    let (from, to) = (sample(Phase::Quiet)?, sample(Phase::Final)?);
    if from.clients != instances || to.clients != instances {
        return Err(crate::err(format!(
            "{instances} × {jobs}: {} then {} instances had a registry client; the load of a \
             window with restarts is not comparable",
            from.clients, to.clients
        )));
    }
    // A client replaced by a restart starts counting from 0 again.
    let (Some(operations), Some(events)) =
        (to.operations.checked_sub(from.operations), to.events.checked_sub(from.events))
    else {
        return Err(crate::err(format!(
            "{instances} × {jobs}: the counts went down in the window (an instance restarted); \
             its load is not comparable"
        )));
    };
    let mut item_runs = 0;
    let mut busy_ticks = BTreeSet::new();
    for entry in report.entries.iter().filter(|e| e.at >= from.at_ms && e.at < to.at_ms) {
        if let What::Event { event: SchedulerEvent::ItemStarted { fire_ms, .. }, .. } = &entry.what
        {
            item_runs += 1;
            busy_ticks.insert((entry.who, *fire_ms));
        }
    }
    Ok(Point {
        instances,
        jobs,
        window_s: (to.at_ms - from.at_ms) as f64 / 1000.0,
        item_runs,
        busy_ticks: busy_ticks.len(),
        operations,
        events,
        wall_s: report.wall.as_secs_f64(),
        violations: report.violations.len(),
    })
}

fn render(results: &[Point]) -> Section {
    let mut body = format!(
        "Real servers on this machine take clusters up to 30 instances (section 3). For larger \
         ones the simulator runs the unchanged core of N instances against one in-memory \
         registry server, which counts what it **receives** from the instances (every \
         operation; a transaction is one) and what it **sends** them (the change events it \
         queues to their watches: the fan-out of every write to whoever watches it). Jobs of \
         {ITEMS} items (`ROUND_ROBIN`: each job's items go to ten instances chosen by its \
         name), failover and monitorExecution on, items of 100 ms, every job firing every \
         {PERIOD_S} s with the jobs spread evenly over the {PERIOD_S} s. No fault; the window \
         runs from the simulator's quiet phase to its final one ({} s of virtual time after \
         every instance started, registered every job and fired it a few times). A *busy \
         tick* is one instance in one second in which it started items: the batcher gives it \
         one write to start them all and one to end them.\n\n\
         | instances × jobs | window | item runs | busy ticks | item runs per busy tick | received per busy tick | received per item run | sent per item run | wall | violations |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        WARM_UP.as_secs()
    );
    for p in results {
        body.push_str(&format!(
            "| {}×{} | {:.0} s | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.0} s | {} |\n",
            p.instances,
            p.jobs,
            p.window_s,
            thousands(p.item_runs as u64),
            thousands(p.busy_ticks as u64),
            ratio(p.item_runs as u64, p.busy_ticks),
            p.received_per_busy_tick(),
            p.received_per_item_run(),
            p.sent_per_item_run(),
            p.wall_s,
            p.violations,
        ));
    }
    body.push_str(&format!(
        "\nWhat to read: *received per busy tick* is the batcher's two writes, whatever the \
         cluster size and however many items the tick starts. *Sent per item run* counts the \
         events of the instance's own writes (the marker's creation and deletion, the \
         ledger's two updates per job fire): no other instance watches another's markers and \
         ledgers, so it does not grow with the cluster. Below {ITEMS} instances an instance \
         holds several items of each job fire, which share its ledger's updates, hence the \
         lower figure there; from {ITEMS} instances on, each holds one item of a job fire at \
         most, and the figures of the rows with {} jobs compare like with like.\n",
        results.first().map_or(0, |p| p.jobs)
    ));
    let mut verdicts = Vec::new();
    // Like with like: the rows of the first job count where each instance holds at most one
    // item of a job fire.
    let jobs = results.first().map_or(0, |p| p.jobs);
    let sweep: Vec<&Point> =
        results.iter().filter(|p| p.jobs == jobs && p.instances >= ITEMS as usize).collect();
    if let (Some(small), Some(large)) = (sweep.first(), sweep.last()) {
        // Flat: what one instance's tick of work and one item run cost the server may not
        // grow with the cluster (the old design's grew with it: every write reached every
        // instance). A job fire does cost more in a larger cluster, as its items are spread
        // over more instances, each writing for its own.
        let spread = |f: &dyn Fn(&Point) -> f64| {
            let values: Vec<f64> = sweep.iter().map(|p| f(p)).collect();
            let max = values.iter().copied().fold(0.0, f64::max);
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            max / min.max(1e-9)
        };
        let received = spread(&Point::received_per_busy_tick);
        let sent = spread(&Point::sent_per_item_run);
        let met = received <= 1.5 && sent <= 1.5;
        let mut verdict = Verdict::new(
            format!(
                "server load per unit of work flat in the cluster size ({} → {} instances, \
                 simulator)",
                small.instances, large.instances
            ),
            format!(
                "received per busy tick {:.2} → {:.2}, sent per item run {:.2} → {:.2} \
                 (largest / smallest: ×{received:.2}, ×{sent:.2})",
                small.received_per_busy_tick(),
                large.received_per_busy_tick(),
                small.sent_per_item_run(),
                large.sent_per_item_run(),
            ),
            met,
        );
        if !met {
            verdict.note = "see the table: what grows with the instances".into();
        }
        verdicts.push(verdict);
        body.push_str(&projection(large));
    }
    Section { body, verdicts }
}

/// The projection to 100 instances × 10,000 jobs from the per-unit figures of `at`.
fn projection(at: &Point) -> String {
    let fires_per_s = PROJECTED_JOBS as f64 / PROJECTED_PERIOD_S as f64;
    let items_per_s = fires_per_s * f64::from(ITEMS);
    // Every second, the items due go to most of the instances: at most one busy tick per
    // instance per second, at most one per item run.
    let busy_per_s = (PROJECTED_INSTANCES as f64).min(items_per_s);
    let received = at.received_per_busy_tick() * busy_per_s;
    let sent = at.sent_per_item_run() * items_per_s;
    // Without narrow scopes and batching: one start and one end write per item run, each
    // reaching every instance.
    let unbatched = 2.0 * items_per_s;
    let fanned = unbatched * PROJECTED_INSTANCES as f64;
    format!(
        "\n**Projection to {PROJECTED_INSTANCES} instances × {} jobs** of {ITEMS} items, each \
         job firing once a minute, the jobs spread over the minute: {:.0} job fires and {} item \
         runs per second. With the figures measured at {}×{} (received per busy tick, sent per \
         item run; every instance busy every second, as {} items a second over \
         {PROJECTED_INSTANCES} instances make it): the server receives about **{} requests \
         per second** and sends about **{} watch events per second**. For comparison, one \
         write to start and one to end each item run, each reaching every instance (ElasticJob \
         writes more than that per item, and every instance watches the whole namespace), \
         would be {} writes and {} notifications per second. What the projection assumes: the \
         per-busy-tick and per-item figures stay as measured (the table shows them flat in the \
         cluster size and the job count), the server keeps up, and the jobs are spread over \
         the minute (10,000 jobs due in the same second would give each instance one busy \
         tick a minute: far fewer requests, as many events).\n",
        thousands(PROJECTED_JOBS),
        fires_per_s,
        thousands(items_per_s.round() as u64),
        at.instances,
        at.jobs,
        thousands(items_per_s.round() as u64),
        thousands(received.round() as u64),
        thousands(sent.round() as u64),
        thousands(unbatched.round() as u64),
        thousands(fanned.round() as u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(instances: usize, busy_ticks: usize, operations: u64, events: u64) -> Point {
        Point {
            instances,
            jobs: 50,
            window_s: 27.0,
            item_runs: 1_000,
            busy_ticks,
            operations,
            events,
            wall_s: 1.0,
            violations: 0,
        }
    }

    #[test]
    fn flat_load_per_unit_of_work_meets_the_target() {
        // Three instances (below the item count) cost less per item run: not compared.
        let flat =
            [point(3, 30, 60, 2_500), point(10, 100, 200, 4_000), point(100, 600, 1_200, 4_000)];
        let section = render(&flat);
        assert_eq!(section.verdicts.len(), 1);
        assert_eq!(section.verdicts[0].status, crate::report::Status::Met);
        assert!(section.verdicts[0].target.contains("10 → 100 instances"));
        assert!(section.body.contains("Projection to 100 instances × 10,000 jobs"));
    }

    #[test]
    fn events_growing_with_the_cluster_miss_it() {
        // Every write reaching every instance: events per item run ten times larger at 100.
        let fanned = [point(10, 100, 200, 4_000), point(100, 600, 1_200, 40_000)];
        let section = render(&fanned);
        assert_eq!(section.verdicts[0].status, crate::report::Status::Missed);
        assert!(!section.verdicts[0].note.is_empty());
    }
}
