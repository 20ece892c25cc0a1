//! Hand-off latency: a put on one thread, a blocking get + consume on another.
//!
//! Ping-pong between two threads, stampede and crossbeam-channel `bounded(1)` alternating in
//! rounds within one run. One way = round trip / 2.
//!
//! - stampede: thread A (a task at virtual time `i`) puts `ts = i` into `handoff/ping` (copy-in:
//!   one allocation + memcpy of the payload), advances its virtual time to `i + 1`, then blocks
//!   on an exact get of `i` from `handoff/pong`, reads it and consumes it. Thread B (a task at
//!   `INFINITY`) blocks on `NEWEST_UNSEEN` of `ping`, reads it, puts its own payload copy at the
//!   same timestamp into `pong` (allowed: it holds `i` open) and consumes `i`. Once both have
//!   consumed, ts_min passes `i` and both items are reclaimed (freed) — inside the loop.
//! - crossbeam: A sends `buf.clone()` (one allocation + memcpy) on `bounded(1)`, blocks on the
//!   reply, reads it and drops it (free); B does the same in the other direction.
//!
//! So each one-way hop copies the payload exactly once on both sides and each receiver reads the
//! first and last byte; gets on the stampede side are zero-copy.

use std::thread;
use std::time::Instant;

use stampede_bench::cli::Options;
use stampede_bench::payload::{case_name, source, touch, IMAGE_BYTES, SMALL_BYTES};
use stampede_bench::ping_pong;
use stampede_bench::report::Line;
use stampede_bench::stats::{elapsed_ns, Summary};

use stampede_bench::BoxResult;

const CROSSBEAM: &str = "crossbeam bounded(1)";

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let rounds = options.scale(4, 1);
    let round_trips = options.scale(5_000, 200);
    let warmup = options.scale(500, 20);
    for payload_bytes in [SMALL_BYTES, IMAGE_BYTES] {
        let mut stampede_rtt = Vec::with_capacity(rounds * round_trips);
        let mut crossbeam_rtt = Vec::with_capacity(rounds * round_trips);
        for _ in 0..rounds {
            stampede_rtt.extend(ping_pong::embedded(payload_bytes, warmup, round_trips)?);
            crossbeam_rtt.extend(crossbeam_ping_pong(payload_bytes, warmup, round_trips)?);
        }
        let stampede = Summary::of(&mut stampede_rtt).divided(2.0);
        let crossbeam = Summary::of(&mut crossbeam_rtt).divided(2.0);
        let case = case_name(payload_bytes);
        Line::new("handoff", &case, "stampede")
            .latency_us("", &stampede)
            .field("round_trips", stampede.n as u64)
            .field("copies", "put copies the payload once (copy-in); get is zero-copy; reclaim frees it")
            .ratio(CROSSBEAM, stampede.p50_ns / crossbeam.p50_ns)
            .field("ratio_p99", stampede.p99_ns / crossbeam.p99_ns)
            .emit();
        Line::new("handoff", &case, CROSSBEAM)
            .latency_us("", &crossbeam)
            .field("round_trips", crossbeam.n as u64)
            .field("copies", "send copies the payload once (Vec clone); receiver drops (frees) it")
            .emit();
    }
    Ok(())
}

/// Round-trip times in ns of `round_trips` crossbeam `bounded(1)` ping-pongs after `warmup`.
fn crossbeam_ping_pong(payload_bytes: usize, warmup: usize, round_trips: usize) -> BoxResult<Vec<u64>> {
    let (ping_tx, ping_rx) = crossbeam_channel::bounded::<Vec<u8>>(1);
    let (pong_tx, pong_rx) = crossbeam_channel::bounded::<Vec<u8>>(1);
    let total = warmup + round_trips;

    let echo = thread::spawn(move || -> BoxResult<()> {
        let buf = source(payload_bytes, 0xb0);
        for _ in 0..total {
            let v = ping_rx.recv()?;
            touch(&v);
            drop(v);
            pong_tx.send(buf.clone())?;
        }
        Ok(())
    });

    let buf = source(payload_bytes, 0xa0);
    let mut rtt_ns = Vec::with_capacity(round_trips);
    for i in 0..total {
        let start = Instant::now();
        ping_tx.send(buf.clone())?;
        let v = pong_rx.recv()?;
        touch(&v);
        drop(v);
        let ns = elapsed_ns(start);
        if i >= warmup {
            rtt_ns.push(ns);
        }
    }
    echo.join().expect("crossbeam echo thread panicked")?;
    Ok(rtt_ns)
}
