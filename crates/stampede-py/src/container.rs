//! `Channel` and `Queue` (docs/SEMANTICS.md, "The API in every language"): handles of a runtime's
//! containers — equal when they name the same container — with their bounds, counters, GC handlers,
//! name-service info and destruction, and a channel's disk tier, timestamps, retention and
//! settledness.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::{PyTraverseError, PyVisit};
use stampede::{Codec, DiskStats, Info, Retention, Stats, Timestamp};

use crate::args::{self, At};
use crate::errors::to_pyerr;
use crate::reclaim::Handlers;
use crate::wait;

/// The `#[pymethods]` of a container class, given its name, the docstrings of its `capacity`,
/// `max_bytes`, `stats`, `on_reclaim` and `destroy`, and its own methods: the members `Channel`
/// and `Queue` share — those, `name`, `info`, `repr`, equality and hash (handles of one container
/// are equal) and the collector's view of the GC handlers — beside its own.
macro_rules! container_class {
    (
        $class:ident;
        $(#[$capacity_doc:meta])* fn capacity;
        $(#[$max_bytes_doc:meta])* fn max_bytes;
        $(#[$stats_doc:meta])* fn stats;
        $(#[$on_reclaim_doc:meta])* fn on_reclaim;
        $(#[$destroy_doc:meta])* fn destroy;
        $($own:tt)*
    ) => {
        #[pymethods]
        impl $class {
            #[getter]
            fn name(&self) -> &str {
                self.inner.name()
            }

            $(#[$capacity_doc])*
            #[getter]
            fn capacity(&self) -> Option<usize> {
                self.inner.limits().capacity
            }

            $(#[$max_bytes_doc])*
            #[getter]
            fn max_bytes(&self) -> Option<usize> {
                self.inner.limits().bytes_max
            }

            $(#[$stats_doc])*
            fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                stats_dict(py, &self.inner.stats(), self.handlers.get().errors.of(self.inner.name()))
            }

            $($own)*

            $(#[$on_reclaim_doc])*
            fn on_reclaim(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
                set_handler(py, &self.handlers, self.inner.id(), self.inner.name(), callback, |t| {
                    self.inner.on_reclaim(t)
                })
            }

            /// What the name service tells of it: a dict with name, kind, node, capacity, max_bytes,
            /// codec and description.
            fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                info_dict(py, self.inner.info())
            }

            $(#[$destroy_doc])*
            fn destroy(&self, py: Python<'_>) -> PyResult<()> {
                wait::released(py, || self.inner.destroy())
            }

            fn __repr__(&self) -> String {
                format!(concat!(stringify!($class), "({:?})"), self.inner.name())
            }

            fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
                other.cast::<$class>().is_ok_and(|o| o.get().inner == self.inner)
            }

            fn __hash__(&self) -> u64 {
                self.inner.id()
            }

            fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
                visit.call(&self.handlers)
            }
        }
    };
}

/// A named channel of timestamped items (at most one per timestamp).
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Channel {
    pub(crate) inner: stampede::Channel,
    /// The runtime's GC handlers (see [`Handlers`] for why every handle holds them).
    pub(crate) handlers: Py<Handlers>,
}

container_class! {
    Channel;
    /// Most items stored at once (None = unbounded).
    fn capacity;
    /// Most payload bytes stored at once (None = unbounded).
    fn max_bytes;
    /// Counters now: live_items, live_bytes, reclaimed, puts, gets, inputs, outputs, tombstones,
    /// tombstone_runs, claim, ts_min, handler_errors.
    fn stats;
    /// Sets the GC handler: `callback(ts)` for each item this channel reclaims, replacing the
    /// previous one; `None` removes it.
    fn on_reclaim;
    /// Destroys the channel: items are reclaimed, the name is freed, operations raise Closed.
    fn destroy;

    /// What the disk tier holds now — `items`, `bytes` and `extents` on disk, items `written`
    /// and `recovered` — or None without a tier.
    fn disk_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Released: the stats wait for the tier's lock, which a put holds while it syncs.
        let stats = py.detach(|| self.inner.disk_stats());
        stats.map(|stats| disk_stats_dict(py, stats)).transpose()
    }

    /// Timestamps of the items stored now, in order.
    fn timestamps(&self) -> Vec<Timestamp> {
        self.inner.timestamps()
    }

    /// The channel's latest puts, oldest first, as `(at_us, ts, bytes)`: when each came (µs of
    /// its runtime's monotonic clock), its timestamp and size (what `stampede hz` reads). The
    /// first call turns the log on, so it starts empty; nothing is read, GC is not held back.
    fn put_log(&self, py: Python<'_>) -> PyResult<Vec<(u64, Timestamp, u64)>> {
        let log = py.detach(|| self.inner.put_log()).map_err(to_pyerr)?;
        Ok(log.into_iter().map(|p| (p.at_us, p.ts, p.bytes)).collect())
    }

    /// The retention policy: "history" or "current_readers".
    #[getter]
    fn retention(&self) -> &'static str {
        match self.inner.retention() {
            Retention::History => "history",
            Retention::CurrentReaders => "current_readers",
        }
    }

    /// Every timestamp below this one is settled: no task can still put it into the channel
    /// (docs/CORRELATION.md, "Settled timestamps"). ts_min while the producer set is open; after
    /// `close_producers()` it follows this channel's producers only (INFINITY once none is left).
    #[getter]
    fn settled_below(&self, py: Python<'_>) -> Timestamp {
        py.detach(|| self.inner.settled_below())
    }

    /// True when no task can still put `ts` into the channel (`ts < settled_below`).
    fn is_settled(&self, py: Python<'_>, ts: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ts = args::timestamp(ts, "ts", At { op: "is_settled", name: self.inner.name() })?;
        Ok(py.detach(|| self.inner.is_settled(ts)))
    }

    /// Closes the producer set: attaching another output connection raises InvalidArgument from
    /// now on, and settledness follows the tasks holding output connections now. Needed by
    /// joins with policy "partial" or "skip" and by ApproxJoin. Idempotent.
    fn close_producers(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.close_producers()).map_err(to_pyerr)
    }
}

/// A named FIFO queue of timestamped items; each item goes to exactly one getter.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Queue {
    pub(crate) inner: stampede::Queue,
    /// The runtime's GC handlers (see [`Handlers`]).
    pub(crate) handlers: Py<Handlers>,
}

container_class! {
    Queue;
    fn capacity;
    fn max_bytes;
    /// Counters now (as `Channel.stats()`).
    fn stats;
    /// Sets the GC handler: `callback(ts)` for each item the queue reclaims (when consumed),
    /// replacing the previous one; `None` removes it.
    fn on_reclaim;
    /// Destroys the queue: items are reclaimed, operations raise Closed.
    fn destroy;
}

/// Sets (or removes) a channel's or queue's Python GC handler; the first time, `register`s the
/// trampoline that calls it with the container.
fn set_handler(
    py: Python<'_>,
    handlers: &Py<Handlers>,
    id: u64,
    name: &str,
    callback: Option<Py<PyAny>>,
    register: impl FnOnce(Box<dyn Fn(&stampede::Item) + Send + Sync>) -> stampede::Result<()>,
) -> PyResult<()> {
    let callback = callback.map(|cb| args::callable(cb, py, "callback")).transpose()?;
    if let Some(trampoline) = Handlers::set(handlers.bind(py), id, name.to_owned(), callback)? {
        if let Err(e) = register(Box::new(trampoline)) {
            Handlers::set(handlers.bind(py), id, name.to_owned(), None)?;
            return Err(to_pyerr(e));
        }
    }
    Ok(())
}

fn disk_stats_dict<'py>(py: Python<'py>, stats: DiskStats) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("items", stats.items)?;
    dict.set_item("bytes", stats.bytes)?;
    dict.set_item("extents", stats.extents)?;
    dict.set_item("written", stats.written)?;
    dict.set_item("recovered", stats.recovered)?;
    Ok(dict)
}

fn info_dict(py: Python<'_>, info: Info) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("name", info.name)?;
    dict.set_item("kind", info.kind)?;
    dict.set_item("node", info.node)?;
    dict.set_item("capacity", info.limits.capacity)?;
    dict.set_item("max_bytes", info.limits.bytes_max)?;
    dict.set_item("codec", info.codec.as_ref().map(Codec::name))?;
    dict.set_item("description", info.description)?;
    Ok(dict)
}

fn stats_dict<'py>(py: Python<'py>, stats: &Stats, handler_errors: u64) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("live_items", stats.live_items)?;
    dict.set_item("live_bytes", stats.live_bytes)?;
    dict.set_item("reclaimed", stats.reclaimed)?;
    dict.set_item("puts", stats.puts)?;
    dict.set_item("gets", stats.gets)?;
    dict.set_item("inputs", stats.inputs)?;
    dict.set_item("outputs", stats.outputs)?;
    dict.set_item("tombstones", stats.tombstones)?;
    dict.set_item("tombstone_runs", stats.tombstone_runs)?;
    dict.set_item("claim", stats.claim)?;
    dict.set_item("ts_min", stats.ts_min)?;
    dict.set_item("handler_errors", handler_errors)?;
    Ok(dict)
}
