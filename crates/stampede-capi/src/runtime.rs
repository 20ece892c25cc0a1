//! `stp_runtime`: an embedded runtime (`stp_runtime_new`) or a session on a node
//! (`stp_connect`), with one API — names, channels and queues, root tasks, ts_min, GC.
//!
//! Freeing the handle closes the runtime (`fclose`-like); `stp_runtime_close` closes it and
//! keeps the handle for the queries that still answer (ts_min). Handles made from a runtime
//! (channels, tasks, connections, items) are independent: they may be freed before or after it;
//! once it is closed their operations fail `STP_CLOSED`, and items already gotten stay readable
//! until released.

use std::ffi::{c_char, c_int, CString};
use std::sync::Arc;

use stampede::{ChannelOptions, ClientTls, ConnectOptions, Container, Credentials, Limits, QueueOptions, Runtime};

use crate::args::{bound, handle, handle_out, invalid, optional_text, policy, text, timeout, write_opt};
use crate::channel::stp_channel;
use crate::error::{c_text, guard, guard_value};
use crate::queue::stp_queue;
use crate::reclaim::Gate;
use crate::task::stp_task;

/// A runtime: embedded in this process, or a client's session on a node.
pub struct stp_runtime {
    pub(crate) runtime: Runtime,
    /// Open until the runtime is closed: GC handlers registered through it run only while it is.
    pub(crate) gate: Arc<Gate>,
    /// The node's name as a C string (`None` when embedded).
    node: Option<CString>,
}

impl stp_runtime {
    fn boxed(runtime: Runtime) -> *mut stp_runtime {
        let node = runtime.node().map(c_text);
        Box::into_raw(Box::new(stp_runtime { runtime, gate: Arc::default(), node }))
    }
}

/// What `stp_runtime_lookup` found: a channel.
pub const STP_KIND_CHANNEL: c_int = 1;
/// What `stp_runtime_lookup` found: a queue.
pub const STP_KIND_QUEUE: c_int = 2;

/// Creates an empty runtime in this process (several may coexist; they share nothing) and
/// writes its handle to `*out`. Free it with `stp_runtime_free`.
///
/// # Safety
/// `out` is NULL (then `STP_INVALID_ARGUMENT`) or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_new(out: *mut *mut stp_runtime) -> c_int {
    guard("stp_runtime_new", || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, "stp_runtime_new", "out") }?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_runtime::boxed(Runtime::new())) };
        Ok(())
    })
}

/// Connects to the node listening on `endpoint` (`"tcp/127.0.0.1:7447"`,
/// `"unixsock-stream/<path>"`, `"tls/<host>:<port>"`) and opens a session there; writes the
/// runtime to `*out`. Its channels, queues and tasks live on the node; its API is the embedded
/// one. `timeout_ms` bounds the wait for the node (`STP_FOREVER`: as long as it takes).
/// Errors: `STP_UNREACHABLE` when no node answers in time, `STP_INVALID_ARGUMENT` for a malformed
/// endpoint or a node of another release.
///
/// # Safety
/// `endpoint` is NULL or a NUL-terminated string; `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_connect(endpoint: *const c_char, timeout_ms: i64, out: *mut *mut stp_runtime) -> c_int {
    const OP: &str = "stp_connect";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let endpoint = unsafe { text(endpoint, OP, "endpoint") }?;
        let runtime = stampede::connect(endpoint, timeout(timeout_ms, OP)?)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_runtime::boxed(runtime)) };
        Ok(())
    })
}

/// What `stp_connect_with` is told besides the endpoint. A NULL string is absent. Start from
/// `{ .timeout_ms = STP_FOREVER }` (or a bound) and set what the node asks for.
#[repr(C)]
pub struct stp_connect_options {
    /// How long to keep trying to reach the node, in ms (`STP_FOREVER`: as long as it takes; 0
    /// tries once).
    pub timeout_ms: i64,
    /// The node to open the session on, reached through the one at the endpoint (NULL: that one).
    pub node: *const c_char,
    /// The user and password, on a node with an access policy (both or neither).
    pub user: *const c_char,
    pub password: *const c_char,
    /// For a `tls/` endpoint: the CA certificate that signed the node's (PEM file path), and the
    /// client's certificate and private key for a node that requires mutual TLS.
    pub tls_root_ca: *const c_char,
    pub tls_certificate: *const c_char,
    pub tls_private_key: *const c_char,
    /// The prefetch policy of this client's channel inputs that choose none
    /// (`stp_task_attach_input_prefetch` with NULL, and `stp_task_attach_input`): `"off"`,
    /// `"newest"` or `"auto"` (NULL: `"auto"`; docs/PREFETCH.md).
    pub prefetch: *const c_char,
}

