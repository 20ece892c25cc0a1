//! Connections (docs/SEMANTICS.md, "Channels", "Queues" and "The API in every language"):
//! `ChannelOutput.put`, `ChannelInput.get` / `get_range` / `consume` / `consume_until` / `stream`,
//! and the queue forms, blocking and asyncio.
//!
//! Each Python connection holds its Rust connection behind an `Arc`, so several Python threads
//! may use one connection at once with the GIL released. `detach()` detaches the Rust connection
//! at once: calls still blocked on it on other threads wake with `Closed`, and every later call
//! raises `Closed` ("the connection was detached"). Building a join
//! (`crate::join`) *takes* the Rust connection of a `ChannelInput` the same way, for good: later
//! calls raise `Closed` ("handed over to a join").
//!
//! asyncio: `get_async` / `put_async` return coroutines (`crate::aio`): a waiting coroutine holds
//! no thread, and one cancelled or timed out never swallows an item nor lands a put later.
//!
//! Here: selectors, the slot every connection class keeps its Rust connection in, and the members
//! every connection class shares (`connection_class!`); beside it, `channel` and `queue` (the
//! four connection classes) and `stream` (their iterator).

mod channel;
mod queue;
mod stream;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use stampede::{Error, Payload, Selector, Timestamp};

use crate::args::{self, At};
use crate::errors::to_pyerr;
use crate::payload::to_payload;
pub(crate) use channel::{ChannelInput, ChannelOutput};
pub(crate) use queue::{QueueInput, QueueOutput};
pub(crate) use stream::{ended, Stream};

/// A get selector other than an exact timestamp: `OLDEST`, `NEWEST`, `OLDEST_UNSEEN`,
/// `NEWEST_UNSEEN`.
#[pyclass(
    module = "stampede._stampede",
    name = "Selector",
    eq,
    frozen,
    from_py_object,
    rename_all = "SCREAMING_SNAKE_CASE"
)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PySelector {
    Oldest,
    Newest,
    OldestUnseen,
    NewestUnseen,
}

/// An exact timestamp (int) or a `Selector`.
fn selector(obj: &Bound<'_, PyAny>, at: At<'_>) -> PyResult<Selector> {
    if let Ok(s) = obj.extract::<PySelector>() {
        return Ok(match s {
            PySelector::Oldest => Selector::Oldest,
            PySelector::Newest => Selector::Newest,
            PySelector::OldestUnseen => Selector::OldestUnseen,
            PySelector::NewestUnseen => Selector::NewestUnseen,
        });
    }
    args::timestamp(obj, "selector", at).map(Selector::At).map_err(|e| {
        if e.is_instance_of::<PyTypeError>(obj.py()) {
            PyTypeError::new_err("selector must be an int timestamp or OLDEST, NEWEST, OLDEST_UNSEEN, NEWEST_UNSEEN")
        } else {
            e
        }
    })
}

/// A queue input's selector: a queue hands out items in FIFO order, so only `OLDEST` (the
/// default) is meaningful; anything else, an int included, is `InvalidArgument`.
fn queue_selector(obj: Option<&Bound<'_, PyAny>>, at: At<'_>) -> PyResult<()> {
    match obj {
        None => Ok(()),
        Some(obj) if matches!(obj.extract::<PySelector>(), Ok(PySelector::Oldest)) => Ok(()),
        Some(obj) => Err(to_pyerr(Error::InvalidArgument {
            op: at.op,
            name: at.name.to_owned(),
            reason: format!(
                "a queue input gets in FIFO order: the selector must be stampede.OLDEST, not {} (pass a timeout \
                 by keyword: get(timeout=...))",
                obj.repr().map(|r| r.to_string()).unwrap_or_default()
            ),
        })),
    }
}

/// The Rust connection of a Python connection, until it is detached or handed over to a join.
struct Slot<T> {
    /// The connection, or why it is gone (the reason of the `Closed` error later calls raise).
    conn: RwLock<Result<Arc<T>, &'static str>>,
    name: String,
}

/// Why a connection handed over to a join refuses every later call.
const HANDED_OVER: &str = "the connection was handed over to a join (use the join; close it to detach)";

/// The Rust connections: each detaches through `&self`, so a call blocked on the connection on
/// another thread is woken (with `Closed`) instead of keeping it attached.
trait Detach {
    fn detach(&self);
}

macro_rules! detach_by_ref {
    ($($t:ty),*) => {$(
        impl Detach for $t {
            fn detach(&self) {
                <$t>::detach(self);
            }
        }
    )*};
}
detach_by_ref!(stampede::ChannelInput, stampede::ChannelOutput, stampede::QueueInput, stampede::QueueOutput);

