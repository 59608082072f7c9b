//! Properties over random clusters: 1..1000 instances, 1..10000 items, arbitrary job names.

use proptest::collection::btree_set;
use proptest::prelude::*;

use crate::sharding::{
    java_string_hash, Assignment, AverageAllocation, OdevitySortByName, RoundRobinByName,
    ShardingStrategies, ShardingStrategy,
};

/// Few cases: each one shards up to 10,000 items, and the suite shares 2 cores.
fn config() -> ProptestConfig {
    ProptestConfig { cases: 64, ..ProptestConfig::default() }
}

/// 1..1000 distinct instance ids in random order.
fn instances() -> impl Strategy<Value = Vec<String>> {
    btree_set(any::<u32>(), 1..1000)
        .prop_map(|ids| ids.into_iter().map(|id| format!("10.{id:08x}@-@{}", id % 97)).collect())
        .prop_shuffle()
}

/// Names of any Unicode, so hashes cover both signs, both parities and surrogate pairs.
fn job_name() -> impl Strategy<Value = String> {
    "\\PC{0,16}"
}

fn refs(ids: &[String]) -> Vec<&str> {
    ids.iter().map(String::as_str).collect()
}

fn sizes(assignment: &Assignment) -> (usize, usize) {
    let lens: Vec<usize> = assignment.iter().map(|(_, items)| items.len()).collect();
    let min = lens.iter().copied().min().unwrap_or(0);
    (min, lens.iter().copied().max().unwrap_or(0))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_item_exactly_once_to_a_given_instance(
        ids in instances(), job in job_name(), total in 1u32..10_000,
    ) {
        let ids = refs(&ids);
        let strategies = ShardingStrategies::default();
        for name in strategies.type_names() {
            let assignment = strategies.get(name).unwrap().shard(&job, &ids, total);
            prop_assert_eq!(assignment.verify(&ids, total), Ok(()), "{}", name);
            prop_assert_eq!(assignment.len(), ids.len());
            prop_assert_eq!(assignment.item_count(), total as usize);
            for (_, items) in assignment.iter() {
                prop_assert!(items.is_sorted(), "{} gave unsorted items", name);
            }
        }
    }

    #[test]
    fn balanced_within_one_item(ids in instances(), job in job_name(), total in 1u32..10_000) {
        let ids = refs(&ids);
        for strategy in [&AverageAllocation as &dyn ShardingStrategy, &OdevitySortByName, &RoundRobinByName] {
            let (min, max) = sizes(&strategy.shard(&job, &ids, total));
            prop_assert!(max - min <= 1, "{}: {} vs {}", strategy.type_name(), min, max);
            prop_assert_eq!(max, (total as usize).div_ceil(ids.len()));
        }
    }

    #[test]
    fn deterministic(ids in instances(), job in job_name(), total in 1u32..10_000) {
        let ids = refs(&ids);
        let (first, second) = (ShardingStrategies::default(), ShardingStrategies::default());
        for name in first.type_names() {
            let a = first.shard(Some(name), &job, &ids, total).unwrap();
            let b = second.shard(Some(name), &job, &ids, total).unwrap();
            prop_assert_eq!(a, b, "{}", name);
        }
    }

    #[test]
    fn odevity_is_avg_over_the_list_reversed_on_even_hash(
        ids in instances(), job in job_name(), total in 1u32..10_000,
    ) {
        let mut ordered = refs(&ids);
        if java_string_hash(&job) % 2 == 0 {
            ordered.reverse();
        }
        prop_assert_eq!(
            OdevitySortByName.shard(&job, &refs(&ids), total),
            AverageAllocation.shard(&job, &ordered, total)
        );
    }

    #[test]
    fn round_robin_is_avg_over_the_rotated_list(
        ids in instances(), job in job_name(), total in 1u32..10_000,
    ) {
        let ids = refs(&ids);
        // |hash| computed independently, in i64 so i32::MIN has its true magnitude.
        let offset = (i64::from(java_string_hash(&job)).abs() % ids.len() as i64) as usize;
        let rotated: Vec<&str> = (0..ids.len()).map(|i| ids[(i + offset) % ids.len()]).collect();
        prop_assert_eq!(
            RoundRobinByName.shard(&job, &ids, total),
            AverageAllocation.shard(&job, &rotated, total)
        );
    }

    #[test]
    fn no_instances_no_assignment(job in job_name(), total in 0u32..10_000) {
        let strategies = ShardingStrategies::default();
        for name in strategies.type_names() {
            let assignment = strategies.shard(Some(name), &job, &[], total).unwrap();
            prop_assert!(assignment.is_empty(), "{}", name);
        }
    }
}
