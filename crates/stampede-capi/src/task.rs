//! Tasks (docs/SEMANTICS.md, "Terms" and "Virtual time, visibility, GC"): the holders of virtual
//! time, and the attach calls that make their connections.
//!
//! A task lives while its handle or any of its connections lives, or until `stp_task_close`,
//! which detaches every connection it holds and releases its claim on ts_min (so a task that
//! ends never pins GC). Any thread may drive a task.

use std::ffi::{c_char, c_int};

use stampede::{InputOptions, OutputOptions, Task};

use crate::args::{bound, handle, handle_out, policy, text, STP_UNBOUNDED};
use crate::channel::{stp_channel, stp_channel_input, stp_channel_output};
use crate::error::{guard, guard_value};
use crate::queue::{stp_queue, stp_queue_input, stp_queue_output};

/// A task: the unit that holds a virtual time.
pub struct stp_task {
    pub(crate) task: Task,
}

impl stp_task {
    pub(crate) fn boxed(task: Task) -> *mut stp_task {
        Box::into_raw(Box::new(stp_task { task }))
    }
}

/// The task's virtual time; -1 when `task` is NULL.
///
/// # Safety
/// `task` is NULL or a live task handle.
#[no_mangle]
pub unsafe extern "C" fn stp_task_virtual_time(task: *const stp_task) -> i64 {
    guard_value("stp_task_virtual_time", -1, || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(task, "stp_task_virtual_time", "task") }?.task.virtual_time())
    })
}

/// The task's visibility: `min(virtual time, timestamps of items open on its inputs)`, the
/// lowest timestamp it may still put; -1 when `task` is NULL.
///
/// # Safety
/// `task` is NULL or a live task handle.
#[no_mangle]
pub unsafe extern "C" fn stp_task_visibility(task: *const stp_task) -> i64 {
    guard_value("stp_task_visibility", -1, || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(task, "stp_task_visibility", "task") }?.task.visibility())
    })
}

/// Sets the virtual time; `vt` must be `>=` the task's visibility (else
/// `STP_BELOW_VISIBILITY`). Advancing it may advance ts_min and reclaim items (running GC
/// handlers) before this returns.
///
/// # Safety
/// `task` is NULL or a live task handle.
#[no_mangle]
pub unsafe extern "C" fn stp_task_set_virtual_time(task: *const stp_task, vt: i64) -> c_int {
    guard("stp_task_set_virtual_time", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(task, "stp_task_set_virtual_time", "task") }?.task.set_virtual_time(vt)
    })
}

/// A child task at virtual time `vt` (`>=` this task's visibility), written to `*out`.
///
/// # Safety
/// `task` is NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_spawn(task: *const stp_task, vt: i64, out: *mut *mut stp_task) -> c_int {
    const OP: &str = "stp_task_spawn";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: NULL or live per the contract.
        let child = unsafe { handle(task, OP, "task") }?.task.spawn(vt)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_task::boxed(child)) };
        Ok(())
    })
}

/// Labels the task for tools (dashboards, traces): UTF-8 text without control characters, at
/// most 256 bytes (`NAME_BYTES_MAX`).
///
/// # Safety
/// `task` is NULL or live; `name` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn stp_task_set_name(task: *const stp_task, name: *const c_char) -> c_int {
    const OP: &str = "stp_task_set_name";
    guard(OP, || {
        // SAFETY: each NULL or valid per the contract.
        let (task, name) = unsafe { (handle(task, OP, "task")?, text(name, OP, "name")?) };
        task.task.set_name(name)
    })
}

/// Ends the task now: detaches its connections (their later use fails `STP_CLOSED`) and releases
/// its claim on ts_min. Idempotent; the handle stays valid until freed.
///
/// # Safety
/// `task` is NULL or a live task handle.
#[no_mangle]
pub unsafe extern "C" fn stp_task_close(task: *const stp_task) -> c_int {
    guard("stp_task_close", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(task, "stp_task_close", "task") }?.task.close();
        Ok(())
    })
}

/// Frees the handle. The task lives on while any of its connections lives (close it first to end
/// it now). NULL is a no-op.
///
/// # Safety
/// `task` is NULL or a live task handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_task_free(task: *mut stp_task) {
    if !task.is_null() {
        guard("stp_task_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(task) });
            Ok(())
        });
    }
}

/// Attaches an input connection of `task` to the channel, written to `*out`. Every item present
/// below the task's visibility is consumed on it at once; the rest, and every item put later,
/// are unseen on it. The task and the channel must belong to the same runtime.
///
/// # Safety
/// `task` and `ch` are NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_input(
    task: *const stp_task,
    ch: *const stp_channel,
    out: *mut *mut stp_channel_input,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { attach_channel_input("stp_task_attach_input", task, ch, ([STP_UNBOUNDED; 2], std::ptr::null()), out) }
}