impl<T: Detach + Send + Sync> Slot<T> {
    fn new(conn: T, name: &str) -> Slot<T> {
        Slot { conn: RwLock::new(Ok(Arc::new(conn))), name: name.to_owned() }
    }

    fn get(&self) -> PyResult<Arc<T>> {
        self.connection().map_err(to_pyerr)
    }

    fn connection(&self) -> stampede::Result<Arc<T>> {
        match &*self.conn.read() {
            Ok(conn) => Ok(conn.clone()),
            Err(reason) => Err(Error::Closed { name: self.name.clone(), reason }),
        }
    }

    fn detach(&self, py: Python<'_>) {
        let conn = {
            let mut slot = self.conn.write();
            match &*slot {
                Ok(_) => std::mem::replace(&mut *slot, Err(stampede::DETACHED)).ok(),
                Err(_) => None, // detached already, or owned by a join now
            }
        };
        // Detaching may release claims and run GC handlers: do it without the GIL. Calls still
        // running on the connection on other threads wake with `Closed`.
        if let Some(conn) = conn {
            py.detach(move || conn.detach());
        }
    }

    /// Takes the Rust connection out for good: later calls fail `Closed` with `reason`. Fails
    /// (changing nothing) if the connection is gone already or a call on another thread still
    /// uses it.
    fn take(&self, reason: &'static str) -> stampede::Result<T> {
        let mut slot = self.conn.write();
        let conn = match std::mem::replace(&mut *slot, Err(reason)) {
            Ok(conn) => conn,
            Err(gone) => {
                *slot = Err(gone);
                return Err(Error::Closed { name: self.name.clone(), reason: gone });
            }
        };
        Arc::try_unwrap(conn).map_err(|conn| {
            *slot = Ok(conn);
            Error::InvalidArgument {
                op: "join",
                name: self.name.clone(),
                reason: "the connection is in use by a call on another thread; a join needs it to itself".into(),
            }
        })
    }

    /// Puts back a connection [`take`](Self::take) took (when building a join failed early).
    fn restore(&self, conn: T) {
        *self.conn.write() = Ok(Arc::new(conn));
    }

    /// Converts the arguments every put takes and copies its data in with `copy_in` (once),
    /// after `check_fits` accepted its size: an item larger than the container's byte bound
    /// fails `Full` before a byte is copied.
    fn put_args(
        &self,
        ts: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        timeout: Option<&Bound<'_, PyAny>>,
        codec: Option<&str>,
        (check_fits, copy_in): (CheckFits<T>, CopyIn<T>),
    ) -> PyResult<PutArgs<T>> {
        let at = At { op: "put", name: &self.name };
        let ts = args::timestamp(ts, "ts", at)?;
        let timeout = args::timeout(timeout, at)?;
        let conn = self.get()?;
        let copy = |parts: &[&[u8]]| {
            check_fits(&conn, ts, parts.iter().map(|p| p.len()).sum()).map_err(to_pyerr)?;
            Ok(copy_in(&conn, parts))
        };
        let payload = to_payload(data, codec, &self.name, ts, &copy)?;
        Ok(PutArgs { conn, ts, payload, timeout })
    }
}

/// An output connection's size check before a copy-in (`check_fits`).
type CheckFits<T> = fn(&T, Timestamp, usize) -> stampede::Result<()>;
/// An output connection's copy-in into a recycled buffer.
type CopyIn<T> = fn(&T, &[&[u8]]) -> bytes::Bytes;

/// A put's arguments, converted, with its data copied in.
struct PutArgs<T> {
    conn: Arc<T>,
    ts: Timestamp,
    payload: Payload,
    timeout: Option<Duration>,
}

/// The `#[pymethods]` of a connection class, given its name, the docstrings of its `name` getter
/// and its `detach`, and its own methods: the members every connection class shares — `name`,
/// `detach`, the context manager (leaving it detaches), `repr` and the collector's view of the GC
/// handlers it holds — beside its own.
macro_rules! connection_class {
    (
        $class:ident;
        $(#[$name_doc:meta])* $name_vis:vis fn name;
        $(#[$detach_doc:meta])* fn detach;
        $($own:tt)*
    ) => {
        #[pyo3::pymethods]
        impl $class {
            $(#[$name_doc])*
            #[getter]
            $name_vis fn name(&self) -> &str {
                &self.slot.name
            }

            $($own)*

            $(#[$detach_doc])*
            fn detach(&self, py: pyo3::Python<'_>) {
                self.slot.detach(py);
            }

            fn __enter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, py: pyo3::Python<'_>, _args: &pyo3::Bound<'_, pyo3::types::PyTuple>) -> bool {
                self.detach(py);
                false
            }

            fn __repr__(&self) -> String {
                format!(concat!(stringify!($class), "({:?})"), self.slot.name)
            }

            fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
                visit.call(&self.handlers)
            }
        }
    };
}
use connection_class;
