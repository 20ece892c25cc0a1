//! Issue 8, defect 3: no public call panics, whatever its arguments (docs/SEMANTICS.md, "Errors").
//!
//! A property test drives the public Rust API of two runtimes — names, channels, queues, tasks,
//! connections, puts, gets, consumes, virtual times, spawns, joins, pacers, destroy and close —
//! with random, boundary and hostile values (negative, 0, `INFINITY`, `i64::MIN`/`MAX`,
//! `u32::MAX` reference counts, `Duration::ZERO`/`MAX` ticks, empty, huge and ill-formed names,
//! tasks of one runtime attached to the other's containers). Every call must return (a value or a
//! typed error with a message); a panic anywhere fails the case, and the runtime's invariants are
//! checked after every step. Calls that could wait use a zero timeout, so nothing blocks; the
//! waiting forms with huge timeouts are proved in `hardening.rs`.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use stampede::{
    ApproxJoin, ChannelInput, ChannelOutput, Container, ExactJoin, Gather, JoinPolicy, Limits, Pacer, PutOptions,
    QueueInput, QueueOutput, Runtime, Selector, Task, Timestamp, INFINITY, TS_MAX,
};

/// Cases run (each a sequence of operations); small enough for CI to finish in seconds.
const CASES: u32 = 96;
/// Longest operation sequence of a case.
const OPS_MAX: usize = 60;

/// Timestamps and virtual times worth trying: boundaries, hostile values and a few ordinary ones.
fn timestamp() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        Just(i64::MIN),
        Just(-1),
        Just(0),
        Just(TS_MAX),
        Just(INFINITY),
        Just(TS_MAX - 1),
        0..8i64,
        0..8i64,
        0..8i64,
    ]
}

/// Names: well-formed, ill-formed, empty and huge.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cam".to_owned()),
        Just("cam/left".to_owned()),
        Just("q".to_owned()),
        Just(String::new()),
        Just("/".to_owned()),
        Just("a//b".to_owned()),
        Just("a/../b".to_owned()),
        Just("camera*".to_owned()),
        Just("tab\there\u{0}".to_owned()),
        Just("é/ü".to_owned()),
        Just("x".repeat(100_000)),
    ]
}

fn bound() -> impl Strategy<Value = Option<usize>> {
    prop_oneof![Just(None), Just(Some(0)), Just(Some(1)), Just(Some(3)), Just(Some(usize::MAX))]
}

fn selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        timestamp().prop_map(Selector::At),
        Just(Selector::Oldest),
        Just(Selector::Newest),
        Just(Selector::OldestUnseen),
        Just(Selector::NewestUnseen),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_nanos(1)),
        Just(Duration::from_millis(33)),
        Just(Duration::MAX)
    ]
}

