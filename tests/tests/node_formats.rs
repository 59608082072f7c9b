//! What shardcron writes into each registry node, checked against what ElasticJob 3.0.4 writes
//! there (measured on a real ElasticJob cluster): ElasticJob's console and runtime read these
//! nodes, so any other data makes them misread or reject a shardcron namespace.
//!
//! One scenario records every write of a small cluster through a watch (so that short-lived
//! nodes such as the reshard flag are seen too): two instances start a job with failover and
//! misfire on, items that outlast the cron period, then one instance crashes mid-run and the
//! survivor takes its items over. Each test then checks one kind of node.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use shardcron_core::__private::layout::{ItemNode, JobNode};
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::registry::{CoordinatorRegistry, WatchEvent};
use shardcron_tests::{TestCluster, EPOCH_MS};

const JOB: &str = "formats";

/// One write seen by the watch.
#[derive(Debug, Clone)]
struct Write {
    node: JobNode,
    path: String,
    data: String,
    ephemeral: bool,
}

/// What the scenario wrote, and the ids of its two instances.
struct Recording {
    writes: Vec<Write>,
    instances: BTreeSet<String>,
    crashed: String,
}

impl Recording {
    fn of(&self, kind: impl Fn(&JobNode) -> bool) -> Vec<&Write> {
        let found: Vec<&Write> = self.writes.iter().filter(|w| kind(&w.node)).collect();
        assert!(!found.is_empty(), "the scenario must write such a node");
        found
    }
}

async fn record_scenario() -> Recording {
    let cluster = TestCluster::new(11);
    let watcher = cluster.client();
    let mut stream = watcher.watch("/").await.expect("watch");
    let writes = Arc::new(Mutex::new(Vec::new()));
    let sink = writes.clone();
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            let (path, node) = match event {
                WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                    (path, node)
                }
                _ => continue,
            };
            let Some((_, kind)) = JobNode::parse(&path) else { continue };
            let data = node.text().into_owned();
            sink.lock().push(Write { node: kind, path, data, ephemeral: node.ephemeral });
        }
    });

    let config = JobConfig::builder(JOB)
        .cron("0/10 * * * * ?")
        .sharding_total_count(4)
        .failover(true)
        .build()
        .expect("a valid config");
    let slow = || {
        Job::from_fn(|ctx| async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(15)) => Ok(()),
                () = ctx.cancellation.cancelled() => Err("cancelled".into()),
            }
        })
    };
    let a = cluster.instance("10.0.0.1").await;
    a.scheduler.add_job(config.clone(), slow()).await.expect("add on a");
    let b = cluster.instance("10.0.0.2").await;
    b.scheduler.add_job(config, slow()).await.expect("add on b");
    // 10 s: the first fire (a reshard first); 20 s: items still run, a misfire; 22 s: b dies in
    // the middle of its run, and a takes its items over once its session has expired.
    sleep_until(&cluster, 22_000).await;
    cluster.crash(&b);
    sleep_until(&cluster, 90_000).await;
    let writes = writes.lock().clone();
    Recording { writes, instances: [a.id(), b.id()].into(), crashed: b.id() }
}

async fn sleep_until(cluster: &TestCluster, ms: i64) {
    let now = cluster.handles.clock.now_ms();
    tokio::time::sleep(Duration::from_millis((EPOCH_MS + ms - now) as u64)).await;
}

/// `/{job}`: ElasticJob writes the job's class name; readers ignore it when blank.
#[tokio::test(start_paused = true)]
async fn job_root_is_blank_or_a_class_name() {
    let r = record_scenario().await;
    for w in r.writes.iter().filter(|w| w.node == JobNode::Root) {
        assert!(!w.data.contains('\n'), "{w:?}");
    }
}

/// `instances/{id}`: YAML with exactly `jobInstanceId` and `serverIp` (and maybe `labels`);
/// ElasticJob's loader rejects any other field.
#[tokio::test(start_paused = true)]
async fn instance_nodes_hold_exactly_elasticjobs_fields() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::Instance(_))) {
        let JobNode::Instance(id) = &w.node else { unreachable!() };
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_norway::from_str(&w.data).expect("YAML mapping");
        let keys: BTreeSet<&str> = fields.keys().map(String::as_str).collect();
        let allowed: BTreeSet<&str> = ["jobInstanceId", "serverIp", "labels"].into();
        assert!(keys.is_subset(&allowed), "{}: fields {keys:?}", w.path);
        assert_eq!(fields["jobInstanceId"], id.as_str(), "{}", w.path);
        assert!(id.starts_with(fields["serverIp"].as_str().unwrap_or("?")), "{}", w.path);
        assert!(w.ephemeral, "{}", w.path);
    }
}

