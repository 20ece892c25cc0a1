//! What the event log costs (issue 13 item 1; `docs/TRACING.md`, `docs/BENCHMARKS.md`): in one
//! process, first with tracing off, then on (`stampede::trace::enable`, a temporary directory):
//!
//! - ns per event: `trace::event` called in a loop, off (the flag's load) and on (a cycle-counter
//!   read and a push into the thread's buffer; the hand-offs to the writer thread included);
//! - the embedded hand-off ping-pong (`handoff`'s, 8 B and 230 400 B; per round trip 3 spans and
//!   a wait on each side, reclaims) off and on: its slowdown, p50 over p50.
//!
//! One JSON line per result. Tracing cannot be turned off once on, hence the order.

use std::time::Instant;

use stampede::trace::{self, Kind, Phase};
use stampede_bench::cli::Options;
use stampede_bench::payload::{case_name, IMAGE_BYTES, SMALL_BYTES};
use stampede_bench::ping_pong;
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;

use stampede_bench::BoxResult;

const BENCH: &str = "trace";

/// Nanoseconds per `trace::event` over `events` calls.
fn ns_per_event(events: u64) -> f64 {
    let start = Instant::now();
    for i in 0..events {
        trace::event(Kind::Claim, Phase::Instant, 0, std::hint::black_box(i), 0);
    }
    start.elapsed().as_nanos() as f64 / events as f64
}

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let events = options.scale(20_000_000, 100_000) as u64;
    let (rounds, warmup, round_trips) = (options.scale(3, 1), options.scale(500, 20), options.scale(5_000, 100));
    let hand_offs = |payload_bytes: usize| -> BoxResult<Summary> {
        let mut rtt = Vec::new();
        for _ in 0..rounds {
            rtt.extend(ping_pong::embedded(payload_bytes, warmup, round_trips)?);
        }
        Ok(Summary::of(&mut rtt))
    };
    let off_event = ns_per_event(events);
    let off: Vec<Summary> = [SMALL_BYTES, IMAGE_BYTES].into_iter().map(hand_offs).collect::<BoxResult<_>>()?;
    let dir = std::env::temp_dir().join(format!("stampede-trace-bench-{}", std::process::id()));
    trace::enable(&dir)?;
    let on_event = ns_per_event(events);
    let on: Vec<Summary> = [SMALL_BYTES, IMAGE_BYTES].into_iter().map(hand_offs).collect::<BoxResult<_>>()?;
    trace::flush();
    let dropped = trace::dropped();
    let _ = std::fs::remove_dir_all(&dir);
    Line::new(BENCH, "event", "trace::event, tracing on")
        .field("ns_per_event", on_event)
        .field("events", events)
        .field("dropped", dropped)
        .field("target_ns", 20.0)
        .emit();
    Line::new(BENCH, "event", "trace::event, tracing off")
        .field("ns_per_event", off_event)
        .field("events", events)
        .emit();
    for ((payload_bytes, off), on) in [SMALL_BYTES, IMAGE_BYTES].into_iter().zip(&off).zip(&on) {
        let case = case_name(payload_bytes);
        Line::new(BENCH, &case, "embedded hand-off, tracing on")
            .latency_us("", &on.divided(2.0))
            .ratio("embedded hand-off, tracing off", on.p50_ns / off.p50_ns)
            .field("target_slowdown", 1.03)
            .emit();
        Line::new(BENCH, &case, "embedded hand-off, tracing off").latency_us("", &off.divided(2.0)).emit();
    }
    Ok(())
}
