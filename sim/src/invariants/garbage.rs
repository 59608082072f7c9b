//! Invariant 6: garbage in the registry (GUARANTEES.md, section 6).
//!
//! The simulator's operator fault writes garbage into a node of a job, or deletes a node a
//! running cluster needs. The checker asks:
//! - **Reported.** Every write of garbage into a node the job reads is reported (a
//!   `registry_garbage` event naming the node, `config_rejected` for the config) by the end of
//!   the run's live phase, and so is the deletion of the config. Not asked for: values the
//!   node's format allows (an empty server node, misfire marker, ledger or flag), an instance
//!   id in a `running` marker (an orphan waiting for failover looks so), nodes of items beyond
//!   the count, deletions the cluster answers as routine (the reshard flag, the leader node, a
//!   server, an owner node while a reshard is pending, rewritten by its commit).
//! - **Fires.** A fire of the job that falls due between a corruption and its report (and a
//!   second after it; two seconds at least), or within two seconds before it (still being
//!   handled), may be lost: the report is its record. Every other
//!   fire is judged by invariant 2 as usual.
//! - **Converged.** At the live checkpoint (well within one reconcile interval after the last
//!   corruption) every node the job reads parses again: the config, the instance and server
//!   nodes, the markers, the leader node, the flag, the failover queue, the ledgers and the
//!   assignment record; invariant 4 checks that the assignment is the strategy's there.

use shardcron_core::__private::layout::{Detailed, ItemNode, JobNode, JobPaths};
use shardcron_core::__private::protocol::records::{
    parse_flag, parse_instance_id, parse_time, Assigned, FailoverEntry, InstanceRecord, Ledger,
    ServerStatus,
};
use shardcron_core::config::JobConfig;
use shardcron_core::runtime::{FireKind, SchedulerEvent};

use super::timeline::Timeline;
use super::{context, index_at, Checkpoint, Invariant, Violation};
use crate::faults::Fault;
use crate::garbage::{Junk, Target};
use crate::trace::{Entry, Note, Phase, What};
use crate::workload::Workload;

/// How long after a corruption fires of its job may be lost, at least.
const LOSS_MS: i64 = 2_000;
/// And after its report (the cluster acts on what it reports at once).
const AFTER_REPORT_MS: i64 = 1_000;
/// How long garbage that names the fire a run owes may blur later runs (a queued failover
/// or a catch-up waits at most for a session timeout and a run or two).
const BLUR_MS: i64 = 60_000;

/// One corruption as applied, and when it was first reported.
#[derive(Debug, Clone)]
pub(crate) struct Corrupted {
    at: i64,
    idx: usize,
    job: String,
    path: String,
    target: Target,
    junk: Option<Junk>,
    reported: Option<i64>,
    /// The first reshard of the job after it (for nodes a reshard repairs).
    resharded: Option<i64>,
}

/// The corruptions of a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Corruptions {
    list: Vec<Corrupted>,
}

impl Corruptions {
    pub(crate) fn read(entries: &[Entry]) -> Self {
        let mut list: Vec<Corrupted> = Vec::new();
        for (idx, e) in entries.iter().enumerate() {
            match &e.what {
                What::Note(Note::Fault(Fault::Corrupt(c))) => list.push(Corrupted {
                    at: e.at,
                    idx,
                    job: c.job.clone(),
                    path: c.path(),
                    target: c.target,
                    junk: c.junk,
                    reported: None,
                    resharded: None,
                }),
                What::Event { event: SchedulerEvent::Sharded { job, .. }, .. } => {
                    for c in list.iter_mut().filter(|c| c.resharded.is_none() && c.job == *job) {
                        c.resharded = Some(e.at);
                    }
                }
                What::Event { event, .. } => {
                    let (job, path) = match event {
                        SchedulerEvent::RegistryGarbage { job, path, .. } => (job, Some(path)),
                        SchedulerEvent::ConfigRejected { job, .. } => (job, None),
                        _ => continue,
                    };
                    for c in list.iter_mut().filter(|c| c.reported.is_none() && c.job == *job) {
                        let config = c.target == Target::Config;
                        if path.map_or(config, |p| *p == c.path) {
                            c.reported = Some(e.at);
                        }
                    }
                }
                _ => {}
            }
        }
        Corruptions { list }
    }

