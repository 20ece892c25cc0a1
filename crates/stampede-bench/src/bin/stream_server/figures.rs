//! What a result line reports of a measurement: a configuration's delays over all its streams
//! ([`Figures`]) and how cold the disk tier was when it started ([`Cache`]).

use stampede_bench::report::Line;
use stampede_bench::stats::{percentile, std_dev_ns};

use crate::stream::Outcome;

/// Bytes per MiB, for `resident_mib`.
const MIB: f64 = 1_048_576.0;

/// A configuration's delays, over all its streams, in µs.
pub(crate) struct Figures {
    frames: usize,
    frames_planned: usize,
    pub(crate) p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    pub(crate) max_us: f64,
    pub(crate) mean_us: f64,
    pub(crate) jitter_us: f64,
    pub(crate) offered_fps: f64,
    pub(crate) achieved_fps: f64,
    pub(crate) achieved_mb_per_s: f64,
    pub(crate) bad_frames: usize,
}

impl Figures {
    pub(crate) fn of(outcomes: &[Outcome], frame_bytes: usize) -> Figures {
        let mut all: Vec<u64> = outcomes.iter().flat_map(|o| o.delays_ns.iter().copied()).collect();
        assert!(!all.is_empty(), "a configuration read no frame");
        all.sort_unstable();
        let mean_ns = all.iter().map(|&d| d as f64).sum::<f64>() / all.len() as f64;
        let fps = |o: &Outcome| o.delays_ns.len() as f64 / (o.span_ns.max(1) as f64 / 1e9);
        let achieved_fps: f64 = outcomes.iter().map(fps).sum();
        let us = |p: f64| percentile(&all, p) as f64 / 1e3;
        Figures {
            frames: all.len(),
            frames_planned: outcomes.iter().map(|o| o.plan.frames).sum(),
            p50_us: us(50.0),
            p90_us: us(90.0),
            p99_us: us(99.0),
            max_us: us(100.0),
            mean_us: mean_ns / 1e3,
            jitter_us: std_dev_ns(&all, mean_ns) / 1e3,
            offered_fps: outcomes.iter().filter_map(|o| o.plan.fps).sum(),
            achieved_fps,
            achieved_mb_per_s: achieved_fps * frame_bytes as f64 / 1e6,
            bad_frames: outcomes.iter().map(|o| o.bad_frames).sum(),
        }
    }

    /// Adds the delay figures, frame counts and checksum failures to `line`.
    pub(crate) fn fields(&self, line: Line) -> Line {
        line.field("frames", self.frames as u64)
            .field("frames_planned", self.frames_planned as u64)
            .field("p50_us", self.p50_us)
            .field("p90_us", self.p90_us)
            .field("p99_us", self.p99_us)
            .field("max_us", self.max_us)
            .field("mean_us", self.mean_us)
            .field("jitter_us", self.jitter_us)
            .field("bad_frames", self.bad_frames as u64)
    }
}

/// How cold the tier was when a measurement started.
pub(crate) struct Cache {
    pub(crate) method: String,
    pub(crate) resident_bytes: u64,
    pub(crate) cold: bool,
}

impl Cache {
    pub(crate) fn fields(&self, line: Line) -> Line {
        line.field("cache", if self.cold { "cold" } else { "warm cache" })
            .field("resident_mib", self.resident_bytes as f64 / MIB)
            .field("evict", self.method.as_str())
    }
}
