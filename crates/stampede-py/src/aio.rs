//! The asyncio bridge behind `get_async` / `put_async` (python/README.md, "What to know": asyncio;
//! cancellation: docs/SEMANTICS.md, "Errors").
//!
//! Cancellation-safe by construction: the coroutine (`stampede/_aio.py`) takes or stores an item
//! only in a non-waiting attempt that runs on the event loop's thread, between two awaits, and
//! returns what it took at once. What it awaits is a [`Readiness`]: a wake-up registered with the
//! runtime *before* the attempt (so no wake-up is lost between the attempt and the await) that
//! carries no item. A coroutine cancelled or timed out while waiting has taken nothing — no item
//! is swallowed, no put lands later — and asyncio's `CancelledError` is the whole story.
//!
//! The wake-up is a Rust future ([`stampede::Changed`]) driven by a small tokio runtime owned by
//! this process: after `fork()` (multiprocessing's default start method on Linux) the child has
//! none of the parent's threads, so the first wait in a child builds the child its own runtime
//! (the parent's is left alone: its threads do not exist there).

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::IntoPyObjectExt;
use stampede::{Payload, PutOptions, Selector, Timestamp};

use crate::errors::to_pyerr;
use crate::item::Item;

/// Worker threads of a process's wake-up runtime: waiting costs no thread, one completes them.
const WAKE_WORKER_THREADS: usize = 1;

/// The wake-up runtime of one process.
struct ProcessRuntime {
    pid: u32,
    runtime: tokio::runtime::Runtime,
}

/// This process's wake-up runtime; a different `pid` means it was inherited through `fork()`.
static RUNTIME: AtomicPtr<ProcessRuntime> = AtomicPtr::new(std::ptr::null_mut());

/// The wake-up runtime of the calling process, built on first use (and again after a fork).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    let pid = std::process::id();
    let current = RUNTIME.load(Ordering::Acquire);
    // SAFETY: a non-null pointer in RUNTIME comes from `Box::leak` below and is never freed.
    if let Some(rt) = unsafe { current.as_ref() } {
        if rt.pid == pid {
            return Ok(&rt.runtime);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WAKE_WORKER_THREADS)
        .thread_name("stampede-async")
        .enable_all()
        .build()
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("cannot start the asyncio bridge: {e}")))?;
    // Leaked on purpose: one per process (a forked child's copy of the parent's cannot be shut
    // down — its threads do not exist in the child — so it is simply abandoned).
    let fresh: &'static mut ProcessRuntime = Box::leak(Box::new(ProcessRuntime { pid, runtime }));
    match RUNTIME.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(&fresh.runtime),
        // Another thread of this process won the race: use its runtime.
        // SAFETY: as above; the loser's runtime stays leaked (at most one per racing thread).
        Err(winner) => Ok(unsafe { &(*winner).runtime }),
    }
}

/// A wake-up registered with the runtime: awaiting it (`wait`) completes an asyncio future when
/// something a blocked get (or put) of the connection would wake on happens. It holds no item.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Readiness {
    state: Mutex<Wait>,
}

enum Wait {
    /// Registered, not awaited yet.
    Registered(stampede::Changed),
    /// Awaited: the task completing the asyncio future.
    Awaited(tokio::task::JoinHandle<()>),
    Closed,
}

impl Readiness {
    pub(crate) fn new(changed: stampede::Changed) -> Readiness {
        Readiness { state: Mutex::new(Wait::Registered(changed)) }
    }
}

