//! Temporal correlation (SPEC §4): `ExactJoin` and `ApproxJoin` over input connections.
//!
//! # Ownership
//!
//! The Rust joins own their input connections. Building a join *hands over* the Rust connection
//! of every Python `ChannelInput` given: all of them or none (if one cannot be handed over —
//! detached, in use by a blocked call on another thread — the others are given back; the same
//! connection given twice is refused before anything is taken). Afterwards the Python connection raises `Closed` ("handed over to a join") on every
//! call; the join reads through it, and `join.close()` (or leaving a `with` block, or dropping
//! the join) detaches it. Everything the Rust constructors would reject is checked *before* the
//! hand-over, so a refused join leaves the connections usable.
//!
//! # Waiting
//!
//! `next` goes through the binding's one blocking helper ([`wait::blocking`]): the GIL is
//! released, and the Rust `next(timeout)` is called in slices of at most 50 ms with a Ctrl-C
//! check in between. Slicing changes nothing: the join keeps its buffers between calls, and a
//! slice that ends empty-handed has released nothing.
//!
//! # End
//!
//! A join is *exhausted* when every input channel is settled everywhere (`settled_below ==
//! INFINITY`: every producer of a closed producer set closed or detached, or nothing at all can
//! be put any more) and nothing more can be released: `next` then raises `Closed` ("the join is
//! exhausted") instead of waiting forever. Iterating a join (`for t in join`, or
//! `join.stream(timeout)`) stops on that, on `Closed` (join closed, task, channel or runtime
//! closed) and, with a timeout, on `NotAvailable`.
//!
//! # Callbacks
//!
//! The Rust join reports partial, skipped and late timestamps to a handler that only queues
//! them; the binding calls the Python `on_incomplete` callback after each slice, on the calling
//! thread, with the join's lock released (so the callback may call `stats()`). Exceptions go
//! through [`reclaim::invoke`], like GC handlers: `sys.unraisablehook`, counted in
//! `join.stats()["handler_errors"]` and `Runtime.stats()["handler_errors"]`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::IntoPyObjectExt;
use pyo3::{PyTraverseError, PyVisit};
use stampede::{Error, Incomplete, JoinPolicy, JoinStats, Timestamp, INFINITY};

use crate::args::{self, At};
use crate::connection::{ended, ChannelInput};
use crate::errors::to_pyerr;
use crate::item::Item;
use crate::reclaim::{self, Handlers};
use crate::wait;

/// Reason of the `Closed` error once every input is settled everywhere and nothing is left.
const EXHAUSTED: &str = "the join is exhausted: every input channel is settled everywhere and nothing more can be \
                         released";
/// Reason of the `Closed` error after `close()`.
const JOIN_CLOSED: &str = "the join was closed";

/// What the driver needs of a Rust join.
trait RustJoin: Send + 'static {
    type Output: Send;
    fn next(&mut self, timeout: Option<Duration>) -> stampede::Result<Self::Output>;
    fn stats(&self) -> JoinStats;
    fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static);
}

impl RustJoin for stampede::ExactJoin {
    type Output = stampede::Joined;

    fn next(&mut self, timeout: Option<Duration>) -> stampede::Result<stampede::Joined> {
        stampede::ExactJoin::next(self, timeout)
    }

    fn stats(&self) -> JoinStats {
        stampede::ExactJoin::stats(self).clone()
    }

    fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static) {
        stampede::ExactJoin::on_incomplete(self, handler);
    }
}

impl RustJoin for stampede::ApproxJoin {
    type Output = stampede::Matched;

    fn next(&mut self, timeout: Option<Duration>) -> stampede::Result<stampede::Matched> {
        stampede::ApproxJoin::next(self, timeout)
    }

    fn stats(&self) -> JoinStats {
        stampede::ApproxJoin::stats(self).clone()
    }

    fn on_incomplete(&mut self, handler: impl FnMut(Timestamp, &[bool], Incomplete) + Send + 'static) {
        stampede::ApproxJoin::on_incomplete(self, handler);
    }
}

/// One partial, skipped or late timestamp, queued for the Python callback.
type Report = (Timestamp, Vec<bool>, Incomplete);

/// The Python-facing machinery both joins share.
struct Driver<J> {
    /// The Rust join; `None` once closed.
    join: Mutex<Option<J>>,
    /// The counters at `close()`.
    final_stats: Mutex<JoinStats>,
    /// The input channels, in order (for settledness and messages).
    channels: Vec<stampede::Channel>,
    /// "a, b": the join's name in errors.
    name: String,
    reports: Arc<Mutex<Vec<Report>>>,
    callback: RwLock<Option<Py<PyAny>>>,
    /// The runtime's GC handlers and count of callback exceptions: the join keeps the runtime
    /// alive, so it holds them like every other handle (see `reclaim::Handlers`).
    handlers: Py<Handlers>,
    /// This join's count of callback exceptions.
    callback_errors: AtomicU64,
}