/// Connects as `stp_connect` does, with a user and password and TLS files (`options`; NULL:
/// none, waiting as long as it takes). Errors as `stp_connect`, and `STP_PERMISSION_DENIED` when
/// the node's access policy refuses the user, or asks for one (docs/SECURITY.md).
///
/// # Safety
/// `endpoint` is NULL or a NUL-terminated string; `options` NULL or a valid `stp_connect_options`
/// whose strings are NULL or NUL-terminated; `out` NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn stp_connect_with(
    endpoint: *const c_char,
    options: *const stp_connect_options,
    out: *mut *mut stp_runtime,
) -> c_int {
    const OP: &str = "stp_connect_with";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: NULL or NUL-terminated per the contract.
        let endpoint = unsafe { text(endpoint, OP, "endpoint") }?;
        // SAFETY: NULL or a valid struct whose strings are NULL or NUL-terminated per the contract.
        let connect = unsafe { connect_options(options.as_ref(), endpoint) }?;
        let runtime = stampede::connect_with(endpoint, &connect)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_runtime::boxed(runtime)) };
        Ok(())
    })
}

/// What `options` (NULL: none) tells a connect to `endpoint`.
///
/// # Safety
/// Each string of `options` is NULL or NUL-terminated.
pub(crate) unsafe fn connect_options(
    options: Option<&stp_connect_options>,
    endpoint: &str,
) -> Result<ConnectOptions, stampede::Error> {
    const OP: &str = "stp_connect_with";
    let mut connect = ConnectOptions::default();
    let Some(o) = options else { return Ok(connect) };
    // SAFETY: each string NULL or NUL-terminated per the contract.
    let owned = |ptr, param| unsafe { optional_text(ptr, OP, param) }.map(|t| t.map(str::to_owned));
    connect.timeout = timeout(o.timeout_ms, OP)?;
    connect.node = owned(o.node, "node")?;
    connect.user = Credentials::pair(owned(o.user, "user")?, owned(o.password, "password")?, endpoint)?;
    connect.tls = ClientTls::from_paths(
        owned(o.tls_root_ca, "tls_root_ca")?,
        owned(o.tls_certificate, "tls_certificate")?,
        owned(o.tls_private_key, "tls_private_key")?,
    );
    // SAFETY: NULL or NUL-terminated per the contract.
    connect.prefetch = unsafe { policy(o.prefetch, OP) }?.unwrap_or_default();
    Ok(connect)
}

/// Closes the runtime. Embedded: every channel and queue is destroyed (blocked calls return
/// `STP_CLOSED`), every task closed. A client's session: its tasks on the node are closed and the
/// client leaves the fabric. Idempotent; the handle stays valid until `stp_runtime_free`.
///
/// # Safety
/// `rt` is NULL or a live runtime handle.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_close(rt: *const stp_runtime) -> c_int {
    guard("stp_runtime_close", || {
        // SAFETY: NULL or live per the contract.
        let rt = unsafe { handle(rt, "stp_runtime_close", "rt") }?;
        rt.runtime.close();
        rt.gate.close();
        Ok(())
    })
}

/// Closes the runtime (as `stp_runtime_close`) and frees the handle. NULL is a no-op.
///
/// # Safety
/// `rt` is NULL or a live runtime handle that no other call is using; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_free(rt: *mut stp_runtime) {
    if rt.is_null() {
        return;
    }
    guard("stp_runtime_free", || {
        // SAFETY: a live handle made by `Box::into_raw`, freed once per the contract.
        let rt = unsafe { Box::from_raw(rt) };
        rt.runtime.close();
        rt.gate.close();
        Ok(())
    });
}

/// The name of the node this runtime is a session on; NULL when embedded (or `rt` is NULL).
/// Valid until the handle is freed.
///
/// # Safety
/// `rt` is NULL or a live runtime handle.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_node(rt: *const stp_runtime) -> *const c_char {
    guard_value("stp_runtime_node", std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        let rt = unsafe { handle(rt, "stp_runtime_node", "rt") }?;
        Ok(rt.node.as_ref().map_or(std::ptr::null(), |node| node.as_ptr()))
    })
}

