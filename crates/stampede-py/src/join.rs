//! Temporal correlation (docs/CORRELATION.md): `ExactJoin` and `ApproxJoin` over input connections.
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
//!
//! # Layout
//!
//! Here: the members both join classes share (`join_class!`) and `JoinStream`; beside it, `driver`
//! (the hand-over and the machinery around a Rust join), `exact` (`ExactJoin`, `Joined`) and
//! `approx` (`ApproxJoin`, `Matched`).

mod approx;
mod driver;
mod exact;

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::connection::ended;
pub(crate) use approx::{ApproxJoin, Matched};
pub(crate) use exact::{ExactJoin, Joined};

/// The `#[pymethods]` of a join class, given its name, its output class, its `JoinRef` variant,
/// the docstrings of the members both join classes share (`next`, `stream`, `stats`,
/// `on_incomplete`, `close`, `names`) and its own methods (constructor, setting, `repr`): the
/// shared members — those, iteration, the context manager (leaving it closes the join) and the
/// collector's view of what the join holds — beside its own.
macro_rules! join_class {
    (
        $class:ident => $output:ident, $join_ref:path;
        $(#[$next_doc:meta])* fn next;
        $(#[$stream_doc:meta])* fn stream;
        $(#[$stats_doc:meta])* fn stats;
        $(#[$on_incomplete_doc:meta])* fn on_incomplete;
        $(#[$close_doc:meta])* fn close;
        $(#[$names_doc:meta])* fn names;
        $($own:tt)*
    ) => {
        #[pyo3::pymethods]
        impl $class {
            $($own)*

            $(#[$next_doc])*
            #[pyo3(signature = (timeout=None))]
            fn next(
                &self,
                py: pyo3::Python<'_>,
                timeout: Option<&pyo3::Bound<'_, pyo3::PyAny>>,
            ) -> pyo3::PyResult<$output> {
                let output = self.driver.next(py, self.driver.timeout(timeout)?)?;
                $output::new(py, output)
            }

            $(#[$stream_doc])*
            #[pyo3(signature = (timeout=None))]
            fn stream(
                slf: &pyo3::Bound<'_, Self>,
                timeout: Option<&pyo3::Bound<'_, pyo3::PyAny>>,
            ) -> pyo3::PyResult<$crate::join::JoinStream> {
                let timeout = slf.get().driver.timeout(timeout)?;
                Ok($crate::join::JoinStream { join: $join_ref(slf.clone().unbind()), timeout })
            }

            fn __iter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            fn __next__(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<Option<$output>> {
                match self.next(py, None) {
                    Ok(output) => Ok(Some(output)),
                    Err(e) => $crate::connection::ended(py, e),
                }
            }

            $(#[$stats_doc])*
            fn stats<'py>(&self, py: pyo3::Python<'py>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyDict>> {
                self.driver.stats(py)
            }

            $(#[$on_incomplete_doc])*
            fn on_incomplete(&self, callback: Option<pyo3::Bound<'_, pyo3::PyAny>>) -> pyo3::PyResult<()> {
                self.driver.on_incomplete(callback)
            }

            $(#[$close_doc])*
            fn close(&self, py: pyo3::Python<'_>) {
                self.driver.close(py);
            }

            $(#[$names_doc])*
            #[getter]
            fn names(&self) -> Vec<String> {
                self.driver.names()
            }

            fn __enter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, py: pyo3::Python<'_>, _args: &pyo3::Bound<'_, pyo3::types::PyTuple>) -> bool {
                self.close(py);
                false
            }

            fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
                self.driver.traverse(&visit)
            }
        }
    };
}
use join_class;

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
