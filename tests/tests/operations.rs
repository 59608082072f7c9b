//! The operations API (`core::api`) on two kinds of namespace: one written by ElasticJob 3.0.4
//! itself (a recorded dump loaded into the in-memory registry), and one written by running
//! shardcron schedulers. The views follow ElasticJob console's status rules; every change goes
//! to the nodes both runtimes read.

use std::time::Duration;

use shardcron_core::api::{ItemStatus, JobOperations, JobStatus};
use shardcron_core::config::JobConfig;
use shardcron_core::job::Job;
use shardcron_core::registry::{CoordinatorRegistry, RegistryExt};
use shardcron_core::Error;
use shardcron_registry_mem::{ConnectOptions, MemRegistry};
use shardcron_tests::fixtures::{load_dump, parse_dump, ELASTICJOB_3_0_4};
use shardcron_tests::{TestCluster, EPOCH_MS};

const A: &str = "192.0.2.2@-@14191";
const B: &str = "192.0.2.2@-@14194";

/// The ElasticJob fixture in a fresh in-memory registry; the returned client holds the
/// instances' ephemeral nodes.
async fn elasticjob_namespace(cluster: &TestCluster) -> MemRegistry {
    let client = cluster
        .server
        .connect(ConnectOptions::default().namespace("/elasticjob"))
        .expect("connect");
    load_dump(&client, ELASTICJOB_3_0_4).await.expect("load the fixture");
    client
}

fn statuses(items: &[shardcron_core::api::ShardingItem]) -> Vec<ItemStatus> {
    items.iter().map(|i| i.status).collect()
}

#[tokio::test(start_paused = true)]
async fn an_elasticjob_namespace_reads_as_its_console_shows_it() {
    let cluster = TestCluster::new(1);
    let client = elasticjob_namespace(&cluster).await;
    let ops = JobOperations::new(&client);

    let jobs = ops.jobs().await.unwrap();
    assert_eq!(jobs.len(), 1);
    let orders = &jobs[0];
    assert_eq!(orders.job_name, "orders");
    assert_eq!(orders.status, JobStatus::Ok);
    assert_eq!(orders.cron, "0/2 * * * * ?");
    assert_eq!(orders.description, "");
    assert_eq!(orders.instance_count, 2);
    assert_eq!(orders.sharding_total_count, 4);
    assert_eq!(orders.leader.as_deref(), Some(A));
    assert_eq!(orders.problem, None);

    let items = ops.sharding_status("orders").await.unwrap();
    let owners: Vec<_> = items.iter().map(|i| i.instance_id.as_deref().unwrap()).collect();
    assert_eq!(owners, [B, B, A, A]);
    assert!(items.iter().all(|i| i.server_ip.as_deref() == Some("192.0.2.2") && !i.failover));
    assert_eq!(statuses(&items), [ItemStatus::Pending; 4]);

    let servers = ops.all_servers().await.unwrap();
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0].server_ip, "192.0.2.2");
    assert_eq!(servers[0].instances, [A, B]);
    assert_eq!(servers[0].job_names, ["orders"]);
    assert_eq!(
        (servers[0].instances_num, servers[0].jobs_num, servers[0].disabled_jobs_num),
        (2, 1, 0)
    );
    let on_server = ops.server_jobs("192.0.2.2").await.unwrap();
    assert_eq!(on_server[0].status, JobStatus::Ok);
    assert_eq!(on_server[0].instance_count, 2);
    let instances = ops.all_instances().await.unwrap();
    assert_eq!(instances.iter().map(|i| i.instance_id.as_str()).collect::<Vec<_>>(), [A, B]);
    assert!(instances.iter().all(|i| i.job_names == ["orders"]));

    let config = ops.config("orders").await.unwrap();
    assert_eq!(config.item_parameters().unwrap()[&3], "Shenzhen");
    assert!(config.failover() && config.overwrite());
}

