//! The C API's pointer-and-length arguments, passed as a C program passes them: each step is one
//! call of `stampede.h` (the `stp_` functions of `stampede-capi`, the very code `libstampede`
//! exports) on one embedded runtime, its arguments taken from the step's bytes — names, prefixes
//! and codecs as C strings (any bytes up to a NUL, UTF-8 or not), payloads and `.npy` files as a
//! pointer and a length, output buffers of any capacity, NULL for any pointer, numbers across
//! their ranges (negative timestamps, `STP_INFINITY`, sentinels, selector kinds and timeouts C
//! does not define). The handles passed are live ones, made by earlier steps — a dangling handle
//! is the caller's promise, which C cannot check — and steps free them too.
//!
//! Checked after every call: its code is `STP_OK` or a documented `STP_` code, never
//! `STP_INTERNAL` (a panic caught at the boundary is a bug); a failure is the thread's last error,
//! with a message; a NULL handle or required pointer is `STP_INVALID_ARGUMENT`; a handle
//! out-parameter is a handle after success and NULL after failure; an item holds the codec and
//! bytes put at its timestamp, through the handle's channel; a timestamp accepted once by a
//! channel is never accepted again; a range is in timestamp order within its bounds; a `.npy`
//! header's description is NUL-terminated within the capacity given, and nothing is written past
//! a capacity (guard elements follow each buffer); ts_min never goes back. At the end every
//! handle left is freed, and the runtime with them, in either order. (Leaks are not seen here:
//! the fuzzer runs without a sanitizer; the C tests run under valgrind's leak check.)
//!
//! Not called: `stp_connect` and `stp_connect_with` (they reach for a network; their text
//! arguments go through the same helpers as every other string), and waits (a timeout is 0 or an
//! invalid one; how a wait ends is the `engine_ops` target's business).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::{null, null_mut, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

use stampede_capi::channel::*;
use stampede_capi::error::*;
use stampede_capi::item::*;
use stampede_capi::npy::*;
use stampede_capi::queue::*;
use stampede_capi::reclaim::*;
use stampede_capi::runtime::*;
use stampede_capi::task::*;
use stampede_capi::watch::*;
use stampede_capi::STP_INFINITY;

use crate::steps::steps;

mod run;
use run::Run;

/// Handles of one type a run holds at once; one more is freed as soon as it is made. Bounds a
/// run's memory whatever the input.
pub const HANDLES_MAX: usize = 32;

/// Longest text a step passes (name, prefix, codec), before its NUL.
const TEXT_BYTES_MAX: u8 = 40;

/// Longest `.npy` description buffer and shape buffer a step passes.
const NPY_CAPACITY_MAX: u8 = 64;

/// What a put stored: its codec and bytes.
type Stored = (String, Vec<u8>);

/// Elements after each output buffer, set to a pattern no call writes, checked after the call.
const GUARD: usize = 16;

/// Runs the C calls of `input`'s steps (see [`crate::steps`]).
pub fn calls(input: &[u8]) {
    let mut rt: *mut stp_runtime = null_mut();
    // SAFETY: `rt` is valid for writing a pointer.
    assert_eq!(unsafe { stp_runtime_new(&mut rt) }, STP_OK, "an embedded runtime starts");
    let mut run = Run::new(rt);
    for (tag, body) in steps(input) {
        let mut args = Args(body);
        // SAFETY: every handle `run` passes is live (made by an earlier call, not yet freed), and
        // every pointer points to memory of the length passed with it.
        unsafe { run.step(tag, &mut args) };
        // SAFETY: `rt` is live.
        let ts_min = unsafe { stp_runtime_ts_min(rt) };
        assert!(ts_min >= run.ts_min, "ts_min went back from {} to {ts_min}", run.ts_min);
        run.ts_min = ts_min;
    }
    // SAFETY: every handle is live and freed once; the runtime may be freed before what it made.
    unsafe { run.free_all(input.len().is_multiple_of(2)) };
}

/// A step's body read as arguments: numbers, then texts and data; zeros past its end.
struct Args<'a>(&'a [u8]);

