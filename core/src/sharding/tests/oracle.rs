//! Differential test against ElasticJob: `testdata/elasticjob_oracle.tsv` holds the assignments
//! ElasticJob-Lite 3.x's own strategy algorithms computed on OpenJDK 17 for 882 inputs (every
//! strategy × job names with odd, even, negative, `i32::MIN` and non-BMP hashes × 1..7 instances
//! × 1..17 items). Rows marked `EXCEPTION` are where ElasticJob throws (ROUND_ROBIN with an
//! `i32::MIN` hash); there we check our documented rotation by `2^31 % n` instead.

use super::render;
use crate::sharding::{java_abs, java_string_hash, RoundRobinByName, ShardingStrategies};

const ORACLE: &str = include_str!("../testdata/elasticjob_oracle.tsv");

/// What ElasticJob's `rotateServerList` computes before indexing: `Math.abs(hash) % n` in `int`.
fn elasticjob_offset(job: &str, n: usize) -> i64 {
    i64::from(java_abs(java_string_hash(job))) % n as i64
}

#[test]
fn matches_elasticjob_for_every_oracle_row() {
    let strategies = ShardingStrategies::default();
    let mut rows = 0;
    let mut exceptions = 0;
    for line in ORACLE.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [strategy, job, total, instances, expected] = fields[..] else {
            panic!("malformed oracle row: {line}");
        };
        let total: u32 = total.parse().unwrap();
        let instances: Vec<&str> = instances.split(',').collect();
        let actual = strategies.shard(Some(strategy), job, &instances, total).unwrap();
        rows += 1;
        if expected == "EXCEPTION" {
            exceptions += 1;
            assert_eq!(strategy, "ROUND_ROBIN", "{line}");
            assert!(elasticjob_offset(job, instances.len()) < 0, "{line}");
            // Ours: AVG over the list rotated by the true |hash| % n.
            let offset = RoundRobinByName::offset(job, instances.len());
            let rotated: Vec<&str> =
                instances[offset..].iter().chain(&instances[..offset]).copied().collect();
            let avg = strategies.shard(None, job, &rotated, total).unwrap();
            assert_eq!(actual, avg, "{line}");
            continue;
        }
        let expected: Vec<&str> = expected.split(';').collect();
        assert_eq!(render(&actual, &instances), expected, "{line}");
    }
    assert_eq!(rows, 882);
    assert_eq!(exceptions, 21);
}
