//! The simulator's own view of every job's reshard flag (`leader/sharding/necessary`): a
//! registry client of its own watches the namespace and notes each change of a flag in the
//! trace: whether it is raised, with the raise time its detail (`shardcron/necessary`) holds. The checker reads those notes to tell which fires fell due while a reshard was asked
//! for, and so wait for it and answer to the assignment it makes. This is the registry's truth,
//! not what the instances say they did: a flag an operator wrote counts the same.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use shardcron_core::registry::{CoordinatorRegistry, Node, WatchEvent};
use shardcron_registry_mem::MemRegistry;

use crate::trace::{Note, Trace};

/// The path suffix of a job's reshard flag, under `/{job}`.
const FLAG: &str = "/leader/sharding/necessary";
/// The path suffix of its detail, which holds the time it was raised.
const DETAIL: &str = "/shardcron/necessary";

/// Notes every change of a reshard flag until the client's watch ends. Runs as a task of the
/// simulation; the client is one nobody breaks (no fault targets it), so its events come at
/// the instant of each write.
pub(crate) async fn record(client: MemRegistry, trace: Trace) {
    let mut stream = match client.watch("/").await {
        Ok(stream) => stream,
        Err(e) => {
            let what = "the simulator's watch of the reshard flags".to_owned();
            trace.note(0, Note::Ignored { what, why: e.to_string() });
            return;
        }
    };
    // The flags and their details as the registry holds them, and the flags as last noted,
    // to note changes only.
    let mut flags = Flags::default();
    let mut seen: BTreeMap<String, Option<String>> = BTreeMap::new();
    while let Some(event) = stream.next().await {
        let mut touched: Vec<String> = Vec::new();
        match event {
            WatchEvent::Resync { nodes } => {
                touched.extend(flags.raised.iter().chain(flags.details.keys()).cloned());
                flags = Flags::default();
                touched.extend(nodes.iter().filter_map(|(path, node)| flags.put(path, node)));
            }
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                touched.extend(flags.put(&path, &node));
            }
            WatchEvent::Deleted { path } => touched.extend(flags.remove(&path)),
            // This watch's scope never changes.
            WatchEvent::Rescoped { .. } => {}
        }
        touched.sort();
        touched.dedup();
        for job in touched {
            let data = flags.noted(&job);
            if seen.get(&job) != Some(&data) {
                seen.insert(job.clone(), data.clone());
                trace.note(0, Note::Flag { job, data });
            }
        }
    }
}

/// Per job: whether the flag exists, and what its detail holds (the raise time, which
/// shardcron keeps beside ElasticJob's empty flag).
#[derive(Default)]
struct Flags {
    raised: BTreeSet<String>,
    details: BTreeMap<String, String>,
}

impl Flags {
    /// Takes a node that now holds `node`; the job whose flag it is, if it is one.
    fn put(&mut self, path: &str, node: &Node) -> Option<String> {
        let (job, part) = job_of(path)?;
        match part {
            Part::Flag => self.raised.insert(job.clone()),
            Part::Detail => self.details.insert(job.clone(), node.text().into_owned()).is_none(),
        };
        Some(job)
    }

    /// Takes a node deleted; the job whose flag it was, if it was one.
    fn remove(&mut self, path: &str) -> Option<String> {
        let (job, part) = job_of(path)?;
        match part {
            Part::Flag => self.raised.remove(&job),
            Part::Detail => self.details.remove(&job).is_some(),
        };
        Some(job)
    }

    /// The flag of `job` as noted: raised with its detail's data, or gone.
    fn noted(&self, job: &str) -> Option<String> {
        self.raised.contains(job).then(|| self.details.get(job).cloned().unwrap_or_default())
    }
}

/// Which of a flag's two nodes a path is.
enum Part {
    /// `leader/sharding/necessary`, as ElasticJob writes it (empty).
    Flag,
    /// `shardcron/necessary`: the raise time.
    Detail,
}

/// The job whose flag (or flag detail) `path` is, if it is one.
fn job_of(path: &str) -> Option<(String, Part)> {
    let (rest, part) = match path.strip_suffix(FLAG) {
        Some(rest) => (rest, Part::Flag),
        None => (path.strip_suffix(DETAIL)?, Part::Detail),
    };
    let job = rest.strip_prefix('/')?;
    (!job.is_empty() && !job.contains('/')).then(|| (job.to_owned(), part))
}
