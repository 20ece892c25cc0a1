//! Channels and their connections (docs/SEMANTICS.md, "Channels"): `stp_channel`,
//! `stp_channel_output` (put) and `stp_channel_input` (get with every selector, get_range, consume,
//! consume_until).
//!
//! Connections are made by `stp_task_attach_input` / `stp_task_attach_output` (task.rs).
//! Detaching (`*_detach`) is idempotent and may be called from another thread while a get or put
//! is blocked on the connection: that call returns `STP_CLOSED`; every later call fails
//! `STP_CLOSED`. Freeing a connection detaches it; it must not be freed while another thread is
//! inside a call on it (detach first, then free once that call has returned).

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use stampede::{Channel, ChannelInput, ChannelOutput, Codec, Parts, PutOptions, Stats};

use crate::args::{bytes, handle, handle_out, invalid, required, selector, text, timeout};
use crate::error::{c_text, guard, guard_value};
use crate::item::{stp_item, stp_items};
use crate::reclaim::Gate;

/// A handle to a named channel (in this process or on a node).
pub struct stp_channel {
    pub(crate) channel: Channel,
    /// The channel's name as a C string.
    name: CString,
    /// Its runtime's handler gate (GC handlers registered here run only while it is open).
    pub(crate) gate: Arc<Gate>,
}

impl stp_channel {
    pub(crate) fn boxed(channel: Channel, gate: &Arc<Gate>) -> *mut stp_channel {
        let name = c_text(channel.name());
        Box::into_raw(Box::new(stp_channel { channel, name, gate: gate.clone() }))
    }
}

/// A task's output connection to a channel.
pub struct stp_channel_output {
    pub(crate) output: ChannelOutput,
}

/// A task's input connection to a channel: per item, a state unseen → open → consumed.
pub struct stp_channel_input {
    pub(crate) input: ChannelInput,
}

/// A channel's or queue's counters (`stp_channel_stats`, `stp_queue_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct stp_stats {
    /// Items stored now.
    pub live_items: u64,
    /// Payload bytes stored now.
    pub live_bytes: u64,
    /// Items reclaimed so far (by ts_min, by reference count, by consumption in a queue).
    pub reclaimed: u64,
    /// Items accepted by put so far.
    pub puts: u64,
    /// Successful gets so far.
    pub gets: u64,
    /// Input connections attached now.
    pub inputs: u64,
    /// Output connections attached now.
    pub outputs: u64,
    /// The node's ts_min when the snapshot was taken.
    pub ts_min: i64,
}

impl From<Stats> for stp_stats {
    fn from(stats: Stats) -> stp_stats {
        stp_stats {
            live_items: stats.live_items as u64,
            live_bytes: stats.live_bytes as u64,
            reclaimed: stats.reclaimed,
            puts: stats.puts,
            gets: stats.gets,
            inputs: stats.inputs as u64,
            outputs: stats.outputs as u64,
            ts_min: stats.ts_min,
        }
    }
}

/// The channel's name; NULL when `ch` is NULL. Valid until the handle is freed.
///
/// # Safety
/// `ch` is NULL or a live channel handle.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_name(ch: *const stp_channel) -> *const c_char {
    guard_value("stp_channel_name", std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(ch, "stp_channel_name", "ch") }?.name.as_ptr())
    })
}

/// Writes the channel's counters to `*out` (remotely: the last ones seen when the node cannot be
/// reached).
///
/// # Safety
/// `ch` is NULL or live; `out` NULL or valid for writing a `stp_stats`.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_stats(ch: *const stp_channel, out: *mut stp_stats) -> c_int {
    const OP: &str = "stp_channel_stats";
    guard(OP, || {
        required(out, OP, "out")?;
        // SAFETY: NULL or live per the contract.
        let stats = unsafe { handle(ch, OP, "ch") }?.channel.stats();
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stats.into()) };
        Ok(())
    })
}

/// Destroys the channel: its items are reclaimed, its name is freed, and every operation on it
/// (blocked ones included) fails `STP_CLOSED`. The handle stays valid until freed.
///
/// # Safety
/// `ch` is NULL or a live channel handle.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_destroy(ch: *const stp_channel) -> c_int {
    // SAFETY: NULL or live per the contract.
    guard("stp_channel_destroy", || unsafe { handle(ch, "stp_channel_destroy", "ch") }?.channel.destroy())
}

