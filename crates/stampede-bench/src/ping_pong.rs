//! The hand-off ping-pong of `handoff` (embedded, beside crossbeam) and `remote` (through a node,
//! A and B in two processes: [`crate::remote`]): A (virtual time `i`) puts `ts=i` into `ping`,
//! advances its virtual time, blocks on an exact get of `i` from `pong` and consumes it; B
//! (virtual time `INFINITY`) blocks on `NEWEST_UNSEEN` of `ping`, puts its answer at the same ts
//! into `pong` and consumes. Both items are reclaimed inside the loop.

use std::thread;
use std::time::Instant;

use stampede::{Limits, Runtime, INFINITY, NEWEST_UNSEEN};

use crate::payload::{source, touch};
use crate::pipe::{check_reclaimed, ts_of};
use crate::stats::elapsed_ns;

use crate::BoxResult;

/// Times `warmup + round_trips` calls of `round(i)`; the last `round_trips` times, in ns.
pub fn timed<E>(
    warmup: usize,
    round_trips: usize,
    mut round: impl FnMut(usize) -> Result<(), E>,
) -> Result<Vec<u64>, E> {
    let mut rtt_ns = Vec::with_capacity(round_trips);
    for i in 0..warmup + round_trips {
        let start = Instant::now();
        round(i)?;
        let ns = elapsed_ns(start);
        if i >= warmup {
            rtt_ns.push(ns);
        }
    }
    Ok(rtt_ns)
}

/// Round-trip times in ns of `round_trips` ping-pongs on an embedded runtime after `warmup`
/// untimed ones.
pub fn embedded(payload_bytes: usize, warmup: usize, round_trips: usize) -> BoxResult<Vec<u64>> {
    let runtime = Runtime::new();
    let ping = runtime.create_channel("handoff/ping", Limits::unbounded())?;
    let pong = runtime.create_channel("handoff/pong", Limits::unbounded())?;
    let a = runtime.task(0)?;
    let a_out = a.attach_output(&ping)?;
    let a_in = a.attach_input(&pong)?;
    let b = runtime.task(INFINITY)?;
    let b_in = b.attach_input(&ping)?;
    let b_out = b.attach_output(&pong)?;
    let total = warmup + round_trips;

    let echo = thread::spawn(move || -> stampede::Result<()> {
        let buf = source(payload_bytes, 0xb0);
        for _ in 0..total {
            let item = b_in.get(NEWEST_UNSEEN, None)?;
            touch(item.data());
            b_out.put(item.ts, buf.as_slice())?;
            b_in.consume(item.ts)?;
        }
        Ok(())
    });

    let buf = source(payload_bytes, 0xa0);
    let rtt_ns = timed(warmup, round_trips, |i| -> stampede::Result<()> {
        let ts = ts_of(i);
        a_out.put(ts, buf.as_slice())?;
        a.set_virtual_time(ts + 1)?;
        touch(a_in.get(ts, None)?.data());
        a_in.consume(ts)
    })?;
    echo.join().expect("stampede echo thread panicked")?;
    // A's virtual time is `total` and nothing is open: everything must be gone.
    check_reclaimed(&ping, total as u64, 0);
    check_reclaimed(&pong, total as u64, 0);
    Ok(rtt_ns)
}
