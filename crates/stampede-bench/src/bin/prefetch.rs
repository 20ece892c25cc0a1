//! Prefetch `off` against `auto`, side by side in one run, through one `stampede serve` node on
//! loopback (issue 31 item 6, first rows; docs/PREFETCH.md, docs/BENCHMARKS.md). One JSON line
//! per result.
//!
//! - `skipping`: a 30 fps camera of 230 400-byte frames (STM's) and a display reading the
//!   freshest frame at 30, 10 and 3 fps, each a client session of its own
//!   ([`stampede_bench::prefetch::skipping`]). Per policy: the display's gets and how many needed
//!   a round trip, the pushed items its gets used ("updates used"), messages (each request and
//!   its reply, each notice or push), bytes pushed, get latency and the frame's age at the
//!   display (from the start of its put) p50/p99, and the frames it showed per second. The
//!   `auto` line carries its savings against the `off` line of the same rate.
//! - `cache_get`: a `NEWEST_UNSEEN` get of a frame already pushed, 8 B, 230 400 B and 6 MB,
//!   against the same get through the node with prefetch off
//!   ([`stampede_bench::prefetch::cache_gets`]).
//!
//! `--quick`: a smoke run with tiny counts (CI), figures meaningless. Nothing here asserts a
//! speed. Needs the `stampede` binary beside this one (`cargo build [--release] -p stampede-cli`)
//! or in `$STAMPEDE_BIN`.

use std::time::Duration;

use stampede::Prefetch;
use stampede_bench::cli::Options;
use stampede_bench::prefetch::{cache_gets, skipping, Skipping};
use stampede_bench::process::Node;
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;
use stampede_bench::BoxResult;

const BENCH: &str = "prefetch";
const CAMERA_FPS: f64 = 30.0;
const DISPLAY_FPS: [f64; 3] = [30.0, 10.0, 3.0];
/// STM's frame (Fig. 11): 230 400 bytes.
const FRAME_BYTES: usize = 230_400;
/// The sizes of the cache-answered get: 8 B, STM's frame, a 1080p RGB frame (6 MB).
const CACHE_GET_BYTES: [usize; 3] = [8, FRAME_BYTES, 1920 * 1080 * 3];
/// Bytes of a notice on the fabric, about (its header; a pushed item adds its payload).
const NOTICE_BYTES: u64 = 40;

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let node = Node::start()?;
    let frames = options.scale(300, 12) as u64;
    for display_fps in DISPLAY_FPS {
        let mut off = None;
        for prefetch in [Prefetch::Off, Prefetch::Auto] {
            let name = format!("skipping/{display_fps}/{prefetch}");
            let run = skipping(&node.endpoint, &name, prefetch, (CAMERA_FPS, display_fps), (frames, FRAME_BYTES))?;
            let line = skipping_line(&run, display_fps, prefetch, off.as_ref());
            line.emit();
            off.get_or_insert(run);
        }
    }
    let gets = options.scale(200, 4);
    for bytes in CACHE_GET_BYTES {
        let settle = Duration::from_millis(if bytes > FRAME_BYTES { 40 } else { 5 });
        let mut off_p50 = None;
        for prefetch in [Prefetch::Off, Prefetch::Newest] {
            let name = format!("cache_get/{bytes}/{prefetch}");
            let (mut samples, pushes) = cache_gets(&node.endpoint, &name, prefetch, bytes, (gets, settle))?;
            let summary = Summary::of(&mut samples);
            let mut line = Line::new(BENCH, &format!("cache_get {bytes} B"), &format!("stampede, prefetch {prefetch}"))
                .field("payload_bytes", bytes as u64)
                .field("gets", gets as u64)
                .field("answered_by_cache", pushes.used)
                .latency_us("get_", &summary);
            if let Some(off) = off_p50 {
                line = line.ratio("stampede, prefetch off", summary.p50_ns / off);
            }
            line.emit();
            off_p50.get_or_insert(summary.p50_ns);
        }
    }
    Ok(())
}

/// The line of one skipping reader's run, with its savings against `off` (the same rate's run
/// with prefetch off).
fn skipping_line(run: &Skipping, display_fps: f64, prefetch: Prefetch, off: Option<&Skipping>) -> Line {
    let messages = |r: &Skipping| 2 * r.requests + r.pushes.notices;
    let round_trips = |r: &Skipping| r.gets - r.pushes.used;
    let shown = run.gets - run.empty;
    let seconds = run.frames as f64 / CAMERA_FPS;
    let mut line = Line::new(
        BENCH,
        &format!("skipping reader {display_fps} fps of a {CAMERA_FPS} fps camera"),
        &format!("stampede, prefetch {prefetch}"),
    )
    .field("frame_bytes", run.frame_bytes)
    .field("gets", run.gets)
    .field("gets_with_a_round_trip", round_trips(run))
    .field("notices", run.pushes.notices)
    .field("pushed", run.pushes.pushed)
    .field("pushed_used", run.pushes.used)
    .field("pushed_used_pct", pct(run.pushes.used, run.pushes.pushed))
    .field("messages", messages(run))
    .field("bytes_pushed", run.pushes.pushed * run.frame_bytes + run.pushes.notices * NOTICE_BYTES)
    .field("fps_shown", shown as f64 / seconds);
    line = line.latency_us("get_", &Summary::of(&mut run.get_ns.clone()));
    if !run.age_ns.is_empty() {
        line = line.latency_us("frame_age_", &Summary::of(&mut run.age_ns.clone()));
    }
    if let Some(off) = off {
        line = line
            .field("remote_misses_removed_pct", 100.0 - pct(round_trips(run), round_trips(off)))
            .field("messages_saved_pct", 100.0 - pct(messages(run), messages(off)));
    }
    line
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return f64::NAN;
    }
    100.0 * part as f64 / whole as f64
}