#[derive(Clone, Debug)]
enum Op {
    CreateChannel { rt: usize, name: String, capacity: Option<usize>, bytes: Option<usize> },
    CreateQueue { rt: usize, name: String, capacity: Option<usize> },
    Lookup { rt: usize, name: String },
    Names { rt: usize, prefix: String },
    Task { rt: usize, vt: Timestamp },
    Spawn { task: usize, vt: Timestamp },
    SetVirtualTime { task: usize, vt: Timestamp },
    CloseTask { task: usize },
    AttachInput { task: usize, container: usize },
    AttachOutput { task: usize, container: usize },
    Put { conn: usize, ts: Timestamp, len: usize, refcount: Option<u32> },
    CheckFits { conn: usize, ts: Timestamp, bytes: usize },
    Get { conn: usize, selector: Selector },
    GetRange { conn: usize, t0: Timestamp, t1: Timestamp },
    Consume { conn: usize, ts: Timestamp },
    ConsumeUntil { conn: usize, ts: Timestamp },
    Detach { conn: usize },
    CloseProducers { container: usize },
    Destroy { container: usize },
    Join { conns: Vec<usize>, approx: Option<Timestamp>, policy: usize },
    Pace { tick: Duration, tolerance: Duration, vt: Timestamp },
    Gather { k: usize },
    Collect { rt: usize },
    CloseRuntime { rt: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let pick = 0..8usize;
    prop_oneof![
        (0..2usize, name(), bound(), bound()).prop_map(|(rt, name, capacity, bytes)| Op::CreateChannel {
            rt,
            name,
            capacity,
            bytes
        }),
        (0..2usize, name(), bound()).prop_map(|(rt, name, capacity)| Op::CreateQueue { rt, name, capacity }),
        (0..2usize, name()).prop_map(|(rt, name)| Op::Lookup { rt, name }),
        (0..2usize, name()).prop_map(|(rt, prefix)| Op::Names { rt, prefix }),
        (0..2usize, timestamp()).prop_map(|(rt, vt)| Op::Task { rt, vt }),
        (pick.clone(), timestamp()).prop_map(|(task, vt)| Op::Spawn { task, vt }),
        (pick.clone(), timestamp()).prop_map(|(task, vt)| Op::SetVirtualTime { task, vt }),
        pick.clone().prop_map(|task| Op::CloseTask { task }),
        (pick.clone(), pick.clone()).prop_map(|(task, container)| Op::AttachInput { task, container }),
        (pick.clone(), pick.clone()).prop_map(|(task, container)| Op::AttachOutput { task, container }),
        (
            pick.clone(),
            timestamp(),
            prop_oneof![Just(0usize), Just(4), Just(100)],
            prop_oneof![Just(None), Just(Some(0)), Just(Some(1)), Just(Some(u32::MAX))]
        )
            .prop_map(|(conn, ts, len, refcount)| Op::Put { conn, ts, len, refcount }),
        (pick.clone(), timestamp(), prop_oneof![Just(0usize), Just(usize::MAX)])
            .prop_map(|(conn, ts, bytes)| Op::CheckFits { conn, ts, bytes }),
        (pick.clone(), selector()).prop_map(|(conn, selector)| Op::Get { conn, selector }),
        (pick.clone(), timestamp(), timestamp()).prop_map(|(conn, t0, t1)| Op::GetRange { conn, t0, t1 }),
        (pick.clone(), timestamp()).prop_map(|(conn, ts)| Op::Consume { conn, ts }),
        (pick.clone(), timestamp()).prop_map(|(conn, ts)| Op::ConsumeUntil { conn, ts }),
        pick.clone().prop_map(|conn| Op::Detach { conn }),
        pick.clone().prop_map(|container| Op::CloseProducers { container }),
        pick.clone().prop_map(|container| Op::Destroy { container }),
        (proptest::collection::vec(pick.clone(), 0..3), prop_oneof![Just(None), timestamp().prop_map(Some)], 0..3usize)
            .prop_map(|(conns, approx, policy)| Op::Join { conns, approx, policy }),
        (duration(), duration(), prop_oneof![Just(i64::MIN), Just(-1), Just(0)])
            .prop_map(|(tick, tolerance, vt)| Op::Pace { tick, tolerance, vt }),
        (0..3usize).prop_map(|k| Op::Gather { k }),
        (0..2usize).prop_map(|rt| Op::Collect { rt }),
        (0..2usize).prop_map(|rt| Op::CloseRuntime { rt }),
    ]
}

/// A connection of any kind.
enum Conn {
    ChannelIn(ChannelInput),
    ChannelOut(ChannelOutput),
    QueueIn(QueueInput),
    QueueOut(QueueOutput),
}

/// Everything a case created so far; operations pick among them by index (modulo the count).
struct World {
    runtimes: [Runtime; 2],
    tasks: Vec<Task>,
    containers: Vec<Container>,
    conns: Vec<Conn>,
}

/// The element `i` picks (modulo the count), if there is any.
fn nth<T>(items: &[T], i: usize) -> Option<&T> {
    (!items.is_empty()).then(|| &items[i % items.len()])
}

/// The result of a call: a value, or a typed error whose message says something.
fn typed<T>(result: stampede::Result<T>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            assert!(!e.to_string().is_empty(), "an error without a message: {e:?}");
            None
        }
    }
}

