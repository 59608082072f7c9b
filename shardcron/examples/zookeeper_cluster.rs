//! A cluster on ZooKeeper: three instances divide a job's items, one leaves, the other two
//! take its items over.
//!
//! ```sh
//! scripts/zookeeper.sh start          # a throw-away server; prints SHARDCRON_ZK=127.0.0.1:PORT
//! SHARDCRON_ZK=127.0.0.1:PORT cargo run -p shardcron --features zookeeper --example zookeeper_cluster
//! # or with a URL of your own:
//! cargo run -p shardcron --features zookeeper --example zookeeper_cluster -- zk://zk1:2181/prod
//! ```
//!
//! Without a server it says how to get one; an unreachable one fails within the connect
//! timeout, naming the hosts it tried. The program is `support/cluster.rs`; only the URL differs
//! from the etcd example.

use std::process::ExitCode;

#[path = "support/cluster.rs"]
mod cluster;

#[tokio::main]
async fn main() -> ExitCode {
    match cluster::registry_url("zk", "SHARDCRON_ZK", "scripts/zookeeper.sh") {
        Some(url) => cluster::main(&url).await,
        None => ExitCode::from(2),
    }
}
