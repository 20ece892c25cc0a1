//! `Recorder` and `replay`: MCAP recordings of a Python runtime's channels (`stampede-record`).
//!
//! Both release the GIL while they work. `replay` looks at pending signals at least every
//! [`SLICE`] (also while it waits for room in a full channel, or for an item's time), so Ctrl-C
//! stops it with `KeyboardInterrupt`; a `Recorder` works on its own thread until `stop()` (or the
//! end of its `with` block, or its collection) writes what is present and finishes the file.
//! Errors: `OSError` for the file, `InvalidArgument` for a file that is not a readable recording
//! (or a bound of the format), the runtime's own errors otherwise.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use stampede::Error;
use stampede_dashboard::foxglove::Tick;
use stampede_record::ros2::{Ros2Time, TimeSource};
use stampede_record::{Compression, RecordError, RecorderOptions, RecorderStats, ReplayOptions, ReplayStats};

use crate::args::At;
use crate::errors::to_pyerr;
use crate::runtime::Runtime;
use crate::wait::SLICE;

/// A `RecordError` as the Python exception that says the same.
fn to_py(error: RecordError, interrupted: Option<PyErr>) -> PyErr {
    match error {
        RecordError::Stampede(e) => to_pyerr(e),
        RecordError::Io { .. } => PyOSError::new_err(error.to_string()),
        RecordError::Stopped => {
            interrupted.unwrap_or_else(|| pyo3::exceptions::PyKeyboardInterrupt::new_err("stopped"))
        }
        e => to_pyerr(Error::InvalidArgument { op: "recording", name: String::new(), reason: e.to_string() }),
    }
}

/// Longest `flush_interval` a `Recorder` takes, in seconds.
const FLUSH_INTERVAL_SECONDS_MAX: f64 = 3600.0;

/// Records channels of `runtime` into an MCAP file: `Recorder(rt, names, path, *,
/// compression="lz4", flush_interval=1.0, foxglove_schemas=False, ros2=False, tick=None)`; `names` is a
/// channel name or prefix, or a list of them. Every item put from now on (and every item present)
/// is written; `stop()` finishes. `foxglove_schemas=True` also writes what Foxglove draws beside
/// the raw items (images, annotations, log lines), on Foxglove's timeline by `tick` (seconds per
/// timestamp, 1/30 by default, or `"ns"`); `ros2=True` writes a ROS 2 bag instead (images as
/// `sensor_msgs/msg/Image` stamped by `tick`, JSON and text as `std_msgs/msg/String`).
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Recorder {
    running: Mutex<Option<stampede_record::Recorder>>,
    last: Mutex<RecorderStats>,
    path: PathBuf,
}

#[pymethods]
impl Recorder {
    #[new]
    #[pyo3(signature = (runtime, names, path, *, compression="lz4", flush_interval=1.0, foxglove_schemas=false, ros2=false, tick=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runtime: &Runtime,
        names: &Bound<'_, PyAny>,
        path: PathBuf,
        compression: &str,
        flush_interval: f64,
        foxglove_schemas: bool,
        ros2: bool,
        tick: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Recorder> {
        let names: Vec<String> =
            if let Ok(one) = names.cast::<PyString>() { vec![one.to_str()?.to_owned()] } else { names.extract()? };
        let at = |name| At { op: "Recorder", name };
        let compression = Compression::from_name(compression)
            .ok_or_else(|| at("compression").invalid(format!("{compression:?} is not none, lz4 or zstd")))?;
        if !(flush_interval > 0.0 && flush_interval <= FLUSH_INTERVAL_SECONDS_MAX) {
            let reason = format!("{flush_interval} is not in (0, {FLUSH_INTERVAL_SECONDS_MAX}] seconds");
            return Err(at("flush_interval").invalid(reason));
        }
        let tick = tick.map(|t| crate::foxglove::tick(t, at("tick"))).transpose()?.unwrap_or(Tick::DEFAULT);
        let options = RecorderOptions {
            compression,
            flush_interval: Duration::from_secs_f64(flush_interval),
            foxglove: (foxglove_schemas && !ros2).then_some(tick),
            ros2: ros2.then_some(tick),
            ..RecorderOptions::default()
        };
        let rt = runtime.rust().clone();
        let started =
            py.detach(|| stampede_record::Recorder::start(&rt, &names, &path, options)).map_err(|e| to_py(e, None))?;
        let last = started.stats();
        Ok(Recorder { running: Mutex::new(Some(started)), last: Mutex::new(last), path })
    }

    /// What was recorded so far: `items`, `bytes`, `flushes`, `converted` and `not_converted`
    /// (messages for Foxglove written, items that looked convertible and were not),
    /// `skipped_queues` and `channels`
    /// (per name: `items`, `bytes`, `first_ts`, `last_ts`, `ended`).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = match self.running.lock().as_ref() {
            Some(recorder) => recorder.stats(),
            None => self.last.lock().clone(),
        };
        recorder_stats(py, &stats)
    }

    /// Writes what is present, finishes the file and returns the final `stats()`. Idempotent.
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let running = self.running.lock().take();
        if let Some(recorder) = running {
            let stats = py.detach(|| recorder.stop()).map_err(|e| to_py(e, None))?;
            *self.last.lock() = stats;
        }
        recorder_stats(py, &self.last.lock())
    }

    /// The file being written.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("Recorder({:?})", self.path.display().to_string())
    }
}

