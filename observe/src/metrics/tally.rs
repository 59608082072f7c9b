//! [`Tally`]: what one job's hooks count between two renders, next to each other in one small
//! allocation, moved into the recorder when the metrics are rendered (a scrape,
//! [`Metrics::render`](super::Metrics::render)).
//!
//! Why not the recorder's handles at each hook: the hooks run for every fire and item of every
//! job, in bursts of thousands on whole seconds, and through the handles each count or sample is
//! a few atomic operations on allocations of their own (the handle, its generation, the value,
//! a histogram's block of samples), scattered over the heap. Measured at 1,000 fires/s that was
//! about 3 µs of the fire path per fire, most of it waiting for memory. Here a hook adds to the
//! job's counts under one uncontended lock, on the cache line or two of its job.
//!
//! Exactness: a histogram keeps, per bucket, how many samples fell in it and their sum (whole
//! milliseconds, as the hooks' times are). At a render they go to the recorder as that many
//! samples of the bucket's mean, which lies in the same bucket: the recorder's buckets and count
//! are exactly what recording each sample would have given, its sum too up to rounding.

use metrics::{Counter, Histogram};
use parking_lot::Mutex;

use super::SECONDS_BUCKETS;

/// Buckets of a histogram: [`SECONDS_BUCKETS`] and `+Inf`.
const BUCKETS: usize = SECONDS_BUCKETS.len() + 1;

/// The counts of one job since the last render.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    counts: Mutex<Counts>,
}

/// What [`Tally`] holds; the histograms last, so that the counters share the lock's cache line.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// By `ExecutionSource`, in the order of `ExecutionSource::ALL`.
    pub fires: [u64; 4],
    pub misfire_catchups: u64,
    pub started: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub lateness: Buckets,
    pub duration: Buckets,
}

/// One histogram's samples since the last render: per bucket, (how many, their sum in ms).
#[derive(Debug)]
pub(crate) struct Buckets([(u64, u64); BUCKETS]);

impl Default for Buckets {
    fn default() -> Self {
        Buckets([(0, 0); BUCKETS])
    }
}

/// A sample as the recorder takes it: `ms` in seconds (negative as 0).
fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

impl Buckets {
    /// Adds a sample of `ms` milliseconds (a negative one as 0, as the recorder's would be).
    pub fn record(&mut self, ms: i64) {
        let ms = u64::try_from(ms).unwrap_or(0);
        let value = seconds(ms);
        // The bucket the recorder puts it in: the first bound at or above it.
        let bucket = SECONDS_BUCKETS.iter().position(|&le| value <= le).unwrap_or(BUCKETS - 1);
        let (count, sum) = &mut self.0[bucket];
        *count += 1;
        *sum = sum.saturating_add(ms);
    }

    /// Records the samples into `histogram`: each bucket's count of its mean.
    fn publish(&self, histogram: &Histogram) {
        for (bucket, &(count, sum)) in self.0.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let mean = sum as f64 / count as f64 / 1000.0;
            // The mean of samples in (lower, upper] is in it; rounding must not move it out.
            let upper = SECONDS_BUCKETS.get(bucket).copied().unwrap_or(f64::INFINITY);
            let lower = bucket.checked_sub(1).map_or(f64::NEG_INFINITY, |b| SECONDS_BUCKETS[b]);
            let mean = if mean <= lower { lower.next_up() } else { mean.min(upper) };
            histogram.record_many(mean, usize::try_from(count).unwrap_or(usize::MAX));
        }
    }
}

/// Where a [`Tally`] goes at a render: the job's series in the recorder.
#[derive(Debug)]
pub(crate) struct Handles {
    pub fires: [Counter; 4],
    pub misfire_catchups: Counter,
    pub started: Counter,
    pub succeeded: Counter,
    pub failed: Counter,
    pub cancelled: Counter,
    pub lateness: Histogram,
    pub duration: Histogram,
}

impl Tally {
    /// Adds to the counts.
    pub fn add(&self, add: impl FnOnce(&mut Counts)) {
        add(&mut self.counts.lock());
    }

    /// Moves the counts into `to`, and starts again from zero.
    pub fn publish(&self, to: &Handles) {
        let counts = std::mem::take(&mut *self.counts.lock());
        let add = |counter: &Counter, n: u64| {
            if n > 0 {
                counter.increment(n);
            }
        };
        for (counter, n) in to.fires.iter().zip(counts.fires) {
            add(counter, n);
        }
        add(&to.misfire_catchups, counts.misfire_catchups);
        add(&to.started, counts.started);
        add(&to.succeeded, counts.succeeded);
        add(&to.failed, counts.failed);
        add(&to.cancelled, counts.cancelled);
        counts.lateness.publish(&to.lateness);
        counts.duration.publish(&to.duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name`'s lines of `text` without the name: `_bucket{le="0.001"} 3`, `_count 12`...
    fn series<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
        text.lines().filter_map(|line| line.strip_prefix(name)).collect()
    }

    #[test]
    fn publishing_gives_the_recorder_what_recording_each_sample_would() {
        let samples = [-5, 0, 1, 2, 3, 5, 5, 7, 2_499, 2_501, 299_999, 300_000, 300_001, 4_000_000];
        let recorder = super::super::builder().expect("buckets").build_recorder();
        metrics::with_local_recorder(&recorder, || {
            let direct = metrics::histogram!("direct_seconds");
            let tallied = metrics::histogram!("tallied_seconds");
            let mut buckets = Buckets::default();
            for ms in samples {
                direct.record(ms.max(0) as f64 / 1000.0);
                buckets.record(ms);
            }
            buckets.publish(&tallied);
        });
        let text = recorder.handle().render();
        let (direct, tallied) = (series(&text, "direct_seconds"), series(&text, "tallied_seconds"));
        assert_eq!(direct.len(), SECONDS_BUCKETS.len() + 3, "buckets, +Inf, sum, count: {text}");
        let (d_sum, t_sum) = (
            direct.iter().position(|l| l.starts_with("_sum")),
            tallied.iter().position(|l| l.starts_with("_sum")),
        );
        let value = |lines: &[&str], at: Option<usize>| -> f64 {
            at.and_then(|i| lines[i].rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN)
        };
        assert!((value(&direct, d_sum) - value(&tallied, t_sum)).abs() < 1e-6, "{text}");
        let without_sum = |lines: &[&str]| -> Vec<String> {
            lines.iter().filter(|l| !l.starts_with("_sum")).map(|l| (*l).to_owned()).collect()
        };
        assert_eq!(without_sum(&direct), without_sum(&tallied), "{text}");
    }
}