#[tokio::test(start_paused = true)]
async fn operations_on_an_elasticjob_namespace_change_its_statuses() {
    let cluster = TestCluster::new(2);
    let client = elasticjob_namespace(&cluster).await;
    let ops = JobOperations::new(&client);

    ops.set_item_disabled("orders", 1, true).await.unwrap();
    assert!(client.exists("/orders/sharding/1/disabled").await.unwrap());
    let items = ops.sharding_status("orders").await.unwrap();
    assert_eq!(items[1].status, ItemStatus::Disabled);

    ops.disable_server("192.0.2.2", None, true).await.unwrap();
    assert_eq!(client.get_text("/orders/servers/192.0.2.2").await.unwrap().unwrap(), "DISABLED");
    assert_eq!(ops.job_brief("orders").await.unwrap().status, JobStatus::Disabled);
    assert_eq!(ops.all_servers().await.unwrap()[0].disabled_jobs_num, 1);
    ops.disable_server("192.0.2.2", Some("orders"), false).await.unwrap();
    assert_eq!(client.get_text("/orders/servers/192.0.2.2").await.unwrap().unwrap(), "ENABLED");

    assert_eq!(ops.trigger("orders").await.unwrap(), 2);
    assert_eq!(client.children("/orders/trigger").await.unwrap(), [A, B]);

    // One instance shut down: its items' owner is gone, the job needs a reshard.
    assert_eq!(ops.shutdown_instance(B, None).await.unwrap(), ["orders"]);
    assert_eq!(ops.job_brief("orders").await.unwrap().status, JobStatus::ShardingFlag);
    let items = ops.sharding_status("orders").await.unwrap();
    assert_eq!(
        statuses(&items),
        [ItemStatus::ShardingFlag, ItemStatus::Disabled, ItemStatus::Pending, ItemStatus::Pending]
    );
    // The whole server shut down: nothing runs the job any more.
    assert_eq!(ops.shutdown_server("192.0.2.2", None).await.unwrap(), 1);
    assert_eq!(ops.job_brief("orders").await.unwrap().status, JobStatus::Crashed);

    // A job disabled as a whole: every server node and the config flag.
    assert_eq!(ops.disable_job("orders", true).await.unwrap(), ["192.0.2.2"]);
    assert!(ops.config("orders").await.unwrap().disabled());
    assert_eq!(client.get_text("/orders/servers/192.0.2.2").await.unwrap().unwrap(), "DISABLED");
}

#[tokio::test(start_paused = true)]
async fn bad_requests_change_nothing() {
    let cluster = TestCluster::new(3);
    let client = elasticjob_namespace(&cluster).await;
    let ops = JobOperations::new(&client);
    let before = ops.dump("orders").await.unwrap();

    let refused = [
        ops.trigger("nope").await.map(drop),
        ops.set_item_disabled("orders", 4, true).await,
        ops.disable_server("10.9.9.9", None, true).await.map(drop),
        ops.disable_server("192.0.2.2", Some("nope"), true).await.map(drop),
        ops.shutdown_instance("10.9.9.9@-@1", Some("orders")).await.map(drop),
        ops.shutdown_server("bad/ip", None).await.map(drop),
        ops.set_config_yaml("orders", "shardingTotalCount: 0\n").await.map(drop),
        ops.set_config_yaml("orders", "shardingTotalCount: [\n").await.map(drop),
        ops.set_config_yaml("orders", "jobName: other\nshardingTotalCount: 2\n").await.map(drop),
        ops.set_config_yaml("orders", "shardingTotalCount: 2\ncron: 61 * * * * ?\n")
            .await
            .map(drop),
        ops.add_job_yaml("orders", "shardingTotalCount: 2\n").await.map(drop),
        ops.add_job_yaml("a/b", "shardingTotalCount: 2\n").await.map(drop),
        ops.remove("orders").await,
    ];
    for (i, result) in refused.into_iter().enumerate() {
        let err = result.expect_err(&format!("request {i} must be refused"));
        assert!(err.is_bad_request(), "request {i}: {err}");
        assert!(!err.to_string().contains('\n'), "one line: {err}");
    }
    assert_eq!(ops.dump("orders").await.unwrap(), before, "nothing changed");
    assert_eq!(ops.job_names().await.unwrap(), ["orders"]);
}

