//! The shared registry behaviour suite (`shardcron_core::testkit`), unchanged, against a real
//! ZooKeeper server (`SHARDCRON_ZK`). Real time: ZooKeeper does not run on tokio's clock.

mod common;

shardcron_core::registry_behaviour_suite! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    backend = match common::ZkBackend::from_env("the behaviour suite") {
        Some(backend) => backend,
        None => return,
    }
}
