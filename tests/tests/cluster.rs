//! Several instances of one job on the in-memory registry, in virtual time: membership changes,
//! crashes with and without failover, session loss, partitions, operator actions and restarts.
//! Each test checks the promises of `GUARANTEES.md`, not just that something ran.

use std::time::Duration;

use shardcron_core::api::JobOperations;
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::registry::{CoordinatorRegistry, RegistryExt};
use shardcron_core::runtime::SchedulerEvent;
use shardcron_tests::{InstanceOptions, TestCluster, TestInstance, EPOCH_MS};

const JOB: &str = "orders";

fn config(items: u32, failover: bool) -> JobConfig {
    JobConfig::builder(JOB)
        .cron("0/10 * * * * ?")
        .sharding_total_count(items)
        .failover(failover)
        .build()
        .expect("a valid config")
}

/// Items that take `secs` of virtual time, and stop early when told they may have lost the item.
fn working(secs: u64) -> Job {
    Job::from_fn(move |ctx| async move {
        tokio::select! {
            biased;
            () = ctx.cancellation.cancelled() => Err("cancelled".into()),
            () = tokio::time::sleep(Duration::from_secs(secs)) => Ok(()),
        }
    })
}

async fn until(cluster: &TestCluster, secs: i64) {
    let target = EPOCH_MS + secs * 1000 + 500;
    let now = cluster.handles.clock.now_ms();
    assert!(target > now, "checkpoint {secs} s is in the past");
    tokio::time::sleep(Duration::from_millis((target - now) as u64)).await;
}

fn short_sessions() -> InstanceOptions {
    InstanceOptions { session_timeout: Duration::from_secs(3), ..Default::default() }
}

/// Three instances on 10.0.0.1-3 running `job` with `config`.
async fn three(cluster: &TestCluster, config: &JobConfig, job: &Job) -> Vec<TestInstance> {
    let mut nodes = Vec::new();
    for n in 1..=3 {
        let node = cluster.instance_opts(&format!("10.0.0.{n}"), short_sessions()).await;
        node.scheduler.add_job(config.clone(), job.clone()).await.expect("add the job");
        nodes.push(node);
    }
    nodes
}

fn owners_at(cluster: &TestCluster, fire_s: i64) -> Vec<(u32, String)> {
    let mut v: Vec<(u32, String)> = cluster
        .runs(JOB)
        .into_iter()
        .filter(|r| r.fire_ms == EPOCH_MS + fire_s * 1000 && r.completed)
        .map(|r| (r.item, r.instance))
        .collect();
    v.sort();
    v
}

#[tokio::test(start_paused = true)]
async fn joining_instances_share_the_items_from_the_next_fire() {
    let cluster = TestCluster::new(21);
    let a = cluster.instance_opts("10.0.0.1", short_sessions()).await;
    a.scheduler.add_job(config(4, false), working(1)).await.unwrap();
    until(&cluster, 10).await;
    assert!(owners_at(&cluster, 10).iter().all(|(_, i)| *i == a.id()), "alone, A runs everything");
    let b = cluster.instance_opts("10.0.0.2", short_sessions()).await;
    b.scheduler.add_job(config(4, false), working(1)).await.unwrap();
    until(&cluster, 22).await;
    let at20 = owners_at(&cluster, 20);
    assert_eq!(at20.iter().filter(|(_, i)| *i == a.id()).count(), 2, "{at20:?}");
    assert_eq!(at20.iter().filter(|(_, i)| *i == b.id()).count(), 2, "{at20:?}");
    cluster.assert_each_item_once(JOB, &[10, 20], 4);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&a, &b], 4).await;
}

#[tokio::test(start_paused = true)]
async fn a_leaving_instance_hands_its_items_over_at_the_next_fire() {
    let cluster = TestCluster::new(22);
    let nodes = three(&cluster, &config(6, false), &working(1)).await;
    until(&cluster, 10).await;
    nodes[2].scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    until(&cluster, 22).await;
    let at20 = owners_at(&cluster, 20);
    assert!(
        at20.iter().all(|(_, i)| *i != nodes[2].id()),
        "the stopped instance runs nothing: {at20:?}"
    );
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1]], 6).await;
}