/// The Rust connections taken from Python connections, with what the driver needs of them.
struct HandedOver {
    inputs: Vec<stampede::ChannelInput>,
    channels: Vec<stampede::Channel>,
    handlers: Py<Handlers>,
}

/// Checks what the Rust constructor checks, then takes the Rust connections out of `inputs`:
/// all of them or, on any failure, none. `settled_for`: the policy that needs every channel's
/// producer set closed, if any.
fn hand_over(
    py: Python<'_>,
    inputs: &[Bound<'_, ChannelInput>],
    op: &'static str,
    settled_for: Option<&str>,
) -> PyResult<HandedOver> {
    let Some(first) = inputs.first() else {
        return Err(invalid(op, "", "no input connections".into()));
    };
    let handlers = first.get().handlers.clone_ref(py);
    if let Some(twice) = inputs.iter().enumerate().find(|(i, input)| inputs[..*i].iter().any(|e| e.is(*input))) {
        let reason = "the same input connection is given twice; a join reads each position through its own \
                      connection (attach another input to read a channel twice)";
        return Err(invalid(op, twice.1.get().name(), reason.into()));
    }
    let channels = inputs.iter().map(|i| i.get().channel()).collect::<PyResult<Vec<_>>>()?;
    if let Some(policy) = settled_for {
        for input in inputs {
            let input = input.get();
            if !wait::released(py, || input.producers_closed())? {
                return Err(invalid(
                    op,
                    input.name(),
                    format!(
                        "{policy} needs settledness: call close_producers() on this channel first (with an open \
                         producer set any task could still put a missing part)"
                    ),
                ));
            }
        }
    }
    let mut taken = Vec::with_capacity(inputs.len());
    for input in inputs {
        match input.get().take() {
            Ok(conn) => taken.push(conn),
            Err(e) => {
                for (input, conn) in inputs.iter().zip(taken) {
                    input.get().restore(conn);
                }
                return Err(to_pyerr(e));
            }
        }
    }
    Ok(HandedOver { inputs: taken, channels, handlers })
}

fn invalid(op: &'static str, name: &str, reason: String) -> PyErr {
    to_pyerr(Error::InvalidArgument { op, name: name.to_owned(), reason })
}

impl<J: RustJoin> Driver<J> {
    fn new(mut join: J, channels: Vec<stampede::Channel>, handlers: Py<Handlers>) -> Driver<J> {
        let reports: Arc<Mutex<Vec<Report>>> = Arc::default();
        let queue = reports.clone();
        join.on_incomplete(move |ts, present, what| queue.lock().push((ts, present.to_vec(), what)));
        let name = channels.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
        Driver {
            join: Mutex::new(Some(join)),
            final_stats: Mutex::default(),
            channels,
            name,
            reports,
            callback: RwLock::new(None),
            handlers,
            callback_errors: AtomicU64::new(0),
        }
    }

    /// A `next` or `stream` timeout (see `args::timeout`).
    fn timeout(&self, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
        args::timeout(timeout, At { op: "join", name: &self.name })
    }

    fn closed(&self, reason: &'static str) -> Error {
        Error::Closed { name: self.name.clone(), reason }
    }

    /// The next output, waiting up to `timeout` (None: until there is one or the join ends).
    fn next(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<J::Output> {
        wait::blocking(py, timeout, |slice| {
            let result = self.attempt(slice);
            self.deliver();
            result
        })
    }

    /// One slice of `next`. Settledness is read first and only grows: when every channel is
    /// settled everywhere, one attempt sees every item there will ever be.
    fn attempt(&self, slice: Option<Duration>) -> stampede::Result<J::Output> {
        let exhausted = self.channels.iter().all(|c| c.settled_below() == INFINITY);
        let mut guard = self.join.lock();
        let join = guard.as_mut().ok_or_else(|| self.closed(JOIN_CLOSED))?;
        match join.next(if exhausted { Some(Duration::ZERO) } else { slice }) {
            Err(Error::NotAvailable { .. }) if exhausted => Err(self.closed(EXHAUSTED)),
            other => other,
        }
    }

    /// Calls the Python callback with the reports queued so far (join lock not held).
    fn deliver(&self) {
        let reports = std::mem::take(&mut *self.reports.lock());
        if reports.is_empty() {
            return;
        }
        Python::try_attach(|py| {
            let Some(callback) = self.callback.read().as_ref().map(|c| c.clone_ref(py)) else { return };
            for (ts, present, what) in reports {
                reclaim::invoke(py, &callback, (ts, present, incomplete_name(what)), || {
                    self.callback_errors.fetch_add(1, Ordering::Relaxed);
                    self.handlers.get().errors.record(None);
                });
            }
        });
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = py.detach(|| match &*self.join.lock() {
            Some(join) => join.stats(),
            None => self.final_stats.lock().clone(),
        });
        let dict = PyDict::new(py);
        dict.set_item("complete", stats.complete)?;
        dict.set_item("partial", stats.partial)?;
        dict.set_item("skipped", stats.skipped)?;
        dict.set_item("late", stats.late)?;
        dict.set_item("handler_errors", self.callback_errors.load(Ordering::Relaxed))?;
        Ok(dict)
    }

    fn on_incomplete(&self, callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        if let Some(callback) = &callback {
            if !callback.is_callable() {
                return Err(PyTypeError::new_err("on_incomplete takes a callable (ts, present, what) or None"));
            }
        }
        *self.callback.write() = callback.map(Bound::unbind);
        Ok(())
    }

    /// Reports the Python objects the join holds to the collector (a callback capturing its
    /// join must not make an uncollectable cycle).
    fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.handlers)?;
        // try_read: the collector holds the GIL and no code holds this lock across a call into
        // Python; if it is held anyway, skipping the callback only delays collection.
        if let Some(callback) = self.callback.try_read() {
            if let Some(callback) = &*callback {
                visit.call(callback)?;
            }
        }
        Ok(())
    }

    /// Drops the Rust join: its connections detach, their claims are released. Idempotent.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            let join = self.join.lock().take();
            if let Some(join) = join {
                *self.final_stats.lock() = join.stats();
                drop(join);
            }
        });
    }

    fn names(&self) -> Vec<String> {
        self.channels.iter().map(|c| c.name().to_owned()).collect()
    }
}