const NOW: Option<Duration> = Some(Duration::ZERO);

impl World {
    /// Two runtimes, each with a channel, a queue, a producer task at 0 and a reader task at
    /// `INFINITY`, so that random operations meet something to act on from the first step.
    fn new() -> World {
        let mut world = World {
            runtimes: [Runtime::new(), Runtime::new()],
            tasks: Vec::new(),
            containers: Vec::new(),
            conns: Vec::new(),
        };
        for rt in 0..2 {
            world.run(Op::CreateChannel { rt, name: "cam".into(), capacity: None, bytes: None });
            world.run(Op::CreateQueue { rt, name: "q".into(), capacity: None });
            world.run(Op::Task { rt, vt: 0 });
            world.run(Op::Task { rt, vt: INFINITY });
        }
        world
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::CreateChannel { rt, name, capacity, bytes } => {
                let limits = Limits { capacity, bytes_max: bytes };
                if let Some(ch) = typed(self.runtimes[rt].create_channel(&name, limits)) {
                    self.containers.push(Container::Channel(ch));
                }
            }
            Op::CreateQueue { rt, name, capacity } => {
                let limits = Limits { capacity, bytes_max: None };
                if let Some(q) = typed(self.runtimes[rt].create_queue(&name, limits)) {
                    self.containers.push(Container::Queue(q));
                }
            }
            Op::Lookup { rt, name } => {
                typed(self.runtimes[rt].lookup(&name));
            }
            Op::Names { rt, prefix } => {
                self.runtimes[rt].names(&prefix).unwrap();
            }
            Op::Task { rt, vt } => {
                if let Some(task) = typed(self.runtimes[rt].task(vt)) {
                    self.tasks.push(task);
                }
            }
            Op::Spawn { task, vt } => {
                if let Some(child) = nth(&self.tasks, task).and_then(|t| typed(t.spawn(vt))) {
                    self.tasks.push(child);
                }
            }
            Op::SetVirtualTime { task, vt } => {
                if let Some(task) = nth(&self.tasks, task) {
                    typed(task.set_virtual_time(vt));
                }
            }
            Op::CloseTask { task } => {
                if let Some(task) = nth(&self.tasks, task) {
                    task.close();
                }
            }
            Op::AttachInput { task, container } => {
                let (Some(task), Some(container)) = (nth(&self.tasks, task), nth(&self.containers, container)) else {
                    return;
                };
                let conn = match container {
                    Container::Channel(ch) => typed(task.attach_input(ch)).map(Conn::ChannelIn),
                    Container::Queue(q) => typed(task.attach_input(q)).map(Conn::QueueIn),
                };
                self.conns.extend(conn);
            }
            Op::AttachOutput { task, container } => {
                let (Some(task), Some(container)) = (nth(&self.tasks, task), nth(&self.containers, container)) else {
                    return;
                };
                let conn = match container {
                    Container::Channel(ch) => typed(task.attach_output(ch)).map(Conn::ChannelOut),
                    Container::Queue(q) => typed(task.attach_output(q)).map(Conn::QueueOut),
                };
                self.conns.extend(conn);
            }
            Op::Put { conn, ts, len, refcount } => match nth(&self.conns, conn) {
                Some(Conn::ChannelOut(out)) => {
                    typed(out.put_with(ts, vec![7; len], PutOptions { refcount, timeout: NOW }));
                }
                Some(Conn::QueueOut(out)) => {
                    typed(out.put(ts, vec![7; len], NOW));
                }
                _ => {}
            },
            Op::CheckFits { conn, ts, bytes } => match nth(&self.conns, conn) {
                Some(Conn::ChannelOut(out)) => {
                    typed(out.check_fits(ts, bytes));
                }
                Some(Conn::QueueOut(out)) => {
                    typed(out.check_fits(ts, bytes));
                }
                _ => {}
            },
            Op::Get { conn, selector } => match nth(&self.conns, conn) {
                Some(Conn::ChannelIn(inp)) => {
                    typed(inp.get(selector, NOW));
                }
                Some(Conn::QueueIn(inp)) => {
                    typed(inp.get(NOW));
                }
                _ => {}
            },
            Op::GetRange { conn, t0, t1 } => {
                if let Some(Conn::ChannelIn(inp)) = nth(&self.conns, conn) {
                    typed(inp.get_range(t0, t1));
                }
            }
            Op::Consume { conn, ts } => match nth(&self.conns, conn) {
                Some(Conn::ChannelIn(inp)) => {
                    typed(inp.consume(ts));
                }
                Some(Conn::QueueIn(inp)) => {
                    typed(inp.consume_ts(ts));
                }
                _ => {}
            },
            Op::ConsumeUntil { conn, ts } => {
                if let Some(Conn::ChannelIn(inp)) = nth(&self.conns, conn) {
                    typed(inp.consume_until(ts));
                }
            }
            Op::Detach { conn } => match nth(&self.conns, conn) {
                Some(Conn::ChannelIn(c)) => c.detach(),
                Some(Conn::ChannelOut(c)) => c.detach(),
                Some(Conn::QueueIn(c)) => c.detach(),
                Some(Conn::QueueOut(c)) => c.detach(),
                None => {}
            },
            Op::CloseProducers { container } => {
                if let Some(Container::Channel(ch)) = nth(&self.containers, container) {
                    ch.close_producers().unwrap();
                }
            }
            Op::Destroy { container } => match nth(&self.containers, container) {
                Some(Container::Channel(ch)) => {
                    typed(ch.destroy());
                }
                Some(Container::Queue(q)) => {
                    typed(q.destroy());
                }
                None => {}
            },
            Op::Join { conns, approx, policy } => self.join(conns, approx, policy),
            Op::Pace { tick, tolerance, vt } => {
                if let Some(mut pacer) = typed(Pacer::new(tick, tolerance)) {
                    pacer.sync(vt);
                    pacer.vt_now();
                }
            }
            Op::Gather { k } => {
                typed(Gather::new(k));
            }
            Op::Collect { rt } => {
                self.runtimes[rt].collect();
            }
            Op::CloseRuntime { rt } => self.runtimes[rt].close(),
        }
    }

    /// Builds a join from the channel input connections picked (taking them out of the world)
    /// and asks it once for a tuple.
    fn join(&mut self, picks: Vec<usize>, approx: Option<Timestamp>, policy: usize) {
        let mut inputs = Vec::new();
        for pick in picks {
            if self.conns.is_empty() {
                break;
            }
            let i = pick % self.conns.len();
            if matches!(self.conns[i], Conn::ChannelIn(_)) {
                if let Conn::ChannelIn(inp) = self.conns.swap_remove(i) {
                    inputs.push(inp);
                }
            }
        }
        match approx {
            Some(tolerance) => {
                if let Some(mut join) = typed(ApproxJoin::new(inputs, tolerance)) {
                    typed(join.next(NOW));
                }
            }
            None => {
                let policy = [JoinPolicy::WaitAll, JoinPolicy::Partial, JoinPolicy::Skip][policy];
                if let Some(mut join) = typed(ExactJoin::new(inputs, policy)) {
                    typed(join.next(NOW));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES=n runs longer (docs/CHECKS.md).
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(CASES),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..ProptestConfig::default()
    })]

    /// Proves that no sequence of public calls with hostile arguments panics: every call returns
    /// a value or a typed error with a message, and every live task's visibility stays at or
    /// above ts_min after each step.
    #[test]
    fn hostile_arguments_never_panic(ops in proptest::collection::vec(op(), 1..OPS_MAX)) {
        let mut world = World::new();
        for op in ops {
            world.run(op);
            for rt in &world.runtimes {
                rt.check_invariants();
            }
        }
    }
}