#[tokio::test(start_paused = true)]
async fn failover_reruns_every_orphan_of_a_crash_in_one_round() {
    let cluster = TestCluster::new(23);
    let nodes = three(&cluster, &config(9, true), &working(4)).await;
    until(&cluster, 11).await;
    let victim = &nodes[2];
    let orphans: Vec<u32> = owners_at_started(&cluster, 10, &victim.id());
    assert_eq!(orphans.len(), 3, "the victim runs 3 of the 9 items");
    cluster.crash(victim);
    // The session expires 3 s after the crash; the survivors are idle by then (items take 4 s).
    until(&cluster, 19).await;
    let claims: Vec<(u32, i64)> = cluster
        .events()
        .into_iter()
        .filter_map(|r| match r.event {
            SchedulerEvent::FailoverClaimed { item, fire_ms, .. } => Some((item, fire_ms)),
            _ => None,
        })
        .collect();
    let mut claimed: Vec<u32> = claims.iter().map(|c| c.0).collect();
    claimed.sort();
    assert_eq!(claimed, orphans, "all orphans claimed once, before the next fire");
    assert!(claims.iter().all(|c| c.1 == EPOCH_MS + 10_000), "re-run for the fire they missed");
    let takers: std::collections::BTreeSet<String> = cluster
        .runs(JOB)
        .into_iter()
        .filter(|r| r.fire_ms == EPOCH_MS + 10_000 && orphans.contains(&r.item) && r.completed)
        .map(|r| r.instance)
        .collect();
    assert_eq!(takers.len(), 2, "both idle survivors took a share: {takers:?}");
    until(&cluster, 26).await;
    cluster.assert_each_item_once(JOB, &[10, 20], 9);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1]], 9).await;
    let queue =
        cluster.client().children_or_empty(&format!("/{JOB}/leader/failover/items")).await.unwrap();
    assert!(queue.is_empty(), "queue drained: {queue:?}");
}

fn owners_at_started(cluster: &TestCluster, fire_s: i64, instance: &str) -> Vec<u32> {
    let mut v: Vec<u32> = cluster
        .runs(JOB)
        .into_iter()
        .filter(|r| r.fire_ms == EPOCH_MS + fire_s * 1000 && r.instance == instance)
        .map(|r| r.item)
        .collect();
    v.sort();
    v
}

#[tokio::test(start_paused = true)]
async fn without_failover_a_crash_loses_the_running_items_until_the_next_fire() {
    let cluster = TestCluster::new(24);
    let nodes = three(&cluster, &config(9, false), &working(4)).await;
    until(&cluster, 11).await;
    let lost = owners_at_started(&cluster, 10, &nodes[2].id());
    cluster.crash(&nodes[2]);
    until(&cluster, 25).await;
    let done10: Vec<u32> = owners_at(&cluster, 10).iter().map(|(i, _)| *i).collect();
    assert!(lost.iter().all(|i| !done10.contains(i)), "no one re-ran the crashed items");
    assert!(cluster
        .events()
        .iter()
        .all(|r| !matches!(r.event, SchedulerEvent::FailoverClaimed { .. })));
    cluster.assert_each_item_once(JOB, &[20], 9);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1]], 9).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_crash_during_resharding_is_survived() {
    let cluster = TestCluster::new(25);
    let a = cluster.instance_opts("10.0.0.1", short_sessions()).await;
    a.scheduler.add_job(config(4, true), working(1)).await.unwrap();
    until(&cluster, 10).await;
    let b = cluster.instance_opts("10.0.0.2", short_sessions()).await;
    b.scheduler.add_job(config(4, true), working(1)).await.unwrap();
    // A (the leader) becomes slow: its reshard commit at +20 s takes 5 s to reach the registry,
    // and A dies at +23 s, with the commit still on its way.
    until(&cluster, 18).await;
    cluster.server.set_latency(a.client_id(), Duration::from_secs(5));
    until(&cluster, 23).await;
    let flagged =
        cluster.client().exists(&format!("/{JOB}/leader/sharding/necessary")).await.unwrap();
    assert!(flagged, "the leader was resharding when it died");
    cluster.crash(&a);
    until(&cluster, 45).await;
    assert!(owners_at(&cluster, 40).iter().all(|(_, i)| *i == b.id()));
    cluster.assert_each_item_once(JOB, &[40], 4);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&b], 4).await;
}

