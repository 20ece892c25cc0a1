//! GC handlers written in C (docs/SEMANTICS.md, "Virtual time, visibility, GC"): a function and a
//! `user` pointer the runtime calls for each item a channel or queue reclaims
//! (`stp_channel_on_reclaim`, `stp_queue_on_reclaim`), or every container of a runtime reclaims
//! (`stp_runtime_on_reclaim`).
//!
//! A handler runs on the thread whose operation made the item garbage (through a client: on a
//! thread of the client), after the runtime's locks are released and before that operation
//! returns — so it may call `stp_` functions, but a handler that blocks delays that operation.
//! Registration is for the container's (or runtime's) lifetime: there is no removal, and `user`
//! must stay valid until `stp_runtime_close` (or `stp_runtime_free`) of the runtime the handle
//! came from has returned: closing destroys the channels, which reclaims their items, so handlers
//! run during it; then it shuts the runtime's handler [`Gate`], waiting for handlers running on
//! other threads (a client delivers reclaims on a thread of its own), and no handler runs after.
//! A handler must not unwind (no C++ exception or `longjmp` out of it) and must not close its own
//! runtime.

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use parking_lot::RwLock;

use stampede::Item;

use crate::args::{handle, invalid};
use crate::channel::stp_channel;
use crate::error::{c_text, guard};
use crate::queue::stp_queue;
use crate::runtime::stp_runtime;

/// A channel's or queue's GC handler: called with the registered `user` pointer and the
/// timestamp of each item reclaimed.
pub type stp_reclaim_fn = Option<unsafe extern "C" fn(user: *mut c_void, ts: i64)>;

/// A runtime-wide GC handler: called with the registered `user` pointer, the name of the
/// channel or queue (valid during the call only) and the timestamp of each item reclaimed.
pub type stp_runtime_reclaim_fn = Option<unsafe extern "C" fn(user: *mut c_void, name: *const c_char, ts: i64)>;

/// The `user` pointer of a handler, carried to whichever thread reclaims.
#[derive(Clone, Copy)]
struct User(*mut c_void);

// SAFETY: registering a handler promises (documented on the registering functions) that `user`
// may be used from any thread; Stampede itself never dereferences it, only passes it back.
unsafe impl Send for User {}
// SAFETY: as above: the pointer is only copied and handed back to the caller's function.
unsafe impl Sync for User {}

impl User {
    /// The pointer (a method, so that closures capture the whole `User`, which is `Send`, and not
    /// its raw field, which is not).
    fn get(self) -> *mut c_void {
        self.0
    }
}

/// A runtime's handler gate: open until the runtime is closed. A handler runs holding it open
/// (shared, recursively: a handler's own calls may reclaim and run handlers); closing waits for
/// the handlers running and keeps every later one from running, so a caller may free `user` once
/// the close returns.
#[derive(Default)]
pub(crate) struct Gate(RwLock<bool>);

impl Gate {
    /// Runs `handler` unless the gate is closed.
    fn pass(&self, handler: impl FnOnce()) {
        let closed = self.0.read_recursive();
        if !*closed {
            handler();
        }
    }

    /// Closes the gate, once the handlers running now have returned.
    pub(crate) fn close(&self) {
        *self.0.write() = true;
    }
}

/// The Rust handler that calls `f(user, ts)` while `gate` is open.
fn trampoline(
    f: unsafe extern "C" fn(*mut c_void, i64),
    user: *mut c_void,
    gate: Arc<Gate>,
) -> impl Fn(&Item) + Send + Sync + 'static {
    let user = User(user);
    // SAFETY (of the call): `f` is the caller's handler, called with the caller's own pointer,
    // as registered, before its runtime's close returned.
    move |item: &Item| gate.pass(|| unsafe { f(user.get(), item.ts) })
}

/// Registers `f` as a GC handler of the channel: `f(user, ts)` runs for each item it reclaims
/// (by ts_min, by reference count, or when the channel is destroyed). `f` NULL is
/// `STP_INVALID_ARGUMENT`. Remotely `STP_UNREACHABLE` when the node cannot be reached.
///
/// # Safety
/// `ch` is NULL or live. `user` is passed back untouched, from any thread; it must stay valid
/// until the runtime's close has returned. `f` must not unwind.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_on_reclaim(ch: *const stp_channel, f: stp_reclaim_fn, user: *mut c_void) -> c_int {
    const OP: &str = "stp_channel_on_reclaim";
    guard(OP, || {
        // SAFETY: NULL or live per the contract.
        let ch = unsafe { handle(ch, OP, "ch") }?;
        let f = f.ok_or_else(|| invalid(OP, "f", "a NULL handler"))?;
        ch.channel.on_reclaim(trampoline(f, user, ch.gate.clone()))
    })
}

/// Registers `f` as a GC handler of the queue: `f(user, ts)` runs for each item it reclaims
/// (consumed by its getter, or the queue destroyed). As `stp_channel_on_reclaim`.
///
/// # Safety
/// `q` is NULL or live. `user` is passed back untouched, from any thread; it must stay valid
/// until the runtime's close has returned. `f` must not unwind.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_on_reclaim(q: *const stp_queue, f: stp_reclaim_fn, user: *mut c_void) -> c_int {
    const OP: &str = "stp_queue_on_reclaim";
    guard(OP, || {
        // SAFETY: NULL or live per the contract.
        let q = unsafe { handle(q, OP, "q") }?;
        let f = f.ok_or_else(|| invalid(OP, "f", "a NULL handler"))?;
        q.queue.on_reclaim(trampoline(f, user, q.gate.clone()))
    })
}

/// Registers `f` as a GC handler of every channel and queue of the runtime: `f(user, name, ts)`.
/// As `stp_channel_on_reclaim`.
///
/// # Safety
/// `rt` is NULL or live. `user` is passed back untouched, from any thread; it must stay valid
/// until the runtime's close has returned. `f` must not unwind.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_on_reclaim(
    rt: *const stp_runtime,
    f: stp_runtime_reclaim_fn,
    user: *mut c_void,
) -> c_int {
    const OP: &str = "stp_runtime_on_reclaim";
    guard(OP, || {
        // SAFETY: NULL or live per the contract.
        let rt = unsafe { handle(rt, OP, "rt") }?;
        let f = f.ok_or_else(|| invalid(OP, "f", "a NULL handler"))?;
        let (user, gate) = (User(user), rt.gate.clone());
        rt.runtime.on_reclaim(move |name: &str, item: &Item| {
            gate.pass(|| {
                let name = c_text(name);
                // SAFETY: the caller's handler with its own pointer, as registered, before its
                // runtime's close returned; `name` lives through the call.
                unsafe { f(user.get(), name.as_ptr(), item.ts) }
            })
        })
    })
}
