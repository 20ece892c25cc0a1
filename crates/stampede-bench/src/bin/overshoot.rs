//! How late a blocking call returns after its timeout (docs/SEMANTICS.md, "Timeouts"): every call
//! returns no later than its timeout plus [`BOUND`] whatever the other side does. Measured for
//! calls that must time out — a get on an empty channel or queue, a put into a full channel — in
//! this process and through a node (its direct path, and zenoh alone, and zenoh through a link
//! cut after the calls' channels were made: a relay that goes silent, as a dead cable does), and
//! for `connect` to a listener that accepts and never speaks; next to `std::thread::sleep` for the same time in the
//! same run (the machine's own timer lateness). One JSON line per case: the overshoot's p50, p99
//! and max in µs, and whether the max stayed within the bound.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use stampede::{ConnectOptions, Error, Limits, PutOptions, Runtime, INFINITY, OLDEST_UNSEEN};
use stampede_bench::cli::Options;
use stampede_bench::process::Node;
use stampede_bench::relay::Relay;
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;

use stampede_bench::BoxResult;

/// The promise measured: a call returns within its timeout plus this.
const BOUND: Duration = Duration::from_millis(100);
/// The timeout of each get and put.
const TIMEOUT: Duration = Duration::from_millis(20);
/// The timeout of each connect (longer: a connect's steps each take a share of it).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

fn main() -> BoxResult<()> {
    let options = Options::from_args();
    let calls = options.scale(200, 5);
    let cut_calls = options.scale(30, 5);
    let connects = options.scale(20, 2);

    let slept = overshoots(calls, TIMEOUT, || {
        std::thread::sleep(TIMEOUT);
        Ok(())
    })?;
    report("sleep", TIMEOUT, "std::thread::sleep", &slept, None);

    measure_runtime("embedded", &Runtime::new(), calls, &slept, None)?;
    for (path, zenoh_only) in [("node, direct path", false), ("node, zenoh alone", true)] {
        // A node of its own: ts_min there starts at 0.
        let node = Node::start()?;
        let options =
            ConnectOptions { timeout: Some(Duration::from_secs(10)), zenoh_only, ..ConnectOptions::default() };
        let rt = stampede::connect_with(&node.endpoint, &options)?;
        measure_runtime(path, &rt, calls, &slept, None)?;
        rt.close();
    }

    // A cut link: every call still returns by its timeout, whatever it returns. Zenoh alone (the
    // direct path would bypass the relay); calls fewer than the link's lease (3 s) allows, so
    // that they meet the silence, not a session already closed.
    let node = Node::start()?;
    let relay = Relay::to(node.endpoint.trim_start_matches("tcp/"))?;
    let options =
        ConnectOptions { timeout: Some(Duration::from_secs(10)), zenoh_only: true, ..ConnectOptions::default() };
    let rt = stampede::connect_with(&relay.endpoint, &options)?;
    measure_runtime("node, zenoh through a cut link", &rt, cut_calls, &slept, Some(&relay))?;
    rt.close();

    // A listener that accepts and never speaks: connect must give up by its timeout.
    let silent = TcpListener::bind("127.0.0.1:0")?;
    let endpoint = format!("tcp/{}", silent.local_addr()?);
    let connected =
        overshoots(connects, CONNECT_TIMEOUT, || match stampede::connect(&endpoint, Some(CONNECT_TIMEOUT)) {
            Err(Error::Unreachable { .. }) => Ok(()),
            other => Err(format!("connect to a silent listener: {:?}", other.map(|_| ())).into()),
        })?;
    report("connect, a listener that never speaks", CONNECT_TIMEOUT, "stampede::connect", &connected, Some(&slept));
    drop(silent);
    Ok(())
}

/// The gets and the put that time out on `rt`, `calls` times each; with `cut`, that relay's link
/// is cut once the containers are made (any error is then a return: the node cannot answer).
fn measure_runtime(path: &str, rt: &Runtime, calls: usize, slept: &Summary, cut: Option<&Relay>) -> BoxResult<()> {
    let frames = rt.create_channel("overshoot/empty", Limits::unbounded())?;
    let full = rt.create_channel("overshoot/full", Limits::items(1))?;
    let jobs = rt.create_queue("overshoot/jobs", Limits::unbounded())?;
    let (producer, reader) = (rt.task(0)?, rt.task(INFINITY)?);
    let input = reader.attach_input(&frames)?;
    let queue_input = reader.attach_input(&jobs)?;
    let output = producer.attach_output(&full)?;
    // The one slot stays taken: the reader holds ts_min at 0 and never consumes.
    let _holder = reader.attach_input(&full)?;
    output.put(0, vec![0u8; 8])?;
    if let Some(relay) = cut {
        relay.cut();
    }

    let timed_out = |result: stampede::Result<()>| match result {
        Err(e) if e.is_transient() || cut.is_some() => Ok(()),
        other => Err(format!("a call that had to time out: {other:?}").into()),
    };
    let get = overshoots(calls, TIMEOUT, || timed_out(input.get(OLDEST_UNSEEN, Some(TIMEOUT)).map(drop)))?;
    report(&format!("{path}: channel get, empty"), TIMEOUT, "stampede", &get, Some(slept));
    let queue_get = overshoots(calls, TIMEOUT, || timed_out(queue_input.get(Some(TIMEOUT)).map(drop)))?;
    report(&format!("{path}: queue get, empty"), TIMEOUT, "stampede", &queue_get, Some(slept));
    let mut ts = 0;
    let put = overshoots(calls, TIMEOUT, || {
        ts += 1;
        timed_out(output.put_with(ts, vec![0u8; 8], PutOptions { timeout: Some(TIMEOUT), ..PutOptions::default() }))
    })?;
    report(&format!("{path}: channel put, full"), TIMEOUT, "stampede", &put, Some(slept));
    Ok(())
}

/// `call` run `n` times; how long after `timeout` each returned, in ns.
fn overshoots(n: usize, timeout: Duration, mut call: impl FnMut() -> BoxResult<()>) -> BoxResult<Summary> {
    let mut late = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        call()?;
        late.push(u64::try_from(start.elapsed().saturating_sub(timeout).as_nanos()).unwrap_or(u64::MAX));
    }
    Ok(Summary::of(&mut late))
}

/// One line: the overshoot of `case` (timeout `timeout`) by `subject`, its p99 over sleep's.
fn report(case: &str, timeout: Duration, subject: &str, late: &Summary, slept: Option<&Summary>) {
    let line = Line::new("overshoot", case, subject)
        .field("timeout_ms", timeout.as_secs_f64() * 1e3)
        .field("calls", late.n as u64)
        .latency_us("overshoot_", late)
        .field("overshoot_max_us", late.max_ns / 1e3)
        .field("within_bound", late.max_ns <= BOUND.as_nanos() as f64);
    match slept {
        Some(slept) => line.ratio("std::thread::sleep (p99)", late.p99_ns / slept.p99_ns.max(1.0)).emit(),
        None => line.emit(),
    }
}
