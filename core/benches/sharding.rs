//! Sharding micro-benchmark: 10,000 items over 1,000 instances with each built-in strategy.
//!
//! A plain `harness = false` binary (no criterion) to keep build times low on small machines.
//! Run with `cargo bench -p shardcron-core --bench sharding`; figures go to `core/README.md`.
//! It measures wall time per call (median and spread over repeated batches), the raw strategy
//! and the checked path the runtime uses (input check + strategy + result verification).

use std::hint::black_box;
use std::time::{Duration, Instant};

use shardcron_core::sharding::{sort_for_sharding, ShardingStrategies};

const INSTANCES: usize = 1_000;
const ITEMS: u32 = 10_000;
const BATCH: u32 = 20;
const SAMPLES: usize = 50;

fn main() {
    // Ids shaped like real ones, `{ip}@-@{pid}`, in the order the runtime hands them over.
    let mut ids: Vec<String> =
        (0..INSTANCES).map(|i| format!("10.0.{}.{}@-@{}", i / 250, i % 250, 4000 + i)).collect();
    sort_for_sharding(&mut ids);
    let instances: Vec<&str> = ids.iter().map(String::as_str).collect();
    let strategies = ShardingStrategies::default();

    println!(
        "sharding {ITEMS} items over {INSTANCES} instances, {SAMPLES} samples of {BATCH} calls"
    );
    println!("{:<34} {:>10} {:>10} {:>10}", "case", "median", "min", "max");
    for name in ["AVG_ALLOCATION", "ODEVITY", "ROUND_ROBIN"] {
        let Ok(strategy) = strategies.get(name) else {
            eprintln!("{name} is not registered");
            return;
        };
        report(&format!("{name} (strategy only)"), || {
            black_box(strategy.shard(black_box("orders"), black_box(&instances), ITEMS));
        });
        report(&format!("{name} (checked)"), || {
            let result = strategies.shard(Some(name), "orders", black_box(&instances), ITEMS);
            black_box(result.is_ok());
        });
    }
    report("sort_for_sharding (1,000 ids)", || {
        let mut copy = instances.clone();
        sort_for_sharding(&mut copy);
        black_box(copy);
    });
}

/// Runs `f` in batches and prints per-call median, min and max.
fn report(label: &str, mut f: impl FnMut()) {
    for _ in 0..BATCH {
        f(); // warm-up: caches, allocator
    }
    let mut per_call: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                f();
            }
            start.elapsed() / BATCH
        })
        .collect();
    per_call.sort();
    let median = per_call[SAMPLES / 2];
    let (min, max) = (per_call[0], per_call[SAMPLES - 1]);
    println!("{label:<34} {:>10} {:>10} {:>10}", fmt(median), fmt(min), fmt(max));
}

fn fmt(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
