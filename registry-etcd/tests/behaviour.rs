//! The shared registry behaviour suite (`shardcron_core::testkit`), unchanged, against a real
//! etcd server (`SHARDCRON_ETCD`, see `scripts/etcd.sh`). Real time: every case runs on a
//! multi-threaded runtime, in its own namespace, and forces expiries by revoking the client's
//! lease from another connection.

mod support;

shardcron_core::registry_behaviour_suite! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    backend = match support::EtcdBackend::from_env() {
        Some(backend) => backend,
        None => return,
    }
}