/// Creates a channel called `name` (`/`-separated segments, e.g. `"camera/left"`) holding at most
/// `capacity` items and `max_bytes` payload bytes (`STP_UNBOUNDED` for no bound); writes its
/// handle to `*out`. Errors: `STP_INVALID_ARGUMENT` for a bad name or a bound of 0,
/// `STP_ALREADY_EXISTS`, `STP_CLOSED`.
///
/// # Safety
/// `rt` is NULL or live; `name` NULL or NUL-terminated; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_create_channel(
    rt: *const stp_runtime,
    name: *const c_char,
    capacity: i64,
    max_bytes: i64,
    out: *mut *mut stp_channel,
) -> c_int {
    const OP: &str = "stp_runtime_create_channel";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or valid per the contract.
        let (rt, name) = unsafe { (handle(rt, OP, "rt")?, text(name, OP, "name")?) };
        let limits =
            Limits { capacity: bound(capacity, OP, "capacity")?, bytes_max: bound(max_bytes, OP, "max_bytes")? };
        let channel = rt.runtime.create_channel(name, ChannelOptions::from(limits))?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_channel::boxed(channel, &rt.gate)) };
        Ok(())
    })
}

/// Creates a queue (names and bounds as `stp_runtime_create_channel`); writes its handle to
/// `*out`.
///
/// # Safety
/// `rt` is NULL or live; `name` NULL or NUL-terminated; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_create_queue(
    rt: *const stp_runtime,
    name: *const c_char,
    capacity: i64,
    max_bytes: i64,
    out: *mut *mut stp_queue,
) -> c_int {
    const OP: &str = "stp_runtime_create_queue";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or valid per the contract.
        let (rt, name) = unsafe { (handle(rt, OP, "rt")?, text(name, OP, "name")?) };
        let limits =
            Limits { capacity: bound(capacity, OP, "capacity")?, bytes_max: bound(max_bytes, OP, "max_bytes")? };
        let queue = rt.runtime.create_queue(name, QueueOptions::from(limits))?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_queue::boxed(queue, &rt.gate)) };
        Ok(())
    })
}

/// Looks `name` up in the name service: `STP_OK` with `STP_KIND_CHANNEL` or `STP_KIND_QUEUE`
/// written to `*kind_out` (when not NULL), `STP_NOT_FOUND`, or `STP_INVALID_ARGUMENT` for a
/// name no container can have.
///
/// # Safety
/// `rt` is NULL or live; `name` NULL or NUL-terminated; `kind_out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_lookup(
    rt: *const stp_runtime,
    name: *const c_char,
    kind_out: *mut c_int,
) -> c_int {
    const OP: &str = "stp_runtime_lookup";
    guard(OP, || {
        // SAFETY: each NULL or valid per the contract.
        let (rt, name) = unsafe { (handle(rt, OP, "rt")?, text(name, OP, "name")?) };
        let kind = match rt.runtime.lookup(name)? {
            Container::Channel(_) => STP_KIND_CHANNEL,
            Container::Queue(_) => STP_KIND_QUEUE,
        };
        // SAFETY: NULL or valid per the contract.
        unsafe { write_opt(kind_out, kind) };
        Ok(())
    })
}

/// The channel called `name`, written to `*out` (`STP_NOT_FOUND` when there is none, or when
/// the name is a queue's).
///
/// # Safety
/// `rt` is NULL or live; `name` NULL or NUL-terminated; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_channel(
    rt: *const stp_runtime,
    name: *const c_char,
    out: *mut *mut stp_channel,
) -> c_int {
    const OP: &str = "stp_runtime_channel";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or valid per the contract.
        let (rt, name) = unsafe { (handle(rt, OP, "rt")?, text(name, OP, "name")?) };
        let channel = rt.runtime.channel(name)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_channel::boxed(channel, &rt.gate)) };
        Ok(())
    })
}

/// The queue called `name`, written to `*out` (`STP_NOT_FOUND` when there is none, or when the
/// name is a channel's).
///
/// # Safety
/// `rt` is NULL or live; `name` NULL or NUL-terminated; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_queue(
    rt: *const stp_runtime,
    name: *const c_char,
    out: *mut *mut stp_queue,
) -> c_int {
    const OP: &str = "stp_runtime_queue";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or valid per the contract.
        let (rt, name) = unsafe { (handle(rt, OP, "rt")?, text(name, OP, "name")?) };
        let queue = rt.runtime.queue(name)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_queue::boxed(queue, &rt.gate)) };
        Ok(())
    })
}

/// A list of names (`stp_runtime_names`).
pub struct stp_names {
    names: Vec<CString>,
}

