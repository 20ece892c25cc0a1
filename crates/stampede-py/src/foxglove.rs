//! `Foxglove`: the live bridge to Foxglove (`stampede_dashboard::foxglove`) of a Python runtime,
//! embedded or connected. Serving happens on the bridge's own threads; closing it (or leaving its
//! `with` block) stops them and closes its readers' tasks.

use std::collections::HashMap;
use std::net::IpAddr;

use pyo3::prelude::*;
use stampede::Error;
use stampede_dashboard::foxglove::{Foxglove as Served, FoxgloveOptions, Tick, FOXGLOVE_APP_ORIGIN, PORT_DEFAULT};

use crate::args::{self, At};
use crate::errors::to_pyerr;
use crate::runtime::Runtime;
use crate::wait;

/// The channels of `runtime` live in Foxglove: `Foxglove(rt, port=8765, host="127.0.0.1",
/// names=None, overlays=None, tick=1/30, ticks=None, allowed_origins=None,
/// allow_anonymous=False)`; in Foxglove, "Open connection" to `bridge.url`. `tick`: seconds per
/// timestamp, or `"ns"` for timestamps in nanoseconds; `ticks`: `{name: tick}` per channel.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Foxglove {
    served: Served,
}

/// A tick given as seconds or `"ns"` (also `Recorder`'s).
pub(crate) fn tick(value: &Bound<'_, PyAny>, at: At<'_>) -> PyResult<Tick> {
    let text = match value.extract::<f64>() {
        Ok(seconds) => seconds.to_string(),
        Err(_) => value.extract::<String>()?,
    };
    Tick::parse(&text).map_err(|reason| to_pyerr(Error::InvalidArgument { op: at.op, name: at.name.into(), reason }))
}

#[pymethods]
impl Foxglove {
    #[new]
    #[pyo3(signature = (runtime, *, port=None, host="127.0.0.1", names=None, overlays=None, tick=None, ticks=None, allowed_origins=None, allow_anonymous=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runtime: &Runtime,
        port: Option<&Bound<'_, PyAny>>,
        host: &str,
        names: Option<Vec<String>>,
        overlays: Option<Vec<String>>,
        tick: Option<&Bound<'_, PyAny>>,
        ticks: Option<HashMap<String, Bound<'_, PyAny>>>,
        allowed_origins: Option<Vec<String>>,
        allow_anonymous: bool,
    ) -> PyResult<Foxglove> {
        let at = At { op: "Foxglove", name: "foxglove" };
        let host: IpAddr = host.parse().map_err(|e| {
            to_pyerr(Error::InvalidArgument { op: at.op, name: at.name.into(), reason: format!("host {host:?}: {e}") })
        })?;
        let ticks = ticks.unwrap_or_default().into_iter().map(|(name, t)| Ok((name, self::tick(&t, at)?)));
        let options = FoxgloveOptions {
            host,
            port: args::count::<u16>(port, "port", at)?.unwrap_or(PORT_DEFAULT),
            names: names.unwrap_or_default(),
            overlays: overlays.unwrap_or_default(),
            tick: tick.map(|t| self::tick(t, at)).transpose()?.unwrap_or(Tick::DEFAULT),
            ticks: ticks.collect::<PyResult<_>>()?,
            allowed_origins: [FOXGLOVE_APP_ORIGIN.to_owned()]
                .into_iter()
                .chain(allowed_origins.unwrap_or_default())
                .collect(),
            allow_anonymous,
        };
        let runtime = runtime.rust().clone();
        let served = wait::released(py, || Served::serve(runtime, options))?;
        Ok(Foxglove { served })
    }

    /// `ws://<host>:<port>`: what Foxglove's "Open connection" asks for.
    #[getter]
    fn url(&self) -> String {
        self.served.url()
    }

    /// The port it listens on (the one chosen when `port=0`).
    #[getter]
    fn port(&self) -> u16 {
        self.served.port()
    }

    /// Stops serving. Idempotent.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.served.close());
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
        format!("Foxglove({:?})", self.served.url())
    }
}