#[tokio::test(start_paused = true)]
async fn an_expired_session_registers_again_and_fails_its_items_over() {
    let cluster = TestCluster::new(26);
    let nodes = three(&cluster, &config(6, true), &working(4)).await;
    until(&cluster, 11).await;
    let victim = &nodes[1];
    cluster.server.expire_session(victim.client_id());
    until(&cluster, 15).await;
    assert!(
        cluster.client().exists(&format!("/{JOB}/instances/{}", victim.id())).await.unwrap(),
        "registered again on its new session"
    );
    until(&cluster, 25).await;
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1], &nodes[2]], 6).await;
}

#[tokio::test(start_paused = true)]
async fn a_partition_longer_than_the_session_never_runs_an_item_twice_at_once() {
    let cluster = TestCluster::new(27);
    let nodes = three(&cluster, &config(6, true), &working(8)).await;
    until(&cluster, 11).await;
    let cut = &nodes[0];
    cluster.server.cut(cut.client_id());
    until(&cluster, 16).await;
    cluster.server.heal(cut.client_id());
    // Items take 8 s of every 10: each fire after the partition is caught up late; the one at
    // +20 s ends at +34 s.
    until(&cluster, 35).await;
    cluster.assert_exclusive(JOB);
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1], &nodes[2]], 6).await;
}

#[tokio::test(start_paused = true)]
async fn a_short_partition_loses_nothing() {
    let cluster = TestCluster::new(28);
    let nodes = three(&cluster, &config(6, true), &working(2)).await;
    until(&cluster, 11).await;
    cluster.server.cut(nodes[0].client_id());
    until(&cluster, 12).await;
    cluster.server.heal(nodes[0].client_id());
    until(&cluster, 25).await;
    assert!(cluster
        .events()
        .iter()
        .all(|r| !matches!(r.event, SchedulerEvent::FailoverClaimed { .. })));
    cluster.assert_exclusive(JOB);
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1], &nodes[2]], 6).await;
}

#[tokio::test(start_paused = true)]
async fn operator_shutdown_fails_the_running_items_over_at_once() {
    let cluster = TestCluster::new(29);
    // Items 0 and 1 (10.0.0.3's, by AVG_ALLOCATION over the descending ids) run long, the others
    // briefly: when the operator shuts 10.0.0.3 down, the survivors are idle.
    let job = Job::from_fn(|ctx| async move {
        let secs = if ctx.item < 2 { 8 } else { 1 };
        tokio::select! {
            biased;
            () = ctx.cancellation.cancelled() => Err("cancelled".into()),
            () = tokio::time::sleep(Duration::from_secs(secs)) => Ok(()),
        }
    });
    let nodes = three(&cluster, &config(6, true), &job).await;
    until(&cluster, 12).await;
    let target = &nodes[2];
    assert_eq!(owners_at_started(&cluster, 10, &target.id()), vec![0, 1]);
    let shut_at = cluster.handles.clock.now_ms();
    let client = cluster.client();
    JobOperations::new(&client).shutdown(JOB, Some(&target.id())).await.unwrap();
    // (the catch-up of the long items for the fire at +20 s, skipped while they ran, ends at +28.5 s)
    until(&cluster, 29).await;
    cluster.dump();
    let retaken: Vec<i64> = cluster
        .runs(JOB)
        .into_iter()
        .filter(|r| {
            r.fire_ms == EPOCH_MS + 10_000 && r.instance != target.id() && r.start_ms >= shut_at
        })
        .map(|r| r.start_ms - shut_at)
        .collect();
    assert_eq!(retaken.len(), 2, "its two running items were taken over");
    assert!(retaken.iter().all(|d| *d < 250), "taken over within 250 ms: {retaken:?}");
    cluster.assert_exclusive(JOB);
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1]], 6).await;
}

