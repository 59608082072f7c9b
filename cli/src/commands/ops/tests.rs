//! The operations commands in-process, on the in-memory registry holding a namespace that
//! ElasticJob 3.0.4 wrote: what they print, what they change, and that bad input changes
//! nothing.

use clap::Parser;
use shardcron::api::JobOperations;
use shardcron::handles::Handles;
use shardcron::mem::{ConnectOptions, MemRegistry, MemServer};
use shardcron::registry::{CoordinatorRegistry, RegistryExt};
use shardcron_tests::fixtures::{load_dump, ELASTICJOB_3_0_4};

use super::super::Command;
use crate::error::CliError;

#[derive(Debug, Parser)]
struct Line {
    #[command(subcommand)]
    command: Command,
}

async fn fixture() -> (MemServer, MemRegistry) {
    let server = MemServer::new(Handles::real());
    let client = server.connect(ConnectOptions::default().namespace("/ej")).unwrap();
    load_dump(&client, ELASTICJOB_3_0_4).await.unwrap();
    (server, client)
}

/// Runs `shardcron ARGS` (with `--registry mem:` added) on `registry`.
async fn shardcron(registry: &dyn CoordinatorRegistry, args: &str) -> Result<String, CliError> {
    let mut words: Vec<&str> = vec!["shardcron"];
    words.extend(args.split_whitespace());
    words.extend(["--registry", "mem:"]);
    let line = Line::try_parse_from(words).map_err(|e| CliError::InvalidInput(e.to_string()))?;
    let printed = super::exec(&line.command, registry).await.expect("an operations command")?;
    Ok(String::from_utf8(printed).unwrap())
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn views_show_an_elasticjob_namespace() {
    let (_server, r) = fixture().await;
    let jobs = shardcron(&r, "jobs").await.unwrap();
    assert_eq!(
        jobs,
        "JOB     STATUS  CRON           ITEMS  INSTANCES  DESCRIPTION\n\
         orders  OK      0/2 * * * * ?  4      2          -\n"
    );
    let jobs = json(&shardcron(&r, "jobs --output json").await.unwrap());
    assert_eq!(jobs[0]["jobName"], "orders");
    assert_eq!(jobs[0]["shardingTotalCount"], 4);

    let show = shardcron(&r, "job show orders").await.unwrap();
    assert!(show.contains("status       OK\n"), "{show}");
    assert!(show.contains("3     PENDING  192.0.2.2@-@14191  -\n"), "{show}");
    assert!(show.contains("192.0.2.2  OK      192.0.2.2@-@14191,192.0.2.2@-@14194\n"), "{show}");
    assert!(show.contains("  shardingItemParameters: 0=Beijing,1=Shanghai"), "{show}");
    let show = json(&shardcron(&r, "job show orders --output json").await.unwrap());
    assert_eq!(show["sharding"][0]["instanceId"], "192.0.2.2@-@14194");
    assert_eq!(show["sharding"][0]["status"], "PENDING");
    assert_eq!(show["config"]["failover"], true);

    let servers = json(&shardcron(&r, "servers --output json").await.unwrap());
    assert_eq!(servers[0]["serverIp"], "192.0.2.2");
    assert_eq!(servers[0]["instancesNum"], 2);
    let on_one = shardcron(&r, "servers --server 192.0.2.2").await.unwrap();
    assert_eq!(on_one, "JOB     STATUS  INSTANCES\norders  OK      2\n");
    let instances = shardcron(&r, "instances").await.unwrap();
    assert!(instances.contains("192.0.2.2@-@14194  192.0.2.2  orders\n"), "{instances}");

    let dump = shardcron(&r, "dump orders --output json").await.unwrap();
    assert_eq!(dump.lines().count(), 21);
    let copy = MemServer::new(Handles::real()).connect(ConnectOptions::default()).unwrap();
    load_dump(&copy, &dump).await.unwrap();
    assert_eq!(shardcron(&copy, "jobs").await.unwrap(), shardcron(&r, "jobs").await.unwrap());
    let table = shardcron(&r, "dump orders").await.unwrap();
    assert!(table.contains("/orders/config  P  cron: 0/2 * * * * ?\\ndescription"), "{table}");
}

#[tokio::test]
async fn actions_change_the_nodes_elasticjob_reads() {
    let (_server, r) = fixture().await;
    shardcron(&r, "disable orders --item 2").await.unwrap();
    assert!(r.exists("/orders/sharding/2/disabled").await.unwrap());
    shardcron(&r, "enable orders --item 2").await.unwrap();
    assert!(!r.exists("/orders/sharding/2/disabled").await.unwrap());

    let out = shardcron(&r, "disable --server 192.0.2.2").await.unwrap();
    assert_eq!(out, "server 192.0.2.2: disabled for orders\n");
    assert_eq!(r.get_text("/orders/servers/192.0.2.2").await.unwrap().unwrap(), "DISABLED");
    let jobs = json(&shardcron(&r, "jobs --output json").await.unwrap());
    assert_eq!(jobs[0]["status"], "DISABLED");
    shardcron(&r, "enable orders").await.unwrap();
    assert_eq!(r.get_text("/orders/servers/192.0.2.2").await.unwrap().unwrap(), "ENABLED");

    assert_eq!(
        shardcron(&r, "trigger orders").await.unwrap(),
        "job orders: triggered on 2 instance(s)\n"
    );
    assert_eq!(r.children("/orders/trigger").await.unwrap().len(), 2);

    let out = shardcron(&r, "shutdown orders --instance 192.0.2.2@-@14194").await.unwrap();
    assert_eq!(out, "instance 192.0.2.2@-@14194: shut down for orders\n");
    let jobs = json(&shardcron(&r, "jobs --output json").await.unwrap());
    assert_eq!(jobs[0]["status"], "SHARDING_FLAG");
    shardcron(&r, "shutdown --server 192.0.2.2").await.unwrap();
    assert!(r.children("/orders/instances").await.unwrap().is_empty());

    let dir = std::env::temp_dir().join(format!("shardcron-ops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("orders.yaml");
    std::fs::write(&file, "cron: 0/30 * * * * ?\nshardingTotalCount: 2\n").unwrap();
    let out = shardcron(&r, &format!("config set orders {}", file.display())).await.unwrap();
    assert!(out.contains("config replaced") && out.contains("overwrite: true"), "{out}");
    let yaml = shardcron(&r, "config get orders").await.unwrap();
    assert!(yaml.contains("cron: 0/30 * * * * ?\n") && yaml.contains("shardingTotalCount: 2\n"));
    assert_eq!(
        json(&shardcron(&r, "config get orders --output json").await.unwrap())
            ["shardingTotalCount"],
        2
    );

    std::fs::write(&file, "cron: 0 0 * * * ?\nshardingTotalCount: 3\nfailover: true\n").unwrap();
    let out = shardcron(&r, &format!("add hourly {}", file.display())).await.unwrap();
    assert_eq!(out, "job hourly: added with 3 item(s)\n");
    let jobs = json(&shardcron(&r, "jobs --output json").await.unwrap());
    assert_eq!(jobs[0]["jobName"], "hourly");
    assert_eq!(jobs[0]["status"], "CRASHED");
    shardcron(&r, "remove hourly").await.unwrap();
    shardcron(&r, "remove orders").await.unwrap();
    assert!(r.children("/").await.unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn bad_input_is_one_line_exit_2_and_changes_nothing() {
    let (_server, r) = fixture().await;
    let before = JobOperations::new(&r).dump("orders").await.unwrap();
    let dir = std::env::temp_dir().join(format!("shardcron-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let invalid_yaml = file("invalid.yaml", "shardingTotalCount: [1,\n");
    let zero = file("zero.yaml", "shardingTotalCount: 0\n");
    let renamed = file("renamed.yaml", "jobName: other\nshardingTotalCount: 1\n");
    let bad_cron = file("cron.yaml", "shardingTotalCount: 1\ncron: '0 0 25 * * ?'\n");
    let cases = [
        "job show nope".to_owned(),
        "trigger nope".into(),
        "disable nope".into(),
        "disable orders --item 4".into(),
        "disable orders --item x".into(),
        "disable orders --item -1".into(),
        "enable --server 10.1.1.1".into(),
        "disable orders --server 10.1.1.1".into(),
        "shutdown --instance 10.1.1.1@-@1".into(),
        "shutdown nope".into(),
        "config get nope".into(),
        format!("config set orders {invalid_yaml}"),
        format!("config set orders {zero}"),
        format!("config set orders {renamed}"),
        format!("config set orders {bad_cron}"),
        format!("config set orders {}", dir.join("missing.yaml").display()),
        format!("add orders {zero}"),
        format!("add orders {}", file("ok.yaml", "shardingTotalCount: 1\n")),
        "remove orders".into(),
        "remove nope".into(),
        "dump nope".into(),
        "servers --server 10.1.1.1".into(),
    ];
    for case in &cases {
        match shardcron(&r, case).await {
            Err(CliError::InvalidInput(reason)) => {
                assert!(!reason.contains('\n') || case.contains("--item"), "{case}: {reason}")
            }
            other => panic!("{case}: expected invalid input, got {other:?}"),
        }
    }
    assert_eq!(JobOperations::new(&r).dump("orders").await.unwrap(), before, "nothing changed");
    assert_eq!(r.children("/").await.unwrap(), ["orders"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
