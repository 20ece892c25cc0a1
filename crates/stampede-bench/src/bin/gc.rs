//! Garbage collection: cost per reclaimed item, and live items in steady state.
//!
//! - `batch`: ts_min jumps over N items at once. Either one `consume_until` by the only reader
//!   releases N items the producer already passed (8-byte items), or the producer alone (no
//!   reader) puts N items at a fixed virtual time and one `set_virtual_time` releases them all
//!   (8-byte and 230 400-byte items). ns/item = the releasing call's time / N; it includes
//!   freeing the payloads.
//! - `steady`: one item at a time, producer alone: `put(i)` then `set_virtual_time(i + 1)`,
//!   which reclaims item `i`. The same `set_virtual_time` with ts_min pinned by an idle task
//!   (nothing reclaimed) is the baseline; the difference is the reclaim. Repeated with idle
//!   channels in the same runtime, since every advance of ts_min sweeps every channel.
//! - `digitizer/tracker`: a digitizer thread puts 230 400-byte frames (unpaced, or paced at
//!   1 kHz by a `Pacer`); a tracker thread gets `NEWEST_UNSEEN`, "works" (sleeps) per frame and
//!   `consume_until`s it. The digitizer samples `stats().live_items` after every put; max and
//!   mean must stay near the frames put during one tracker period.

use std::thread;
use std::time::{Duration, Instant};

use stampede::{Limits, Pacer, Result, NEWEST_UNSEEN};
use stampede_bench::cli::Options;
use stampede_bench::payload::{case_name, source, touch, IMAGE_BYTES, SMALL_BYTES};
use stampede_bench::pipe::{check_reclaimed, ts_of, Pipe};
use stampede_bench::report::Line;
use stampede_bench::stats::{elapsed_ns, timer_overhead_ns};

fn main() -> Result<()> {
    let options = Options::from_args();
    let rounds = options.scale(3, 1);
    let batch_small = options.scale(100_000, 1_000);
    let batch_image = options.scale(2_000, 20);

    for (case, payload_bytes, n) in [
        ("batch consume_until", SMALL_BYTES, batch_small),
        ("batch set_virtual_time", SMALL_BYTES, batch_small),
        ("batch set_virtual_time", IMAGE_BYTES, batch_image),
    ] {
        let by_consume = case.contains("consume_until");
        let ns = (0..rounds).map(|_| batch(payload_bytes, n, by_consume)).collect::<Result<Vec<u64>>>()?;
        let best = ns.into_iter().min().expect("at least one round");
        Line::new("gc", &format!("{case} {}", case_name(payload_bytes)), "stampede")
            .field("items", n as u64)
            .field("release_us", best as f64 / 1e3)
            .field("ns_per_item", best as f64 / n as f64)
            .emit();
    }

    let steps = options.scale(200_000, 1_000);
    let overhead = timer_overhead_ns();
    for idle_channels in [0, 3_000, 30_000] {
        let reclaiming =
            (0..rounds).map(|_| steady(steps, idle_channels, false, overhead)).collect::<Result<Vec<f64>>>()?;
        let pinned = (0..rounds).map(|_| steady(steps, idle_channels, true, overhead)).collect::<Result<Vec<f64>>>()?;
        let reclaiming = reclaiming.into_iter().fold(f64::INFINITY, f64::min);
        let pinned = pinned.into_iter().fold(f64::INFINITY, f64::min);
        Line::new("gc", &format!("steady 1 item/advance, {idle_channels} idle channels"), "stampede")
            .field("set_vt_reclaiming_ns", reclaiming)
            .field("set_vt_pinned_ns", pinned)
            .field("ns_per_item", reclaiming - pinned)
            .ratio("set_virtual_time with nothing reclaimed", reclaiming / pinned)
            .emit();
    }

    let run_for = Duration::from_millis(options.scale(2_000, 100) as u64);
    for (case, frame_period, work) in [
        ("digitizer unpaced, tracker 2 ms/frame", None, Duration::from_millis(2)),
        ("digitizer 1 kHz, tracker 5 ms/frame", Some(Duration::from_millis(1)), Duration::from_millis(5)),
    ] {
        let live = digitizer_tracker(run_for, frame_period, work)?;
        let expected = live.frames_per_tracker_period();
        Line::new("gc", case, "stampede")
            .field("payload_bytes", IMAGE_BYTES as u64)
            .field("frames_put", live.frames_put as u64)
            .field("frames_tracked", live.frames_tracked as u64)
            .field("live_items_max", live.max as u64)
            .field("live_items_mean", live.mean)
            .field("live_bytes_max", (live.max * IMAGE_BYTES) as u64)
            .field("frames_per_tracker_period", expected)
            .field("bounded", live.end_live_items <= live.max && (live.max as f64) <= 3.0 * expected + 2.0)
            .emit();
    }
    Ok(())
}