    /// Whether a fire of `job` at `at` fell due while a corruption of the job was not yet acted
    /// on, or was still being handled when it landed (`handled`: when an owner of the item
    /// first handled the fire).
    pub(crate) fn excuses(&self, job: &str, at: i64, handled: &dyn Fn() -> Option<i64>) -> bool {
        self.list.iter().any(|c| {
            let mut until = c.at + LOSS_MS;
            if let Some(r) = c.reported {
                until = until.max(r + AFTER_REPORT_MS);
            }
            // What a reshard repairs (an owner, the flag, the leader, the config) is repaired
            // by the next one, which may wait for a leader.
            let by_reshard = matches!(
                c.target,
                Target::Owner(_) | Target::Flag | Target::Leader | Target::Config
            );
            if let (true, Some(r)) = (by_reshard, c.resharded) {
                until = until.max(r + AFTER_REPORT_MS);
            }
            // A fire still being handled when the corruption landed counts too: due within
            // the loss window before it, or handled by its owner only at or after it.
            c.job == job
                && at <= until
                && (at >= c.at - LOSS_MS || (at < c.at && handled().is_some_and(|h| h >= c.at)))
        })
    }

    /// Whether an operator deleted `job`'s reshard flag at `at`.
    pub(crate) fn deleted_flag(&self, job: &str, at: i64) -> bool {
        self.list
            .iter()
            .any(|c| c.job == job && c.at == at && c.target == Target::Flag && c.junk.is_none())
    }

    /// Whether a second run of `item` of `job` (of `kind`, started at `at`) is a catch-up or a
    /// failover that garbage in what names its fire (a misfire marker, a ledger, a running
    /// marker, a queue entry) had run for the latest fire instead.
    pub(crate) fn explains_extra_run(&self, job: &str, item: u32, kind: FireKind, at: i64) -> bool {
        self.list.iter().any(|c| {
            let relevant = match (kind, c.target) {
                (FireKind::Misfire, Target::Misfire(n)) => n == item,
                (FireKind::Failover, Target::Ledger(_) | Target::FailoverEntry(_)) => true,
                (FireKind::Misfire | FireKind::Failover, Target::Assigned) => true,
                (FireKind::Failover, Target::Running(n)) => n == item,
                _ => false,
            };
            relevant && c.job == job && (at - BLUR_MS..=at).contains(&c.at)
        })
    }

    /// Whether garbage in `job`'s assignment record or a ledger between `from` and `to` hid who
    /// owed the catch-up of fires a crashed owner missed.
    pub(crate) fn blurs_catch_up(&self, job: &str, from: i64, to: i64) -> bool {
        self.list.iter().any(|c| {
            c.job == job
                && matches!(c.target, Target::Assigned | Target::Ledger(_))
                && (from..=to).contains(&c.at)
        })
    }

    /// Whether a corruption of `job` between `from` and `to` may have garbled which fire an
    /// interrupted run belonged to (its instance's ledger, its marker, its queue entry): its
    /// failover then runs the latest fire the survivors can tell.
    pub(crate) fn blurs_fire(&self, job: &str, from: i64, to: i64) -> bool {
        self.list.iter().any(|c| {
            c.job == job
                && (from..=to).contains(&c.at)
                && matches!(
                    c.target,
                    Target::Ledger(_) | Target::Running(_) | Target::FailoverEntry(_)
                )
        })
    }
}

/// Whether instance `who` was up at `at` and stayed up a little (to see the change).
fn up_around(tl: &Timeline, who: usize, at: i64) -> bool {
    tl.not_up(who, at).is_none() && tl.went_down(who, at, at + LOSS_MS).is_none()
}

/// The instance that last won the job's election at or before `at`, and when.
fn leader_at(entries: &[Entry], job: &str, at: i64) -> Option<(usize, i64)> {
    entries[..=index_at(entries, at)].iter().rev().find_map(|e| match &e.what {
        What::Event { event: SchedulerEvent::LeaderElected { job: j }, .. } if j == job => {
            Some((e.who, e.at))
        }
        _ => None,
    })
}

/// Whether the node `c` corrupted was written again (by the next corruption of it, the job's
/// next reshard, which rewrites every owner node, or, for a server node, an operator's disable
/// or enable of the server) before the job's next leader was elected.
fn overwritten_before_a_leader(c: &Corrupted, entries: &[Entry]) -> bool {
    let elected = next_election(c, entries);
    let written = entries.iter().skip(c.idx + 1).find_map(|e| match &e.what {
        What::Note(Note::Fault(Fault::Corrupt(_))) => corrupts_again(c, e),
        // An operator's disable or enable writes the server node.
        What::Note(Note::Work {
            work:
                Workload::DisableServer { job, instance } | Workload::EnableServer { job, instance },
            error: None,
        }) if *job == c.job && c.target == Target::Server(*instance) => Some(e.at),
        _ => None,
    });
    let rewritten = [written, c.resharded].into_iter().flatten().min();
    rewritten.is_some_and(|w| elected.is_none_or(|l| w < l))
}

