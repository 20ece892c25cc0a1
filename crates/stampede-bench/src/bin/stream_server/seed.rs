//! The seed's own loads and figures (GigaView, seed `001_*`): its single-stream and multi-user
//! cases measured here and set against its delays and utilisation, and the Delay = Latency +
//! Size/Throughput fit set against its disk and link model.

use stampede_bench::report::Line;
use stampede_bench::stats::LinearFit;

use crate::figures::Figures;
use crate::stream::Plan;
use crate::{BoxResult, Server, Settings, BENCH, FRAME_BYTES, SUBJECT};

const SEED: &str = "GigaView (seed 001: simulated, 8 disks on 4 T9000 nodes)";

/// Seed §5.2: one stream of 400 KB frames at 32 frames/s is 70 % utilisation of the GigaView.
const SEED_FPS: f64 = 32.0;
const SEED_UTILISATION: f64 = 0.70;
/// The seed's MB/s per frame/s: "36 frames/s (14.4 MBytes/s)", so 400 KB = 0.4 MB.
const SEED_FRAME_MB: f64 = 0.4;
/// Seed §5.3: one stream's maximum access delay, and three streams' (8, 7 and 6 frames per
/// time-slice, starting together: 27 frames/s, 60 % utilisation).
const SEED_SINGLE_MAX_DELAY_MS: f64 = 50.0;
const SEED_MIXED_MAX_DELAY_MS: f64 = 130.0;
const SEED_MIXED_RATES: [f64; 3] = [8.0, 7.0, 6.0];
const SEED_MIXED_UTILISATION: f64 = 0.60;
/// Seed §3.1–3.2: the model's components, Delay = Latency + Size/Throughput: disks rated 10 ms
/// and 4 MB/s, T9000 links 5 µs and 8 MB/s. The seed fits no line to the whole server.
const SEED_DISK_LATENCY_US: f64 = 10_000.0;
const SEED_DISK_MB_PER_S: f64 = 4.0;
const SEED_LINK_LATENCY_US: f64 = 5.0;
const SEED_LINK_MB_PER_S: f64 = 8.0;

impl Server {
    /// The seed's own loads, and the lines comparing with its figures.
    pub(crate) fn seed_cases(
        &mut self,
        settings: &Settings,
        max_bytes_per_s: f64,
        grid: &[(usize, f64, f64, Figures)],
    ) -> BoxResult<()> {
        let seed_capacity_mb_s = SEED_FPS * SEED_FRAME_MB / SEED_UTILISATION;
        Line::new(BENCH, "capacity (100 % utilisation)", SUBJECT)
            .field("mb_per_s", max_bytes_per_s / 1e6)
            .field("seed_mb_per_s", seed_capacity_mb_s)
            .ratio(SEED, max_bytes_per_s / 1e6 / seed_capacity_mb_s)
            .emit();

        let single = self.measure(
            &format!("seed load: K=1 F={SEED_FPS}fps S={FRAME_BYTES}B"),
            "seed_load",
            &[settings.plan(0, SEED_FPS)],
            max_bytes_per_s,
        )?;
        let utilisation = SEED_FPS * FRAME_BYTES as f64 / max_bytes_per_s;
        Line::new(BENCH, "seed load: utilisation of 1 stream at 32 fps", SUBJECT)
            .field("utilisation", utilisation)
            .field("seed_utilisation", SEED_UTILISATION)
            .field("max_delay_ms", single.max_us / 1e3)
            .field("seed_max_delay_ms", SEED_SINGLE_MAX_DELAY_MS)
            .ratio(SEED, utilisation / SEED_UTILISATION)
            .emit();

        let at_70 = grid.iter().find(|g| g.0 == 1 && (g.1 - SEED_UTILISATION).abs() < 1e-9);
        if let Some((_, _, fps, figures)) = at_70 {
            Line::new(BENCH, "single stream at 70 % utilisation", SUBJECT)
                .field("fps", *fps)
                .field("achieved_fps", figures.achieved_fps)
                .field("seed_fps", SEED_FPS)
                .field("mb_per_s", figures.achieved_mb_per_s)
                .field("seed_mb_per_s", SEED_FPS * SEED_FRAME_MB)
                .field("p50_ms", figures.p50_us / 1e3)
                .field("max_ms", figures.max_us / 1e3)
                .field("jitter_ms", figures.jitter_us / 1e3)
                .field("seed_max_delay_ms", SEED_SINGLE_MAX_DELAY_MS)
                .ratio(SEED, figures.achieved_fps / SEED_FPS)
                .emit();
        }

        let total_fps = SEED_MIXED_UTILISATION * max_bytes_per_s / FRAME_BYTES as f64;
        let weights: f64 = SEED_MIXED_RATES.iter().sum();
        let plans: Vec<Plan> =
            SEED_MIXED_RATES.iter().enumerate().map(|(k, r)| settings.plan(k, total_fps * r / weights)).collect();
        let mixed = self.measure(
            "seed multi-user: K=3 rates 8:7:6, 60 %, starting together",
            "seed_mixed",
            &plans,
            max_bytes_per_s,
        )?;
        // The seed's single-stream maximum (50 ms) is at 70 %: the same case here, if measured.
        let (single_case, single_max_us) = match at_70 {
            Some(g) => ("K=1 at 70 %", g.3.max_us),
            None => ("K=1 at 32 fps", single.max_us),
        };
        Line::new(BENCH, "multi-user max delay over single-stream max delay", SUBJECT)
            .field("max_ms", mixed.max_us / 1e3)
            .field("single_case", single_case)
            .field("single_max_ms", single_max_us / 1e3)
            .field("seed_max_ms", SEED_MIXED_MAX_DELAY_MS)
            .field("seed_single_max_ms", SEED_SINGLE_MAX_DELAY_MS)
            .field("seed_ratio", SEED_MIXED_MAX_DELAY_MS / SEED_SINGLE_MAX_DELAY_MS)
            .ratio(
                "the same ratio in the seed",
                (mixed.max_us / single_max_us) / (SEED_MIXED_MAX_DELAY_MS / SEED_SINGLE_MAX_DELAY_MS),
            )
            .emit();
        Ok(())
    }

