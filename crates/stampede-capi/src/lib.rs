//! Stampede's C ABI (docs/C.md, issue 16): the functions of `stampede.h`, every symbol prefixed
//! `stp_` (`STP_` for constants), over the Rust client — so a C program uses an embedded runtime
//! or a session on a node with the same calls, rules and errors as Rust and Python. `docs/C.md`
//! is the user's guide.
//!
//! A Rust library, so that Rust can call the C ABI as C does: `crates/stampede-c` links it into
//! `libstampede.so` / `libstampede.a` (which export these `#[no_mangle]` functions) and holds the
//! header cbindgen generates from this source (its `src/header.rs` says how and why it is checked
//! in); the C API's fuzz target (`crates/stampede-fuzz/src/capi.rs`) calls them with the
//! pointers and lengths it evolves.
//!
//! # Layout
//!
//! - [`error`] — status codes (one per `stampede::Error` variant), the thread's last error and
//!   its message, and the guard every entry point runs in (no panic crosses the boundary).
//! - [`args`] — arguments from C: handles, strings, buffers, out-parameters, timeouts, bounds
//!   and selectors, each checked into `STP_INVALID_ARGUMENT` when bad.
//! - [`runtime`] — `stp_runtime`: `stp_runtime_new`, `stp_connect`, close and free, creating and
//!   looking up channels and queues, names, root tasks, ts_min, collect.
//! - [`task`] — `stp_task`: virtual time, visibility, spawn, close, and the attach calls.
//! - [`channel`] — `stp_channel` and its connections: put, get with every selector, get_range,
//!   consume, consume_until, detach; `stp_stats`.
//! - [`queue`] — `stp_queue` and its connections.
//! - [`item`] — `stp_item`, the zero-copy read-only view of an item, and `stp_items` lists.
//! - [`reclaim`] — GC handlers written in C.
//! - [`npy`] — `stp_npy_header`: `.npy` headers decoded by `stampede::npy`.
//! - [`watch`] — `stp_watch`: the name service's events (names created and destroyed, nodes up
//!   and down).
//!
//! # The contract every function keeps
//!
//! - Fallible functions return `int`: `STP_OK` (0) or a negative `STP_*` code; results go through
//!   out-parameters, and a handle out-parameter is NULL after any failure. Accessors that cannot fail but for a NULL handle return their value directly,
//!   with a documented sentinel (-1, NULL, 0) for NULL.
//! - A NULL handle, a NULL required pointer, a string that is not UTF-8 or an out-of-range number
//!   is `STP_INVALID_ARGUMENT`, never a crash; a panic is caught and returned as `STP_INTERNAL`.
//!   What cannot be checked (a dangling or freed handle, a buffer shorter than its length) is the
//!   caller's promise, stated under `# Safety` on each function.
//! - Every handle is freed (or released) exactly once, by the function of its type; handles are
//!   independent of each other and may be freed in any order.
//! - Handles may be used from any thread; a handle must not be freed while another thread is in a
//!   call on it.
//!
//! Rust's naming lint is off for this crate: its types are named as C sees them (`stp_channel`),
//! so that what the header says and what the source says are the same word.

#![allow(non_camel_case_types)]
// Each `unsafe extern "C"` function documents its own `# Safety`; this lint is kept on.
#![deny(clippy::missing_safety_doc)]

// In the order the header lists them (cbindgen follows declaration order; the blank lines keep
// rustfmt from sorting them): errors first, then the runtime, then what it makes.
pub mod error;

pub mod args;

pub mod runtime;

pub mod task;

pub mod channel;

pub mod queue;

pub mod item;

pub mod reclaim;

pub mod npy;

pub mod watch;

#[cfg(test)]
mod tests;

/// Virtual time `INFINITY`: a task at it holds nothing back (a reader that inherits timestamps
/// from what it gets). Never an item timestamp.
pub const STP_INFINITY: i64 = i64::MAX;

/// Most puts of one output connection on their way to the node at once
/// (`stp_task_attach_output_window`).
pub const STP_PUT_WINDOW_MAX: usize = 64;
const _: () = assert!(STP_PUT_WINDOW_MAX == stampede::PUT_WINDOW_MAX, "the C bound is the client's");

/// Handles are used from any thread (docs/C.md, "Threads"): each wraps a Rust handle that is
/// `Send + Sync`. Checked at compile time, so a change in the Rust client that breaks this does
/// not compile here.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<runtime::stp_runtime>();
    shared::<channel::stp_channel>();
    shared::<channel::stp_channel_input>();
    shared::<channel::stp_channel_output>();
    shared::<queue::stp_queue>();
    shared::<queue::stp_queue_input>();
    shared::<queue::stp_queue_output>();
    shared::<task::stp_task>();
    shared::<item::stp_item>();
    shared::<item::stp_items>();
    shared::<watch::stp_watch>();
};