fn incomplete_name(what: Incomplete) -> &'static str {
    match what {
        Incomplete::Partial => "partial",
        Incomplete::Skipped => "skipped",
        Incomplete::Late => "late",
    }
}

fn items(py: Python<'_>, items: Vec<Option<stampede::Item>>) -> PyResult<Vec<Option<Py<Item>>>> {
    items.into_iter().map(|i| i.map(|i| Py::new(py, Item::from_channel(i))).transpose()).collect()
}

fn clone_items(py: Python<'_>, items: &[Option<Py<Item>>]) -> Vec<Option<Py<Item>>> {
    items.iter().map(|i| i.as_ref().map(|i| i.clone_ref(py))).collect()
}

// ---- exact join ----------------------------------------------------------------------------

/// Exact join over N input connections: tuples of the items sharing one timestamp, in
/// timestamp order (SPEC §4). `policy`: "wait_all" (default), "partial" or "skip"; the last two
/// need every channel's producer set closed (`Channel.close_producers()`).
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ExactJoin {
    driver: Driver<stampede::ExactJoin>,
    policy: &'static str,
}

#[pymethods]
impl ExactJoin {
    /// Hands the Rust connections of `inputs` over to the join (the Python connections raise
    /// Closed afterwards). Raises InvalidArgument, leaving the connections usable, if `inputs`
    /// is empty or a "partial"/"skip" join meets an open producer set.
    #[new]
    #[pyo3(signature = (inputs, policy="wait_all"))]
    fn new(py: Python<'_>, inputs: Vec<Bound<'_, ChannelInput>>, policy: &str) -> PyResult<ExactJoin> {
        let (rust_policy, policy) = match policy {
            "wait_all" => (JoinPolicy::WaitAll, "wait_all"),
            "partial" => (JoinPolicy::Partial, "partial"),
            "skip" => (JoinPolicy::Skip, "skip"),
            other => {
                let name = inputs.first().map(|i| i.get().name().to_owned()).unwrap_or_default();
                let reason = format!("policy must be \"wait_all\", \"partial\" or \"skip\", not {other:?}");
                return Err(invalid("join", &name, reason));
            }
        };
        let settled_for = (rust_policy != JoinPolicy::WaitAll).then(|| format!("policy=\"{policy}\""));
        let HandedOver { inputs, channels, handlers } = hand_over(py, &inputs, "join", settled_for.as_deref())?;
        let join = wait::released(py, || stampede::ExactJoin::new(inputs, rust_policy))?;
        Ok(ExactJoin { driver: Driver::new(join, channels, handlers), policy })
    }

