//! The configs the cluster runs: the ones the workload writes, and the ones an instance writes
//! without having been shown the cluster's.
//!
//! An instance writes a job's config in two cases: it registers the job and finds no config
//! stored (or garbage), and it leads the job and repairs a config node that is missing or
//! garbage. Either way it writes the config it knows, which may be older than the cluster's: an
//! instance that restarted publishes its own definition, and a leader cut off while the config
//! changed writes back the one it had. The cluster then runs that config, and so must the
//! checker, or it would hold the cluster to a config nobody can read any more.
//!
//! But a write of an older config is also what a bug looks like: an instance that skipped a
//! config change it was shown, and wrote its old config back (the fixed bug of `garbage` seed
//! 1,676,230,277). So the witness records an instance's write as the cluster's config only when
//! that instance could not have known better: when the last config its registry showed it (by a
//! watch event or a read, since its process started) is not the one the cluster runs. Garbage
//! shows no config: the last one shown stays. A write by an instance last shown the cluster's
//! config is left unrecorded, and the checker goes on judging by the cluster's. Unless the
//! config written says `overwrite: true`: its instance's own config is then meant to win at
//! its start, and the write is the cluster's config.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use parking_lot::Mutex;
use shardcron_core::config::JobConfig;
use shardcron_core::registry::{
    Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Result,
    SessionEvents, TxnOp, TxnResult, Version, WatchEvent, WatchScope, WatchStream,
};
use shardcron_registry_mem::MemServer;

use crate::sim::NAMESPACE;
use crate::trace::{JobState, Note, Trace};

/// A job's name and the bytes of its config node.
type StoredConfig = (String, Vec<u8>);

/// The config of each job as the cluster runs it, for the checker's notes.
#[derive(Debug)]
pub(crate) struct ConfigBook {
    trace: Trace,
    /// The registry, to see whether a write an instance made is still there when it learns
    /// of it.
    server: MemServer,
    configs: Mutex<BTreeMap<String, JobState>>,
    /// What each stored config's bytes read as ([`state_of`]), parsed once per run: every
    /// instance reads every job's config as it registers, and its watch shows it again.
    parsed: Mutex<BTreeMap<StoredConfig, Option<JobState>>>,
}

impl ConfigBook {
    pub fn new(trace: Trace, server: MemServer) -> Self {
        ConfigBook { trace, server, configs: Mutex::default(), parsed: Mutex::default() }
    }

    /// [`state_of`], remembered.
    fn state_of(&self, job: &str, data: &[u8]) -> Option<JobState> {
        let key = (job.to_owned(), data.to_vec());
        if let Some(state) = self.parsed.lock().get(&key) {
            return state.clone();
        }
        let state = state_of(job, data);
        self.parsed.lock().insert(key, state.clone());
        state
    }

    /// Records `state` as the config of its job from now on, written by `who` (0: the
    /// simulator's workload).
    pub fn record(&self, who: usize, state: JobState) {
        self.configs.lock().insert(state.job.clone(), state.clone());
        self.trace.note(who, Note::Config(state));
    }

    pub fn forget(&self, job: &str) {
        self.configs.lock().remove(job);
    }

    /// Every job's config as recorded.
    pub fn all(&self) -> Vec<JobState> {
        self.configs.lock().values().cloned().collect()
    }

    fn current(&self, job: &str) -> Option<JobState> {
        self.configs.lock().get(job).cloned()
    }
}

/// The job of a config node path (`/{job}/config`).
fn config_job(path: &str) -> Option<&str> {
    let job = path.strip_prefix('/')?.strip_suffix("/config")?;
    (!job.is_empty() && !job.contains('/')).then_some(job)
}

/// What the checker needs of a stored config, if the bytes are `job`'s config.
fn state_of(job: &str, data: &[u8]) -> Option<JobState> {
    let config = JobConfig::from_yaml(std::str::from_utf8(data).ok()?).ok()?;
    (config.job_name() == job).then(|| JobState::of(&config))
}

/// Two states of one job's config, the same but for the simulated item time.
fn same_config(a: &JobState, b: &JobState) -> bool {
    JobState { item_ms: 0, ..a.clone() } == JobState { item_ms: 0, ..b.clone() }
}

/// What one job's config node last showed an instance.
#[derive(Debug, Default)]
struct Shown {
    /// The node's bytes as last shown, garbage included.
    bytes: Vec<u8>,
    /// The last config shown (item time zeroed); garbage leaves it as it was.
    config: Option<JobState>,
}

/// One instance's registry, watched for the configs it is shown and the ones it writes.
pub(crate) struct ConfigWitness {
    inner: Arc<dyn CoordinatorRegistry>,
    who: usize,
    book: Arc<ConfigBook>,
    /// Per job, the last config this client was shown. Not a set of all: a config changed to
    /// 3 items and back to 2 is not known by an instance shown only the first 2.
    shown: Arc<Mutex<BTreeMap<String, Shown>>>,
}

impl ConfigWitness {
    pub fn wrap(
        inner: Arc<dyn CoordinatorRegistry>,
        who: usize,
        book: Arc<ConfigBook>,
    ) -> Arc<dyn CoordinatorRegistry> {
        Arc::new(ConfigWitness { inner, who, book, shown: Arc::default() })
    }

    /// Notes the config `data` at `path` as shown to this instance.
    fn shown_node(
        shown: &Mutex<BTreeMap<String, Shown>>,
        book: &ConfigBook,
        path: &str,
        data: &[u8],
    ) {
        let Some(job) = config_job(path) else { return };
        let mut shown = shown.lock();
        let last = shown.entry(job.to_owned()).or_default();
        // The same bytes again (every change of the watch's scope shows the config node
        // anew): nothing to parse.
        if last.bytes == data {
            return;
        }
        last.bytes = data.to_vec();
        if let Some(state) = book.state_of(job, data) {
            last.config = Some(JobState { item_ms: 0, ..state });
        }
    }

