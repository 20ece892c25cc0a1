//! `stp_watch`: the name service's events (docs/NODES.md, "The name service") — the channels and
//! queues under a prefix, first those that exist, then each creation and destruction, and, through
//! a client, the nodes coming up and going down. The same events, with the same names, as Rust's
//! `Watch`, Python's `WatchEvent` and Java's.
//!
//! An event's strings live in the watch until its next `stp_watch_next` or its `stp_watch_free`:
//! the watch keeps the last event it handed out, so no event needs freeing.

use std::ffi::{c_char, c_int, CString};
use std::ptr;

use parking_lot::Mutex;
use stampede::{Watch, WatchEvent};

use crate::args::{handle, handle_out, required, text, timeout};
use crate::error::{c_text, guard};
use crate::runtime::{stp_runtime, STP_KIND_CHANNEL, STP_KIND_QUEUE};

/// A watch on the names under a prefix (`stp_runtime_watch`). One thread at a time reads it
/// (another thread's `stp_watch_next` waits for the first to return).
pub struct stp_watch {
    inner: Mutex<Watched>,
}

/// The watch, and the strings of the last event it handed out (what that event points into).
struct Watched {
    watch: Watch,
    kept: Kept,
}

/// The strings of the last event handed out.
#[derive(Default)]
struct Kept {
    kind: CString,
    name: Option<CString>,
    node: Option<CString>,
}

/// One event of a watch. `kind` is what happened: `"created"`, `"destroyed"`, `"node_up"`,
/// `"node_down"` or `"lagged"`. For `"created"` and `"destroyed"`: `name` and
/// `container_kind` (`STP_KIND_CHANNEL` or `STP_KIND_QUEUE`; 0 otherwise) of the channel or
/// queue, and `node` where it lives (NULL: this process). For `"node_up"` and `"node_down"`:
/// `node`. For `"lagged"`: `missed`, how many changes the watcher missed (`stp_runtime_names`
/// tells the present). The strings stay valid until the watch's next `stp_watch_next` or its
/// `stp_watch_free`; fields that do not apply are NULL or 0.
#[repr(C)]
pub struct stp_watch_event {
    pub kind: *const c_char,
    pub name: *const c_char,
    pub container_kind: c_int,
    pub node: *const c_char,
    pub missed: u64,
}

/// A watch on the channels and queues under `prefix` (hierarchical, as `stp_runtime_names`:
/// `""` selects all), written to `*out`; free it with `stp_watch_free`. Remotely
/// `STP_UNREACHABLE` when the node cannot be reached.
///
/// # Safety
/// `rt` is NULL or live; `prefix` NULL or NUL-terminated; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_watch(
    rt: *const stp_runtime,
    prefix: *const c_char,
    out: *mut *mut stp_watch,
) -> c_int {
    const OP: &str = "stp_runtime_watch";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or valid per the contract.
        let (rt, prefix) = unsafe { (handle(rt, OP, "rt")?, text(prefix, OP, "prefix")?) };
        // Each `stp_watch_next` says how long to wait; the watch's own timeout is unused.
        let watch = rt.runtime.watch(prefix, None)?;
        let inner = Mutex::new(Watched { watch, kept: Kept::default() });
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(Box::into_raw(Box::new(stp_watch { inner }))) };
        Ok(())
    })
}

/// The next event, written to `*event`, waiting at most `timeout_ms` (`STP_FOREVER`: as long as
/// it takes; 0: not at all). `STP_NOT_AVAILABLE` when none came in time (call again),
/// `STP_CLOSED` once the runtime closed; `*event` is then left as it was.
///
/// # Safety
/// `watch` is NULL or live; `event` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_watch_next(
    watch: *const stp_watch,
    timeout_ms: i64,
    event: *mut stp_watch_event,
) -> c_int {
    const OP: &str = "stp_watch_next";
    guard(OP, || {
        // SAFETY: each NULL or valid per the contract.
        let watch = unsafe { handle(watch, OP, "watch") }?;
        required(event, OP, "event")?;
        let timeout = timeout(timeout_ms, OP)?;
        let mut watched = watch.inner.lock();
        let next = watched.watch.next_event(timeout)?;
        let written = watched.kept.hold(next);
        // SAFETY: checked non-NULL; valid for a write per the contract.
        unsafe { event.write(written) };
        Ok(())
    })
}

/// Ends a watch and frees it (NULL is a no-op); the strings of its last event go with it.
///
/// # Safety
/// `watch` is NULL or a live watch, not used afterwards (and no call on it is in progress).
#[no_mangle]
pub unsafe extern "C" fn stp_watch_free(watch: *mut stp_watch) {
    if !watch.is_null() {
        guard("stp_watch_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(watch) });
            Ok(())
        });
    }
}

impl Kept {
    /// Keeps `event`'s strings (replacing the last event's) and returns the C view of it.
    fn hold(&mut self, event: WatchEvent) -> stp_watch_event {
        *self = Kept { kind: c_text(event.kind()), name: None, node: None };
        let (mut container_kind, mut missed) = (0, 0);
        match event {
            WatchEvent::Created { name, container_kind: kept_kind, node }
            | WatchEvent::Destroyed { name, container_kind: kept_kind, node } => {
                container_kind = if kept_kind == "queue" { STP_KIND_QUEUE } else { STP_KIND_CHANNEL };
                self.name = Some(c_text(&name));
                self.node = node.as_deref().map(c_text);
            }
            WatchEvent::NodeUp { node } | WatchEvent::NodeDown { node } => self.node = Some(c_text(&node)),
            WatchEvent::Lagged { missed: count } => missed = count,
        }
        let text = |kept: &Option<CString>| kept.as_ref().map_or(ptr::null(), |text| text.as_ptr());
        let kind = self.kind.as_ptr();
        stp_watch_event { kind, name: text(&self.name), container_kind, node: text(&self.node), missed }
    }
}