    /// The next tuple (consuming the previous one first), waiting up to `timeout` seconds (None:
    /// as long as it takes). Raises NotAvailable on timeout, Closed when the join is exhausted
    /// or closed. Releases the GIL; Ctrl-C interrupts it.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Joined> {
        let joined = self.driver.next(py, self.driver.timeout(timeout)?)?;
        Joined::new(py, joined)
    }

    /// An iterator of tuples that stops when no tuple comes within `timeout` seconds (None: never
    /// times out), or when the join is exhausted or closed.
    #[pyo3(signature = (timeout=None))]
    fn stream(slf: &Bound<'_, Self>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<JoinStream> {
        let timeout = slf.get().driver.timeout(timeout)?;
        Ok(JoinStream { join: JoinRef::Exact(slf.clone().unbind()), timeout })
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Joined>> {
        match self.next(py, None) {
            Ok(joined) => Ok(Some(joined)),
            Err(e) => ended(py, e),
        }
    }

    /// Counters: complete, partial, skipped, late, and handler_errors (exceptions raised by the
    /// on_incomplete callback).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.driver.stats(py)
    }

    /// Sets (or with None removes) `callback(ts, present, what)`, called for every partial,
    /// skipped or late timestamp: `present[i]` tells whether input i had an item, `what` is
    /// "partial", "skipped" or "late". Exceptions go to sys.unraisablehook and are counted.
    fn on_incomplete(&self, callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        self.driver.on_incomplete(callback)
    }

    /// Ends the join: its connections detach (the open tuple is released). Idempotent.
    fn close(&self, py: Python<'_>) {
        self.driver.close(py);
    }

    /// The policy: "wait_all", "partial" or "skip".
    #[getter]
    fn policy(&self) -> &'static str {
        self.policy
    }

    /// The input channels' names, in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.driver.names()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("ExactJoin({:?}, policy={:?})", self.driver.names(), self.policy)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.driver.traverse(&visit)
    }
}

/// A tuple of an exact join: the timestamp and, per input, its item or None.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Joined {
    /// The tuple's timestamp.
    #[pyo3(get)]
    ts: Timestamp,
    parts: Vec<Option<Py<Item>>>,
}

impl Joined {
    fn new(py: Python<'_>, joined: stampede::Joined) -> PyResult<Joined> {
        Ok(Joined { ts: joined.ts, parts: items(py, joined.items)? })
    }
}

#[pymethods]
impl Joined {
    /// Per input, in order, its item at `ts` or None (missing, policy "partial").
    #[getter]
    fn items(&self, py: Python<'_>) -> Vec<Option<Py<Item>>> {
        clone_items(py, &self.parts)
    }

    fn __len__(&self) -> usize {
        self.parts.len()
    }

    fn __getitem__(&self, py: Python<'_>, index: isize) -> PyResult<Option<Py<Item>>> {
        let len = self.parts.len() as isize;
        let i = if index < 0 { index + len } else { index };
        if !(0..len).contains(&i) {
            return Err(pyo3::exceptions::PyIndexError::new_err("Joined index out of range"));
        }
        Ok(self.parts[i as usize].as_ref().map(|i| i.clone_ref(py)))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let list = self.items(py).into_py_any(py)?;
        Ok(list.bind(py).try_iter()?.into_any().unbind())
    }

    fn __repr__(&self) -> String {
        let present: Vec<&str> = self.parts.iter().map(|p| if p.is_some() { "Item" } else { "None" }).collect();
        format!("Joined(ts={}, items=[{}])", self.ts, present.join(", "))
    }
}

// ---- approximate join ----------------------------------------------------------------------

/// Approximate join: for each item of the pivot (inputs[0]), in timestamp order, the item of
/// every other input closest in timestamp within `tolerance` (ties: the earlier), or None.
/// Every channel's producer set must be closed.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ApproxJoin {
    driver: Driver<stampede::ApproxJoin>,
    tolerance: Timestamp,
}