#[tokio::test(start_paused = true)]
async fn config_updates_follow_the_overwrite_rule_and_keep_extra_configurations() {
    let cluster = TestCluster::new(4);
    let client = elasticjob_namespace(&cluster).await;
    let ops = JobOperations::new(&client);
    let update = ops
        .set_config_yaml("orders", "cron: 0/10 * * * * ?\nshardingTotalCount: 6\nfailover: true\n")
        .await
        .unwrap();
    assert!(update.replaced_on_restart, "the fixture's instances publish with overwrite on");
    let config = ops.config("orders").await.unwrap();
    assert_eq!((config.cron(), config.sharding_total_count()), (Some("0/10 * * * * ?"), 6));
    assert_eq!(ops.sharding_status("orders").await.unwrap().len(), 6);

    // A JSON body (what a console sends) is a config too.
    let update = ops
        .set_config_yaml("orders", r#"{"jobName": "orders", "shardingTotalCount": 2}"#)
        .await
        .unwrap();
    assert!(!update.replaced_on_restart, "the last edit had overwrite off");
    assert_eq!(ops.config("orders").await.unwrap().sharding_total_count(), 2);

    // Extra configurations are not shown by editors: an edit without them keeps the stored ones.
    let traced = JobConfig::from_yaml(
        "jobName: traced\nshardingTotalCount: 1\njobExtraConfigurations:\n\
         - !!org.apache.shardingsphere.elasticjob.tracing.yaml.YamlTracingConfiguration\n  \
         type: RDB\n",
    )
    .unwrap();
    assert_eq!(traced.job_extra_configurations().len(), 1);
    ops.add_job(&traced).await.unwrap();
    let update = ops.set_config_yaml("traced", "shardingTotalCount: 3\n").await.unwrap();
    assert!(update.kept_extra_configurations);
    let stored = client.get_text("/traced/config").await.unwrap().unwrap();
    assert!(stored.contains("YamlTracingConfiguration"), "{stored}");
    assert_eq!(ops.job_brief("traced").await.unwrap().status, JobStatus::Crashed);
    ops.remove("traced").await.unwrap();
    assert!(!client.exists("/traced").await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_dump_loads_back_into_the_same_views() {
    let cluster = TestCluster::new(5);
    let client = elasticjob_namespace(&cluster).await;
    let ops = JobOperations::new(&client);
    let dump = ops.dump("orders").await.unwrap();
    assert_eq!(dump.len(), parse_dump(ELASTICJOB_3_0_4).unwrap().len() - 1, "all but the root");
    assert_eq!(dump[0].path, "/orders");
    assert_eq!(dump[0].data, "ejoracle.LoggingSimpleJob");
    let jsonl: String = dump.iter().map(|n| serde_json::to_string(n).unwrap() + "\n").collect();
    let copy = cluster.server.connect(ConnectOptions::default().namespace("/copy")).unwrap();
    load_dump(&copy, &jsonl).await.unwrap();
    let copied = JobOperations::new(&copy);
    assert_eq!(copied.jobs().await.unwrap(), ops.jobs().await.unwrap());
    assert_eq!(
        copied.sharding_status("orders").await.unwrap(),
        ops.sharding_status("orders").await.unwrap()
    );
}

/// Lets virtual time run until `ms` past the epoch.
async fn at(cluster: &TestCluster, ms: i64) {
    let now = cluster.handles.clock.now_ms();
    tokio::time::sleep(Duration::from_millis((EPOCH_MS + ms - now) as u64)).await;
}

/// Two shardcron instances run a job whose items take 3 s; the views show what they do.
#[tokio::test(start_paused = true)]
async fn a_shardcron_namespace_reads_with_the_same_rules() {
    let cluster = TestCluster::new(6);
    let a = cluster.instance("10.0.0.1").await;
    let b = cluster.instance("10.0.0.2").await;
    let config = JobConfig::builder("reports")
        .cron("0/10 * * * * ?")
        .sharding_total_count(4)
        .build()
        .unwrap();
    let slow = || {
        Job::from_fn(|_| async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok(())
        })
    };
    a.scheduler.add_job(config.clone(), slow()).await.unwrap();
    b.scheduler.add_job(config, slow()).await.unwrap();
    let client = cluster.client();
    let ops = JobOperations::new(&client);

    at(&cluster, 10_500).await; // items of the fire at 10 s are running
    let brief = ops.job_brief("reports").await.unwrap();
    assert_eq!((brief.status, brief.instance_count), (JobStatus::Ok, 2));
    let items = ops.sharding_status("reports").await.unwrap();
    assert_eq!(statuses(&items), [ItemStatus::Running; 4]);
    let owners: std::collections::BTreeSet<_> =
        items.iter().filter_map(|i| i.instance_id.clone()).collect();
    assert_eq!(owners.into_iter().collect::<Vec<_>>(), [a.id(), b.id()]);

    at(&cluster, 14_000).await; // done
    assert_eq!(statuses(&ops.sharding_status("reports").await.unwrap()), [ItemStatus::Pending; 4]);
    let servers = ops.servers("reports").await.unwrap();
    assert_eq!(
        servers.iter().map(|s| s.server_ip.as_str()).collect::<Vec<_>>(),
        ["10.0.0.1", "10.0.0.2"]
    );
    assert_eq!(servers[0].instances, [a.id()]);

    ops.set_item_disabled("reports", 0, true).await.unwrap();
    ops.disable_server("10.0.0.2", Some("reports"), true).await.unwrap();
    assert_eq!(ops.server_jobs("10.0.0.2").await.unwrap()[0].status, JobStatus::Disabled);
    at(&cluster, 20_500).await; // the fire at 20 s runs on 10.0.0.1 alone, without item 0
    let items = ops.sharding_status("reports").await.unwrap();
    assert_eq!(
        statuses(&items),
        [ItemStatus::Disabled, ItemStatus::Running, ItemStatus::Running, ItemStatus::Running]
    );
    assert!(items.iter().all(|i| i.instance_id.as_deref() == Some(a.id().as_str())));

    // An operator's shutdown of the last enabled instance: the job has no owner left.
    ops.shutdown_instance(&a.id(), None).await.unwrap();
    at(&cluster, 25_000).await;
    let brief = ops.job_brief("reports").await.unwrap();
    assert_eq!(brief.instance_count, 1);
    assert_eq!(brief.status, JobStatus::ShardingFlag);
    let err = ops.remove("reports").await.unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
}
