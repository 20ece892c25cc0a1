//! `ApproxJoin` and its results, `Matched`: for each item of the pivot, in timestamp order, the
//! closest item of every other input within a tolerance.

use pyo3::prelude::*;
use stampede::Timestamp;

use crate::args::{self, At};
use crate::connection::ChannelInput;
use crate::item::Item;
use crate::join::driver::{clone_items, hand_over, invalid, items, Driver, HandedOver};
use crate::join::{join_class, JoinRef};
use crate::wait;

/// Approximate join: for each item of the pivot (inputs[0]), in timestamp order, the item of
/// every other input closest in timestamp within `tolerance` (ties: the earlier), or None.
/// Every channel's producer set must be closed.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ApproxJoin {
    pub(super) driver: Driver<stampede::ApproxJoin>,
    tolerance: Timestamp,
}

join_class! {
    ApproxJoin => Matched, JoinRef::Approx;
    /// The next pivot item with its matches (releasing the previous one first), waiting up to
    /// `timeout` seconds. Raises NotAvailable on timeout, Closed when exhausted or closed.
    fn next;
    /// An iterator of matches (as `ExactJoin.stream`).
    fn stream;
    /// Counters: complete, partial (pivot items with some input unmatched), skipped (always 0),
    /// late (pivot items arriving below one released), handler_errors.
    fn stats;
    /// Sets (or removes) `callback(ts, present, what)` for pivot items released with some input
    /// unmatched ("partial"; `present[0]` is the pivot) and late pivot items ("late").
    fn on_incomplete;
    /// Ends the join: its connections detach. Idempotent.
    fn close;
    /// The input channels' names, pivot first.
    fn names;

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

    /// The tolerance, in timestamp units.
    #[getter]
    fn tolerance(&self) -> Timestamp {
        self.tolerance
    }

    fn __repr__(&self) -> String {
        format!("ApproxJoin({:?}, tolerance={})", self.driver.names(), self.tolerance)
    }
}

/// A result of an approximate join: the pivot item and, per other input, its best match or None.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Matched {
    pivot: Py<Item>,
    parts: Vec<Option<Py<Item>>>,
}

impl Matched {
    pub(super) fn new(py: Python<'_>, matched: stampede::Matched) -> PyResult<Matched> {
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