/// Frees the handle (the channel itself lives on, see `stp_channel_destroy`). NULL is a no-op.
///
/// # Safety
/// `ch` is NULL or a live channel handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_free(ch: *mut stp_channel) {
    if !ch.is_null() {
        guard("stp_channel_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(ch) });
            Ok(())
        });
    }
}

/// Puts `len` bytes at `data` (copied: the buffer may be reused once this returns) at `ts`, with
/// codec `codec` (NULL is `"raw"`; `"npy"` payloads must be valid `.npy` files). `refcount`: the
/// number of consumptions after which the item is reclaimed even above ts_min, or -1 for none.
/// `timeout_ms` bounds the wait for room in a bounded channel (`STP_FOREVER`: as long as
/// needed; 0: fail `STP_FULL` at once). Errors: `STP_INVALID_TIMESTAMP`, `STP_BELOW_VISIBILITY`,
/// `STP_DUPLICATE_TIMESTAMP`, `STP_FULL`, `STP_CLOSED`, `STP_INVALID_ARGUMENT` (refcount 0, a bad
/// payload), remotely `STP_UNREACHABLE`.
///
/// # Safety
/// `out` is NULL or live; `codec` NULL or NUL-terminated; `data` NULL (with `len` 0) or valid for
/// reading `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_output_put(
    out: *const stp_channel_output,
    ts: i64,
    codec: *const c_char,
    data: *const u8,
    len: usize,
    refcount: i64,
    timeout_ms: i64,
) -> c_int {
    const OP: &str = "stp_channel_output_put";
    guard(OP, || {
        // SAFETY: each NULL or valid per the contract.
        let (out, codec, data) =
            unsafe { (handle(out, OP, "out")?, codec_of(codec, OP)?, bytes(data, len, OP, "data")?) };
        let refcount = match refcount {
            -1 => None,
            n => Some(u32::try_from(n).map_err(|_| {
                invalid(OP, "refcount", format!("{n}: give -1 for none, or a count of consumptions >= 1"))
            })?),
        };
        let options = PutOptions { refcount, timeout: timeout(timeout_ms, OP)? };
        out.output.put_with(ts, Parts { parts: &[data], codec }, options)
    })
}

/// The codec called `codec` (NULL: `raw`).
///
/// # Safety
/// `codec` is NULL or NUL-terminated.
pub(crate) unsafe fn codec_of(codec: *const c_char, op: &'static str) -> Result<Codec, stampede::Error> {
    if codec.is_null() {
        return Ok(Codec::Raw);
    }
    // SAFETY: non-NULL and NUL-terminated per the contract.
    Ok(Codec::from_name(unsafe { text(codec, op, "codec") }?))
}

/// Demand feedback: the lowest timestamp any current or future consumer may still get if it were
/// put now; a source may skip producing below it. -1 when `out` is NULL.
///
/// # Safety
/// `out` is NULL or a live output connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_output_demand(out: *const stp_channel_output) -> i64 {
    guard_value("stp_channel_output_demand", -1, || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(out, "stp_channel_output_demand", "out") }?.output.demand())
    })
}

/// Waits until every put of the connection landed or failed, and returns the oldest error of a
/// pipelined put not returned yet (`stp_task_attach_output_window`); `STP_OK` at once without a
/// window, and embedded.
///
/// # Safety
/// `out` is NULL or a live output connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_output_flush(out: *const stp_channel_output) -> c_int {
    guard("stp_channel_output_flush", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(out, "stp_channel_output_flush", "out") }?.output.flush()
    })
}

/// Detaches the output connection (idempotent); a put blocked on it returns `STP_CLOSED`. The
/// errors of pipelined puts not returned yet are dropped: `stp_channel_output_flush` first.
///
/// # Safety
/// `out` is NULL or a live output connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_output_detach(out: *const stp_channel_output) -> c_int {
    guard("stp_channel_output_detach", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(out, "stp_channel_output_detach", "out") }?.output.detach();
        Ok(())
    })
}

/// Detaches and frees the output connection. NULL is a no-op.
///
/// # Safety
/// `out` is NULL or a live output connection that no other thread is using, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_output_free(out: *mut stp_channel_output) {
    if !out.is_null() {
        guard("stp_channel_output_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(out) });
            Ok(())
        });
    }
}