/// Whether garbage `c` over the config was written over (by the next corruption of it) while
/// no instance was up, from the garbage to that write.
fn config_unread(c: &Corrupted, tl: &Timeline, entries: &[Entry]) -> bool {
    let written = entries.iter().skip(c.idx + 1).find_map(|e| corrupts_again(c, e));
    written.is_some_and(|w| (1..=tl.down.len()).all(|i| tl.down_throughout(i, c.at, w)))
}

/// When `e` is a later corruption of the node `c` corrupted, its time.
fn corrupts_again(c: &Corrupted, e: &Entry) -> Option<i64> {
    match &e.what {
        What::Note(Note::Fault(Fault::Corrupt(other))) if other.path() == c.path => Some(e.at),
        _ => None,
    }
}

/// Whether a count change removed item `n`, whose node `c` corrupted, before the job's next
/// leader was elected.
fn removed_before_a_leader(c: &Corrupted, n: u32, tl: &Timeline, entries: &[Entry]) -> bool {
    let elected = next_election(c, entries);
    tl.configs.get(&c.job).is_some_and(|configs| {
        configs.iter().any(|(t, s)| *t > c.at && elected.is_none_or(|l| *t < l) && s.count <= n)
    })
}

/// When the job's next leader after the corruption `c` was elected, if one was.
fn next_election(c: &Corrupted, entries: &[Entry]) -> Option<i64> {
    entries.iter().skip(c.idx + 1).find_map(|e| match &e.what {
        What::Event { event: SchedulerEvent::LeaderElected { job }, .. } if *job == c.job => {
            Some(e.at)
        }
        _ => None,
    })
}

/// Whether the session of the leader at `c` ended (a stop, or its end) within a second of it.
fn leader_session_ended(c: &Corrupted, tl: &Timeline, entries: &[Entry]) -> bool {
    // The leader as the corruption found it (a successor may win in the same millisecond).
    let leader = entries[..c.idx].iter().rev().find_map(|e| match &e.what {
        What::Event { event: SchedulerEvent::LeaderElected { job }, .. } if *job == c.job => {
            Some((e.who, e.at))
        }
        _ => None,
    });
    leader.is_some_and(|(w, _)| {
        tl.went_down(w, c.at - 1, c.at + AFTER_REPORT_MS)
            .is_some_and(|(_, why)| why.contains("stop") || why.contains("session"))
    })
}

/// Whether the holder of item `n`'s `running` marker (the instance that last started the
/// item before `c`) was down at `c`, and the marker was written over before that holder came
/// back or its session ended while another instance was up (its departure shown to it); or,
/// the job's failover off, the holder stayed down until its session ended.
fn marker_unread(c: &Corrupted, n: u32, tl: &Timeline, entries: &[Entry]) -> bool {
    let holder = entries[..c.idx].iter().rev().find_map(|e| match &e.what {
        What::Event { event: SchedulerEvent::ItemStarted { job, item, .. }, .. }
            if *job == c.job && *item == n =>
        {
            Some(e.who)
        }
        _ => None,
    });
    let Some(holder) = holder else { return false };
    if tl.not_up(holder, c.at).is_none() {
        return false;
    }
    let later = entries.iter().skip(c.idx + 1);
    // Its session's end shows its departure only to an instance up then.
    let survivor_up =
        |at: i64| (1..=tl.down.len()).any(|w| w != holder && tl.not_up(w, at).is_none());
    // Without failover nobody reads a departed instance's markers (nothing is queued from
    // them): a marker is its holder's alone, and one that went with its session while the
    // holder was cut off from the corruption on was read by nobody (1 × 3 `garbage` seed
    // 1,054,040,436 and 5 × 3 seed 1,791,048,947 of a job file with failover off: the holder
    // partitioned, garbage over its marker, its session expired before the heal).
    let failover = |at: i64| tl.config_at(&c.job, at).is_none_or(|s| s.failover);
    let gone_unread = later.clone().find_map(|e| match &e.what {
        What::Note(Note::Started) if e.who == holder => Some(false),
        What::Note(Note::SessionEnded { .. }) if e.who == holder => {
            Some(!failover(c.at) && !failover(e.at) && tl.down_throughout(holder, c.at, e.at))
        }
        _ => None,
    });
    if gone_unread == Some(true) {
        return true;
    }
    let back = later.clone().find_map(|e| match &e.what {
        What::Note(Note::Started) if e.who == holder => Some(e.at),
        What::Note(Note::SessionEnded { .. }) if e.who == holder && survivor_up(e.at) => Some(e.at),
        _ => None,
    });
    let written = later.clone().find_map(|e| match &e.what {
        What::Note(Note::Fault(Fault::Corrupt(other))) if other.path() == c.path => Some(e.at),
        _ => None,
    });
    written.is_some_and(|w| back.is_none_or(|b| w < b))
}