#[pymethods]
impl ApproxJoin {
    /// Hands the Rust connections of `inputs` over to the join (as `ExactJoin`). `tolerance` is
    /// in timestamp units, >= 0.
    #[new]
    fn new(py: Python<'_>, inputs: Vec<Bound<'_, ChannelInput>>, tolerance: &Bound<'_, PyAny>) -> PyResult<ApproxJoin> {
        let name = inputs.first().map(|i| i.get().name().to_owned()).unwrap_or_default();
        let tolerance = args::timestamp(tolerance, "tolerance", At { op: "approx_join", name: &name })?;
        if !inputs.is_empty() && (tolerance < 0 || inputs.len() < 2) {
            let reason = "needs a pivot and at least one other channel, and tolerance >= 0".into();
            return Err(invalid("approx_join", inputs[0].get().name(), reason));
        }
        let HandedOver { inputs, channels, handlers } =
            hand_over(py, &inputs, "approx_join", Some("an approximate join"))?;
        let join = wait::released(py, || stampede::ApproxJoin::new(inputs, tolerance))?;
        Ok(ApproxJoin { driver: Driver::new(join, channels, handlers), tolerance })
    }

    /// The next pivot item with its matches (releasing the previous one first), waiting up to
    /// `timeout` seconds. Raises NotAvailable on timeout, Closed when exhausted or closed.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Matched> {
        let matched = self.driver.next(py, self.driver.timeout(timeout)?)?;
        Matched::new(py, matched)
    }

    /// An iterator of matches (as `ExactJoin.stream`).
    #[pyo3(signature = (timeout=None))]
    fn stream(slf: &Bound<'_, Self>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<JoinStream> {
        let timeout = slf.get().driver.timeout(timeout)?;
        Ok(JoinStream { join: JoinRef::Approx(slf.clone().unbind()), timeout })
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Matched>> {
        match self.next(py, None) {
            Ok(matched) => Ok(Some(matched)),
            Err(e) => ended(py, e),
        }
    }

    /// Counters: complete, partial (pivot items with some input unmatched), skipped (always 0),
    /// late (pivot items arriving below one released), handler_errors.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.driver.stats(py)
    }

    /// Sets (or removes) `callback(ts, present, what)` for pivot items released with some input
    /// unmatched ("partial"; `present[0]` is the pivot) and late pivot items ("late").
    fn on_incomplete(&self, callback: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        self.driver.on_incomplete(callback)
    }

    /// Ends the join: its connections detach. Idempotent.
    fn close(&self, py: Python<'_>) {
        self.driver.close(py);
    }

    /// The tolerance, in timestamp units.
    #[getter]
    fn tolerance(&self) -> Timestamp {
        self.tolerance
    }

    /// The input channels' names, pivot first.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.driver.names()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("ApproxJoin({:?}, tolerance={})", self.driver.names(), self.tolerance)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.driver.traverse(&visit)
    }
}

/// A result of an approximate join: the pivot item and, per other input, its best match or None.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Matched {
    pivot: Py<Item>,
    parts: Vec<Option<Py<Item>>>,
}

impl Matched {
    fn new(py: Python<'_>, matched: stampede::Matched) -> PyResult<Matched> {
        Ok(Matched { pivot: Py::new(py, Item::from_channel(matched.pivot))?, parts: items(py, matched.matches)? })
    }
}

#[pymethods]
impl Matched {
    /// The pivot item.
    #[getter]
    fn pivot(&self, py: Python<'_>) -> Py<Item> {
        self.pivot.clone_ref(py)
    }

    /// The pivot's timestamp.
    #[getter]
    fn ts(&self) -> Timestamp {
        self.pivot.get().ts
    }

    /// Per other input (inputs[1:]), the closest item within the tolerance, or None.
    #[getter]
    fn matches(&self, py: Python<'_>) -> Vec<Option<Py<Item>>> {
        clone_items(py, &self.parts)
    }

    fn __repr__(&self) -> String {
        let parts: Vec<String> =
            self.parts.iter().map(|p| p.as_ref().map_or("None".into(), |i| i.get().ts.to_string())).collect();
        format!("Matched(ts={}, matches=[{}])", self.pivot.get().ts, parts.join(", "))
    }
}

// ---- streams -------------------------------------------------------------------------------

enum JoinRef {
    Exact(Py<ExactJoin>),
    Approx(Py<ApproxJoin>),
}

/// The iterator returned by `ExactJoin.stream()` (of `Joined`) and `ApproxJoin.stream()` (of
/// `Matched`).
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct JoinStream {
    join: JoinRef,
    timeout: Option<Duration>,
}

#[pymethods]
impl JoinStream {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let next = match &self.join {
            JoinRef::Exact(join) => {
                join.get().driver.next(py, self.timeout).and_then(|j| Joined::new(py, j)?.into_py_any(py))
            }
            JoinRef::Approx(join) => {
                join.get().driver.next(py, self.timeout).and_then(|m| Matched::new(py, m)?.into_py_any(py))
            }
        };
        match next {
            Ok(value) => Ok(Some(value)),
            Err(e) => ended(py, e),
        }
    }
}
