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

/// Standard deviation (population) of `samples_ns` around their `mean_ns`: the jitter of a delay.
pub fn std_dev_ns(samples_ns: &[u64], mean_ns: f64) -> f64 {
    assert!(!samples_ns.is_empty(), "std_dev_ns: no samples");
    let sum_sq: f64 = samples_ns.iter().map(|&s| (s as f64 - mean_ns).powi(2)).sum();
    (sum_sq / samples_ns.len() as f64).sqrt()
}

/// A least-squares line `y = intercept + slope * x`, and how much of `y`'s variance it explains.
#[derive(Clone, Copy, Debug)]
pub struct LinearFit {
    pub intercept: f64,
    pub slope: f64,
    /// Coefficient of determination (1: every point on the line).
    pub r2: f64,
}

impl LinearFit {
    /// Fits `points` (x, y) by ordinary least squares; `None` with fewer than two distinct x.
    pub fn of(points: &[(f64, f64)]) -> Option<LinearFit> {
        let n = points.len() as f64;
        let (mean_x, mean_y) =
            (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let syy: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
        if points.len() < 2 || sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let intercept = mean_y - slope * mean_x;
        let sse: f64 = points.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
        let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
        Some(LinearFit { intercept, slope, r2 })
    }
}
