//! Arguments from C: each helper turns a bad one — a NULL handle or required pointer, text that
//! is not UTF-8, a NULL buffer with a length, a number outside its documented range — into
//! `Error::InvalidArgument` naming the entry point (`op`) and the parameter, so that the caller
//! gets `STP_INVALID_ARGUMENT` and a message, never a crash. Also the sentinels and selector kinds
//! C passes in (`STP_FOREVER`, `STP_UNBOUNDED`, `STP_AT`, …) and their conversion.
//!
//! What C cannot let us check (a dangling handle, a buffer shorter than its length) stays the
//! caller's promise: each helper's `# Safety` says which.

use std::ffi::{c_char, c_int, CStr};
use std::time::Duration;

use stampede::{Error, Selector};

/// A prefetch policy by name (NULL: the default), parameter `prefetch` of entry point `op`.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string.
pub(crate) unsafe fn policy(ptr: *const c_char, op: &'static str) -> Result<Option<stampede::Prefetch>, Error> {
    // SAFETY: NULL or NUL-terminated per the contract.
    match unsafe { optional_text(ptr, op, "prefetch") }? {
        None => Ok(None),
        Some(name) => stampede::Prefetch::parse(name).map(Some).map_err(|why| invalid(op, "prefetch", why)),
    }
}

/// An `InvalidArgument` of entry point `op` about parameter `param`.
pub(crate) fn invalid(op: &'static str, param: &str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument { op, name: param.to_owned(), reason: reason.into() }
}

/// The handle `ptr` points to; `InvalidArgument` when it is NULL.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` made by this library that no other call frees while
/// the returned borrow lives.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, op: &'static str, param: &str) -> Result<&'a T, Error> {
    // SAFETY: per the contract above, a non-NULL `ptr` is a live handle.
    unsafe { ptr.as_ref() }.ok_or_else(|| invalid(op, param, "a NULL handle"))
}

/// The UTF-8 text of a NUL-terminated C string; `InvalidArgument` when NULL or not UTF-8.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, op: &'static str, param: &str) -> Result<&'a str, Error> {
    if ptr.is_null() {
        return Err(invalid(op, param, "a NULL string"));
    }
    // SAFETY: non-NULL and NUL-terminated per the contract above.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes.to_str().map_err(|e| invalid(op, param, format!("not UTF-8 text ({e})")))
}

/// The text at `ptr`, or `None` for NULL; `InvalidArgument` when it is not UTF-8.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string that lives as long as the returned borrow.
pub(crate) unsafe fn optional_text<'a>(
    ptr: *const c_char,
    op: &'static str,
    param: &str,
) -> Result<Option<&'a str>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, so NUL-terminated and live per the contract above.
    unsafe { text(ptr, op, param) }.map(Some)
}

/// The bytes at `data`; `InvalidArgument` when `data` is NULL and `len` is not 0, or when `len`
/// is larger than any buffer can be (`isize::MAX`: a negative length cast to `size_t`).
///
/// # Safety
/// `data` is NULL or valid for reading `len` bytes during the call.
pub(crate) unsafe fn bytes<'a>(data: *const u8, len: usize, op: &'static str, param: &str) -> Result<&'a [u8], Error> {
    if len > isize::MAX as usize {
        return Err(invalid(op, param, format!("a length of {len} bytes (a negative length?)")));
    }
    match (data.is_null(), len) {
        (true, 0) => Ok(&[]),
        (true, _) => Err(invalid(op, param, format!("NULL with a length of {len}"))),
        // SAFETY: non-NULL and valid for `len <= isize::MAX` bytes per the contract above.
        (false, _) => Ok(unsafe { std::slice::from_raw_parts(data, len) }),
    }
}

/// Checks that a required out-parameter is not NULL, before the operation runs (so that nothing
/// is done whose result would be lost).
pub(crate) fn required<T>(out: *mut T, op: &'static str, param: &str) -> Result<(), Error> {
    if out.is_null() {
        return Err(invalid(op, param, "a NULL out-parameter"));
    }
    Ok(())
}

