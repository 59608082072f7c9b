//! The [`ShardingStrategy`] trait and ElasticJob's three strategies.
//!
//! The built-ins mirror ElasticJob-Lite 3.x's `AverageAllocationJobShardingStrategy`,
//! `OdevitySortByNameJobShardingStrategy` and `RoundRobinByNameJobShardingStrategy` step for step,
//! so the same instance list, job name and count give the same assignment.

use std::fmt;

use super::java::java_string_hash;
use super::Assignment;

/// A pure function from (job name, instances, total item count) to an [`Assignment`].
///
/// # Contract
/// - `instances` arrive in *sharding order*: the runtime sorts live instance ids with
///   [`sort_for_sharding`](super::sort_for_sharding) (ElasticJob's order) before calling. A strategy
///   may depend on that order but must not assume anything else about the ids.
/// - The result assigns every item in `0..total_count` to exactly one of `instances` and lists
///   every instance, with an empty list when it gets nothing. With no instances the result is
///   empty.
/// - Deterministic: no clock, randomness or global state; equal inputs give equal outputs.
///
/// [`ShardingStrategies::shard`](super::ShardingStrategies::shard) checks the input (no empty or
/// duplicate ids) and verifies the output, so a faulty custom strategy yields an error rather than
/// a lost or doubled item.
pub trait ShardingStrategy: fmt::Debug + Send + Sync {
    /// The name configs refer to it by (`jobShardingStrategyType`), e.g. `"AVG_ALLOCATION"`.
    fn type_name(&self) -> &str;

    /// Computes the assignment. See the trait's contract.
    fn shard(&self, job_name: &str, instances: &[&str], total_count: u32) -> Assignment;
}

/// `AVG_ALLOCATION`, the default: consecutive blocks of `total / n` items in instance order, then
/// the `total % n` leftover items one each to the first instances.
///
/// 3 instances, 8 items: `[0,1,6] [2,3,7] [4,5]`; 9 items: `[0,1,2] [3,4,5] [6,7,8]`;
/// 10 items: `[0,1,2,9] [3,4,5] [6,7,8]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AverageAllocation;

impl AverageAllocation {
    /// Its `jobShardingStrategyType`.
    pub const TYPE: &'static str = "AVG_ALLOCATION";
}

impl ShardingStrategy for AverageAllocation {
    fn type_name(&self) -> &str {
        Self::TYPE
    }

    fn shard(&self, _job_name: &str, instances: &[&str], total_count: u32) -> Assignment {
        average_allocation(instances.iter().copied(), instances.len(), total_count)
    }
}

/// `ODEVITY`: if the job name's Java hash is even, reverse the instance list; then
/// [`AverageAllocation`].
///
/// ElasticJob documents this as "odd hash: IPs ascending, even: descending", which holds for an
/// ascending input. ElasticJob actually feeds instances in *descending* order (see
/// [`sort_for_sharding`](super::sort_for_sharding)), so in a real cluster an odd hash keeps the
/// descending order and an even one makes it ascending. We replicate the operation, not the prose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OdevitySortByName;

impl OdevitySortByName {
    /// Its `jobShardingStrategyType`.
    pub const TYPE: &'static str = "ODEVITY";

    /// True when ODEVITY reverses the instance list for this job (its name's hash is even).
    /// Negative hashes count by their parity too (Java's `%` keeps the sign, `-3 % 2 == -1`).
    pub fn reverses(job_name: &str) -> bool {
        java_string_hash(job_name) % 2 == 0
    }
}

impl ShardingStrategy for OdevitySortByName {
    fn type_name(&self) -> &str {
        Self::TYPE
    }

    fn shard(&self, job_name: &str, instances: &[&str], total_count: u32) -> Assignment {
        if Self::reverses(job_name) {
            average_allocation(instances.iter().rev().copied(), instances.len(), total_count)
        } else {
            average_allocation(instances.iter().copied(), instances.len(), total_count)
        }
    }
}

/// `ROUND_ROBIN`: rotate the instance list left by `|hash(job name)| % n`, then
/// [`AverageAllocation`]. With offset 1, `[a, b, c]` becomes `[b, c, a]`.
///
/// Java's `Math.abs(Integer.MIN_VALUE)` is still negative, so for a job name hashing to
/// `i32::MIN` (e.g. `"polygenelubricants"`) ElasticJob computes a negative offset whenever `n` is
/// not a power of two and then fails with `IndexOutOfBoundsException`, leaving the job unsharded.
/// When `n` is a power of two the offset is 0 and ElasticJob does not rotate. We rotate by the true
/// `2^31 % n`: the same result wherever ElasticJob produces one, and a valid one where it crashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundRobinByName;

impl RoundRobinByName {
    /// Its `jobShardingStrategyType`.
    pub const TYPE: &'static str = "ROUND_ROBIN";

    /// The left rotation applied to a list of `instance_count` instances for this job.
    /// `0` when there are no instances.
    pub fn offset(job_name: &str, instance_count: usize) -> usize {
        if instance_count == 0 {
            return 0;
        }
        // ElasticJob: `Math.abs(hash) % n`. `unsigned_abs` equals Java's `Math.abs` for every hash
        // but i32::MIN, where it gives the true magnitude 2^31 instead of a negative number.
        let magnitude = u64::from(java_string_hash(job_name).unsigned_abs());
        // `instance_count` fits in u64 on every supported target, and the remainder is below it.
        (magnitude % instance_count as u64) as usize
    }
}

impl ShardingStrategy for RoundRobinByName {
    fn type_name(&self) -> &str {
        Self::TYPE
    }

    fn shard(&self, job_name: &str, instances: &[&str], total_count: u32) -> Assignment {
        let offset = Self::offset(job_name, instances.len());
        let (head, tail) = instances.split_at(offset);
        average_allocation(tail.iter().chain(head).copied(), instances.len(), total_count)
    }
}

/// ElasticJob's average allocation over `ordered` (of length `count`).
///
/// Instance `k` gets `[k*per, (k+1)*per)` where `per = total / count`, and instance `k < total %
/// count` also gets `per*count + k`: exactly ElasticJob's `shardingAliquot` + `addAliquant`.
fn average_allocation<'a>(
    ordered: impl Iterator<Item = &'a str>,
    count: usize,
    total_count: u32,
) -> Assignment {
    if count == 0 {
        return Assignment::new();
    }
    // u64 so `k * per` cannot overflow whatever the instance count; every value stays below
    // `total_count`, a u32, so the narrowing below is lossless.
    let total = u64::from(total_count);
    let count = count as u64;
    let per = total / count;
    let remainder = total % count;
    (0u64..)
        .zip(ordered)
        .map(|(k, instance)| {
            let block = (k * per..(k + 1) * per).map(|item| item as u32);
            let extra = (k < remainder).then_some((per * count + k) as u32);
            (instance, block.chain(extra).collect::<Vec<u32>>())
        })
        .collect()
}
