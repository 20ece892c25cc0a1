//! `ExactJoin` and its tuples, `Joined`: the items of every input sharing one timestamp, in
//! timestamp order, under a policy for timestamps some input misses.

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use stampede::{JoinPolicy, Timestamp};

use crate::connection::ChannelInput;
use crate::item::Item;
use crate::join::driver::{clone_items, hand_over, invalid, items, Driver, HandedOver};
use crate::join::{join_class, JoinRef};
use crate::wait;

/// Exact join over N input connections: tuples of the items sharing one timestamp, in
/// timestamp order (docs/CORRELATION.md, "Exact join"). `policy`: "wait_all" (default), "partial"
/// or "skip"; the last two need every channel's producer set closed (`Channel.close_producers()`).
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ExactJoin {
    pub(super) driver: Driver<stampede::ExactJoin>,
    policy: &'static str,
}

join_class! {
    ExactJoin => Joined, JoinRef::Exact;
    /// The next tuple (consuming the previous one first), waiting up to `timeout` seconds (None:
    /// as long as it takes). Raises NotAvailable on timeout, Closed when the join is exhausted
    /// or closed. Releases the GIL; Ctrl-C interrupts it.
    fn next;
    /// An iterator of tuples that stops when no tuple comes within `timeout` seconds (None: never
    /// times out), or when the join is exhausted or closed.
    fn stream;
    /// Counters: complete, partial, skipped, late, and handler_errors (exceptions raised by the
    /// on_incomplete callback).
    fn stats;
    /// Sets (or with None removes) `callback(ts, present, what)`, called for every partial,
    /// skipped or late timestamp: `present[i]` tells whether input i had an item, `what` is
    /// "partial", "skipped" or "late". Exceptions go to sys.unraisablehook and are counted.
    fn on_incomplete;
    /// Ends the join: its connections detach (the open tuple is released). Idempotent.
    fn close;
    /// The input channels' names, in order.
    fn names;

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

    /// The policy: "wait_all", "partial" or "skip".
    #[getter]
    fn policy(&self) -> &'static str {
        self.policy
    }

    fn __repr__(&self) -> String {
        format!("ExactJoin({:?}, policy={:?})", self.driver.names(), self.policy)
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
    pub(super) fn new(py: Python<'_>, joined: stampede::Joined) -> PyResult<Joined> {
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