/// ns taken by the one call that releases `n` items of `payload_bytes`.
fn batch(payload_bytes: usize, n: usize, by_consume: bool) -> Result<u64> {
    let buf = source(payload_bytes, 1);
    let Pipe { runtime: _runtime, channel, producer, out, consumer: _consumer, inp } =
        Pipe::new("gc/batch", Limits::unbounded())?;
    // Producer alone: detaching the reader drops its claim, so only the virtual time pins items.
    let inp = if by_consume {
        Some(inp)
    } else {
        inp.detach();
        None
    };
    for i in 0..n {
        let ts = ts_of(i);
        out.put(ts, buf.as_slice())?;
        if inp.is_some() {
            producer.set_virtual_time(ts + 1)?;
        }
    }
    assert_eq!(channel.stats().live_items, n, "nothing may be reclaimed before the release");
    let start = Instant::now();
    match &inp {
        Some(inp) => inp.consume_until(ts_of(n - 1))?,
        None => producer.set_virtual_time(ts_of(n))?,
    }
    let ns = elapsed_ns(start);
    check_reclaimed(&channel, n as u64, 0);
    Ok(ns)
}

/// Mean ns of `set_virtual_time(i + 1)` after `put(i)`, timer overhead subtracted. `pinned`: an
/// idle task at virtual time 0 holds ts_min, so nothing is reclaimed.
fn steady(steps: usize, idle_channels: usize, pinned: bool, overhead: f64) -> Result<f64> {
    let (runtime, channel, producer, out) = Pipe::producer_only("gc/steady", Limits::unbounded())?;
    let _idle: Vec<_> = (0..idle_channels)
        .map(|k| runtime.create_channel(&format!("gc/idle/{k}"), Limits::unbounded()))
        .collect::<Result<_>>()?;
    let pin = if pinned { Some(runtime.task(0)?) } else { None };
    let buf = source(SMALL_BYTES, 2);
    let mut total_ns = 0;
    for i in 0..steps {
        let ts = ts_of(i);
        out.put(ts, buf.as_slice())?;
        let start = Instant::now();
        producer.set_virtual_time(ts + 1)?;
        total_ns += elapsed_ns(start);
    }
    check_reclaimed(&channel, steps as u64, if pinned { steps } else { 0 });
    drop(pin);
    Ok(total_ns as f64 / steps as f64 - overhead)
}

/// What the digitizer saw of the channel's live items.
struct Live {
    frames_put: usize,
    frames_tracked: usize,
    max: usize,
    mean: f64,
    end_live_items: usize,
    run_ns: u64,
    tracker_ns: u64,
}

impl Live {
    /// Frames the digitizer put during one mean tracker period.
    fn frames_per_tracker_period(&self) -> f64 {
        let put_rate = self.frames_put as f64 / self.run_ns as f64;
        put_rate * self.tracker_ns as f64 / self.frames_tracked.max(1) as f64
    }
}

/// Runs the digitizer/tracker pair for `run_for`; `frame_period` paces the digitizer.
fn digitizer_tracker(run_for: Duration, frame_period: Option<Duration>, work: Duration) -> Result<Live> {
    let Pipe { runtime: _runtime, channel, producer, out, consumer: _consumer, inp } =
        Pipe::new("gc/frames", Limits::unbounded())?;
    let deadline = Instant::now() + run_for;
    let tracker = thread::spawn(move || -> Result<(usize, u64)> {
        let start = Instant::now();
        let mut tracked = 0;
        while Instant::now() < deadline {
            let Ok(item) = inp.get(NEWEST_UNSEEN, Some(Duration::from_millis(50))) else { continue };
            touch(item.data());
            thread::sleep(work);
            inp.consume_until(item.ts)?;
            tracked += 1;
        }
        Ok((tracked, elapsed_ns(start)))
    });
    let frame = source(IMAGE_BYTES, 3);
    let mut pacer = frame_period.map(|tick| Pacer::new(tick, tick)).transpose()?;
    let start = Instant::now();
    let (mut frames_put, mut max, mut sum) = (0, 0, 0);
    while Instant::now() < deadline {
        let ts = ts_of(frames_put);
        if let Some(pacer) = pacer.as_mut() {
            pacer.sync(ts);
        }
        out.put(ts, frame.as_slice())?;
        producer.set_virtual_time(ts + 1)?;
        frames_put += 1;
        let live = channel.stats().live_items;
        max = live.max(max);
        sum += live;
    }
    let run_ns = elapsed_ns(start);
    let (frames_tracked, tracker_ns) = tracker.join().expect("tracker thread panicked")?;
    Ok(Live {
        frames_put,
        frames_tracked,
        max,
        mean: sum as f64 / frames_put.max(1) as f64,
        end_live_items: channel.stats().live_items,
        run_ns,
        tracker_ns,
    })
}