#[tokio::test(start_paused = true)]
async fn a_graceful_stop_past_its_deadline_fails_the_cancelled_items_over() {
    let cluster = TestCluster::new(30);
    let mut options = short_sessions();
    options.settings.shutdown_timeout = Duration::from_secs(1);
    let mut nodes = Vec::new();
    for n in 1..=2 {
        let node = cluster.instance_opts(&format!("10.0.0.{n}"), options.clone()).await;
        node.scheduler.add_job(config(4, true), working(6)).await.unwrap();
        nodes.push(node);
    }
    until(&cluster, 11).await;
    nodes[1].scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    // (the survivor takes the cancelled items over after its own run, and catches the fire at
    // +20 s up when that ends, at +22 s, for 6 s)
    until(&cluster, 29).await;
    cluster.assert_exclusive(JOB);
    cluster.assert_each_item_once(JOB, &[10, 20], 4);
    cluster.assert_settled(JOB, &[&nodes[0]], 4).await;
}

#[tokio::test(start_paused = true)]
async fn a_disabled_server_gets_no_items_and_its_leader_abdicates() {
    let cluster = TestCluster::new(31);
    let nodes = three(&cluster, &config(6, false), &working(1)).await;
    until(&cluster, 10).await;
    let client = cluster.client();
    let leader =
        client.get_text(&format!("/{JOB}/leader/election/instance")).await.unwrap().unwrap();
    let leader_ip = leader.split("@-@").next().unwrap().to_owned();
    JobOperations::new(&client).set_server_disabled(JOB, &leader_ip, true).await.unwrap();
    until(&cluster, 22).await;
    let new_leader =
        client.get_text(&format!("/{JOB}/leader/election/instance")).await.unwrap().unwrap();
    assert_ne!(new_leader, leader, "the disabled leader abdicated");
    assert!(
        owners_at(&cluster, 20).iter().all(|(_, i)| *i != leader),
        "the disabled server runs nothing"
    );
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
    let live: Vec<&TestInstance> = nodes.iter().filter(|n| n.id() != leader).collect();
    cluster.assert_settled(JOB, &live, 6).await;
}

#[tokio::test(start_paused = true)]
async fn a_count_change_reshards_the_whole_cluster() {
    let cluster = TestCluster::new(32);
    let nodes = three(&cluster, &config(3, false), &working(1)).await;
    until(&cluster, 10).await;
    let client = cluster.client();
    let ops = JobOperations::new(&client);
    let c = ops.config(JOB).await.unwrap().to_builder().sharding_total_count(7).build().unwrap();
    ops.update_config(&c).await.unwrap();
    until(&cluster, 22).await;
    cluster.assert_each_item_once(JOB, &[10], 3);
    cluster.assert_each_item_once(JOB, &[20], 7);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1], &nodes[2]], 7).await;
}

#[tokio::test(start_paused = true)]
async fn the_whole_cluster_restarts_cleanly() {
    let cluster = TestCluster::new(33);
    let first = three(&cluster, &config(6, true), &working(1)).await;
    until(&cluster, 10).await;
    for node in &first {
        node.scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    }
    assert!(
        cluster.ephemerals().is_empty(),
        "invariant 5: nothing left: {:?}",
        cluster.ephemerals()
    );
    until(&cluster, 15).await;
    let second = three(&cluster, &config(6, true), &working(1)).await;
    until(&cluster, 32).await;
    assert!(owners_at(&cluster, 20).len() == 6 && owners_at(&cluster, 30).len() == 6);
    cluster.assert_each_item_once(JOB, &[10, 20, 30], 6);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&second[0], &second[1], &second[2]], 6).await;
    for node in &second {
        node.scheduler.shutdown(Duration::from_secs(3600)).await.unwrap();
    }
    assert!(cluster.ephemerals().is_empty(), "invariant 5 after the second stop");
}