impl Drop for Recorder {
    /// A recorder dropped without `stop()` stops here, with the GIL released: its thread may
    /// need the GIL to finish (a Python GC handler runs when its consumption reclaims an item).
    /// While the interpreter shuts down that thread may never get the GIL again, so then the stop
    /// is only asked for, not waited on (the file keeps what its closed chunks hold).
    fn drop(&mut self) {
        let Some(recorder) = self.running.get_mut().take() else { return };
        Python::attach(|py| {
            let finalizing = py
                .import("sys")
                .and_then(|sys| sys.call_method0("is_finalizing"))
                .and_then(|finalizing| finalizing.extract::<bool>())
                .unwrap_or(true);
            if finalizing {
                recorder.stop_in_background();
            } else {
                py.detach(|| drop(recorder.stop()));
            }
        });
    }
}

fn recorder_stats<'py>(py: Python<'py>, stats: &RecorderStats) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("items", stats.items)?;
    out.set_item("bytes", stats.bytes)?;
    out.set_item("flushes", stats.flushes)?;
    out.set_item("converted", stats.converted)?;
    out.set_item("not_converted", stats.not_converted)?;
    out.set_item("skipped_queues", stats.skipped_queues.clone())?;
    let channels = PyDict::new(py);
    for (name, channel) in &stats.channels {
        let one = PyDict::new(py);
        one.set_item("items", channel.items)?;
        one.set_item("bytes", channel.bytes)?;
        one.set_item("first_ts", channel.first_ts)?;
        one.set_item("last_ts", channel.last_ts)?;
        one.set_item("ended", channel.ended.clone())?;
        one.set_item("missed", channel.missed)?;
        channels.set_item(name, one)?;
    }
    out.set_item("channels", channels)?;
    Ok(out)
}

/// Puts the items of the recording at `path` back into `runtime`'s channels (created as recorded
/// when missing) and returns what it did: `replay(rt, path, *, rate=1.0, loop=False, remap=None,
/// offset=0, time="header", tick="ns")`. `rate=None` replays as fast as the channels take items;
/// `loop=True` repeats until interrupted, each pass above the last; `remap` is a dict `{from: to}`
/// of names or prefixes. A ROS 2 bag (a file or a rosbag2 directory) replays each topic into a
/// channel, timed by each message's header stamp or log time (`time`), as nanoseconds or frame
/// numbers (`tick`: seconds per timestamp).
#[pyfunction]
#[pyo3(
    signature = (runtime, path, *, rate=Some(1.0), r#loop=false, remap=None, offset=0, time="header", tick=None),
    text_signature = "(runtime, path, *, rate=1.0, loop=False, remap=None, offset=0, time='header', tick=None)"
)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay<'py>(
    py: Python<'py>,
    runtime: &Runtime,
    path: PathBuf,
    rate: Option<f64>,
    r#loop: bool,
    remap: Option<&Bound<'py, PyDict>>,
    offset: i64,
    time: &str,
    tick: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let remap = match remap {
        None => Vec::new(),
        Some(remap) => remap.iter().map(|(from, to)| Ok((from.extract()?, to.extract()?))).collect::<PyResult<_>>()?,
    };
    let at = |name| At { op: "replay", name };
    let source = match time {
        "header" => TimeSource::Header,
        "log" => TimeSource::Log,
        other => return Err(at("time").invalid(format!("{other:?} is not \"header\" or \"log\""))),
    };
    let tick = tick.map(|t| crate::foxglove::tick(t, at("tick"))).transpose()?.unwrap_or(Tick::Nanos);
    let ros2 = Ros2Time { source, tick };
    let options = ReplayOptions { rate, passes: if r#loop { None } else { Some(1) }, remap, offset, ros2 };
    let rt = runtime.rust().clone();
    let mut interrupted = None;
    let mut last_check = Instant::now();
    let result = py.detach(|| {
        stampede_record::replay(&rt, &path, &options, &mut |_| {
            if last_check.elapsed() < SLICE {
                return true;
            }
            last_check = Instant::now();
            interrupted = Python::attach(|py| py.check_signals().err());
            interrupted.is_none()
        })
    });
    let stats = result.map_err(|e| to_py(e, interrupted))?;
    replay_stats(py, &stats)
}

fn replay_stats<'py>(py: Python<'py>, stats: &ReplayStats) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("items", stats.items)?;
    out.set_item("bytes", stats.bytes)?;
    out.set_item("items_per_pass", stats.items_per_pass)?;
    out.set_item("passes", stats.passes)?;
    out.set_item("late", stats.late)?;
    out.set_item("channels", stats.channels.clone())?;
    out.set_item("cut_off", stats.cut_off.clone())?;
    out.set_item("duplicates", stats.duplicates)?;
    out.set_item("skipped", stats.skipped)?;
    out.set_item("skip_reason", stats.skip_reason.clone())?;
    Ok(out)
}
