//! The lag from "garbage on node B" to "reclaimed on node A" (issue 29 item 8): two nodes of one
//! mesh in this process (a, and b connected to it, over Unix sockets, each with its runtime
//! embedded: both hold doors). A channel on a; a producer on a puts `ts = i` and moves past it, so
//! that only a task on b — its claim at `i` reaches a through the mesh — keeps the item. The clock
//! starts when b's task moves its virtual time past `i` (the item is garbage from then on) and
//! stops when a's GC handler sees the item reclaimed. Beside it, in the same run: one message
//! between two zenoh sessions configured as the nodes are (a router listening on a Unix socket,
//! another connected to it), as half a publish → subscribe → publish-back round trip — what
//! "a message round" costs here. The goal: the lag within 2 message rounds.
//!
//! Two cases, each against the message measured alike (docs/BENCHMARKS.md says why):
//! - **back to back**: the producer moves just before b's task, so a's own move may still be on
//!   its way to b, and b's door (an embedded runtime holds one) rises past the item only once b
//!   hears of it — the door rule's extra round (docs/PROTOCOL.md, "Doors"). Beside messages sent
//!   back to back.
//! - **settled**: [`SETTLE`] between the producer's move and b's task's, so that the lag is b's
//!   news alone. Beside messages sent [`SETTLE`] apart: from rest, a message costs this VM a
//!   wake-up of zenoh's threads on both sides that back-to-back messages do not pay.
//!
//! Every wait is bounded ([`WAIT`]); a lag sample that times out fails the run.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use stampede::{Limits, Runtime, INFINITY};
use stampede_bench::cli::Options;
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;
use stampede_bench::BoxResult;
use stampede_node::{Node, NodeOptions};
use stampede_wire::fabric;
use zenoh::qos::CongestionControl;
use zenoh::Wait;

/// Longest one sample may take before the run fails.
const WAIT: Duration = Duration::from_secs(10);
/// Untimed samples first.
const WARMUP: usize = 50;
/// The pause before each sample of the "settled" case (and between its reference messages).
const SETTLE: Duration = Duration::from_millis(2);

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let samples = options.scale(2_000, 100);
    let dir = tempfile::tempdir()?;
    let endpoint = |name: &str| format!("unixsock-stream/{}", dir.path().join(format!("{name}.sock")).display());

    for (n, (case, pause)) in [("back to back", Duration::ZERO), ("settled", SETTLE)].into_iter().enumerate() {
        let end = |name: &str| endpoint(&format!("{name}{n}"));
        let round = message_round(&end("p"), &end("q"), samples, pause)?;
        let lag = reclaim_lag(&end("a"), &end("b"), samples, pause)?;
        let message = format!("one message between two nodes' zenoh sessions (rtt / 2), {case}");
        Line::new("mesh_lag", &message, "zenoh pub/sub").field("samples", round.n).latency_us("", &round).emit();
        Line::new("mesh_lag", &format!("garbage on node b -> reclaimed on node a, {case}"), "stampede")
            .field("samples", lag.n)
            .latency_us("", &lag)
            .field("rounds_p50", lag.p50_ns / round.p50_ns)
            .field("rounds_p99", lag.p99_ns / round.p99_ns)
            .ratio("one message, same percentile", lag.p50_ns / round.p50_ns)
            .emit();
    }
    Ok(())
}

/// One way of a message between two zenoh routers configured as the nodes are, in ns, each
/// round trip `pause` after the one before.
fn message_round(listen: &str, other: &str, samples: usize, pause: Duration) -> BoxResult<Summary> {
    let config = |listen: &str, connect: &[String]| {
        fabric::node_config(&[listen.to_owned()], connect, Duration::from_secs(10), 1 << 20, None)
    };
    let p = zenoh::open(config(listen, &[])?).wait()?;
    let q = zenoh::open(config(other, &[listen.to_owned()])?).wait()?;
    let pongs = p.declare_subscriber("bench/mesh_lag/pong").wait()?;
    let echo = q.declare_publisher("bench/mesh_lag/pong").congestion_control(CongestionControl::Block).wait()?;
    let _echo = q
        .declare_subscriber("bench/mesh_lag/ping")
        .callback(move |sample| {
            let _ = echo.put(sample.payload().clone()).wait();
        })
        .wait()?;
    let ping = p.declare_publisher("bench/mesh_lag/ping").congestion_control(CongestionControl::Block).wait()?;
    let deadline = Instant::now() + WAIT;
    while !ping.matching_status().wait()?.matching() {
        if Instant::now() > deadline {
            return Err("the echo's subscriber never matched".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut rtt = Vec::with_capacity(samples);
    for i in 0..WARMUP + samples {
        std::thread::sleep(pause);
        let start = Instant::now();
        ping.put((i as u64).to_le_bytes().to_vec()).wait()?;
        pongs.recv_timeout(WAIT)?.ok_or("no pong in time")?;
        if i >= WARMUP {
            rtt.push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
    }
    drop(ping);
    q.close().wait()?;
    p.close().wait()?;
    Ok(Summary::of(&mut rtt).divided(2.0))
}

/// From b's task moving past an item to a's GC handler seeing it reclaimed, in ns; b's task
/// moves `pause` after the producer.
fn reclaim_lag(a_end: &str, b_end: &str, samples: usize, pause: Duration) -> BoxResult<Summary> {
    let serve = |name: &str, listen: &str, connect: Option<&str>| -> BoxResult<(Node, Runtime)> {
        let mut options = NodeOptions::listen(listen);
        options.name = name.into();
        options.connect = connect.into_iter().map(str::to_owned).collect();
        let runtime = Runtime::new();
        let node = Node::serve(runtime.engine()?, options)?;
        Ok((node, runtime))
    };
    let (_a, a_rt) = serve("a", a_end, None)?;
    let (_b, b_rt) = serve("b", b_end, Some(a_end))?;
    let frames = a_rt.create_channel("frames", Limits::unbounded())?;
    let (reclaimed, seen) = mpsc::channel();
    frames.on_reclaim(move |item| {
        let _ = reclaimed.send((item.ts, Instant::now()));
    })?;
    // b's task at `start` is at or above b's door, which a's ts_min never passes: whatever a
    // knows of the task, nothing it may get is reclaimed before it moves.
    let start = a_rt.ts_min().max(b_rt.ts_min());
    let holder = b_rt.task(start)?;
    let producer = a_rt.task(start)?;
    let out = producer.attach_output(&frames)?;
    let mut lag = Vec::with_capacity(samples);
    for i in 0..WARMUP + samples {
        let ts = start + i as i64;
        out.put(ts, vec![0])?;
        producer.set_virtual_time(ts + 1)?;
        std::thread::sleep(pause);
        // Only b's task at ts holds the item now: garbage once it moves on.
        let moved = Instant::now();
        holder.set_virtual_time(ts + 1)?;
        let (what, when) = seen.recv_timeout(WAIT).map_err(|_| format!("item {ts} was not reclaimed on a in time"))?;
        if what != ts || when < moved {
            return Err(format!("reclaimed {what} (expected {ts}) before b's task moved past it: a bug").into());
        }
        if i >= WARMUP {
            lag.push(u64::try_from(when.duration_since(moved).as_nanos()).unwrap_or(u64::MAX));
        }
    }
    holder.set_virtual_time(INFINITY)?;
    Ok(Summary::of(&mut lag))
}
