//! Items as Python sees them: timestamp, codec, and zero-copy read-only views of the stored
//! bytes (copy-out: docs/SEMANTICS.md, "Channels"; codecs: "Payloads and codecs").
//!
//! The payload stays in the Rust [`Bytes`] the channel holds. `item.data` is a `memoryview` over
//! a [`ItemBuffer`] that exports that buffer read-only through the buffer protocol; `item.array()`
//! is an ndarray whose base is such an `ItemBuffer`. Neither copies, every get of the same item
//! sees the same memory, and nobody can write to it.

use std::os::raw::{c_int, c_void};

use bytes::Bytes;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;
use stampede::{Codec, Payload, Timestamp};

use crate::payload::{ndarray_type, npy_view};

/// An item gotten from a channel or queue. Immutable.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Item {
    /// The item's timestamp.
    #[pyo3(get)]
    pub(crate) ts: Timestamp,
    /// For queue items, the position in the queue's insertion order (tells items of the same
    /// timestamp apart for `consume(item)`); `None` for channel items.
    #[pyo3(get)]
    pub(crate) seq: Option<u64>,
    pub(crate) payload: Payload,
}

impl Item {
    pub(crate) fn from_channel(item: stampede::Item) -> Item {
        Item { ts: item.ts, seq: None, payload: item.payload }
    }

    pub(crate) fn from_queue(item: stampede::QueueItem) -> Item {
        Item { ts: item.item.ts, seq: Some(item.seq), payload: item.item.payload }
    }

    fn buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, ItemBuffer>> {
        Bound::new(py, ItemBuffer { bytes: self.payload.data.clone() })
    }
}

#[pymethods]
impl Item {
    /// The codec name: "raw", "utf8", "json", "npy" or an application's name.
    #[getter]
    fn codec(&self) -> &str {
        self.payload.codec.name()
    }

    /// The stored bytes as a read-only memoryview (zero-copy).
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        PyMemoryView::from(&self.buffer(py)?.into_any())
    }

    /// Payload size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.payload.data.len()
    }

    /// The payload decoded as text (copies; for "utf8" and "json" items).
    fn text(&self) -> PyResult<String> {
        std::str::from_utf8(&self.payload.data)
            .map(str::to_owned)
            .map_err(|e| PyValueError::new_err(format!("item ts={} is not UTF-8: {e}", self.ts)))
    }

    /// A read-only NumPy array viewing the stored data (zero-copy), for "npy" items. A payload
    /// that is not a valid `.npy` file, or whose dtype holds Python objects, raises `ValueError`
    /// naming the item's timestamp and the rule broken.
    fn array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.payload.codec != Codec::Npy {
            return Err(PyValueError::new_err(format!(
                "item ts={} has codec \"{}\", not \"npy\"; use item.data",
                self.ts,
                self.payload.codec.name()
            )));
        }
        let view = npy_view(py, &self.payload.data)
            .map_err(|e| PyValueError::new_err(format!("item ts={}: not a valid .npy payload: {e}", self.ts)))?;
        // numpy.ndarray(shape, dtype, buffer, offset, strides, order): a view of the buffer,
        // read-only because `ItemBuffer` refuses writable exports; NumPy checks that the buffer
        // holds offset + shape × itemsize bytes (so does `npy_view`, exactly).
        let args =
            (view.shape.bind(py), view.dtype.bind(py), self.buffer(py)?, view.data_offset, py.None(), view.order);
        ndarray_type(py)?.call1(args)
    }

    /// The payload as `bytes` (copies).
    fn __bytes__(&self) -> Vec<u8> {
        self.payload.data.to_vec()
    }

    fn __len__(&self) -> usize {
        self.payload.data.len()
    }

    fn __repr__(&self) -> String {
        match self.seq {
            Some(seq) => format!(
                "Item(ts={}, seq={seq}, codec={:?}, nbytes={})",
                self.ts,
                self.payload.codec.name(),
                self.payload.data.len()
            ),
            None => format!(
                "Item(ts={}, codec={:?}, nbytes={})",
                self.ts,
                self.payload.codec.name(),
                self.payload.data.len()
            ),
        }
    }
}

/// Exports an item's stored bytes through the buffer protocol, read-only. Holding one keeps the
/// bytes alive (they are reference-counted, shared with the channel and every other getter).
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct ItemBuffer {
    bytes: Bytes,
}

#[pymethods]
impl ItemBuffer {
    /// The buffer protocol's export, read-only.
    ///
    /// # Safety
    ///
    /// Called by the interpreter (through PyO3's slot) with `view` either null (refused) or
    /// pointing to a `Py_buffer` it owns and will release with `bf_releasebuffer`.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("null view"));
        }
        if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("Stampede items are read-only; copy the data to modify it"));
        }
        let bytes = &slf.get().bytes;
        let (ptr, len) = (bytes.as_ptr() as *mut c_void, bytes.len() as ffi::Py_ssize_t);
        // SAFETY: `view` is non-null and provided by the interpreter; `PyBuffer_FillInfo` takes a
        // new reference to `slf`, which keeps `bytes` (and so `ptr`) alive until the view is
        // released. readonly = 1.
        if unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr, len, 1, flags) } < 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.bytes.len()
    }
}
