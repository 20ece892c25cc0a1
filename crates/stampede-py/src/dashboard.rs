//! `Dashboard`: the live web dashboard (`stampede-dashboard`) of a Python runtime, embedded or
//! connected. Serving happens on the dashboard's own threads; closing it (or leaving its `with`
//! block) stops them and detaches its task.

use std::net::IpAddr;
use std::time::Duration;

use pyo3::prelude::*;
use stampede::Error;
use stampede_dashboard::{Dashboard as Served, DashboardOptions, REFRESH_MAX};

use crate::args::{self, At};
use crate::errors::to_pyerr;
use crate::runtime::Runtime;
use crate::wait;

/// A dashboard of `runtime` served over HTTP: `Dashboard(rt, port=0, host="127.0.0.1",
/// image=None, overlays=None, refresh=0.2, login=None)`; open `dashboard.url` in a browser.
/// `login=(user, password)`: the page asks for these credentials (HTTP Basic). Required for a
/// runtime connected as a user (it shows what that user may read), with that user's name.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Dashboard {
    served: Served,
}

#[pymethods]
impl Dashboard {
    #[new]
    #[pyo3(signature = (runtime, *, port=None, host="127.0.0.1", image=None, overlays=None, refresh=0.2, login=None, allowed_origins=None, allow_anonymous=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runtime: &Runtime,
        port: Option<&Bound<'_, PyAny>>,
        host: &str,
        image: Option<String>,
        overlays: Option<Vec<String>>,
        refresh: f64,
        login: Option<(String, String)>,
        allowed_origins: Option<Vec<String>>,
        allow_anonymous: bool,
    ) -> PyResult<Dashboard> {
        let at = At { op: "Dashboard", name: "dashboard" };
        let invalid = |reason: String| to_pyerr(Error::InvalidArgument { op: at.op, name: at.name.to_owned(), reason });
        let port = args::count::<u16>(port, "port", at)?.unwrap_or(0);
        let host: IpAddr = host.parse().map_err(|e| invalid(format!("host {host:?}: {e}")))?;
        // Checked before it becomes a Duration (which a huge or non-finite number would not fit).
        if !(refresh > 0.0 && refresh <= REFRESH_MAX.as_secs_f64()) {
            return Err(invalid(format!("refresh={refresh} must be a number of seconds in (0, {REFRESH_MAX:?}]")));
        }
        let overlays = overlays.unwrap_or_default();
        let allowed_origins = allowed_origins.unwrap_or_default();
        let options = DashboardOptions {
            host,
            port,
            image,
            overlays,
            refresh: Duration::from_secs_f64(refresh),
            allowed_origins,
            allow_anonymous,
        };
        let runtime = runtime.rust().clone();
        match (runtime.user(), &login) {
            (Some(user), None) => {
                return Err(invalid(format!(
                    "this runtime is connected as {user:?}: the dashboard shows what that user may read, so give \
                     it login=({user:?}, password) — whoever opens the page logs in with them (docs/SECURITY.md)"
                )))
            }
            (Some(user), Some((name, _))) if name != user => {
                return Err(invalid(format!("login is for {name:?}, but the runtime is connected as {user:?}")))
            }
            _ => {}
        }
        let served = match login {
            Some((user, password)) => {
                let login = stampede_dashboard::login_as(&user, &password);
                wait::released(py, || Served::serve_with_login(runtime, options, login))?
            }
            None => wait::released(py, || Served::serve(runtime, options))?,
        };
        Ok(Dashboard { served })
    }

    /// `http://<host>:<port>/`.
    #[getter]
    fn url(&self) -> String {
        self.served.url()
    }

    /// The port it listens on (the one chosen when `port=0`).
    #[getter]
    fn port(&self) -> u16 {
        self.served.address().port()
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
        format!("Dashboard({:?})", self.served.url())
    }
}
