//! The simulator's own view of every job's reshard flag (`leader/sharding/necessary`): a
//! registry client of its own watches the namespace and notes each change of a flag in the
//! trace. The checker reads those notes to tell which fires fell due while a reshard was asked
//! for, and so wait for it and answer to the assignment it makes. This is the registry's truth,
//! not what the instances say they did: a flag an operator wrote counts the same.

use futures::StreamExt;
use shardcron_core::registry::{CoordinatorRegistry, WatchEvent};
use shardcron_registry_mem::MemRegistry;

use crate::trace::{Note, Trace};

/// The path suffix of a job's reshard flag, under `/{job}`.
const FLAG: &str = "/leader/sharding/necessary";

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
    // The flags as last noted, to note a resync's differences only.
    let mut seen: std::collections::BTreeMap<String, Option<String>> = Default::default();
    while let Some(event) = stream.next().await {
        let changes: Vec<(String, Option<String>)> = match event {
            WatchEvent::Resync { nodes } => {
                let now: std::collections::BTreeMap<String, String> = nodes
                    .iter()
                    .filter_map(|(path, node)| Some((job_of(path)?, node.text().into_owned())))
                    .collect();
                let gone = seen
                    .iter()
                    .filter(|(job, data)| data.is_some() && !now.contains_key(*job))
                    .map(|(job, _)| (job.clone(), None));
                let mut changes: Vec<_> = gone.collect();
                changes.extend(now.into_iter().map(|(job, data)| (job, Some(data))));
                changes
            }
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                job_of(&path).map(|job| (job, Some(node.text().into_owned()))).into_iter().collect()
            }
            WatchEvent::Deleted { path } => {
                job_of(&path).map(|job| (job, None)).into_iter().collect()
            }
        };
        for (job, data) in changes {
            if seen.get(&job) != Some(&data) {
                seen.insert(job.clone(), data.clone());
                trace.note(0, Note::Flag { job, data });
            }
        }
    }
}

/// The job whose flag `path` is, if it is one.
fn job_of(path: &str) -> Option<String> {
    let job = path.strip_suffix(FLAG)?.strip_prefix('/')?;
    (!job.is_empty() && !job.contains('/')).then(|| job.to_owned())
}
