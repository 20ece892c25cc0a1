//! `stampede._stampede`: the Python binding of Stampede (python/README.md; docs/SEMANTICS.md,
//! "The API in every language"): the embedded runtime, serving it to remote clients, and `connect`
//! to a node.
//!
//! # Layout
//!
//! - [`errors`] — the `StampedeError` hierarchy and the one conversion from `stampede::Error`.
//! - [`wait`] — the one GIL-releasing, Ctrl-C-aware helper every blocking call goes through.
//! - [`args`] — Python arguments to Rust values: wrong types raise `TypeError`, out-of-range
//!   ints the typed error of what they are.
//! - [`aio`] — the cancellation-safe asyncio bridge behind `get_async` / `put_async`.
//! - [`runtime`] — `Runtime` (embedded, serving, or `connect`ed) and `connect`.
//! - [`container`] — `Channel`, `Queue`: handles of a runtime's containers.
//! - [`task`] — `Task`.
//! - [`connection`] — channel and queue connections, selectors, streams, asyncio forms.
//! - [`payload`] — Python values to payloads (`raw`, `utf8`, `npy`), `.npy` headers.
//! - [`item`] — `Item` and the zero-copy, read-only buffer behind `item.data` / `item.array()`.
//! - [`join`] — `ExactJoin`, `ApproxJoin` (docs/CORRELATION.md): temporal correlation over input
//!   connections.
//! - [`reclaim`] — GC handlers written in Python, and the count of their exceptions.
//! - [`pacer`] — `Pacer`.
//! - [`watch`] — `Watch`: the name service's events as an iterator of `WatchEvent`s.
//! - [`dashboard`] — `Dashboard`: the live web dashboard of a runtime (`stampede-dashboard`).
//! - [`foxglove`] — `Foxglove`: the live bridge of a runtime's channels to Foxglove.
//! - [`record`] — `Recorder` and `replay`: MCAP recordings (`stampede-record`).
//! - [`trace`] — `span` and `trace_flush`: the event log (`stampede::trace`).
//! - [`cli`] — `_cli`: the `stampede` command line, for the package's console script.
//!
//! The binding uses only the public API of the `stampede` crate (`stampede-node` to serve, `stampede-dashboard` for dashboards). The Python package
//! (`python/stampede`) re-exports everything from here and adds type stubs.

use pyo3::prelude::*;

mod aio;
mod args;
mod cli;
mod connection;
mod container;
mod dashboard;
mod errors;
mod foxglove;
mod item;
mod join;
mod pacer;
mod payload;
mod reclaim;
mod record;
mod runtime;
mod task;
mod trace;
mod wait;
mod watch;

#[pymodule]
fn _stampede(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<runtime::Runtime>()?;
    m.add_function(wrap_pyfunction!(runtime::connect, m)?)?;
    m.add_class::<container::Channel>()?;
    m.add_class::<container::Queue>()?;
    m.add_class::<task::Task>()?;
    m.add_class::<connection::ChannelInput>()?;
    m.add_class::<connection::ChannelOutput>()?;
    m.add_class::<connection::QueueInput>()?;
    m.add_class::<connection::QueueOutput>()?;
    m.add_class::<connection::Stream>()?;
    m.add_class::<connection::PySelector>()?;
    m.add_class::<item::Item>()?;
    m.add_class::<item::ItemBuffer>()?;
    m.add_class::<pacer::Pacer>()?;
    m.add_class::<pacer::Epoch>()?;
    m.add_class::<join::ExactJoin>()?;
    m.add_class::<join::ApproxJoin>()?;
    m.add_class::<join::Joined>()?;
    m.add_class::<join::Matched>()?;
    m.add_class::<join::JoinStream>()?;
    m.add_class::<watch::Watch>()?;
    m.add_class::<watch::WatchEvent>()?;
    m.add_class::<dashboard::Dashboard>()?;
    m.add_class::<foxglove::Foxglove>()?;
    m.add_class::<record::Recorder>()?;
    m.add_function(wrap_pyfunction!(record::replay, m)?)?;
    m.add_class::<trace::Span>()?;
    m.add_function(wrap_pyfunction!(trace::span, m)?)?;
    m.add_function(wrap_pyfunction!(trace::trace_flush, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_cli, m)?)?;
    errors::register(m)?;

    let py = m.py();
    m.add("OLDEST", connection::PySelector::Oldest.into_pyobject(py)?)?;
    m.add("NEWEST", connection::PySelector::Newest.into_pyobject(py)?)?;
    m.add("OLDEST_UNSEEN", connection::PySelector::OldestUnseen.into_pyobject(py)?)?;
    m.add("NEWEST_UNSEEN", connection::PySelector::NewestUnseen.into_pyobject(py)?)?;
    m.add("INFINITY", stampede::INFINITY)?;
    // Which cargo profile built this module: the test suite runs a dev build, figures need release.
    m.add("BUILD_PROFILE", if cfg!(debug_assertions) { "dev" } else { "release" })?;
    m.add("TS_MAX", stampede::TS_MAX)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
