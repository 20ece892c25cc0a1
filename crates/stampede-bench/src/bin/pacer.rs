//! Real-time pacing (docs/SEMANTICS.md, "Pacing"): the wake-up error of `Pacer::sync` — how late
//! after its due time `sync(vt)` returns — next to plain `std::thread::sleep` to the same due times
//! in the same run, and the frame rate a 30 fps source written with the pacer actually holds.

use std::time::{Duration, Instant};

use stampede::{Pacer, Result};
use stampede_bench::cli::Options;
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;

fn main() -> Result<()> {
    let options = Options::from_args();
    let ticks = options.scale(400, 20);
    let tick = Duration::from_millis(5);

    let mut pacer = Pacer::new(tick, Duration::from_millis(1))?;
    let start = Instant::now();
    let mut paced: Vec<u64> = (1..=ticks as i64)
        .map(|vt| {
            pacer.sync(vt);
            lateness_ns(start, tick * vt as u32)
        })
        .collect();

    let start = Instant::now();
    let mut slept: Vec<u64> = (1..=ticks as u32)
        .map(|k| {
            let due = tick * k;
            std::thread::sleep(due.saturating_sub(start.elapsed()));
            lateness_ns(start, due)
        })
        .collect();

    let (paced, slept) = (Summary::of(&mut paced), Summary::of(&mut slept));
    let case = format!("{} ticks of {} ms", ticks, tick.as_millis());
    Line::new("pacer_wakeup_error", &case, "std::thread::sleep").latency_us("", &slept).emit();
    Line::new("pacer_wakeup_error", &case, "stampede Pacer::sync")
        .latency_us("", &paced)
        .ratio("std::thread::sleep", paced.p50_ns / slept.p50_ns.max(1.0))
        .emit();

    let frames = options.scale(90, 9);
    let mut pacer = Pacer::new(Duration::from_secs_f64(1.0 / 30.0), Duration::from_millis(5))?;
    let start = Instant::now();
    for vt in 1..=frames as i64 {
        pacer.sync(vt);
    }
    let fps = frames as f64 / start.elapsed().as_secs_f64();
    Line::new("pacer_30fps", &format!("{frames} frames"), "stampede Pacer::sync").field("fps", fps).emit();
    Ok(())
}

/// How late `now` is after `due` (measured from `start`), in ns.
fn lateness_ns(start: Instant, due: Duration) -> u64 {
    u64::try_from(start.elapsed().saturating_sub(due).as_nanos()).unwrap_or(u64::MAX)
}
