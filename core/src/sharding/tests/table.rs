//! Table tests: the examples ElasticJob documents, Java hash corner cases, and the lookup.

use std::sync::Arc;

use super::render;
use crate::sharding::{
    Assignment, AssignmentDefect, AverageAllocation, OdevitySortByName, RoundRobinByName,
    ShardingError, ShardingStrategies, ShardingStrategy,
};

const THREE: [&str; 3] = ["s1", "s2", "s3"];

fn run(strategy: &dyn ShardingStrategy, job: &str, instances: &[&str], total: u32) -> Vec<String> {
    render(&strategy.shard(job, instances, total), instances)
}

#[test]
fn average_allocation_documented_examples() {
    let cases: &[(u32, [&str; 3])] = &[
        (8, ["s1=0,1,6", "s2=2,3,7", "s3=4,5"]),
        (9, ["s1=0,1,2", "s2=3,4,5", "s3=6,7,8"]),
        (10, ["s1=0,1,2,9", "s2=3,4,5", "s3=6,7,8"]),
        (2, ["s1=0", "s2=1", "s3="]),
        (0, ["s1=", "s2=", "s3="]),
    ];
    for (total, expected) in cases {
        assert_eq!(run(&AverageAllocation, "any", &THREE, *total), expected, "{total} items");
    }
}

/// ElasticJob's ODEVITY example: 3 servers, 2 items; odd hash keeps the order, even reverses it.
#[test]
fn odevity_documented_examples_and_hash_signs() {
    let cases: &[(&str, i32, [&str; 3])] = &[
        ("myJob", 104_343_153, ["s1=0", "s2=1", "s3="]),
        ("job1", 3_267_604, ["s1=", "s2=1", "s3=0"]),
        ("testJob", -1_422_475_829, ["s1=0", "s2=1", "s3="]),
        ("dailySettlement", -1_665_189_854, ["s1=", "s2=1", "s3=0"]),
        // i32::MIN is even: reversed.
        ("polygenelubricants", i32::MIN, ["s1=", "s2=1", "s3=0"]),
    ];
    for (job, hash, expected) in cases {
        assert_eq!(crate::sharding::java_string_hash(job), *hash, "hash of {job}");
        assert_eq!(run(&OdevitySortByName, job, &THREE, 2), expected, "job {job}");
    }
}

/// ElasticJob's ROUND_ROBIN description: offset 1 → `[1,2,3] [4,5,6] [7,8,0]`-style rotation of
/// the servers (the items stay in blocks; the servers move).
#[test]
fn round_robin_rotates_by_hash() {
    let cases: &[(&str, usize, [&str; 3])] = &[
        // 104343153 % 3 == 0: no rotation.
        ("myJob", 0, ["s1=0,1,2", "s2=3,4,5", "s3=6,7,8"]),
        // 3267604 % 3 == 1: [s2, s3, s1].
        ("job1", 1, ["s1=6,7,8", "s2=0,1,2", "s3=3,4,5"]),
        // |-1422475829| % 3 == 2: [s3, s1, s2].
        ("testJob", 2, ["s1=3,4,5", "s2=6,7,8", "s3=0,1,2"]),
    ];
    for (job, offset, expected) in cases {
        assert_eq!(RoundRobinByName::offset(job, 3), *offset, "offset of {job}");
        assert_eq!(run(&RoundRobinByName, job, &THREE, 9), expected, "job {job}");
    }
}

/// `Math.abs(Integer.MIN_VALUE)` is negative in Java. ElasticJob then does not rotate when the
/// instance count is a power of two (offset 0) and throws otherwise; we rotate by 2^31 % n.
#[test]
fn round_robin_min_value_hash() {
    let job = "polygenelubricants";
    for n in [1usize, 2, 4, 8, 64] {
        assert_eq!(RoundRobinByName::offset(job, n), 0, "{n} instances");
    }
    assert_eq!(RoundRobinByName::offset(job, 3), 2); // 2147483648 % 3
    assert_eq!(RoundRobinByName::offset(job, 5), 3);
    assert_eq!(RoundRobinByName::offset(job, 7), 2);
    assert_eq!(run(&RoundRobinByName, job, &THREE, 9), ["s1=3,4,5", "s2=6,7,8", "s3=0,1,2"]);
}

#[test]
fn no_instances_give_an_empty_assignment() {
    let strategies = ShardingStrategies::default();
    for name in strategies.type_names() {
        let strategy = strategies.get(name).unwrap();
        assert_eq!(strategy.shard("job", &[], 10), Assignment::new(), "{name}");
        assert_eq!(RoundRobinByName::offset("job", 0), 0);
    }
}