/// Checks that a handle out-parameter is not NULL and sets it to NULL, so that after any failure
/// it holds NULL (which every free function accepts).
///
/// # Safety
/// `out` is NULL or valid for writing a pointer.
pub(crate) unsafe fn handle_out<T>(out: *mut *mut T, op: &'static str, param: &str) -> Result<(), Error> {
    required(out, op, param)?;
    // SAFETY: checked non-NULL; valid for a write per the contract above.
    unsafe { out.write(std::ptr::null_mut()) };
    Ok(())
}

/// Writes `value` through `out` when it is not NULL.
///
/// # Safety
/// `out` is NULL or valid for writing one `T`.
pub(crate) unsafe fn write_opt<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL and valid for one write per the contract above.
        unsafe { out.write(value) };
    }
}

/// Sentinel of `timeout_ms`: wait as long as needed.
pub const STP_FOREVER: i64 = -1;

/// A timeout in milliseconds: `STP_FOREVER` (`-1`) waits as long as needed, `0` never waits;
/// other negative values are `InvalidArgument` (a deadline computed wrong should not wait
/// forever).
pub(crate) fn timeout(timeout_ms: i64, op: &'static str) -> Result<Option<Duration>, Error> {
    match timeout_ms {
        STP_FOREVER => Ok(None),
        ms if ms >= 0 => Ok(Some(Duration::from_millis(ms as u64))),
        ms => Err(invalid(op, "timeout_ms", format!("{ms}: give STP_FOREVER (-1) to wait as long as needed, or >= 0"))),
    }
}

/// Sentinel of a channel's or queue's `capacity` and `max_bytes`: no bound.
pub const STP_UNBOUNDED: i64 = -1;

/// A bound: `STP_UNBOUNDED` is none; other negative values are `InvalidArgument` (0 is passed
/// on, for the runtime's own check to refuse).
pub(crate) fn bound(value: i64, op: &'static str, param: &str) -> Result<Option<usize>, Error> {
    match value {
        STP_UNBOUNDED => Ok(None),
        v if v >= 0 => usize::try_from(v).map(Some).map_err(|_| invalid(op, param, format!("{v} is too large"))),
        v => Err(invalid(op, param, format!("{v}: give STP_UNBOUNDED (-1) for no bound, or a positive bound"))),
    }
}

/// Selector kind: exactly the timestamp given with it.
pub const STP_AT: c_int = 0;
/// Selector kind: the lowest timestamp present and not consumed on the connection.
pub const STP_OLDEST: c_int = 1;
/// Selector kind: the highest timestamp present and not consumed on the connection.
pub const STP_NEWEST: c_int = 2;
/// Selector kind: the lowest timestamp not yet gotten on the connection (in-order reading).
pub const STP_OLDEST_UNSEEN: c_int = 3;
/// Selector kind: the highest timestamp not yet gotten on the connection (the freshest item).
pub const STP_NEWEST_UNSEEN: c_int = 4;

/// The selector of `kind` (`ts` is used by `STP_AT` only).
pub(crate) fn selector(kind: c_int, ts: i64, op: &'static str) -> Result<Selector, Error> {
    Ok(match kind {
        STP_AT => Selector::At(ts),
        STP_OLDEST => Selector::Oldest,
        STP_NEWEST => Selector::Newest,
        STP_OLDEST_UNSEEN => Selector::OldestUnseen,
        STP_NEWEST_UNSEEN => Selector::NewestUnseen,
        other => {
            return Err(invalid(
                op,
                "selector",
                format!(
                "{other} is no selector: give STP_AT, STP_OLDEST, STP_NEWEST, STP_OLDEST_UNSEEN or STP_NEWEST_UNSEEN"
            ),
            ))
        }
    })
}