/// Gets an item and writes a new item handle to `*item_out` (release it with
/// `stp_item_release`); the item becomes open on this connection. `selector`: `STP_AT` (exactly
/// `ts`), `STP_OLDEST`, `STP_NEWEST`, `STP_OLDEST_UNSEEN` or `STP_NEWEST_UNSEEN` (`ts` ignored).
/// `timeout_ms`: `STP_FOREVER` waits as long as needed, 0 never waits. Errors:
/// `STP_NOT_AVAILABLE` (see `stp_last_error_neighbours`), `STP_ALREADY_CONSUMED`,
/// `STP_RECLAIMED`, `STP_INVALID_TIMESTAMP`, `STP_CLOSED` (destroyed, detached, closed — also
/// while blocked), remotely `STP_UNREACHABLE`. On error `*item_out` is set to NULL.
///
/// # Safety
/// `inp` is NULL or live; `item_out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_input_get(
    inp: *const stp_channel_input,
    selector_kind: c_int,
    ts: i64,
    timeout_ms: i64,
    item_out: *mut *mut stp_item,
) -> c_int {
    const OP: &str = "stp_channel_input_get";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(item_out, OP, "item_out") }?;
        // SAFETY: NULL or live per the contract.
        let inp = unsafe { handle(inp, OP, "inp") }?;
        let item = inp.input.get(selector(selector_kind, ts, OP)?, timeout(timeout_ms, OP)?)?;
        // SAFETY: as above.
        unsafe { item_out.write(stp_item::from_channel(item).boxed()) };
        Ok(())
    })
}

/// Every item with `t0 <= ts <= t1` present and not consumed on this connection, in timestamp
/// order, written to `*items_out` as a list (release it with `stp_items_release`); each becomes
/// open. Never waits. On error `*items_out` is set to NULL.
///
/// # Safety
/// `inp` is NULL or live; `items_out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_input_get_range(
    inp: *const stp_channel_input,
    t0: i64,
    t1: i64,
    items_out: *mut *mut stp_items,
) -> c_int {
    const OP: &str = "stp_channel_input_get_range";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(items_out, OP, "items_out") }?;
        // SAFETY: NULL or live per the contract.
        let inp = unsafe { handle(inp, OP, "inp") }?;
        let items = inp.input.get_range(t0, t1)?.into_iter().map(stp_item::from_channel).collect();
        // SAFETY: as above.
        unsafe { items_out.write(Box::into_raw(Box::new(stp_items { items }))) };
        Ok(())
    })
}

/// Marks the item at `ts` consumed on this connection ("garbage, as far as this task is
/// concerned"). A no-op for one already consumed or reclaimed; `STP_NOT_AVAILABLE` for a
/// timestamp never put.
///
/// # Safety
/// `inp` is NULL or a live input connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_input_consume(inp: *const stp_channel_input, ts: i64) -> c_int {
    guard("stp_channel_input_consume", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(inp, "stp_channel_input_consume", "inp") }?.input.consume(ts)
    })
}

/// Marks every present item `<= ts` consumed on this connection, unseen ones included.
///
/// # Safety
/// `inp` is NULL or a live input connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_input_consume_until(inp: *const stp_channel_input, ts: i64) -> c_int {
    guard("stp_channel_input_consume_until", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(inp, "stp_channel_input_consume_until", "inp") }?.input.consume_until(ts)
    })
}

/// Detaches the input connection (idempotent): all its claims are dropped; a get blocked on it
/// returns `STP_CLOSED`; every later call fails `STP_CLOSED`.
///
/// # Safety
/// `inp` is NULL or a live input connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_input_detach(inp: *const stp_channel_input) -> c_int {
    guard("stp_channel_input_detach", || {
        // SAFETY: NULL or live per the contract.
        unsafe { handle(inp, "stp_channel_input_detach", "inp") }?.input.detach();
        Ok(())
    })
}

/// Detaches and frees the input connection. Items gotten through it stay readable until
/// released. NULL is a no-op.
///
/// # Safety
/// `inp` is NULL or a live input connection that no other thread is using, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_input_free(inp: *mut stp_channel_input) {
    if !inp.is_null() {
        guard("stp_channel_input_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(inp) });
            Ok(())
        });
    }
}