#[test]
fn lookup_by_type_name() {
    let strategies = ShardingStrategies::default();
    assert_eq!(
        strategies.type_names().collect::<Vec<_>>(),
        ["AVG_ALLOCATION", "ODEVITY", "ROUND_ROBIN"]
    );
    for name in ["AVG_ALLOCATION", "ODEVITY", "ROUND_ROBIN"] {
        assert_eq!(strategies.get(name).unwrap().type_name(), name);
    }
    // ElasticJob: null or empty type means the default.
    assert_eq!(strategies.resolve(None).unwrap().type_name(), "AVG_ALLOCATION");
    assert_eq!(strategies.resolve(Some("")).unwrap().type_name(), "AVG_ALLOCATION");
    assert!(strategies.contains("ODEVITY"));
    assert!(!strategies.contains("odevity"));
}

#[test]
fn unknown_strategy_is_a_typed_error() {
    let err = ShardingStrategies::default().get("avg_allocation").unwrap_err();
    assert_eq!(
        err,
        ShardingError::UnknownStrategy {
            name: "avg_allocation".into(),
            known: "AVG_ALLOCATION, ODEVITY, ROUND_ROBIN".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "unknown sharding strategy \"avg_allocation\": known strategies are \
         AVG_ALLOCATION, ODEVITY, ROUND_ROBIN; register custom ones with ShardingStrategies::register"
    );
}

/// A custom strategy: everything to the last instance.
#[derive(Debug)]
struct AllToLast;

impl ShardingStrategy for AllToLast {
    fn type_name(&self) -> &str {
        "ALL_TO_LAST"
    }
    fn shard(&self, _job: &str, instances: &[&str], total: u32) -> Assignment {
        let mut result = Assignment::with_instances(instances);
        if let Some(last) = instances.last() {
            result.assign(last, 0..total);
        }
        result
    }
}

/// A broken custom strategy: forgets idle instances and doubles item 0.
#[derive(Debug)]
struct Broken(&'static str);

impl ShardingStrategy for Broken {
    fn type_name(&self) -> &str {
        self.0
    }
    fn shard(&self, _job: &str, instances: &[&str], _total: u32) -> Assignment {
        let mut result = Assignment::with_instances(instances);
        for id in instances {
            result.assign(id, [0]);
        }
        result
    }
}

#[test]
fn custom_strategies_plug_in_by_name() {
    let mut strategies = ShardingStrategies::default();
    strategies.register(Arc::new(AllToLast)).unwrap();
    let assignment = strategies.shard(Some("ALL_TO_LAST"), "job", &THREE, 3).unwrap();
    assert_eq!(render(&assignment, &THREE), ["s1=", "s2=", "s3=0,1,2"]);
}

#[test]
fn registration_rejects_clashing_and_empty_names() {
    let mut strategies = ShardingStrategies::default();
    let err = strategies.register(Arc::new(Broken("ODEVITY"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a sharding strategy named \"ODEVITY\" is already registered; pick another type name"
    );
    let err = strategies.register(Arc::new(Broken(""))).unwrap_err();
    assert_eq!(err.to_string(), "a sharding strategy must have a non-empty type name");
    // The built-in is untouched.
    assert_eq!(strategies.get("ODEVITY").unwrap().type_name(), "ODEVITY");
}

#[test]
fn checked_shard_rejects_bad_input_and_bad_output() {
    let mut strategies = ShardingStrategies::default();
    strategies.register(Arc::new(Broken("BROKEN"))).unwrap();
    let cases: Vec<(Option<&str>, Vec<&str>, ShardingError, &str)> = vec![
        (
            Some("AVG_ALLOCATION"),
            vec!["a", "", "b"],
            ShardingError::EmptyInstanceId { position: 1 },
            "instance id at position 1 is empty; every instance needs a non-empty id",
        ),
        (
            Some("AVG_ALLOCATION"),
            vec!["a", "b", "a"],
            ShardingError::DuplicateInstance { instance: "a".into() },
            "instance \"a\" is listed more than once; each instance may appear only once",
        ),
        (
            Some("BROKEN"),
            vec!["a", "b"],
            ShardingError::InvalidAssignment {
                strategy: "BROKEN".into(),
                defect: AssignmentDefect::DuplicateItem(0),
            },
            "sharding strategy \"BROKEN\" returned an invalid assignment: \
             item 0 is assigned more than once",
        ),
    ];
    for (name, instances, expected, message) in cases {
        let err = strategies.shard(name, "job", &instances, 2).unwrap_err();
        assert_eq!(err, expected);
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn duplicates_passed_directly_still_assign_every_item() {
    // Bypassing the checks: items of both occurrences stay with the instance.
    let assignment = AverageAllocation.shard("job", &["a", "b", "a"], 6);
    assert_eq!(render(&assignment, &["a", "b"]), ["a=0,1,4,5", "b=2,3"]);
}