/// Whether the corruption must be reported.
fn must_report(c: &Corrupted, tl: &Timeline, entries: &[Entry]) -> bool {
    if tl.removed_by(&c.job, c.at, c.at + LOSS_MS) {
        return false;
    }
    // Who would read it: the holder of an ephemeral node (its session's end takes the node,
    // garbage and all), and the leader for most of the others: the process that won, up since
    // (one restarted under the same id is not the leader until it wins again; the node is
    // still its predecessor's, the session of a crashed process, until that session ends:
    // 2 × 1 `garbage` seed 3,373,457,995).
    // A leader whose server was disabled since it won abdicated (it bids again once enabled,
    // and a win is a new election): no leader reads the job's nodes until the next one (1 × 3
    // `garbage` seed 1,360,704,776: the only instance disabled, garbage over an owner node
    // written over again before it was enabled and won).
    let leader_up = leader_at(entries, &c.job, c.at).is_some_and(|(w, won)| {
        up_around(tl, w, c.at)
            && tl.went_down(w, won, c.at).is_none()
            && !tl.server_disabled_between(&c.job, w, won, c.at)
    });
    match c.target {
        Target::Instance(i) if !up_around(tl, i, c.at) => return false,
        Target::Leader if !leader_up => return false,
        // The leader node is ephemeral: garbage written into it as its leader's session ended
        // (a graceful stop closes it at once) went with it (2 × 1 `garbage` seed 2,601,736,208:
        // written in the millisecond the leader stopped; the other instance won at once).
        Target::Leader if leader_session_ended(c, tl, entries) => return false,
        // A `running` marker is read by its holder and by whoever queues its run for failover:
        // garbage over the marker of a holder that was down, written over again before the
        // holder came back or its session ended, was nobody's to read (2 × 1 `garbage` seed
        // 4,071,823,425: the holder crashed, the other instance crashed before the departure
        // showed, and an instance id replaced the garbage before the holder's restart).
        Target::Running(n) if marker_unread(c, n, tl, entries) => return false,
        // A config deleted while no leader could see it may be published again by an
        // instance starting before any leader looks.
        Target::Config if c.junk.is_none() && !leader_up => return false,
        // Every instance reads the config: garbage written over again (deleted, say) while
        // none was up to read it was nobody's (1 × 4 `garbage` seed 3,520,240,609 over 300 s:
        // the only instance cut off, the config garbled, then deleted 6 s later).
        Target::Config if config_unread(c, tl, entries) => return false,
        // What every departure leaves until its reshard: reported only when no reshard is
        // pending (the leader reshards either way; invariant 4 checks that).
        Target::Owner(_) if c.junk == Some(Junk::DeadId) => return false,
        // The leader reads the owner nodes. With none up, garbage written over before the
        // next leader was elected was nobody's to read (3 × 1 `garbage` seed 4,003,910,573:
        // the leader's session was expiring, and the node was deleted 7 s later, before its
        // successor won); garbage still there then is the new leader's to report.
        Target::Owner(_) if !leader_up && overwritten_before_a_leader(c, entries) => return false,
        // Or its item removed by a count change before then: the new leader reads the nodes of
        // items beyond the count as nobody's (an empty owner node is what a reshard writes
        // there; 2 × 1 `garbage` seed 532,650,773: an empty owner node of item 4 written while
        // the leader was cut off, the count set to 3 1.6 s later, a leader elected 2 s after).
        Target::Owner(n) if !leader_up && removed_before_a_leader(c, n, tl, entries) => {
            return false
        }
        // A server node is read by the leader and by the server's instances: with neither up
        // (a link cut counts), garbage written over before the next leader was elected was
        // nobody's to read (2 × 1 `garbage` seed 3,427,387,281: the leader, the server's
        // only instance, cut off; an operator disabled the server 0.7 s later).
        Target::Server(i)
            if !leader_up && !up_around(tl, i, c.at) && overwritten_before_a_leader(c, entries) =>
        {
            return false
        }
        _ => {}
    }
    let count = tl.config_at(&c.job, c.at).map_or(0, |s| s.count);
    let item_gone = |n: u32| n >= count;
    match (c.target, c.junk) {
        (Target::Config, _) => true,
        (_, None) => false,
        (Target::Server(_) | Target::Misfire(_) | Target::Flag, Some(Junk::Empty)) => false,
        (Target::Running(_), Some(Junk::DeadId)) => false,
        (Target::Owner(n) | Target::Running(n) | Target::Misfire(n), _) => !item_gone(n),
        _ => true,
    }
}

