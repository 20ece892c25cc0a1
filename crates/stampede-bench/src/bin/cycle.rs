//! One thread's put + get + consume cycle for an 8-byte payload, in ns.
//!
//! A producer task (virtual time = the timestamp it puts) and a consumer task (`INFINITY`) on
//! one channel, both driven by the same thread, so the figure is the runtime's own cost with no
//! wake-up in it. Cases:
//!
//! - `put+get+consume+set_vt`: every cycle also advances the producer's virtual time past the
//!   item, so ts_min advances and the item is reclaimed (freed) inside the cycle — the full cost.
//! - `put+get+consume (set_vt every 1024)`: the same with the virtual time advanced once per 1024
//!   cycles; each advance reclaims 1024 items, whose cost is spread over the cycles.
//! - `put(refcount=1)+get+consume`: the item is reclaimed early by its reference count inside
//!   `consume`; virtual time advanced every 1024 cycles to drop the tombstones.
//! - `put+get+consume+set_vt, node in a mesh`: the full cycle on a runtime linked to a mesh
//!   participant with no peers (`stampede::mesh_link`, what every node runs):
//!   every claim change also goes to the mesh and its ts_min comes back — the link's own cost.
//! - `op:*`: each operation of the full cycle timed on its own (timer overhead subtracted).
//! - reference: crossbeam-channel `unbounded` send (8-byte `Vec`, one allocation) + recv + drop
//!   on one thread.
//!
//! Means over all cycles; `p50_ns` is the median of per-batch means (batches of 1000 cycles).
//! `--case NAME` runs that case alone (`op:` for the per-operation timings), to profile it.

use std::hint::black_box;
use std::time::Instant;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use stampede::mesh_link::MeshLink;
use stampede::{Limits, PutOptions, Result, Runtime};
use stampede_bench::cli::Options;
use stampede_bench::payload::{source, touch, SMALL_BYTES};
use stampede_bench::pipe::{check_reclaimed, ts_of, Pipe};
use stampede_bench::report::Line;
use stampede_bench::stats::{elapsed_ns, timer_overhead_ns, Summary};
use stampede_core::{Mesh, MeshLimits, Peer};

const BATCH: usize = 1000;
/// Cycles between virtual-time advances in the amortized cases.
const VT_EVERY: usize = 1024;
const TARGET_NS: f64 = 1000.0;
const CROSSBEAM: &str = "crossbeam unbounded send+recv";

/// How the cycle reclaims its item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reclaim {
    /// `set_virtual_time(ts + 1)` every cycle.
    EveryCycle,
    /// `set_virtual_time(ts + 1)` every [`VT_EVERY`] cycles.
    Amortized,
    /// `put` with refcount 1; virtual time every [`VT_EVERY`] cycles.
    Refcount,
}

fn main() -> Result<()> {
    // `--case <name>`: only that case (to profile it alone; `op:` for the per-operation timings).
    let (options, values) = Options::with_values(&["--case"]);
    let only = values.into_iter().map(|(_, value)| value).next_back();
    let wanted = |case: &str| only.as_deref().is_none_or(|name| case == name);
    let cycles = options.scale(1_000_000, 10_000);
    let buf = source(SMALL_BYTES, 0);

    let crossbeam = crossbeam_cycle(&buf, cycles);
    emit("crossbeam send+recv (8B Vec)", CROSSBEAM, &crossbeam, None);
    for (case, reclaim, linked) in [
        ("put+get+consume+set_vt", Reclaim::EveryCycle, false),
        ("put+get+consume+set_vt, node in a mesh", Reclaim::EveryCycle, true),
        ("put+get+consume (set_vt every 1024)", Reclaim::Amortized, false),
        ("put(refcount=1)+get+consume", Reclaim::Refcount, false),
    ] {
        if !wanted(case) {
            continue;
        }
        let runtime = Runtime::new();
        let _node = linked.then(|| lone_node(&runtime)).transpose()?;
        let summary = stampede_cycle(runtime, &buf, cycles, reclaim)?;
        emit(case, "stampede", &summary, Some(crossbeam.mean_ns));
    }
    if !wanted("op:") {
        return Ok(());
    }
    for (op, ns) in op_breakdown(&buf, cycles)? {
        Line::new("cycle", &format!("op:{op}"), "stampede").field("mean_ns", ns).emit();
    }
    Ok(())
}

fn emit(case: &str, subject: &str, summary: &Summary, crossbeam_ns: Option<f64>) {
    let mut line = Line::new("cycle", case, subject)
        .field("payload_bytes", SMALL_BYTES as u64)
        .field("mean_ns", summary.mean_ns)
        .field("p50_ns", summary.p50_ns)
        .field("p99_ns", summary.p99_ns)
        .field("cycles", (summary.n * BATCH) as u64);
    if let Some(crossbeam_ns) = crossbeam_ns {
        line = line
            .ratio(CROSSBEAM, summary.mean_ns / crossbeam_ns)
            .field("target_ns", TARGET_NS)
            .field("target_met", summary.mean_ns <= TARGET_NS);
    }
    line.emit();
}