/// `servers/{ip}`: `ENABLED` or `DISABLED`; ElasticJob's runtime takes anything else for
/// disabled.
#[tokio::test(start_paused = true)]
async fn server_nodes_are_enabled_or_disabled() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::Server(_))) {
        assert!(w.data == "ENABLED" || w.data == "DISABLED", "{}: {:?}", w.path, w.data);
    }
}

/// `sharding/{n}/instance`: the owner's instance id.
#[tokio::test(start_paused = true)]
async fn owner_nodes_hold_an_instance_id() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::Item(_, ItemNode::Instance))) {
        assert!(r.instances.contains(&w.data), "{}: {:?}", w.path, w.data);
        assert!(!w.ephemeral, "{}", w.path);
    }
}

/// `sharding/{n}/running`: the id of the instance running the item (ElasticJob's crash
/// failover reads it as one).
#[tokio::test(start_paused = true)]
async fn running_markers_hold_the_runners_instance_id() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::Item(_, ItemNode::Running))) {
        assert!(r.instances.contains(&w.data), "{}: {:?}", w.path, w.data);
    }
}

/// `sharding/{n}/failover`: the taker's instance id, ephemeral.
#[tokio::test(start_paused = true)]
async fn failover_markers_hold_the_takers_instance_id() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::Item(_, ItemNode::Failover))) {
        assert!(r.instances.contains(&w.data) && w.data != r.crashed, "{}: {:?}", w.path, w.data);
        assert!(w.ephemeral, "{}", w.path);
    }
}

/// `sharding/{n}/failovering`: while a failover is pending, the crashed owner's id.
#[tokio::test(start_paused = true)]
async fn pending_failovers_name_the_crashed_owner() {
    let r = record_scenario().await;
    let queued: BTreeSet<u32> = r
        .of(|n| matches!(n, JobNode::FailoverItem(_)))
        .iter()
        .filter_map(|w| match w.node {
            JobNode::FailoverItem(n) => Some(n),
            _ => None,
        })
        .collect();
    for item in queued {
        let suffix = format!("/sharding/{item}/failovering");
        let marker = r.writes.iter().find(|w| w.path.ends_with(&suffix));
        let marker = marker.unwrap_or_else(|| panic!("no failovering node for item {item}"));
        assert_eq!(marker.data, r.crashed);
    }
}

/// `sharding/{n}/misfire`: empty; only its existence counts.
#[tokio::test(start_paused = true)]
async fn misfire_flags_are_empty() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::Item(_, ItemNode::Misfire))) {
        assert_eq!(w.data, "", "{}", w.path);
    }
}

/// `leader/sharding/necessary`: empty; only its existence counts.
#[tokio::test(start_paused = true)]
async fn the_reshard_flag_is_empty() {
    let r = record_scenario().await;
    for w in r.of(|n| *n == JobNode::ShardingNecessary) {
        assert_eq!(w.data, "", "{}", w.path);
    }
}

/// `leader/failover/items/{n}`: empty; only its existence counts.
#[tokio::test(start_paused = true)]
async fn queued_failover_items_are_empty() {
    let r = record_scenario().await;
    for w in r.of(|n| matches!(n, JobNode::FailoverItem(_))) {
        assert_eq!(w.data, "", "{}", w.path);
    }
}

/// `leader/election/instance`: the leader's instance id, ephemeral.
#[tokio::test(start_paused = true)]
async fn the_leader_node_holds_the_leaders_instance_id() {
    let r = record_scenario().await;
    for w in r.of(|n| *n == JobNode::LeaderInstance) {
        assert!(r.instances.contains(&w.data), "{}: {:?}", w.path, w.data);
        assert!(w.ephemeral, "{}", w.path);
    }
}

/// `config`: the job's YAML with ElasticJob's field names and nothing else.
#[tokio::test(start_paused = true)]
async fn the_config_is_elasticjob_yaml() {
    let r = record_scenario().await;
    for w in r.of(|n| *n == JobNode::Config) {
        let config = JobConfig::from_yaml(&w.data).expect("parses");
        assert_eq!(config.unknown_fields().count(), 0, "{}", w.data);
        assert_eq!(config.to_yaml().expect("encodes"), w.data, "written as ElasticJob writes it");
    }
}
