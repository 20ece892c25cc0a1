//! A client's operations, run by the engine as a node runs them: each step is a request message;
//! those that decode to an operation run in one session with every right (a node without an access
//! policy), their waits clamped as a node clamps them.
//!
//! Checked after every operation: the engine's invariants (`Runtime::check_invariants`); ts_min
//! never goes back (no task, existing or future, may get an item below it); every operation
//! returns (its wait is bounded; the clock is paused, so waiting costs no real time). At the end
//! the session closes, as a node closes it when its client goes, and the invariants hold again.

use stampede_core::{Op, Timestamp};
use stampede_engine::{Body, Runtime, Session, Unrestricted};
use stampede_wire::{decode_request, Request};

use crate::steps::steps;

/// Handles the fuzzed session may hold (a node allows 4 096; fewer keep a run small).
pub const SESSION_HANDLES_MAX: usize = 64;

/// Largest payload the fuzzed session may put (a node's default is 64 MiB; inputs are smaller).
pub const PAYLOAD_BYTES_MAX: usize = 1 << 20;

/// Longest wait an operation may ask for, in µs (a node allows a second per request).
pub const WAIT_US_MAX: u64 = 1_000;

/// Runs the operations of `input`'s steps (see [`crate::steps`]).
pub fn ops(input: &[u8]) {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread tokio runtime builds");
    let runtime = Runtime::new();
    let session = Session::new("fuzz".into(), SESSION_HANDLES_MAX, PAYLOAD_BYTES_MAX);
    let mut ts_min = runtime.ts_min();
    for (_, message) in steps(input) {
        let Ok((header, payload)) = decode_request(message) else { continue };
        let Request::Op(op) = header.request else { continue };
        // The consumes a request carries run first, each as if it had come on its own.
        for carried in header.consumed {
            ts_min = run(&tokio, &runtime, &session, carried.op(), &[], ts_min);
        }
        ts_min = run(&tokio, &runtime, &session, op, payload, ts_min);
    }
    session.close();
    checked(&runtime, ts_min, "closing the session");
}

/// Runs `op` (a put's payload `payload`) in `session`, its wait clamped; checks the runtime after
/// it and returns its ts_min, which was `before`.
fn run(
    tokio: &tokio::runtime::Runtime,
    runtime: &Runtime,
    session: &Session,
    mut op: Op,
    payload: &[u8],
    before: Timestamp,
) -> Timestamp {
    op.clamp_waits(WAIT_US_MAX);
    let described = format!("{op:?}");
    let _ = tokio.block_on(runtime.execute(session, &Unrestricted, op, Body::Inline(payload)));
    checked(runtime, before, &described)
}

/// Checks the runtime after `after`; returns its ts_min.
fn checked(runtime: &Runtime, before: Timestamp, after: &str) -> Timestamp {
    runtime.check_invariants();
    let now = runtime.ts_min();
    assert!(now >= before, "ts_min went back from {before} to {now} after {after}");
    now
}

/// `op` as a request message of a session's client, with `payload` after its header.
pub fn request(seq: u64, op: Op, payload: &[u8]) -> Vec<u8> {
    let header =
        stampede_wire::RequestHeader { seq, ..stampede_wire::RequestHeader::new("fuzz", [0; 16], Request::Op(op)) };
    let mut message = stampede_wire::encode(&header);
    message.extend_from_slice(payload);
    message
}