#[tokio::test(start_paused = true)]
async fn an_idle_cluster_sends_no_registry_request() {
    let cluster = TestCluster::new(34);
    let idle = config(6, true).to_builder().cron("0 0 0 1 1 ? 2099").build().unwrap();
    let nodes = three(&cluster, &idle, &working(1)).await;
    until(&cluster, 5).await;
    for node in &nodes {
        node.counter.take();
    }
    until(&cluster, 65).await;
    for node in &nodes {
        assert_eq!(
            node.counter.total(),
            0,
            "{} sent {:?} while idle",
            node.id(),
            node.counter.counts()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_fire_costs_one_transaction_to_start_and_one_to_finish() {
    let cluster = TestCluster::new(35);
    let nodes = three(&cluster, &config(9, true), &working(1)).await;
    until(&cluster, 15).await;
    for node in &nodes {
        node.counter.take();
    }
    until(&cluster, 25).await;
    for node in &nodes {
        let counts = node.counter.counts();
        assert_eq!(counts.get("transaction"), Some(&2), "{}: {counts:?}", node.id());
        assert_eq!(node.counter.total(), 2, "nothing but the two transactions: {counts:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_item_left_to_a_ghost_owner_is_resharded() {
    let cluster = TestCluster::new(36);
    let c = config(4, false)
        .to_builder()
        .cron("0 0/2 * * * ?")
        .reconcile_interval(Some(Duration::from_secs(60)))
        .build()
        .unwrap();
    let nodes = three(&cluster, &c, &working(1)).await;
    // The first fire (+40 s: the epoch is at second :20) shards.
    until(&cluster, 45).await;
    let client = cluster.client();
    // Someone (a bug, an operator) leaves an item to a ghost, without flagging a reshard.
    client.set(&format!("/{JOB}/sharding/2/instance"), b"10.9.9.9@-@1", None).await.unwrap();
    until(&cluster, 125).await;
    // The leader sees the owner node change and flags a reshard at once (reporting the node),
    // rather than at its next reconcile.
    let reported = cluster
        .events()
        .iter()
        .filter(|r| {
            matches!(&r.event, SchedulerEvent::RegistryGarbage { path, .. }
                if path == &format!("/{JOB}/sharding/2/instance"))
        })
        .count();
    assert_eq!(reported, 1, "the leader reported the ghost owner once");
    // The next fire (+160 s) reshards: the ghost's item has a live owner again and runs.
    until(&cluster, 165).await;
    cluster.assert_each_item_once(JOB, &[160], 4);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1], &nodes[2]], 4).await;
}

/// Counts the distribute-once callbacks per fire.
#[derive(Default)]
struct OncePerFire {
    started: parking_lot::Mutex<Vec<i64>>,
    completed: parking_lot::Mutex<Vec<i64>>,
}

#[async_trait::async_trait]
impl shardcron_core::guarantee::DistributeOnceListener for OncePerFire {
    async fn all_started(&self, _job: &str, fire_ms: i64) {
        self.started.lock().push(fire_ms);
    }
    async fn all_completed(&self, _job: &str, fire_ms: i64) {
        self.completed.lock().push(fire_ms);
    }
}

#[tokio::test(start_paused = true)]
async fn distribute_once_listeners_run_once_per_fire_across_the_cluster() {
    let cluster = TestCluster::new(37);
    let listener = std::sync::Arc::new(OncePerFire::default());
    let mut nodes = Vec::new();
    for n in 1..=3 {
        let options = InstanceOptions { once_listener: Some(listener.clone()), ..short_sessions() };
        let node = cluster.instance_opts(&format!("10.0.0.{n}"), options).await;
        node.scheduler.add_job(config(6, false), working(n)).await.unwrap();
        nodes.push(node);
    }
    until(&cluster, 25).await;
    let fires = vec![EPOCH_MS + 10_000, EPOCH_MS + 20_000];
    assert_eq!(*listener.started.lock(), fires, "once per fire, when the last item started");
    assert_eq!(*listener.completed.lock(), fires, "once per fire, when the last item completed");
    let completed_at: Vec<i64> = cluster
        .runs(JOB)
        .iter()
        .filter(|r| r.fire_ms == EPOCH_MS + 10_000)
        .filter_map(|r| r.end_ms)
        .collect();
    assert_eq!(
        completed_at.iter().max(),
        Some(&(EPOCH_MS + 13_000)),
        "the slowest instance finished last"
    );
    cluster.assert_each_item_once(JOB, &[10, 20], 6);
}

#[tokio::test(start_paused = true)]
async fn fires_missed_while_a_crash_went_unnoticed_get_one_catch_up() {
    let cluster = TestCluster::new(38);
    let long = InstanceOptions { session_timeout: Duration::from_secs(25), ..Default::default() };
    let mut nodes = Vec::new();
    for n in 1..=3 {
        let node = cluster.instance_opts(&format!("10.0.0.{n}"), long.clone()).await;
        node.scheduler.add_job(config(6, true), working(1)).await.unwrap();
        nodes.push(node);
    }
    until(&cluster, 12).await;
    let victim = &nodes[2];
    let its_items = owners_at_started(&cluster, 10, &victim.id());
    // Crashed while idle: nobody notices before its session times out at +37 s, so the fires at
    // +20 s and +30 s of its items find no one to run them.
    cluster.crash(victim);
    until(&cluster, 39).await;
    let caught_up: Vec<(u32, i64)> = cluster
        .runs(JOB)
        .into_iter()
        .filter(|r| r.completed && its_items.contains(&r.item) && r.start_ms > EPOCH_MS + 36_000)
        .map(|r| (r.item, r.fire_ms - EPOCH_MS))
        .collect();
    assert_eq!(caught_up.len(), its_items.len(), "one catch-up per missed item: {caught_up:?}");
    assert!(
        caught_up.iter().all(|(_, fire)| *fire == 30_000),
        "for the latest missed fire: {caught_up:?}"
    );
    until(&cluster, 42).await;
    cluster.assert_each_item_once(JOB, &[40], 6);
    cluster.assert_exclusive(JOB);
    cluster.assert_settled(JOB, &[&nodes[0], &nodes[1]], 6).await;
}

/// `servers/{ip}` nodes of IPs no instance uses any more (pods get a new IP each restart) are
/// removed by the leader once the grace ran out; a server an operator disabled stays.
#[tokio::test(start_paused = true)]
async fn the_leader_removes_server_nodes_nobody_uses_after_the_grace() {
    let cluster = TestCluster::new(27);
    let grace = InstanceOptions {
        settings: shardcron_core::runtime::Settings {
            stale_server_grace: Some(Duration::from_secs(60)),
            ..Default::default()
        },
        ..short_sessions()
    };
    let mut nodes = Vec::new();
    for n in 1..=3 {
        let node = cluster.instance_opts(&format!("10.0.0.{n}"), grace.clone()).await;
        node.scheduler.add_job(config(4, false), working(1)).await.expect("add the job");
        nodes.push(node);
    }
    until(&cluster, 10).await;
    let ops = cluster.client();
    JobOperations::new(&ops).set_server_disabled(JOB, "10.0.0.2", true).await.expect("disable");
    // 10.0.0.2 (disabled) and 10.0.0.3 leave; 10.0.0.1 leads.
    nodes[2].scheduler.shutdown(Duration::from_secs(60)).await.expect("stop 10.0.0.3");
    nodes[1].scheduler.shutdown(Duration::from_secs(60)).await.expect("stop 10.0.0.2");
    until(&cluster, 40).await;
    let servers = |ip: &str| format!("/{JOB}/servers/{ip}");
    assert!(ops.exists(&servers("10.0.0.3")).await.unwrap(), "kept within the grace");
    until(&cluster, 80).await;
    assert!(!ops.exists(&servers("10.0.0.3")).await.unwrap(), "removed after the grace");
    assert!(ops.exists(&servers("10.0.0.2")).await.unwrap(), "a disabled server stays");
    assert!(ops.exists(&servers("10.0.0.1")).await.unwrap(), "a server in use stays");
    cluster.assert_exclusive(JOB);
}
