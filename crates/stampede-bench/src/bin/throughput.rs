//! Producer → consumer throughput of 230 400-byte images on two threads, next to a single-thread
//! memcpy of the same size in the same run (the seeds' image bandwidth, 1 → 1: docs/BENCHMARKS.md,
//! "How every benchmark measures and reports").
//!
//! - stampede: the producer task puts frame `i` (copy-in: one allocation + memcpy of 230 400
//!   bytes) and advances its virtual time to `i + 1`; the consumer task (`INFINITY`) gets
//!   `OLDEST_UNSEEN` (every frame, in order, zero-copy), reads it and consumes it, which lets
//!   ts_min pass it and reclaims (frees) it. Unbounded channel, then `capacity = 4` items so the
//!   producer blocks on a full channel until GC frees room.
//! - references: `memcpy` of the frame into a preallocated buffer on one thread (the bound the
//!   target is stated against), the same with a fresh allocation per frame (`to_vec` + free,
//!   what copy-in costs), and crossbeam `bounded(4)` carrying `Vec<u8>` copies between the same
//!   two threads.
//!
//! MB = 10^6 bytes. Stampede and references alternate in rounds; the best round of each is
//! reported (the machine is shared, so the best is the least disturbed).

use std::hint::black_box;
use std::thread;
use std::time::Instant;

use stampede::{Limits, OLDEST_UNSEEN};
use stampede_bench::cli::Options;
use stampede_bench::payload::{source, touch, IMAGE_BYTES};
use stampede_bench::pipe::{check_reclaimed, ts_of, Pipe};
use stampede_bench::report::Line;
use stampede_bench::stats::{elapsed_ns, mb_per_s};

use stampede_bench::BoxResult;

const MEMCPY: &str = "memcpy (1 thread, preallocated)";
const TARGET_RATIO: f64 = 0.5;
/// The bounded variant's capacity, in items.
const BOUNDED_CAPACITY: usize = 4;

/// One measured run: frames moved, wall time, and the most items live at once (stampede only).
#[derive(Clone, Copy, Debug)]
struct Run {
    frames: usize,
    ns: u64,
    live_items_max: usize,
}

impl Run {
    fn mb_per_s(&self) -> f64 {
        mb_per_s((self.frames * IMAGE_BYTES) as u64, self.ns)
    }

    fn items_per_s(&self) -> f64 {
        self.frames as f64 / (self.ns as f64 / 1e9)
    }

    fn best(runs: &[Run]) -> Run {
        *runs.iter().min_by_key(|r| r.ns).expect("at least one round")
    }
}

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let rounds = options.scale(3, 1);
    let frames = options.scale(10_000, 200);
    let frame = source(IMAGE_BYTES, 0x5a);

    let mut memcpy = Vec::new();
    let mut alloc_copy = Vec::new();
    let mut crossbeam = Vec::new();
    let mut unbounded = Vec::new();
    let mut bounded = Vec::new();
    for _ in 0..rounds {
        memcpy.push(memcpy_run(&frame, frames));
        alloc_copy.push(alloc_copy_run(&frame, frames));
        crossbeam.push(crossbeam_run(&frame, frames)?);
        unbounded.push(stampede_run(&frame, frames, Limits::unbounded())?);
        bounded.push(stampede_run(&frame, frames, Limits::items(BOUNDED_CAPACITY))?);
    }
    let memcpy = Run::best(&memcpy);
    let reference = memcpy.mb_per_s();
    let line = |case: &str, subject: &str, run: Run| {
        Line::new("throughput", case, subject)
            .field("payload_bytes", IMAGE_BYTES as u64)
            .field("frames", run.frames as u64)
            .field("mb_per_s", run.mb_per_s())
            .field("items_per_s", run.items_per_s())
            .field("us_per_item", run.ns as f64 / run.frames as f64 / 1e3)
            .ratio(MEMCPY, run.mb_per_s() / reference)
    };
    line("1 thread", MEMCPY, memcpy).emit();
    line("1 thread", "alloc+memcpy+free (1 thread)", Run::best(&alloc_copy)).emit();
    let crossbeam = Run::best(&crossbeam);
    line("1->1 bounded(4)", "crossbeam bounded(4), Vec copy per send", crossbeam).emit();
    for (case, runs) in [("1->1 unbounded", &unbounded), ("1->1 capacity=4", &bounded)] {
        let run = Run::best(runs);
        line(case, "stampede", run)
            .field("live_items_max", run.live_items_max as u64)
            .field("ratio_vs_crossbeam", run.mb_per_s() / crossbeam.mb_per_s())
            .field("target_ratio", TARGET_RATIO)
            .field("target_met", run.mb_per_s() / reference >= TARGET_RATIO)
            .emit();
    }
    Ok(())
}

/// Copies the frame into one preallocated buffer `frames` times.
fn memcpy_run(frame: &[u8], frames: usize) -> Run {
    let mut dst = vec![0u8; frame.len()];
    let start = Instant::now();
    for _ in 0..frames {
        dst.copy_from_slice(black_box(frame));
        black_box(&mut dst);
    }
    Run { frames, ns: elapsed_ns(start), live_items_max: 0 }
}

/// Copies the frame into a fresh allocation and frees it, `frames` times.
fn alloc_copy_run(frame: &[u8], frames: usize) -> Run {
    let start = Instant::now();
    for _ in 0..frames {
        let copy = black_box(frame).to_vec();
        touch(black_box(&copy));
    }
    Run { frames, ns: elapsed_ns(start), live_items_max: 0 }
}

/// Two threads: producer sends `frame.to_vec()` on `bounded(4)`; consumer reads and drops.
fn crossbeam_run(frame: &[u8], frames: usize) -> BoxResult<Run> {
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(BOUNDED_CAPACITY);
    let start = Instant::now();
    let consumer = thread::spawn(move || {
        for v in rx.iter() {
            touch(&v);
        }
    });
    for _ in 0..frames {
        tx.send(frame.to_vec())?;
    }
    drop(tx);
    consumer.join().expect("crossbeam consumer panicked");
    Ok(Run { frames, ns: elapsed_ns(start), live_items_max: 0 })
}

/// Two threads through a stampede channel bounded by `limits`; timed until the consumer has
/// consumed the last frame.
fn stampede_run(frame: &[u8], frames: usize, limits: Limits) -> BoxResult<Run> {
    let Pipe { runtime: _runtime, channel, producer, out, consumer: _consumer, inp } =
        Pipe::new("throughput/frames", limits)?;
    let last = ts_of(frames - 1);
    let start = Instant::now();
    let probe = channel.clone();
    let reader = thread::spawn(move || -> stampede::Result<usize> {
        let mut live_items_max = 0;
        loop {
            let item = inp.get(OLDEST_UNSEEN, None)?;
            touch(item.data());
            let ts = item.ts;
            drop(item);
            inp.consume(ts)?;
            if ts % 64 == 0 {
                live_items_max = live_items_max.max(probe.stats().live_items);
            }
            if ts == last {
                return Ok(live_items_max);
            }
        }
    });
    for i in 0..frames {
        let ts = ts_of(i);
        out.put(ts, frame)?;
        producer.set_virtual_time(ts + 1)?;
    }
    let live_items_max = reader.join().expect("stampede consumer panicked")?;
    let ns = elapsed_ns(start);
    check_reclaimed(&channel, frames as u64, 0);
    Ok(Run { frames, ns, live_items_max })
}
