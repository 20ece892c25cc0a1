//! A hand-off through a node, hop by hop (issue 31 item 8; `docs/BENCHMARKS.md`, "hops"): the
//! `remote` ping-pong through a `stampede serve` node (A here, B in another process, both on the
//! direct path), with prefetch `off` (every get a request; B's get parks on the node) and `auto`,
//! beside the Unix-socket ping-pong in the same run. For each, per round trip and per process
//! (`node`, `A`, `B`; `A` and `echo` for the socket), and per thread name within it: wake-ups
//! (voluntary context switches), preemptions and CPU time, read from `/proc` around the run, and
//! system calls, counted by `perf stat` in the kernel ([`stampede_bench::kernel`]): nothing traces
//! the processes while they are timed. One way = round trip / 2. Rounds alternate the implementations; counts are
//! summed over the rounds and divided by every round trip run, warm-up included.
//!
//! A raw socket's round trip is two hops: two writes, two reads, two wake-ups. The design's floor
//! for a hand-off through a node is two hops each way; the counts say how far each process is
//! from it and which thread pays. `--quick`: a smoke run, figures meaningless. Nothing here
//! asserts a speed.
//!
//! Needs the `stampede` binary beside this one (`cargo build [--release] -p stampede-cli`) or in
//! `$STAMPEDE_BIN`.

use std::collections::BTreeMap;

use stampede::Prefetch;
use stampede_bench::cli::Options;
use stampede_bench::kernel::{Probe, ProcessCounts};
use stampede_bench::process::{Node, Role};
use stampede_bench::reference::unix;
use stampede_bench::remote::{self, Via};
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;
use stampede_bench::BoxResult;

const BENCH: &str = "hops";

/// The sizes measured: the 8 B–8 KiB.
const PAYLOAD_BYTES: [usize; 3] = [8, 1024, 8 * 1024];

/// What is measured, in the order each round runs them.
#[derive(Clone, Copy)]
enum Subject {
    Stampede(Prefetch),
    UnixSocket,
}

impl Subject {
    const ALL: [Subject; 3] =
        [Subject::Stampede(Prefetch::Off), Subject::Stampede(Prefetch::Auto), Subject::UnixSocket];

    fn name(self) -> String {
        match self {
            Subject::Stampede(prefetch) => format!("stampede remote, direct path, prefetch {prefetch}"),
            Subject::UnixSocket => "Unix-socket ping-pong".to_owned(),
        }
    }
}

/// One subject's samples and counts over every round.
#[derive(Default)]
struct Measured {
    rtt_ns: Vec<u64>,
    round_trips_run: u64,
    /// By process label, summed over rounds.
    processes: BTreeMap<String, ProcessCounts>,
}

fn main() -> BoxResult<()> {
    if let Some(role) = Role::from_args() {
        return match role.name.as_str() {
            remote::ECHO_ROLE => remote::echo_role(&role),
            unix::ECHO_ROLE => unix::echo_role(&role),
            other => Err(format!("unknown role {other:?}").into()),
        };
    }
    let options = Options::from_args();
    let (rounds, warmup, round_trips) = (options.scale(2, 1), options.scale(100, 5), options.scale(2_000, 20));
    let node = Node::start()?;
    for payload_bytes in PAYLOAD_BYTES {
        let mut measured: Vec<Measured> = Subject::ALL.iter().map(|_| Measured::default()).collect();
        for round in 0..rounds {
            for (subject, measured) in Subject::ALL.into_iter().zip(&mut measured) {
                let mut probe = Probe::of(&[("A", std::process::id())]);
                let rtt_ns = match subject {
                    Subject::Stampede(prefetch) => {
                        probe.add("node", node.pid());
                        let names = (
                            format!("hops/ping{payload_bytes}-{round}-{prefetch}"),
                            format!("hops/pong{payload_bytes}-{round}-{prefetch}"),
                        );
                        let via = Via { prefetch, ..Via::DEFAULT };
                        remote::ping_pong(
                            &node.endpoint,
                            &names,
                            payload_bytes,
                            via,
                            (warmup, round_trips),
                            &mut probe,
                        )?
                    }
                    Subject::UnixSocket => unix::ping_pong(payload_bytes, warmup, round_trips, &mut probe)?,
                };
                measured.rtt_ns.extend(rtt_ns);
                measured.round_trips_run += (warmup + round_trips) as u64;
                for counts in probe.counts {
                    add(measured.processes.entry(counts.label.clone()).or_default(), &counts);
                }
            }
        }
        let floor = Summary::of(&mut measured[2].rtt_ns.clone());
        for (subject, measured) in Subject::ALL.into_iter().zip(&mut measured) {
            emit(subject, payload_bytes, measured, &floor);
        }
    }
    Ok(())
}

/// Adds `counts` into `sum` (same process, another round).
fn add(sum: &mut ProcessCounts, counts: &ProcessCounts) {
    sum.label.clone_from(&counts.label);
    sum.syscalls = sum.syscalls.zip(counts.syscalls).map(|(a, b)| a + b).or(counts.syscalls);
    for (name, thread) in &counts.threads {
        let total = sum.threads.entry(name.clone()).or_default();
        total.threads = total.threads.max(thread.threads);
        total.wakeups += thread.wakeups;
        total.preempted += thread.preempted;
        total.run_ns += thread.run_ns;
    }
}

/// One line for the subject's latency, one per process and one per thread name that woke.
fn emit(subject: Subject, payload_bytes: usize, measured: &mut Measured, floor: &Summary) {
    let case = format!("{payload_bytes} B");
    let rtt = Summary::of(&mut measured.rtt_ns);
    let one_way = |ns: f64| ns / 2_000.0;
    Line::new(BENCH, &case, &subject.name())
        .field("one_way_p50_us", one_way(rtt.p50_ns))
        .field("one_way_p99_us", one_way(rtt.p99_ns))
        .ratio("Unix-socket ping-pong", rtt.p50_ns / floor.p50_ns)
        .field("round_trips", rtt.n as u64)
        .emit();
    let per_round_trip = |n: u64| n as f64 / measured.round_trips_run as f64;
    for (label, process) in &measured.processes {
        let total = process.total();
        let line = Line::new(BENCH, &case, &subject.name())
            .field("process", label.as_str())
            .field("wakeups_per_round_trip", per_round_trip(total.wakeups))
            .field("preempted_per_round_trip", per_round_trip(total.preempted))
            .field("cpu_us_per_round_trip", per_round_trip(total.run_ns) / 1_000.0);
        match process.syscalls {
            Some(syscalls) => line.field("syscalls_per_round_trip", per_round_trip(syscalls)),
            None => line.field("syscalls", "not counted: needs perf on PATH, allowed to count raw_syscalls:sys_enter"),
        }
        .emit();
        // Threads that ran less than once per hundred round trips are noise (timers, zenoh's).
        for (name, thread) in process.threads.iter().filter(|(_, t)| per_round_trip(t.wakeups + t.preempted) >= 0.01) {
            Line::new(BENCH, &case, &subject.name())
                .field("process", label.as_str())
                .field("thread", name.as_str())
                .field("threads", thread.threads)
                .field("wakeups_per_round_trip", per_round_trip(thread.wakeups))
                .field("cpu_us_per_round_trip", per_round_trip(thread.run_ns) / 1_000.0)
                .emit();
        }
    }
}