/// The names of the channels and queues under `prefix`, sorted, written to `*out` (free it with
/// `stp_names_free`). Hierarchical: `""` selects all, `"camera/"` the names under `camera/`,
/// `"camera"` `camera` itself and the names under it. Remotely `STP_UNREACHABLE` when the node
/// cannot be reached.
///
/// # Safety
/// `rt` is NULL or live; `prefix` NULL or NUL-terminated; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_names(
    rt: *const stp_runtime,
    prefix: *const c_char,
    out: *mut *mut stp_names,
) -> c_int {
    const OP: &str = "stp_runtime_names";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: each NULL or valid per the contract.
        let (rt, prefix) = unsafe { (handle(rt, OP, "rt")?, text(prefix, OP, "prefix")?) };
        let names = rt.runtime.names(prefix)?.iter().map(|name| c_text(name)).collect();
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(Box::into_raw(Box::new(stp_names { names }))) };
        Ok(())
    })
}

/// How many names the list holds (0 for NULL).
///
/// # Safety
/// `names` is NULL or a live list.
#[no_mangle]
pub unsafe extern "C" fn stp_names_len(names: *const stp_names) -> usize {
    // SAFETY: NULL or live per the contract.
    guard_value("stp_names_len", 0, || Ok(unsafe { handle(names, "stp_names_len", "names") }?.names.len()))
}

/// The `index`th name (NULL when out of range or `names` is NULL); valid until the list is freed.
///
/// # Safety
/// `names` is NULL or a live list.
#[no_mangle]
pub unsafe extern "C" fn stp_names_at(names: *const stp_names, index: usize) -> *const c_char {
    const OP: &str = "stp_names_at";
    guard_value(OP, std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        let names = unsafe { handle(names, OP, "names") }?;
        let len = names.names.len();
        let name = names.names.get(index).ok_or_else(|| invalid(OP, "index", format!("{index} >= {len} names")))?;
        Ok(name.as_ptr())
    })
}

/// Frees a list of names. NULL is a no-op.
///
/// # Safety
/// `names` is NULL or a live list, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_names_free(names: *mut stp_names) {
    if !names.is_null() {
        guard("stp_names_free", || {
            // SAFETY: made by `Box::into_raw`, freed once per the contract.
            drop(unsafe { Box::from_raw(names) });
            Ok(())
        });
    }
}

/// A root task at virtual time `vt` (`STP_INFINITY` allowed), written to `*out`. It must be at or
/// above ts_min (else `STP_BELOW_VISIBILITY`); a negative `vt` is `STP_INVALID_TIMESTAMP`.
///
/// # Safety
/// `rt` is NULL or live; `out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_task(rt: *const stp_runtime, vt: i64, out: *mut *mut stp_task) -> c_int {
    const OP: &str = "stp_runtime_task";
    guard(OP, || {
        // SAFETY: NULL or valid for writing a pointer per the contract.
        unsafe { handle_out(out, OP, "out") }?;
        // SAFETY: NULL or live per the contract.
        let task = unsafe { handle(rt, OP, "rt") }?.runtime.task(vt)?;
        // SAFETY: checked non-NULL; valid per the contract.
        unsafe { out.write(stp_task::boxed(task)) };
        Ok(())
    })
}

/// The current ts_min: no existing or future task can get an item below it (`STP_INFINITY` when
/// nothing holds it back). -1 when `rt` is NULL.
///
/// # Safety
/// `rt` is NULL or a live runtime handle.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_ts_min(rt: *const stp_runtime) -> i64 {
    // SAFETY: NULL or live per the contract.
    guard_value("stp_runtime_ts_min", -1, || Ok(unsafe { handle(rt, "stp_runtime_ts_min", "rt") }?.runtime.ts_min()))
}

/// Runs a GC pass now and writes the number of items it reclaimed to `*reclaimed_out` (when not
/// NULL). Reclamation normally happens within the operation that makes an item garbage; this is
/// for tests and tools.
///
/// # Safety
/// `rt` is NULL or live; `reclaimed_out` NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_collect(rt: *const stp_runtime, reclaimed_out: *mut usize) -> c_int {
    guard("stp_runtime_collect", || {
        // SAFETY: NULL or live per the contract.
        let reclaimed = unsafe { handle(rt, "stp_runtime_collect", "rt") }?.runtime.collect();
        // SAFETY: NULL or valid per the contract.
        unsafe { write_opt(reclaimed_out, reclaimed) };
        Ok(())
    })
}

/// The version of this library (`"0.1.0"`); a static string.
#[no_mangle]
pub extern "C" fn stp_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