/// As `stp_task_attach_input`, with a bound on how far the connection may fall behind
/// (docs/SEMANTICS.md, "Slow readers: max_lag"): at most `max_lag_items` unseen items and none
/// more than `max_lag_ts` below the channel's newest item (each `STP_UNBOUNDED` for no bound;
/// `max_lag_items` 0 is `STP_INVALID_ARGUMENT`); beyond, the oldest unseen items are consumed for
/// it and counted as skipped.
///
/// # Safety
/// `task` and `ch` are NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_input_bounded(
    task: *const stp_task,
    ch: *const stp_channel,
    max_lag_items: i64,
    max_lag_ts: i64,
    out: *mut *mut stp_channel_input,
) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        attach_channel_input(
            "stp_task_attach_input_bounded",
            task,
            ch,
            ([max_lag_items, max_lag_ts], std::ptr::null()),
            out,
        )
    }
}

/// As `stp_task_attach_input`, with a prefetch policy (docs/PREFETCH.md): `"off"`, `"newest"` or
/// `"auto"`; NULL for the runtime's default (`auto`). What the node pushes ahead of a remote
/// channel input's gets; an embedded runtime has nothing to push. Any other word is
/// `STP_INVALID_ARGUMENT`.
///
/// # Safety
/// `task` and `ch` are NULL or live; `prefetch` NULL or a NUL-terminated string; `out` NULL or
/// valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_input_prefetch(
    task: *const stp_task,
    ch: *const stp_channel,
    prefetch: *const c_char,
    out: *mut *mut stp_channel_input,
) -> c_int {
    // SAFETY: the same contract.
    unsafe { attach_channel_input("stp_task_attach_input_prefetch", task, ch, ([STP_UNBOUNDED; 2], prefetch), out) }
}

/// Attaches with the bounds `[max_lag_items, max_lag_ts]` and the prefetch policy as C gives
/// them.
///
/// # Safety
/// `task` and `ch` are NULL or live; `prefetch` NULL or a NUL-terminated string; `out` NULL or
/// valid for writing a pointer.
unsafe fn attach_channel_input(
    op: &'static str,
    task: *const stp_task,
    ch: *const stp_channel,
    ([max_lag_items, max_lag_ts], prefetch): ([i64; 2], *const c_char),
    out: *mut *mut stp_channel_input,
) -> c_int {
    guard(op, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, op, "out") }?;
        // SAFETY: NULL or a NUL-terminated string per the contract.
        let prefetch = unsafe { policy(prefetch, op) }?;
        let options = InputOptions {
            max_lag_items: bound(max_lag_items, op, "max_lag_items")?,
            max_lag_ts: bound(max_lag_ts, op, "max_lag_ts")?.map(|distance| distance as u64),
            prefetch,
        };
        // SAFETY: each NULL or live per the contract.
        let (task, ch) = unsafe { (handle(task, op, "task")?, handle(ch, op, "ch")?) };
        let input = task.task.attach_input_with(&ch.channel, options)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(Box::into_raw(Box::new(stp_channel_input { input }))) };
        Ok(())
    })
}

/// Attaches an output connection of `task` to the channel, written to `*out`.
///
/// # Safety
/// `task` and `ch` are NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_output(
    task: *const stp_task,
    ch: *const stp_channel,
    out: *mut *mut stp_channel_output,
) -> c_int {
    // SAFETY: forwarded under the same contract.
    unsafe { stp_task_attach_output_window(task, ch, 0, out) }
}

/// As `stp_task_attach_output`, with a put window: through a node, up to `put_window` puts are
/// sent without waiting for their replies; a put's error is returned by the connection's next
/// `stp_channel_output_put` or `stp_channel_output_flush` (docs/NODES.md, "Pipelined puts"). 0:
/// every put waits (`stp_task_attach_output`). `STP_INVALID_ARGUMENT` above `STP_PUT_WINDOW_MAX`.
///
/// # Safety
/// `task` and `ch` are NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_output_window(
    task: *const stp_task,
    ch: *const stp_channel,
    put_window: usize,
    out: *mut *mut stp_channel_output,
) -> c_int {
    const OP: &str = "stp_task_attach_output_window";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or live per the contract.
        let (task, ch) = unsafe { (handle(task, OP, "task")?, handle(ch, OP, "ch")?) };
        let output = task.task.attach_output_with(&ch.channel, OutputOptions { put_window })?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(Box::into_raw(Box::new(stp_channel_output { output }))) };
        Ok(())
    })
}

/// Attaches an input connection of `task` to the queue, written to `*out`.
///
/// # Safety
/// `task` and `q` are NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_queue_input(
    task: *const stp_task,
    q: *const stp_queue,
    out: *mut *mut stp_queue_input,
) -> c_int {
    const OP: &str = "stp_task_attach_queue_input";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or live per the contract.
        let (task, q) = unsafe { (handle(task, OP, "task")?, handle(q, OP, "q")?) };
        let input = task.task.attach_input(&q.queue)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(Box::into_raw(Box::new(stp_queue_input { input }))) };
        Ok(())
    })
}

/// Attaches an output connection of `task` to the queue, written to `*out`.
///
/// # Safety
/// `task` and `q` are NULL or live; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_task_attach_queue_output(
    task: *const stp_task,
    q: *const stp_queue,
    out: *mut *mut stp_queue_output,
) -> c_int {
    const OP: &str = "stp_task_attach_queue_output";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or live per the contract.
        let (task, q) = unsafe { (handle(task, OP, "task")?, handle(q, OP, "q")?) };
        let output = task.task.attach_output(&q.queue)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(Box::into_raw(Box::new(stp_queue_output { output }))) };
        Ok(())
    })
}