    /// A config this instance wrote: the cluster's from now on, unless the last config the
    /// instance was shown is the cluster's (see the module's comment), or the write was
    /// overwritten already (over a slow link, the workload may have changed it before the
    /// instance heard its write succeed; that change is the cluster's).
    fn wrote(&self, path: &str, data: &[u8]) {
        let Some(job) = config_job(path) else { return };
        let stored = self.book.server.node(&format!("{NAMESPACE}{path}"));
        if stored.is_none_or(|node| node.data != data) {
            return;
        }
        let Some(written) = self.book.state_of(job, data) else { return };
        let Some(current) = self.book.current(job) else { return };
        if same_config(&written, &current) {
            return;
        }
        let knew = self
            .shown
            .lock()
            .get(job)
            .and_then(|last| last.config.as_ref())
            .is_some_and(|last| same_config(last, &current));
        // With `overwrite: true` the instance's own config is meant to win over the stored
        // one at its start (ElasticJob's meaning), shown the cluster's or not (a job file with
        // it, 1 instance, `chaos` seed 3,303,219,729: a cron change, then a restart that wrote
        // its own cron back, which the checker went on holding the cluster to).
        let overwrite = || {
            std::str::from_utf8(data)
                .ok()
                .and_then(|text| JobConfig::from_yaml(text).ok())
                .is_some_and(|config| config.overwrite())
        };
        if knew && !overwrite() {
            // Left to the checker, which judges what follows by the cluster's config; noted,
            // for whoever reads the trace.
            let what =
                format!("config of {job} written by this instance (count={})", written.count);
            let why = "it was last shown the cluster's config, not that one: not recorded";
            self.book.trace.note(self.who, Note::Ignored { what, why: why.to_owned() });
        } else {
            self.book.record(self.who, JobState { item_ms: current.item_ms, ..written });
        }
    }

    fn wrote_ops(&self, ops: &[TxnOp]) {
        for op in ops {
            match op {
                TxnOp::Create { path, data, .. } | TxnOp::Set { path, data, .. } => {
                    self.wrote(path, data)
                }
                _ => {}
            }
        }
    }
}

impl fmt::Debug for ConfigWitness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigWitness").field("who", &self.who).field("inner", &self.inner).finish()
    }
}

#[async_trait]
impl CoordinatorRegistry for ConfigWitness {
    fn capability(&self) -> Capability {
        self.inner.capability()
    }

    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        let created = self.inner.create(path, data, mode).await?;
        self.wrote(path, data);
        Ok(created)
    }

    async fn get(&self, path: &str) -> Result<Option<Node>> {
        let node = self.inner.get(path).await?;
        if let Some(node) = &node {
            Self::shown_node(&self.shown, &self.book, path, &node.data);
        }
        Ok(node)
    }

    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        let version = self.inner.set(path, data, expected).await?;
        self.wrote(path, data);
        Ok(version)
    }

    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()> {
        self.inner.delete(path, expected).await
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn children(&self, path: &str) -> Result<Vec<String>> {
        self.inner.children(path).await
    }

    async fn delete_recursive(&self, path: &str) -> Result<()> {
        self.inner.delete_recursive(path).await
    }

    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        let writes: Vec<TxnOp> = ops
            .iter()
            .filter(|op| {
                matches!(op, TxnOp::Create { .. } | TxnOp::Set { .. })
                    && config_job(op.path()).is_some()
            })
            .cloned()
            .collect();
        let results = self.inner.transaction(ops).await?;
        self.wrote_ops(&writes);
        Ok(results)
    }

    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        let stream = self.inner.watch_scope(scope).await?;
        let scoper = stream.scoper();
        let (shown, book) = (self.shown.clone(), self.book.clone());
        Ok(WatchStream::with_scoper(
            stream.inspect(move |event| match event {
                WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                    Self::shown_node(&shown, &book, path, &node.data)
                }
                WatchEvent::Resync { nodes } | WatchEvent::Rescoped { added: nodes, .. } => {
                    for (path, node) in nodes.iter().filter(|(p, _)| config_job(p).is_some()) {
                        Self::shown_node(&shown, &book, path, &node.data);
                    }
                }
                _ => {}
            }),
            scoper,
        ))
    }

    fn session_events(&self) -> SessionEvents {
        self.inner.session_events()
    }

    async fn leader_latch(&self, path: &str, participant: &str) -> Result<Box<dyn LeaderLatch>> {
        self.inner.leader_latch(path, participant).await
    }

    async fn lock(
        &self,
        path: &str,
        owner: &str,
        timeout: Duration,
    ) -> Result<Box<dyn MutexGuard>> {
        self.inner.lock(path, owner, timeout).await
    }

    async fn registry_time(&self) -> Result<i64> {
        self.inner.registry_time().await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_jobs_own_config_node_is_a_config() {
        assert_eq!(config_job("/j0/config"), Some("j0"));
        assert_eq!(config_job("/j0/sharding/0/config"), None);
        assert_eq!(config_job("/config"), None);
        assert_eq!(config_job("j0/config"), None);
    }

    #[test]
    fn garbage_and_another_jobs_config_are_no_config() {
        assert!(state_of("j0", b"[1, 2, {garbage: true}]").is_none());
        assert!(state_of("j0", b"").is_none());
        let yaml = "jobName: j1\ncron: 0/2 * * * * ?\nshardingTotalCount: 2\n";
        assert!(state_of("j1", yaml.as_bytes()).is_some_and(|s| s.count == 2));
        assert!(state_of("j0", yaml.as_bytes()).is_none());
    }
}
