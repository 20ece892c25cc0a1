//! Status codes, the thread's last error, and the one guard every entry point runs its body in
//! (STYLE habit 6: one mapping per language).
//!
//! Every fallible function returns an `int`: `STP_OK` or the negative code of the
//! [`stampede::Error`] variant of the same name ([`code`] is the one mapping, an exhaustive match:
//! a new variant does not compile until it has a code). The failing call also stores, per thread,
//! the error's message — the Rust `Display` text unchanged — which `stp_last_error_message`
//! returns until the next failing call on that thread; successful calls leave it alone (as
//! `errno`).
//!
//! [`guard`] and [`guard_value`] run a body under `catch_unwind`: no panic crosses the C
//! boundary; one becomes `STP_INTERNAL` with the panic's text. Bad arguments from C (a NULL
//! handle, a string that is not UTF-8, a negative size) are `Error::InvalidArgument` like any
//! other, built by the helpers at the end of this file.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use stampede::{Error, ErrorKind, Timestamp};

use crate::args::write_opt;

/// Success.
pub const STP_OK: c_int = 0;
/// A timestamp below the task's visibility (or, for a root task, below ts_min).
pub const STP_BELOW_VISIBILITY: c_int = -1;
/// The channel holds, or has reclaimed early, an item at this timestamp.
pub const STP_DUPLICATE_TIMESTAMP: c_int = -2;
/// A negative timestamp, or `STP_INFINITY` as an item timestamp.
pub const STP_INVALID_TIMESTAMP: c_int = -3;
/// A bounded channel or queue stayed full until the timeout (or the item can never fit).
pub const STP_FULL: c_int = -4;
/// Nothing suitable before the timeout (`stp_last_error_neighbours` tells what is around).
pub const STP_NOT_AVAILABLE: c_int = -5;
/// Exact get of an item already consumed on this connection.
pub const STP_ALREADY_CONSUMED: c_int = -6;
/// Exact get below ts_min, or of an item reclaimed early by its reference count.
pub const STP_RECLAIMED: c_int = -7;
/// The channel or queue was destroyed, the connection detached, the task or runtime closed.
pub const STP_CLOSED: c_int = -8;
/// No channel or queue has this name.
pub const STP_NOT_FOUND: c_int = -9;
/// A channel or queue of this name exists already.
pub const STP_ALREADY_EXISTS: c_int = -10;
/// An argument outside its documented range: a NULL handle, a string that is not UTF-8, a
/// refcount of 0, a bad name, …
pub const STP_INVALID_ARGUMENT: c_int = -11;
/// A node could not be reached or stopped answering.
pub const STP_UNREACHABLE: c_int = -12;
/// The node's access policy refused the operation.
pub const STP_PERMISSION_DENIED: c_int = -13;
/// A channel's disk tier failed (full disk, missing directory).
pub const STP_STORAGE: c_int = -14;
/// A bug in Stampede: a panic was caught at the C boundary (the message has its text).
pub const STP_INTERNAL: c_int = -15;

/// The status code of an error: `-(number + 1)` of its [`ErrorKind`], so one per variant, in the
/// order of the `STP_*` constants above (checked by a test).
pub(crate) fn code(error: &Error) -> c_int {
    -(error.kind() as c_int) - 1
}

/// The name of a status code, as every language names the error (`"NotAvailable"`, from
/// [`ErrorKind::name`]); `"Ok"` for `STP_OK`, `"Internal"` for `STP_INTERNAL`, `"Unknown"` for
/// anything else.
fn name(code: c_int) -> &'static CStr {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = NAMES.get_or_init(|| ErrorKind::ALL.iter().map(|kind| c_text(kind.name())).collect());
    match code {
        STP_OK => c"Ok",
        STP_INTERNAL => c"Internal",
        _ => usize::try_from(-i64::from(code) - 1).ok().and_then(|i| names.get(i)).map_or(c"Unknown", |n| n.as_c_str()),
    }
}

