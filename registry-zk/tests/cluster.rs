//! Several shardcron clients on one real ZooKeeper server, as the instances of a cluster use it:
//! registration, watches, election, hand-over, compare-and-set; plus connecting by URL and the
//! contract's data-size limit on a real server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{options, server};
use futures::StreamExt;
use shardcron_core::registry::ext::await_leadership;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, Leadership, Node, RegistryError, RegistryExt, TxnOp,
    WatchEvent, WatchStream, MAX_DATA_SIZE,
};
use shardcron_registry_zk::ZkRegistry;

const PATIENCE: Duration = Duration::from_secs(30);

async fn converge(
    stream: &mut WatchStream,
    view: &mut BTreeMap<String, Node>,
    done: impl Fn(&BTreeMap<String, Node>) -> bool,
) {
    while !done(view) {
        let ev = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("a watch event in time")
            .expect("the stream goes on");
        ev.apply_to(view);
    }
}

fn instances(view: &BTreeMap<String, Node>) -> Vec<String> {
    view.keys().filter_map(|p| p.strip_prefix("/job/instances/")).map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_instances_share_one_server() {
    let Some(hosts) = server("several_instances_share_one_server") else { return };
    let ns = common::namespace("cluster");
    const N: usize = 4;
    let mut nodes = Vec::new();
    for _ in 0..N {
        nodes.push(ZkRegistry::connect(options(&hosts, &ns)).await.unwrap());
    }
    let elsewhere =
        ZkRegistry::connect(options(&hosts, &common::namespace("cluster_other"))).await.unwrap();
    let ids: Vec<u64> = nodes.iter().map(|n| n.session_id().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] != w[1]), "one session per client: {ids:?}");

    // Every instance watches the membership, then registers itself.
    let mut watches = Vec::new();
    for n in &nodes {
        let mut stream = n.watch("/job/instances").await.unwrap();
        let mut view = BTreeMap::new();
        stream.next().await.unwrap().apply_to(&mut view);
        watches.push((stream, view));
    }
    for (i, n) in nodes.iter().enumerate() {
        n.create(&format!("/job/instances/i{i}"), b"", CreateMode::Ephemeral).await.unwrap();
    }
    let all: Vec<String> = (0..N).map(|i| format!("i{i}")).collect();
    for (stream, view) in &mut watches {
        converge(stream, view, |v| instances(v) == all).await;
    }
    assert!(!elsewhere.exists("/job").await.unwrap(), "namespaces are apart");

    // One leader among them.
    let mut latches = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        latches.push(n.leader_latch("/job/leader", &format!("i{i}")).await.unwrap());
    }
    await_leadership(latches[0].as_mut(), PATIENCE).await.unwrap();
    for latch in latches.iter_mut().skip(1) {
        assert!(tokio::time::timeout(Duration::from_millis(300), latch.changed()).await.is_err());
    }
    assert_eq!(latches[1].leader().await.unwrap().as_deref(), Some("i0"));

    // Compare-and-set from every instance at once: no update lost.
    nodes[0].create("/job/counter", b"0", CreateMode::Persistent).await.unwrap();
    let mut tasks = Vec::new();
    for n in &nodes {
        let n = n.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                loop {
                    let node = n.get("/job/counter").await.unwrap().unwrap();
                    let next = node.text().parse::<u64>().unwrap() + 1;
                    match n
                        .set("/job/counter", next.to_string().as_bytes(), Some(node.version))
                        .await
                    {
                        Ok(_) => break,
                        Err(RegistryError::BadVersion { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(nodes[3].get_text("/job/counter").await.unwrap().as_deref(), Some("40"));

    // The leader's instance stops: everyone sees it leave, the next in line leads.
    let leader = nodes.remove(0);
    let mut leader_latch = latches.remove(0);
    let (mut gone_stream, mut gone_view) = watches.remove(0);
    leader.close().await.unwrap();
    assert!(matches!(leader_latch.changed().await, Ok(Leadership::Lost) | Err(_)));
    await_leadership(latches[0].as_mut(), PATIENCE).await.unwrap();
    assert_eq!(latches[2].leader().await.unwrap().as_deref(), Some("i1"));
    let rest: Vec<String> = (1..N).map(|i| format!("i{i}")).collect();
    for (stream, view) in &mut watches {
        converge(stream, view, |v| instances(v) == rest).await;
    }
    // The closed client's watch ended with it.
    while let Ok(Some(ev)) = tokio::time::timeout(PATIENCE, gone_stream.next()).await {
        ev.apply_to(&mut gone_view);
    }

    for n in nodes {
        n.close().await.unwrap();
    }
    elsewhere.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connects_by_url() {
    let Some(hosts) = server("connects_by_url") else { return };
    let ns = common::top_namespace("url");
    // Several hosts, one of them dead: the client finds the live one.
    let url = format!(
        "zk://127.0.0.1:1,{hosts}{ns}?session_timeout_ms=3000&connect_timeout_ms=5000\
         &operation_timeout_ms=5000&digest=carol:p%40ss"
    );
    let registry = ZkRegistry::connect_url(&url).await.unwrap();
    assert_eq!(registry.options().hosts.len(), 2);
    assert_eq!(registry.negotiated_session_timeout(), Some(Duration::from_secs(3)));
    assert!(registry.capability().acl);
    registry.create("/x", b"", CreateMode::Persistent).await.unwrap();
    let same = ZkRegistry::connect(options(&hosts, &ns).digest("carol", "p@ss")).await.unwrap();
    assert!(same.exists("/x").await.unwrap(), "the URL's namespace and decoded password");
    same.close().await.unwrap();
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_up_to_the_contract_limit() {
    let Some(hosts) = server("data_up_to_the_contract_limit") else { return };
    let registry = ZkRegistry::connect(options(&hosts, &common::namespace("limit"))).await.unwrap();
    // Exactly the limit needs a server jute.maxbuffer above ZooKeeper's 1 MiB default.
    let full = vec![b'z'; MAX_DATA_SIZE];
    registry.create("/full", &full, CreateMode::Persistent).await.unwrap();
    assert_eq!(registry.get("/full").await.unwrap().unwrap().data.len(), MAX_DATA_SIZE);
    // Two full nodes in one transaction still fit in the test server's 4 MiB.
    registry
        .transaction(vec![
            TxnOp::set("/full", full.clone(), Some(0)),
            TxnOp::create("/full2", full.clone(), CreateMode::Persistent),
        ])
        .await
        .unwrap();
    // A watch carries them too.
    let mut stream = registry.watch("/").await.unwrap();
    let Some(WatchEvent::Resync { nodes }) = stream.next().await else { panic!("resync") };
    assert_eq!(nodes["/full2"].data.len(), MAX_DATA_SIZE);
    assert_eq!(nodes["/"].version, 0, "the namespace node reads as the contract's root");
    registry.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_time_is_the_servers_clock_and_invisible() {
    let Some(hosts) = server("registry_time_is_the_servers_clock_and_invisible") else { return };
    let registry = ZkRegistry::connect(options(&hosts, &common::namespace("time"))).await.unwrap();
    let mut stream = registry.watch("/").await.unwrap();
    let Some(WatchEvent::Resync { .. }) = stream.next().await else { panic!("resync") };
    let local = || {
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        i64::try_from(since_epoch.unwrap().as_millis()).unwrap()
    };
    let before = local();
    let server_ms = registry.registry_time().await.unwrap();
    let after = local();
    // Same machine, same clock: the server stamped the write while we waited for it.
    assert!(before - 5 <= server_ms && server_ms <= after + 5, "{before} {server_ms} {after}");
    // Clock writes are not changes of the contract's read-only root.
    let root = registry.get("/").await.unwrap().unwrap();
    assert_eq!((root.version, root.data.len()), (0, 0));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), stream.next()).await.is_err(),
        "no watch event for a clock read"
    );
    registry.close().await.unwrap();
}
