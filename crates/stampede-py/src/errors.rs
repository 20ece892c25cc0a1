//! The exception hierarchy and the one conversion from [`stampede::Error`] to a Python exception
//! (STYLE habit 6).
//!
//! Every variant of the Rust error enum maps onto the exception of the same name, derived from
//! `stampede.StampedeError`, with the message text of the Rust `Display` unchanged. The fields of
//! the variant are also set as attributes (`name`, `ts`, `reason`; `selector`, `previous`, `next`,
//! `settled` for `NotAvailable`, whose `ts` is the exact timestamp asked for, if any; `limit` for
//! `BelowVisibility`, `right` for `PermissionDenied`), `None` where the variant has no such field.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use stampede::{Error, Selector, Timestamp};

create_exception!(stampede, StampedeError, PyException, "Base class of every Stampede error.");
create_exception!(stampede, BelowVisibility, StampedeError, "A timestamp below the task's visibility (or ts_min).");
create_exception!(stampede, DuplicateTimestamp, StampedeError, "The channel holds or has reclaimed that timestamp.");
create_exception!(stampede, InvalidTimestamp, StampedeError, "A negative timestamp, or INFINITY as an item timestamp.");
create_exception!(stampede, Full, StampedeError, "A bounded channel or queue stayed full until the timeout.");
create_exception!(stampede, NotAvailable, StampedeError, "Nothing suitable before the timeout (see previous/next).");
create_exception!(stampede, AlreadyConsumed, StampedeError, "Exact get of an item consumed on this connection.");
create_exception!(stampede, Reclaimed, StampedeError, "Exact get below ts_min, or of an item reclaimed by refcount.");
create_exception!(stampede, Closed, StampedeError, "The channel, queue, connection, task or runtime is closed.");
create_exception!(stampede, NotFound, StampedeError, "No channel or queue has this name.");
create_exception!(stampede, AlreadyExists, StampedeError, "A channel or queue of this name exists already.");
create_exception!(stampede, InvalidArgument, StampedeError, "An argument outside its documented range.");
create_exception!(
    stampede,
    Unreachable,
    StampedeError,
    "A remote node cannot be reached, or stopped answering (fabric)."
);

create_exception!(
    stampede,
    PermissionDenied,
    StampedeError,
    "The node's access policy does not give this user the right on this name."
);

create_exception!(
    stampede,
    Storage,
    StampedeError,
    "A channel's disk tier could not write, sync or allocate (full disk, missing directory)."
);

/// Converts a Stampede error into the Python exception of the same name.
pub(crate) fn to_pyerr(error: Error) -> PyErr {
    let message = error.to_string();
    let err = match &error {
        Error::BelowVisibility { .. } => BelowVisibility::new_err(message),
        Error::DuplicateTimestamp { .. } => DuplicateTimestamp::new_err(message),
        Error::InvalidTimestamp { .. } => InvalidTimestamp::new_err(message),
        Error::Full { .. } => Full::new_err(message),
        Error::NotAvailable { .. } => NotAvailable::new_err(message),
        Error::AlreadyConsumed { .. } => AlreadyConsumed::new_err(message),
        Error::Reclaimed { .. } => Reclaimed::new_err(message),
        Error::Closed { .. } => Closed::new_err(message),
        Error::NotFound { .. } => NotFound::new_err(message),
        Error::AlreadyExists { .. } => AlreadyExists::new_err(message),
        Error::InvalidArgument { .. } => InvalidArgument::new_err(message),
        Error::Unreachable { .. } => Unreachable::new_err(message),
        Error::PermissionDenied { .. } => PermissionDenied::new_err(message),
        Error::Storage { .. } => Storage::new_err(message),
    };
    Python::attach(|py| {
        // Setting attributes on a fresh exception instance cannot fail short of memory
        // exhaustion; the message alone is still correct if it does.
        let _ = set_attributes(&err.value(py).clone().into_any(), &error);
    });
    err
}

fn set_attributes(value: &Bound<'_, PyAny>, error: &Error) -> PyResult<()> {
    let none: Option<Timestamp> = None;
    let (name, ts, reason): (&str, Option<Timestamp>, Option<String>) = match error {
        Error::BelowVisibility { name, ts, limit, .. } => {
            value.setattr("limit", *limit)?;
            (name, Some(*ts), None)
        }
        Error::DuplicateTimestamp { name, ts } | Error::AlreadyConsumed { name, ts } => (name, Some(*ts), None),
        Error::InvalidTimestamp { name, ts, .. } => (name, Some(*ts), None),
        Error::Full { name, ts, reason, .. } | Error::Reclaimed { name, ts, reason } => {
            (name, Some(*ts), Some(reason.clone()))
        }
        Error::NotAvailable { name, selector, previous, next, settled, .. } => {
            value.setattr("selector", selector.to_string())?;
            value.setattr("previous", *previous)?;
            value.setattr("next", *next)?;
            value.setattr("settled", *settled)?;
            let ts = match selector {
                Selector::At(ts) => Some(*ts),
                _ => None,
            };
            (name, ts, None)
        }
        Error::Closed { name, reason } => (name, none, Some((*reason).to_owned())),
        Error::NotFound { name } | Error::AlreadyExists { name } => (name, none, None),
        Error::InvalidArgument { name, reason, .. }
        | Error::Unreachable { name, reason, .. }
        | Error::Storage { name, reason, .. } => (name, none, Some(reason.clone())),
        Error::PermissionDenied { name, right, reason, .. } => {
            value.setattr("right", *right)?;
            (name, none, Some(reason.clone()))
        }
    };
    value.setattr("name", name)?;
    value.setattr("ts", ts)?;
    value.setattr("reason", reason)?;
    Ok(())
}

/// `.py()` turns a `stampede::Result` into a `PyResult` through [`to_pyerr`].
pub(crate) trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for stampede::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_pyerr)
    }
}

/// Registers the exception classes in the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StampedeError", py.get_type::<StampedeError>())?;
    m.add("BelowVisibility", py.get_type::<BelowVisibility>())?;
    m.add("DuplicateTimestamp", py.get_type::<DuplicateTimestamp>())?;
    m.add("InvalidTimestamp", py.get_type::<InvalidTimestamp>())?;
    m.add("Full", py.get_type::<Full>())?;
    m.add("NotAvailable", py.get_type::<NotAvailable>())?;
    m.add("AlreadyConsumed", py.get_type::<AlreadyConsumed>())?;
    m.add("Reclaimed", py.get_type::<Reclaimed>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("AlreadyExists", py.get_type::<AlreadyExists>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("Unreachable", py.get_type::<Unreachable>())?;
    m.add("PermissionDenied", py.get_type::<PermissionDenied>())?;
    m.add("Storage", py.get_type::<Storage>())?;
    Ok(())
}