/// A runtime linked to a mesh participant alone in its mesh (its door open at once), with a
/// driver thread that takes what the machine queues each time the link wakes it — as
/// `stampede_node::mesh` does, minus the sending. Dropping it stops the thread.
struct LoneNode {
    stop: Arc<AtomicBool>,
    wake: SyncSender<()>,
    driver: Option<JoinHandle<()>>,
}

impl Drop for LoneNode {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.wake.try_send(());
        if let Some(driver) = self.driver.take() {
            let _ = driver.join();
        }
    }
}

fn lone_node(runtime: &Runtime) -> Result<LoneNode> {
    let (wake, woken) = mpsc::sync_channel::<()>(1);
    let signal = wake.clone();
    let mesh = Mesh::new(Peer { id: 1, incarnation: 1 }, MeshLimits::default());
    let link = MeshLink::attach(
        runtime,
        mesh,
        Arc::new(move || {
            let _ = signal.try_send(());
        }),
    )?;
    link.with(|mesh| mesh.open_door()).expect("a mesh of one opens its door");
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let driver = std::thread::spawn(move || {
        while !stopped.load(Ordering::Acquire) && woken.recv().is_ok() {
            link.with(|mesh| while mesh.poll_transmit().is_some() {});
        }
    });
    Ok(LoneNode { stop, wake, driver: Some(driver) })
}

/// Per-cycle summary (of batch means) of `cycles` stampede cycles on `runtime`.
fn stampede_cycle(runtime: Runtime, buf: &[u8], cycles: usize, reclaim: Reclaim) -> Result<Summary> {
    let pipe = Pipe::on(runtime, "cycle/items", Limits::unbounded())?;
    let options = PutOptions { refcount: (reclaim == Reclaim::Refcount).then_some(1), timeout: None };
    let mut batch_ns = Vec::with_capacity(cycles / BATCH);
    for batch in 0..cycles / BATCH {
        let start = Instant::now();
        for i in batch * BATCH..(batch + 1) * BATCH {
            let ts = ts_of(i);
            pipe.out.put_with(ts, buf, options)?;
            let item = pipe.inp.get(ts, None)?;
            touch(item.data());
            drop(item);
            pipe.inp.consume(ts)?;
            if reclaim == Reclaim::EveryCycle || (i + 1) % VT_EVERY == 0 {
                pipe.producer.set_virtual_time(ts + 1)?;
            }
        }
        batch_ns.push(elapsed_ns(start));
    }
    let done = ts_of(cycles);
    pipe.producer.set_virtual_time(done)?;
    check_reclaimed(&pipe.channel, cycles as u64, 0);
    Ok(Summary::of(&mut batch_ns).divided(BATCH as f64))
}

/// Mean ns of each operation of the full cycle, each timed on its own.
fn op_breakdown(buf: &[u8], cycles: usize) -> Result<Vec<(&'static str, f64)>> {
    let overhead = timer_overhead_ns();
    let pipe = Pipe::new("cycle/ops", Limits::unbounded())?;
    let mut total_ns = [0u64; 4];
    for i in 0..cycles {
        let ts = ts_of(i);
        let t0 = Instant::now();
        pipe.out.put(ts, buf)?;
        let t1 = Instant::now();
        let item = pipe.inp.get(ts, None)?;
        let t2 = Instant::now();
        touch(item.data());
        drop(item);
        let t3 = Instant::now();
        pipe.inp.consume(ts)?;
        let t4 = Instant::now();
        pipe.producer.set_virtual_time(ts + 1)?;
        let t5 = Instant::now();
        for (total, (a, b)) in total_ns.iter_mut().zip([(t0, t1), (t1, t2), (t3, t4), (t4, t5)]) {
            *total += u64::try_from((b - a).as_nanos()).unwrap_or(u64::MAX);
        }
    }
    check_reclaimed(&pipe.channel, cycles as u64, 0);
    let names = ["put", "get", "consume", "set_virtual_time (reclaims 1 item)"];
    // One `Instant::now()` per boundary: about half a now+elapsed pair per operation.
    let per_op = |total: u64| (total as f64 / cycles as f64 - overhead / 2.0).max(0.0);
    Ok(names.into_iter().zip(total_ns.map(per_op)).collect())
}

/// Per-cycle summary of `cycles` crossbeam send + recv on one thread.
fn crossbeam_cycle(buf: &[u8], cycles: usize) -> Summary {
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<u8>>();
    let mut batch_ns = Vec::with_capacity(cycles / BATCH);
    for _ in 0..cycles / BATCH {
        let start = Instant::now();
        for _ in 0..BATCH {
            tx.send(buf.to_vec()).expect("receiver alive");
            let v = rx.try_recv().expect("just sent");
            touch(&v);
            drop(black_box(v));
        }
        batch_ns.push(elapsed_ns(start));
    }
    Summary::of(&mut batch_ns).divided(BATCH as f64)
}