/// What the last failing call on a thread left behind.
struct LastError {
    code: c_int,
    message: CString,
    /// `NotAvailable`'s neighbouring timestamps (`None` inside when there is none that side);
    /// `None` for every other error.
    neighbours: Option<(Option<Timestamp>, Option<Timestamp>)>,
}

thread_local! {
    static LAST: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

/// Records `error` as this thread's last error and returns its code.
pub(crate) fn fail(error: Error) -> c_int {
    let code = code(&error);
    let neighbours = match &error {
        Error::NotAvailable { previous, next, .. } => Some((*previous, *next)),
        _ => None,
    };
    record(LastError { code, message: c_text(&error.to_string()), neighbours });
    code
}

/// Records a caught panic as this thread's last error (`STP_INTERNAL`).
fn fail_panic(op: &str, panic: Box<dyn std::any::Any + Send>) -> c_int {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    let message = format!("{op}: internal error in Stampede (a bug; please report it): {what}");
    record(LastError { code: STP_INTERNAL, message: c_text(&message), neighbours: None });
    STP_INTERNAL
}

fn record(last: LastError) {
    // `try_with`: during thread teardown the slot may be gone; the code still tells the caller.
    let _ = LAST.try_with(|slot| *slot.borrow_mut() = Some(last));
}

/// `text` as a C string; an interior NUL (possible only in names made outside C) is shown as
/// `\0` so that the message is never cut short.
pub(crate) fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', "\\0")).expect("interior NULs were replaced")
}

/// Runs `body` for the entry point `op`: `STP_OK`, or the error's (or a panic's) code with this
/// thread's last error set.
pub(crate) fn guard(op: &'static str, body: impl FnOnce() -> Result<(), Error>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => STP_OK,
        Ok(Err(error)) => fail(error),
        Err(panic) => fail_panic(op, panic),
    }
}

/// Runs an accessor `body` that returns a value directly: its value, or `fallback` (the
/// documented sentinel) with this thread's last error set.
pub(crate) fn guard_value<T>(op: &'static str, fallback: T, body: impl FnOnce() -> Result<T, Error>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => {
            fail(error);
            fallback
        }
        Err(panic) => {
            fail_panic(op, panic);
            fallback
        }
    }
}

/// The message of the last failing call on this thread: the same text as the Rust error's
/// `Display` (and Python's exception). Never NULL: `""` when no call has failed on this thread.
/// Valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn stp_last_error_message() -> *const c_char {
    LAST.try_with(|slot| slot.borrow().as_ref().map(|last| last.message.as_ptr()))
        .ok()
        .flatten()
        .unwrap_or(c"".as_ptr())
}

/// The status code of the last failing call on this thread (`STP_OK` if none failed yet).
#[no_mangle]
pub extern "C" fn stp_last_error_code() -> c_int {
    LAST.try_with(|slot| slot.borrow().as_ref().map_or(STP_OK, |last| last.code)).unwrap_or(STP_OK)
}

/// When the last failing call on this thread failed `STP_NOT_AVAILABLE`: writes the neighbouring
/// timestamps present and not consumed on that connection (`-1` for none on that side) through
/// the non-NULL pointers and returns 1. Otherwise writes nothing and returns 0.
///
/// # Safety
/// `previous_out` and `next_out` are each NULL or valid for writing one `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn stp_last_error_neighbours(previous_out: *mut i64, next_out: *mut i64) -> c_int {
    let neighbours = LAST.try_with(|slot| slot.borrow().as_ref().and_then(|last| last.neighbours)).ok().flatten();
    let Some((previous, next)) = neighbours else { return 0 };
    // SAFETY: the caller passes NULL or a pointer valid for one write.
    unsafe {
        write_opt(previous_out, previous.unwrap_or(-1));
        write_opt(next_out, next.unwrap_or(-1));
    }
    1
}

/// The name of a status code as every language names the error: `"NotAvailable"`,
/// `"InvalidArgument"`, …; `"Ok"` for `STP_OK`, `"Internal"`, or `"Unknown"` for a number that is
/// no code. A static string: never freed.
#[no_mangle]
pub extern "C" fn stp_error_name(code: c_int) -> *const c_char {
    name(code).as_ptr()
}
