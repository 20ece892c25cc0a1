//! Queues and their connections (docs/SEMANTICS.md, "Queues"): FIFO by insertion, each item to
//! exactly one getter, reclaimed when that getter consumes it. Connections detach and free as a
//! channel's (channel.rs).

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use stampede::{Parts, Queue, QueueInput, QueueOutput};

use crate::args::{bytes, handle, handle_out, invalid, required, timeout};
use crate::channel::{codec_of, stp_stats};
use crate::error::{c_text, guard, guard_value};
use crate::item::stp_item;
use crate::reclaim::Gate;

/// A handle to a named queue (in this process or on a node).
pub struct stp_queue {
    pub(crate) queue: Queue,
    /// The queue's name as a C string.
    name: CString,
    /// Its runtime's handler gate (GC handlers registered here run only while it is open).
    pub(crate) gate: Arc<Gate>,
}

impl stp_queue {
    pub(crate) fn boxed(queue: Queue, gate: &Arc<Gate>) -> *mut stp_queue {
        let name = c_text(queue.name());
        Box::into_raw(Box::new(stp_queue { queue, name, gate: gate.clone() }))
    }
}

/// A task's output connection to a queue.
pub struct stp_queue_output {
    pub(crate) output: QueueOutput,
}

/// A task's input connection to a queue.
pub struct stp_queue_input {
    pub(crate) input: QueueInput,
}

/// The queue's name; NULL when `q` is NULL. Valid until the handle is freed.
///
/// # Safety
/// `q` is NULL or a live queue handle.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_name(q: *const stp_queue) -> *const c_char {
    guard_value("stp_queue_name", std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(q, "stp_queue_name", "q") }?.name.as_ptr())
    })
}

/// Writes the queue's counters to `*out`.
///
/// # Safety
/// `q` is NULL or live; `out` NULL or valid for writing a `stp_stats`.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_stats(q: *const stp_queue, out: *mut stp_stats) -> c_int {
    const OP: &str = "stp_queue_stats";
    guard(OP, || {
        required(out, OP, "out")?;
        // SAFETY: NULL or live per the contract.
        let stats = unsafe { handle(q, OP, "q") }?.queue.stats();
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stats.into()) };
        Ok(())
    })
}

/// Destroys the queue: its items are reclaimed, its name is freed, and every operation on it
/// (blocked ones included) fails `STP_CLOSED`. The handle stays valid until freed.
///
/// # Safety
/// `q` is NULL or a live queue handle.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_destroy(q: *const stp_queue) -> c_int {
    // SAFETY: NULL or live per the contract.
    guard("stp_queue_destroy", || unsafe { handle(q, "stp_queue_destroy", "q") }?.queue.destroy())
}

/// Frees the handle (the queue itself lives on). NULL is a no-op.
///
/// # Safety
/// `q` is NULL or a live queue handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_free(q: *mut stp_queue) {
    if !q.is_null() {
        guard("stp_queue_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(q) });
            Ok(())
        });
    }
}

/// Appends `len` bytes at `data` (copied) at `ts` with codec `codec` (NULL is `"raw"`);
/// `timeout_ms` bounds the wait for room in a bounded queue (`STP_FULL` when it expires).
///
/// # Safety
/// `out` is NULL or live; `codec` NULL or NUL-terminated; `data` NULL (with `len` 0) or valid for
/// reading `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_output_put(
    out: *const stp_queue_output,
    ts: i64,
    codec: *const c_char,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
) -> c_int {
    const OP: &str = "stp_queue_output_put";
    guard(OP, || {
        // SAFETY: each NULL or valid per the contract.
        let (out, codec, data) =
            unsafe { (handle(out, OP, "out")?, codec_of(codec, OP)?, bytes(data, len, OP, "data")?) };
        out.output.put(ts, Parts { parts: &[data], codec }, timeout(timeout_ms, OP)?)
    })
}

/// Detaches the output connection (idempotent); a put blocked on it returns `STP_CLOSED`.
///
/// # Safety
/// `out` is NULL or a live output connection.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_output_detach(out: *const stp_queue_output) -> c_int {
    guard("stp_queue_output_detach", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(out, "stp_queue_output_detach", "out") }?.output.detach();
        Ok(())
    })
}

/// Detaches and frees the output connection. NULL is a no-op.
///
/// # Safety
/// `out` is NULL or a live output connection that no other thread is using, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_output_free(out: *mut stp_queue_output) {
    if !out.is_null() {
        guard("stp_queue_output_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(out) });
            Ok(())
        });
    }
}

/// Takes the oldest waiting item and writes a new item handle to `*item_out` (release it with
/// `stp_item_release`); the item is open on this connection, holding the task's visibility at
/// its timestamp, until consumed. `timeout_ms` as `stp_channel_input_get`; `STP_NOT_AVAILABLE`
/// when it expires. On error `*item_out` is set to NULL.
///
/// # Safety
/// `inp` is NULL or live; `item_out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_input_get(
    inp: *const stp_queue_input,
    timeout_ms: i64,
    item_out: *mut *mut stp_item,
) -> c_int {
    const OP: &str = "stp_queue_input_get";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(item_out, OP, "item_out") }?;
        // SAFETY: NULL or live per the contract.
        let inp = unsafe { handle(inp, OP, "inp") }?;
        let item = inp.input.get(timeout(timeout_ms, OP)?)?;
        // SAFETY: as above.
        unsafe { item_out.write(stp_item::from_queue(item).boxed()) };
        Ok(())
    })
}

/// Consumes the item this connection got (by `stp_queue_input_get`): the queue reclaims it. An
/// item of a channel is `STP_INVALID_ARGUMENT`.
///
/// # Safety
/// `inp` is NULL or live; `item` NULL or a live item handle.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_input_consume(inp: *const stp_queue_input, item: *const stp_item) -> c_int {
    const OP: &str = "stp_queue_input_consume";
    guard(OP, || {
        // SAFETY: each NULL or live per the contract.
        let (inp, item) = unsafe { (handle(inp, OP, "inp")?, handle(item, OP, "item")?) };
        let seq = item.seq.ok_or_else(|| invalid(OP, "item", "an item of a channel, not of a queue"))?;
        inp.input.consume(&stampede::QueueItem { seq, item: item.item.clone() })
    })
}

/// Consumes the oldest item open on this connection at `ts`.
///
/// # Safety
/// `inp` is NULL or a live input connection.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_input_consume_ts(inp: *const stp_queue_input, ts: i64) -> c_int {
    guard("stp_queue_input_consume_ts", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(inp, "stp_queue_input_consume_ts", "inp") }?.input.consume_ts(ts)
    })
}

/// Detaches the input connection (idempotent): items it holds open go back to the head of the
/// queue; a get blocked on it returns `STP_CLOSED`.
///
/// # Safety
/// `inp` is NULL or a live input connection.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_input_detach(inp: *const stp_queue_input) -> c_int {
    guard("stp_queue_input_detach", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(inp, "stp_queue_input_detach", "inp") }?.input.detach();
        Ok(())
    })
}

/// Detaches and frees the input connection. NULL is a no-op.
///
/// # Safety
/// `inp` is NULL or a live input connection that no other thread is using, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_input_free(inp: *mut stp_queue_input) {
    if !inp.is_null() {
        guard("stp_queue_input_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(inp) });
            Ok(())
        });
    }
}
