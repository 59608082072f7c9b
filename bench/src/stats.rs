//! Statistics for the report: a lock-free latency histogram that many job tasks record into at
//! once, and exact percentiles of small sample sets.

use std::sync::atomic::{AtomicU64, Ordering};

/// Values below this are counted exactly; above, each power of two is cut into this many
/// buckets, so a bucket is at most 1/64 (1.6 %) of its value wide.
const LINEAR: u64 = 64;
const SUB_BITS: u32 = 6;
/// Enough buckets for values up to 2^40 (over 12 days in microseconds).
const BUCKETS: usize = (LINEAR as usize) * (40 - SUB_BITS as usize + 1);

/// A log-linear histogram of non-negative integers (microseconds here), filled with atomic
/// counters so that job tasks on any thread record without a lock, in fixed memory (about
/// 17 KiB whatever the number of samples, so that it weighs the same in every scheduler's RSS).
#[derive(Debug)]
pub struct Histogram {
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    max: AtomicU64,
    sum: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            max: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }
}

/// The bucket of `value`.
fn bucket_of(value: u64) -> usize {
    if value < LINEAR {
        return value as usize;
    }
    let bits = 64 - value.leading_zeros(); // value < 2^bits, bits > SUB_BITS
    let shift = bits - SUB_BITS - 1;
    let sub = (value >> shift) - LINEAR; // 0..LINEAR
    let index = (shift as usize + 1) * LINEAR as usize + sub as usize;
    index.min(BUCKETS - 1)
}

/// The largest value that falls in bucket `index` (percentiles are reported as upper bounds).
fn bucket_high(index: usize) -> u64 {
    let linear = LINEAR as usize;
    if index < linear {
        return index as u64;
    }
    let shift = (index / linear - 1) as u32;
    let sub = (index % linear) as u64;
    ((LINEAR + sub + 1) << shift) - 1
}

impl Histogram {
    pub fn record(&self, value: u64) {
        self.buckets[bucket_of(value)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(value, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        self.sum.load(Ordering::Relaxed) as f64 / n as f64
    }

    /// The smallest bucket bound at or below which `q` (0..=1) of the samples fall; the exact
    /// maximum for `q = 1`, 0 without samples.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        if q >= 1.0 {
            return self.max();
        }
        let rank = ((q * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, bucket) in self.buckets.iter().enumerate() {
            seen += bucket.load(Ordering::Relaxed);
            if seen >= rank {
                return bucket_high(index).min(self.max());
            }
        }
        self.max()
    }

    /// The figures the report shows.
    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count(),
            p50: self.quantile(0.50),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.max(),
            mean: self.mean(),
        }
    }
}

/// Percentiles of one distribution (in the unit recorded: microseconds for latencies).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// The `q` quantile (0..=1) of `samples` by the nearest-rank method; `None` when empty.
pub fn quantile(samples: &[f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).max(1);
    Some(sorted[rank - 1])
}

/// The median of `samples`; `None` when empty.
pub fn median(samples: &[f64]) -> Option<f64> {
    quantile(samples, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_64_and_within_two_percent_above() {
        for v in 0..LINEAR {
            assert_eq!(bucket_high(bucket_of(v)), v);
        }
        for v in [64, 65, 100, 127, 128, 1_000, 4_999, 5_000, 123_456, 10_000_000, 1 << 39] {
            let high = bucket_high(bucket_of(v));
            assert!(high >= v, "{v} is at or below its bucket's bound {high}");
            assert!((high - v) as f64 <= v as f64 / 64.0, "{v}: bound {high} too far");
        }
        // Buckets are contiguous: the next value after a bound opens the next bucket.
        for index in 0..BUCKETS - 1 {
            assert_eq!(bucket_of(bucket_high(index) + 1), index + 1, "after bucket {index}");
        }
    }

    #[test]
    fn histogram_percentiles_of_a_known_distribution() {
        let h = Histogram::default();
        assert_eq!(h.summary(), Summary::default());
        for v in 1..=1_000 {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!(s.count, 1_000);
        assert_eq!(s.max, 1_000);
        assert!((500..=508).contains(&s.p50), "{s:?}");
        assert!((990..=1_000).contains(&s.p99), "{s:?}");
        assert!((s.mean - 500.5).abs() < 1e-9);
        assert_eq!(h.quantile(0.0), 1, "rank 1 is the smallest sample");
    }

    #[test]
    fn exact_quantiles_by_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 1.0), Some(4.0));
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.0), Some(1.0));
    }
}
