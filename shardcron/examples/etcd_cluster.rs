//! A cluster on etcd: three instances divide a job's items, one leaves, the other two take
//! its items over.
//!
//! ```sh
//! scripts/etcd.sh start               # a throw-away server; prints SHARDCRON_ETCD=http://127.0.0.1:PORT
//! SHARDCRON_ETCD=127.0.0.1:PORT cargo run -p shardcron --features etcd --example etcd_cluster
//! # or with a URL of your own:
//! cargo run -p shardcron --features etcd --example etcd_cluster -- etcd://etcd1:2379/prod?ttl_s=10
//! ```
//!
//! Building the etcd backend needs `protoc` (Debian: `protobuf-compiler`). Without a server
//! it says how to get one; an unreachable one fails within the connect timeout, naming the
//! hosts it tried. The program is `support/cluster.rs`; only the URL differs from the
//! ZooKeeper example.

use std::process::ExitCode;

#[path = "support/cluster.rs"]
mod cluster;

#[tokio::main]
async fn main() -> ExitCode {
    match cluster::registry_url("etcd", "SHARDCRON_ETCD", "scripts/etcd.sh") {
        Some(url) => cluster::main(&url).await,
        None => ExitCode::from(2),
    }
}