    /// Delay of a cold, unpaced frame read against frame size, and the least-squares line.
    pub(crate) fn size_fit(&mut self, settings: &Settings) -> BoxResult<()> {
        let mut means = Vec::new();
        let mut every = Vec::new();
        for (i, &size) in settings.fit_sizes.iter().enumerate() {
            let stream = settings.streams + i;
            let plan = Plan { stream, fps: None, frames: self.streams[stream].on_disk };
            let cache = self.evict()?;
            let outcomes = self.run(&[plan])?;
            self.write_csv(&outcomes, None, "fit")?;
            let figures = Figures::of(&outcomes, size);
            means.push((size as f64, figures.mean_us));
            every.extend(outcomes[0].delays_ns.iter().map(|&d| (size as f64, d as f64 / 1e3)));
            let line = Line::new(BENCH, &format!("size fit: 1 reader, cold, unpaced, S={size}B"), SUBJECT)
                .field("frame_bytes", size as u64)
                .field("mb_per_s", figures.achieved_mb_per_s);
            cache.fields(figures.fields(line)).emit();
        }
        let (Some(fit), Some(fit_frames)) = (LinearFit::of(&means), LinearFit::of(&every)) else {
            return Err("size fit: fewer than two frame sizes".into());
        };
        // Delay in µs against size in bytes: the slope is µs per byte, so 1/slope is bytes per µs = MB/s.
        let throughput = |fit: &LinearFit| if fit.slope > 0.0 { 1.0 / fit.slope } else { f64::INFINITY };
        Line::new(BENCH, "size fit: Delay = Latency + Size/Throughput", SUBJECT)
            .field("latency_us", fit.intercept)
            .field("throughput_mb_per_s", throughput(&fit))
            .field("r2", fit.r2)
            .field("per_frame_latency_us", fit_frames.intercept)
            .field("per_frame_throughput_mb_per_s", throughput(&fit_frames))
            .field("per_frame_r2", fit_frames.r2)
            .field("seed_disk_latency_us", SEED_DISK_LATENCY_US)
            .field("seed_disk_mb_per_s", SEED_DISK_MB_PER_S)
            .field("seed_link_latency_us", SEED_LINK_LATENCY_US)
            .field("seed_link_mb_per_s", SEED_LINK_MB_PER_S)
            .field("seed_disk_latency_over_latency", SEED_DISK_LATENCY_US / fit.intercept)
            .ratio("seed disk model (10 ms + size / 4 MB/s), throughput", throughput(&fit) / SEED_DISK_MB_PER_S)
            .emit();
        Ok(())
    }
}
