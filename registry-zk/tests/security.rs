//! Digest authentication and ACLs against a real ZooKeeper.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{options, server};
use shardcron_core::registry::{CoordinatorRegistry, CreateMode, RegistryError, TxnOp};
use shardcron_registry_zk::zookeeper_client as zk;
use shardcron_registry_zk::ZkRegistry;

/// A raw ZooKeeper client, optionally authenticated with `user:password`.
async fn raw(hosts: &str, digest: Option<&str>) -> zk::Client {
    let mut connector = zk::Client::connector();
    if let Some(digest) = digest {
        connector = connector.with_auth("digest", digest.as_bytes());
    }
    connector.connect(hosts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_our_digest_can_touch_our_nodes() {
    let Some(hosts) = server("only_our_digest_can_touch_our_nodes") else { return };
    let ns = common::top_namespace("acl");
    let alice =
        ZkRegistry::connect(options(&hosts, &ns).digest("alice", "wonderland")).await.unwrap();
    assert!(alice.capability().acl);
    alice.create("/job/config", b"cron: 0/5 * * * * ?", CreateMode::Persistent).await.unwrap();
    alice.create("/job/instances/i1", b"", CreateMode::Ephemeral).await.unwrap();
    let seq = alice
        .transaction(vec![TxnOp::create(
            "/job/seq-",
            b"t".to_vec(),
            CreateMode::PersistentSequential,
        )])
        .await
        .unwrap();
    assert_eq!(seq.len(), 1);

    // Every node alice made carries her digest, and nothing else.
    let inspector = raw(&hosts, Some("alice:wonderland")).await;
    for p in ["", "/job", "/job/config", "/job/instances", "/job/instances/i1"] {
        let (acl, _) = inspector.get_acl(&format!("{ns}{p}")).await.unwrap();
        assert_eq!(acl.len(), 1, "{p}: {acl:?}");
        assert_eq!(acl[0].scheme(), "digest", "{p}: {acl:?}");
        assert!(acl[0].id().starts_with("alice:"), "{p}: {acl:?}");
        assert_eq!(acl[0].permission(), zk::Permission::ALL, "{p}: {acl:?}");
    }

    // Other credentials, and none at all: no read, no write, no create, no delete.
    for (who, digest) in [("mallory", Some("mallory:guess")), ("anonymous", None)] {
        let intruder = raw(&hosts, digest).await;
        let config = format!("{ns}/job/config");
        let denied = [
            intruder.get_data(&config).await.map(drop),
            intruder.set_data(&config, b"evil", None).await.map(drop),
            intruder.list_children(&format!("{ns}/job")).await.map(drop),
            intruder
                .create(
                    &format!("{ns}/job/evil"),
                    b"",
                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
                )
                .await
                .map(drop),
            intruder.delete(&format!("{ns}/job/instances/i1"), None).await,
        ];
        for (i, res) in denied.into_iter().enumerate() {
            assert_eq!(res, Err(zk::Error::NoAuth), "{who}, op #{i}");
        }
    }

    // The same credentials in another client are the same identity.
    let alice2 =
        ZkRegistry::connect(options(&hosts, &ns).digest("alice", "wonderland")).await.unwrap();
    assert_eq!(alice2.set("/job/config", b"cron: 0 * * * * ?", Some(0)).await.unwrap(), 1);
    assert!(alice2.exists("/job/instances/i1").await.unwrap());
    alice.close().await.unwrap();
    alice2.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_fail_at_connect() {
    let Some(hosts) = server("wrong_credentials_fail_at_connect") else { return };
    let ns = common::top_namespace("wrong_credentials");
    let owner =
        ZkRegistry::connect(options(&hosts, &ns).digest("alice", "wonderland")).await.unwrap();

    let err = ZkRegistry::connect(options(&hosts, &ns).digest("alice", "wrong"))
        .await
        .expect_err("a wrong password must not connect");
    assert!(matches!(err, RegistryError::Auth { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("digest user \"alice\""), "{message}");
    assert!(message.contains("wrong digest user or password"), "{message}");
    assert!(!message.contains("wrong\""), "the password is not echoed: {message}");

    let err = ZkRegistry::connect(options(&hosts, &ns)).await.expect_err("no credentials");
    assert!(matches!(err, RegistryError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("without credentials"), "{err}");

    // Nor can anyone else create a namespace under one that is not theirs.
    let err = ZkRegistry::connect(options(&hosts, &format!("{ns}/inner")).digest("bob", "pw"))
        .await
        .expect_err("bob cannot create children in alice's namespace");
    assert!(matches!(err, RegistryError::Auth { .. }), "{err}");
    assert!(err.to_string().contains("cannot create the namespace node"), "{err}");
    owner.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_nodes_are_open() {
    let Some(hosts) = server("without_credentials_nodes_are_open") else { return };
    let ns = common::namespace("open");
    let registry = ZkRegistry::connect(options(&hosts, &ns)).await.unwrap();
    assert!(!registry.capability().acl);
    registry.create("/a", b"", CreateMode::Persistent).await.unwrap();
    let anyone = raw(&hosts, None).await;
    let (acl, _) = anyone.get_acl(&format!("{ns}/a")).await.unwrap();
    assert_eq!(acl, vec![zk::Acl::new(zk::Permission::ALL, zk::AuthId::anyone())]);
    anyone.set_data(&format!("{ns}/a"), b"x", None).await.unwrap();
    registry.close().await.unwrap();
}
