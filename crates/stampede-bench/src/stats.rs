//! Summaries of timing samples.

use std::hint::black_box;
use std::time::Instant;

/// Percentiles and mean of a set of samples, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
}

impl Summary {
    /// Summarises `samples_ns` (sorted in place). Panics on an empty slice: a benchmark that
    /// measured nothing is a bug in the benchmark.
    pub fn of(samples_ns: &mut [u64]) -> Summary {
        assert!(!samples_ns.is_empty(), "Summary::of: no samples");
        samples_ns.sort_unstable();
        let total: u128 = samples_ns.iter().map(|&s| s as u128).sum();
        Summary {
            n: samples_ns.len(),
            mean_ns: total as f64 / samples_ns.len() as f64,
            p50_ns: percentile(samples_ns, 50.0) as f64,
            p99_ns: percentile(samples_ns, 99.0) as f64,
            min_ns: samples_ns[0] as f64,
            max_ns: samples_ns[samples_ns.len() - 1] as f64,
        }
    }

    /// The same summary with every figure divided by `k` (a round trip halved into one way, a
    /// batch divided into iterations).
    pub fn divided(self, k: f64) -> Summary {
        Summary {
            n: self.n,
            mean_ns: self.mean_ns / k,
            p50_ns: self.p50_ns / k,
            p99_ns: self.p99_ns / k,
            min_ns: self.min_ns / k,
            max_ns: self.max_ns / k,
        }
    }
}

/// The nearest-rank `p`-th percentile (0 < p <= 100) of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    assert!(!sorted.is_empty(), "percentile of no samples");
    assert!(p > 0.0 && p <= 100.0, "percentile {p} out of (0, 100]");
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Nanoseconds since `start`, saturated into a `u64`.
pub fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The mean cost of one `Instant::now()` + `elapsed()` pair, to subtract from per-call timings.
pub fn timer_overhead_ns() -> f64 {
    const ROUNDS: usize = 100_000;
    let start = Instant::now();
    let mut sink = 0;
    for _ in 0..ROUNDS {
        sink += elapsed_ns(black_box(Instant::now()));
    }
    black_box(sink);
    elapsed_ns(start) as f64 / ROUNDS as f64
}

/// Megabytes (10^6 bytes) per second for `bytes` moved in `ns`.
pub fn mb_per_s(bytes: u64, ns: u64) -> f64 {
    bytes as f64 / 1e6 / (ns as f64 / 1e9)
}