impl<'a> Args<'a> {
    fn byte(&mut self) -> u8 {
        let Some((&first, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        first
    }

    /// A timestamp or virtual time: a small one mostly, an edge of `i64` sometimes.
    fn ts(&mut self) -> i64 {
        match self.byte() {
            0xFF => STP_INFINITY,
            0xFE => STP_INFINITY - 1,
            0xFD => i64::MIN,
            _ => i64::from(i16::from_le_bytes([self.byte(), self.byte()])),
        }
    }

    /// A count or bound: `STP_UNBOUNDED` (-1), another negative one, or a small count.
    fn bound(&mut self) -> i64 {
        i64::from(self.byte() as i8)
    }

    /// A timeout: 0 (never wait), or a negative one other than `STP_FOREVER` (refused).
    fn timeout(&mut self) -> i64 {
        match self.byte() {
            b if b & 1 == 0 => 0,
            b => -2 - i64::from(b >> 1),
        }
    }

    /// One of `n` things, by index; `None` when there are none.
    fn pick(&mut self, n: usize) -> Option<usize> {
        let b = usize::from(self.byte());
        (n > 0).then(|| b % n)
    }

    /// A C string: a length byte, then that many bytes, of which those before a NUL.
    fn text(&mut self) -> CString {
        let len = usize::from(self.byte() % TEXT_BYTES_MAX).min(self.0.len());
        let (text, rest) = self.0.split_at(len);
        self.0 = rest;
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        CString::new(&text[..end]).expect("no NUL before the end")
    }

    /// The rest of the body: a payload.
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

/// Which pointers of a call are NULL: bit `i` for the `i`-th pointer argument.
#[derive(Clone, Copy)]
struct Nulls(u8);

impl Nulls {
    fn of<T>(self, i: u8, ptr: *const T) -> *const T {
        if self.0 & (1 << i) != 0 {
            null()
        } else {
            ptr
        }
    }
    fn of_mut<T>(self, i: u8, ptr: *mut T) -> *mut T {
        if self.0 & (1 << i) != 0 {
            null_mut()
        } else {
            ptr
        }
    }
    fn any(self, below: u8) -> bool {
        self.0 & ((1u16 << below) - 1) as u8 != 0
    }
}

/// What a handle to a channel or queue, or a connection to one, was made for: its name and the
/// generation of that name (a name destroyed and created again is another channel).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Of {
    name: String,
    generation: u32,
}

/// Live handles of one type, each with what it is of, and the function that frees them.
struct Pool<T> {
    live: Vec<(*mut T, Of)>,
    free: unsafe extern "C" fn(*mut T),
}

impl<T> Pool<T> {
    fn new(free: unsafe extern "C" fn(*mut T)) -> Self {
        Pool { live: Vec::new(), free }
    }

    /// Keeps `handle` — or frees it now when the pool is full.
    ///
    /// # Safety
    /// `handle` is live and owned by the caller.
    unsafe fn keep(&mut self, handle: *mut T, of: Of) {
        if self.live.len() < HANDLES_MAX {
            self.live.push((handle, of));
        } else {
            // SAFETY: live and owned, per the contract.
            unsafe { (self.free)(handle) }
        }
    }

    fn pick(&self, args: &mut Args) -> Option<(*mut T, Of)> {
        args.pick(self.live.len()).map(|i| self.live[i].clone())
    }

    /// Frees the handle `args` picks.
    ///
    /// # Safety
    /// Every handle of the pool is live.
    unsafe fn free_one(&mut self, args: &mut Args) {
        if let Some(i) = args.pick(self.live.len()) {
            // SAFETY: live per the contract; removed, so freed once.
            unsafe { (self.free)(self.live.swap_remove(i).0) }
        }
    }

    /// # Safety
    /// Every handle of the pool is live.
    unsafe fn free_all(&mut self) {
        for (handle, _) in self.live.drain(..) {
            // SAFETY: live per the contract; drained, so freed once.
            unsafe { (self.free)(handle) }
        }
    }
}

/// A handle out-parameter's value before the call: neither NULL nor a handle, so a call that
/// leaves it alone is told from one that writes NULL.
fn unwritten<T>() -> *mut T {
    NonNull::dangling().as_ptr()
}

/// The thread's last error message.
fn last_message() -> String {
    // SAFETY: never NULL, NUL-terminated, valid until the next failing call on this thread.
    unsafe { CStr::from_ptr(stp_last_error_message()) }.to_string_lossy().into_owned()
}

/// Checks the code `call` returned (`null_required`: a NULL handle or required pointer was
/// passed) and tells whether it succeeded.
fn checked(call: &str, code: c_int, null_required: bool) -> bool {
    assert!((STP_INTERNAL..=STP_OK).contains(&code), "{call} returned {code}, not an STP_ code");
    assert_ne!(code, STP_INTERNAL, "{call} panicked: {}", last_message());
    if null_required {
        assert_eq!(code, STP_INVALID_ARGUMENT, "{call} took a NULL it requires: {}", last_message());
    }
    if code != STP_OK {
        assert_eq!(stp_last_error_code(), code, "{call}: the thread's last error is the call's");
        assert!(!last_message().is_empty(), "{call} failed without a message");
    }
    code == STP_OK
}

/// Checks a call that makes a handle: a handle after success, NULL after failure.
fn made<T>(call: &str, code: c_int, null_required: bool, out: *mut T) -> bool {
    let ok = checked(call, code, null_required);
    if !null_required {
        assert_eq!(ok, !out.is_null() && out != unwritten(), "{call} returned {code} and wrote {out:?}");
    }
    ok
}

/// Counts what a GC handler was called with (its `user` pointer points to it).
unsafe extern "C" fn counted(user: *mut c_void, ts: i64) {
    assert!(ts >= 0, "a GC handler was called with timestamp {ts}");
    // SAFETY: `user` is the run's counter, alive until the runtime is closed.
    unsafe { &*user.cast::<AtomicU64>() }.fetch_add(1, Ordering::Relaxed);
}

/// A runtime-wide GC handler: the same, with the name of the channel or queue.
unsafe extern "C" fn counted_by_name(user: *mut c_void, name: *const c_char, ts: i64) {
    // SAFETY: a NUL-terminated name, valid during the call.
    assert!(unsafe { CStr::from_ptr(name) }.to_str().is_ok(), "a GC handler was given a name that is not UTF-8");
    // SAFETY: as `counted`'s.
    unsafe { counted(user, ts) }
}

/// `stp_npy_header` over any bytes, into buffers of any capacity (guard elements after each).
fn npy_header(args: &mut Args) {
    let nulls = Nulls(args.byte());
    let descr_capacity = usize::from(args.byte() % NPY_CAPACITY_MAX);
    let shape_capacity = usize::from(args.byte() % NPY_CAPACITY_MAX);
    let data = args.rest();
    let mut descr = vec![0xAAu8; descr_capacity + GUARD];
    let mut shape = vec![usize::MAX; shape_capacity + GUARD];
    let mut layout = stp_npy_layout::default();
    // SAFETY: each pointer NULL or valid for its length.
    let code = unsafe {
        stp_npy_header(
            nulls.of(0, data.as_ptr()),
            data.len(),
            nulls.of_mut(1, descr.as_mut_ptr().cast()),
            descr_capacity,
            nulls.of_mut(2, shape.as_mut_ptr()),
            shape_capacity,
            nulls.of_mut(3, &mut layout),
        )
    };
    let null_data = nulls.any(1) && !data.is_empty();
    let ok = checked("stp_npy_header", code, null_data);
    assert!(descr[descr_capacity..].iter().all(|&b| b == 0xAA), "a write past descr's capacity");
    assert!(shape[shape_capacity..].iter().all(|&d| d == usize::MAX), "a write past the shape's capacity");
    if !ok || nulls.0 & 0b1110 != 0 {
        return;
    }
    assert!(layout.descr_bytes < descr_capacity && descr[layout.descr_bytes] == 0, "descr not NUL-terminated");
    assert!(!descr[..layout.descr_bytes].contains(&0), "a NUL inside descr");
    assert!(layout.ndim <= shape_capacity, "ndim {} past the shape's capacity", layout.ndim);
    assert!(layout.data_offset <= data.len(), "the data starts past the payload");
}

/// An item's timestamp, codec and bytes, checked for what C reads of it.
///
/// # Safety
/// `item` is live.
unsafe fn read(item: *const stp_item) -> (i64, Stored) {
    // SAFETY: live per the contract; the codec a C string and the data `len` bytes while it lives.
    unsafe {
        let codec = CStr::from_ptr(stp_item_codec(item)).to_string_lossy().into_owned();
        let len = stp_item_len(item);
        let data = stp_item_data(item);
        assert!(!data.is_null() || len == 0, "an item of {len} bytes has no data");
        let bytes = if len == 0 { Vec::new() } else { std::slice::from_raw_parts(data, len).to_vec() };
        (stp_item_ts(item), (codec, bytes))
    }
}
