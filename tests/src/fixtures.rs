//! Registry namespaces recorded from real clusters, loaded into any registry: the JSON-lines
//! node dumps under `tests/fixtures/` (one `{"path", "ephemeral", "data", ...}` object per node,
//! parents before children; the form `shardcron dump --output json` writes).

use shardcron_core::api::DumpedNode;
use shardcron_core::registry::{CoordinatorRegistry, CreateMode};

/// A namespace written by ElasticJob-Lite 3.0.4 itself on ZooKeeper 3.8: job `orders`, 4 items,
/// two live instances on one IP, a leader, steady (no run in progress).
pub const ELASTICJOB_3_0_4: &str = include_str!("../fixtures/elasticjob-3.0.4-namespace.jsonl");

/// Parses a JSON-lines dump.
pub fn parse_dump(jsonl: &str) -> Result<Vec<DumpedNode>, serde_json::Error> {
    jsonl.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect()
}

/// Creates every node of the dump (but the root) in `registry`, ephemeral ones in the
/// registry's session: they live as long as it does, as the instances that wrote them would.
pub async fn load_dump(
    registry: &dyn CoordinatorRegistry,
    jsonl: &str,
) -> Result<usize, Box<dyn std::error::Error>> {
    let nodes = parse_dump(jsonl)?;
    let mut created = 0;
    for node in nodes.iter().filter(|n| n.path != "/") {
        let mode = if node.ephemeral { CreateMode::Ephemeral } else { CreateMode::Persistent };
        registry.create(&node.path, node.data.as_bytes(), mode).await?;
        created += 1;
    }
    Ok(created)
}