#[pymethods]
impl Readiness {
    /// An asyncio future of `event_loop`, completed (through `wake(future)`, called in the loop's
    /// thread) at the wake-up. Call once.
    fn wait<'py>(&self, event_loop: &Bound<'py, PyAny>, wake: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let future = event_loop.call_method0("create_future")?;
        let mut state = self.state.lock();
        let changed = match std::mem::replace(&mut *state, Wait::Closed) {
            Wait::Registered(changed) => changed,
            _ => return Err(pyo3::exceptions::PyRuntimeError::new_err("a Readiness is awaited once")),
        };
        let (event_loop, wake, target) = (event_loop.clone().unbind(), wake.clone().unbind(), future.clone().unbind());
        let task = runtime()?.spawn(async move {
            changed.await;
            // Skipped during interpreter shutdown; the loop may also be closed meanwhile (the
            // coroutine abandoned): then there is nobody to wake.
            Python::try_attach(|py| {
                let _ = event_loop.call_method1(py, "call_soon_threadsafe", (wake, target));
            });
        });
        *state = Wait::Awaited(task);
        Ok(future)
    }

    /// Deregisters the wake-up (after the wait ended, was cancelled or timed out). Idempotent.
    fn close(&self) {
        if let Wait::Awaited(task) = std::mem::replace(&mut *self.state.lock(), Wait::Closed) {
            task.abort();
        }
    }
}

/// An asynchronous get or put in progress: what `stampede/_aio.py` attempts and waits for.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Pending {
    op: Op,
}

/// The operation, with everything it needs to be attempted again without converting or copying
/// its arguments again.
pub(crate) enum Op {
    ChannelGet(Arc<stampede::ChannelInput>, Selector),
    QueueGet(Arc<stampede::QueueInput>),
    ChannelPut(Arc<stampede::ChannelOutput>, Timestamp, Payload, Option<u32>),
    QueuePut(Arc<stampede::QueueOutput>, Timestamp, Payload),
}

impl Pending {
    /// The coroutine that runs `op` until done, or until `timeout` passes.
    pub(crate) fn start(py: Python<'_>, op: Op, timeout: Option<Duration>) -> PyResult<Bound<'_, PyAny>> {
        static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        static PUT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let (cell, function) = match op {
            Op::ChannelGet(..) | Op::QueueGet(..) => (&GET, "get"),
            Op::ChannelPut(..) | Op::QueuePut(..) => (&PUT, "put"),
        };
        let coroutine =
            cell.get_or_try_init(py, || Ok::<_, PyErr>(py.import("stampede._aio")?.getattr(function)?.unbind()))?;
        let pending = Bound::new(py, Pending { op })?;
        coroutine.bind(py).call1((pending, timeout.map(|t| t.as_secs_f64())))
    }
}

#[pymethods]
impl Pending {
    /// Tries once without waiting: the item got, `True` for a put that stored its item, `None`
    /// for "not yet" (with `last`, the "not yet" error is raised instead); other errors raise.
    fn attempt(&self, py: Python<'_>, last: bool) -> PyResult<Option<Py<PyAny>>> {
        let now = Some(Duration::ZERO);
        let done = py.detach(|| match &self.op {
            Op::ChannelGet(conn, selector) => conn.get(*selector, now).map(|i| Done::Item(Item::from_channel(i))),
            Op::QueueGet(conn) => conn.get(now).map(|i| Done::Item(Item::from_queue(i))),
            // Waited, even on a pipelined connection: a try that finds no room must say so now.
            Op::ChannelPut(conn, ts, payload, refcount) => conn
                .put_waited(*ts, payload.clone(), PutOptions { refcount: *refcount, timeout: now })
                .map(|()| Done::Stored),
            Op::QueuePut(conn, ts, payload) => conn.put(*ts, payload.clone(), now).map(|()| Done::Stored),
        });
        match done {
            Ok(Done::Item(item)) => Ok(Some(item.into_py_any(py)?)),
            Ok(Done::Stored) => Ok(Some(true.into_py_any(py)?)),
            Err(e) if e.is_transient() && !last => Ok(None),
            Err(e) => Err(to_pyerr(e)),
        }
    }

    /// A wake-up registered now, for the wait after the next attempt.
    fn readiness(&self) -> Readiness {
        Readiness::new(match &self.op {
            Op::ChannelGet(conn, selector) => conn.changed(*selector),
            Op::QueueGet(conn) => conn.changed(),
            Op::ChannelPut(conn, ..) => conn.freed(),
            Op::QueuePut(conn, ..) => conn.freed(),
        })
    }
}

enum Done {
    Item(Item),
    Stored,
}