pub(super) fn check(
    entries: &[Entry],
    tl: &Timeline,
    checkpoints: &[Checkpoint],
    out: &mut Vec<Violation>,
) {
    let deadline = tl.phase(Phase::Final).unwrap_or(tl.end);
    for c in &tl.garbage.list {
        if c.reported.is_none() && must_report(c, tl, entries) {
            let what = match c.junk {
                Some(junk) => format!("{junk:?} garbage written into {}", c.path),
                None => format!("{} deleted", c.path),
            };
            out.push(Violation {
                invariant: Invariant::Garbage,
                at: c.at,
                message: format!("{what} at {}; no instance reported it by {deadline}", c.at),
                context: context(entries, c.idx, Some(&c.job)),
            });
        }
    }
    let Some(cp) = checkpoints.iter().find(|c| c.phase == Phase::Live) else { return };
    if !cp.unsettled.is_empty() {
        return;
    }
    for job in tl.configs.keys().filter(|j| !tl.gone_at_end(j)) {
        let count = tl.config_at(job, cp.at).map_or(0, |s| s.count);
        let prefix = format!("/{job}/");
        let paths = JobPaths::new(job);
        for (path, (text, _)) in cp.nodes.range(prefix.clone()..) {
            if !path.starts_with(&prefix) {
                break;
            }
            let Some((_, node)) = JobNode::parse(path) else { continue };
            let data = text.as_bytes();
            let unreadable = match &node {
                // Readable as a config of this job (what validates it, custom strategies
                // and all, is the instances' business).
                JobNode::Config => match std::str::from_utf8(data).map(JobConfig::from_yaml) {
                    Ok(Ok(c)) if c.job_name() == job => None,
                    Ok(Ok(c)) => Some(format!("it names job {:?}", c.job_name())),
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some("not UTF-8 text".to_owned()),
                },
                JobNode::Instance(id) => match InstanceRecord::parse(path, data) {
                    Ok(r) if r.job_instance_id == *id => None,
                    Ok(_) => Some("it names another instance".to_owned()),
                    Err(g) => Some(g.reason),
                },
                JobNode::Server(_) => ServerStatus::parse(path, data).err().map(|g| g.reason),
                JobNode::Item(n, ItemNode::Running) if *n < count => {
                    parse_instance_id(path, data, "a running marker").err().map(|g| g.reason)
                }
                // What ElasticJob keeps empty is read by nobody: its detail is (while the
                // node exists; a detail without its node means nothing).
                JobNode::Detail(of) if !cp.nodes.contains_key(&paths.detailed(*of)) => None,
                JobNode::Detail(Detailed::Misfire(n)) if *n < count && !text.trim().is_empty() => {
                    parse_time(path, data, "a misfire marker").err().map(|g| g.reason)
                }
                JobNode::LeaderInstance => {
                    parse_instance_id(path, data, "the leader node").err().map(|g| g.reason)
                }
                JobNode::Detail(Detailed::Flag) => parse_flag(path, data).err().map(|g| g.reason),
                JobNode::Detail(Detailed::Entry(_)) => {
                    FailoverEntry::parse(path, data).err().map(|g| g.reason)
                }
                JobNode::Ledger(_) => Ledger::parse(path, data).err().map(|g| g.reason),
                JobNode::Assigned => Assigned::parse(path, data).err().map(|g| g.reason),
                _ => None,
            };
            if let Some(why) = unreadable {
                let shown: String = text.chars().take(40).collect();
                let why: String = why.chars().take(160).collect();
                out.push(Violation {
                    invariant: Invariant::Garbage,
                    at: cp.at,
                    message: format!(
                        "{path} still holds garbage at the live checkpoint ({shown:?}: {why})"
                    ),
                    context: context(entries, index_at(entries, cp.at), Some(job)),
                });
            }
        }
    }
}
