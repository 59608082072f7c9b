//! The simulator's own view of every job's reshard flag (`leader/sharding/necessary`): a
//! registry client of its own watches the namespace and notes each change of a flag in the
//! trace: whether it is raised, with the raise time its detail (`shardcron/necessary`) holds. The checker reads those notes to tell which fires fell due while a reshard was asked
//! for, and so wait for it and answer to the assignment it makes. This is the registry's truth,
//! not what the instances say they did: a flag an operator wrote counts the same.

use std::collections::BTreeMap;

use futures::StreamExt;
use shardcron_core::registry::{CoordinatorRegistry, WatchEvent};
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
    // Per job: whether the flag exists, and what its detail holds (the raise time, which
    // shardcron keeps beside ElasticJob's empty flag); and the flags as last noted, to note
    // changes only.
    let mut raised: BTreeMap<String, bool> = BTreeMap::new();
    let mut details: BTreeMap<String, String> = BTreeMap::new();
    let mut seen: BTreeMap<String, Option<String>> = BTreeMap::new();
    while let Some(event) = stream.next().await {
        let mut touched: Vec<String> = Vec::new();
        match event {
            WatchEvent::Resync { nodes } => {
                touched.extend(raised.keys().chain(details.keys()).cloned());
                raised.clear();
                details.clear();
                for (path, node) in &nodes {
                    match job_of(path) {
                        Some((job, Part::Flag)) => {
                            raised.insert(job.clone(), true);
                            touched.push(job);
                        }
                        Some((job, Part::Detail)) => {
                            details.insert(job.clone(), node.text().into_owned());
                            touched.push(job);
                        }
                        None => {}
                    }
                }
            }
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                match job_of(&path) {
                    Some((job, Part::Flag)) => {
                        raised.insert(job.clone(), true);
                        touched.push(job);
                    }
                    Some((job, Part::Detail)) => {
                        details.insert(job.clone(), node.text().into_owned());
                        touched.push(job);
                    }
                    None => {}
                }
            }
            WatchEvent::Deleted { path } => match job_of(&path) {
                Some((job, Part::Flag)) => {
                    raised.remove(&job);
                    touched.push(job);
                }
                Some((job, Part::Detail)) => {
                    details.remove(&job);
                    touched.push(job);
                }
                None => {}
            },
        }
        touched.sort();
        touched.dedup();
        for job in touched {
            let data = raised.get(&job).map(|_| details.get(&job).cloned().unwrap_or_default());
            if seen.get(&job) != Some(&data) {
                seen.insert(job.clone(), data.clone());
                trace.note(0, Note::Flag { job, data });
            }
        }
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
