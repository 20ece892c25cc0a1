//! Python values in, Stampede payloads out (docs/SEMANTICS.md, "Payloads and codecs"): `bytes`-like
//! objects (codec `raw`), `str` (codec `utf8`), NumPy arrays (codec `npy`) and `Item`s (forwarded
//! without copying).
//!
//! Copy-in: a put copies the caller's data exactly once, into the buffer the channel will hold.
//! For an array that buffer is a complete `.npy` file (format 1.0, or 2.0 for a header over
//! 64 KiB): the header is written first, then the array data is copied behind it in the array's
//! own C or Fortran order. Only an array that is neither C- nor Fortran-contiguous is first made
//! contiguous by NumPy (a second copy). Object arrays are refused: `.npy` would need pickles.
//! Bytes-like or `str` data put with `codec="npy"` is checked by [`stampede::npy::check`]
//! (`InvalidArgument`: bad header, object dtype, wrong data length) before it is copied.
//!
//! Copy-out of `.npy` ([`npy_view`]): the header is read by NumPy's own `numpy.lib.format`
//! (`read_magic`, `read_array_header_1_0` / `_2_0`), then checked here: no object dtype, sizes
//! computed without overflow, the payload exactly as long as the header says. Parsed headers are
//! cached by their bytes (at most [`NPY_HEADER_CACHE_MAX`]), so viewing a stream of same-shaped
//! frames costs a hash lookup plus one `numpy.ndarray(...)` call.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use parking_lot::Mutex;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyBytes, PyString, PyTuple};
use stampede::npy::{HEADER_BYTES_MAX, HEADER_CACHE_KEY_BYTES_MAX, MAGIC as NPY_MAGIC};
use stampede::{Codec, Payload, Timestamp};

use crate::errors::IntoPyResult;
use crate::item::Item;

/// Most parsed `.npy` headers [`npy_view`] keeps; when full the cache is emptied and refilled.
/// Headers over `HEADER_CACHE_KEY_BYTES_MAX` bytes are parsed every time.
pub(crate) const NPY_HEADER_CACHE_MAX: usize = 64;
/// `.npy` headers (magic + version + length + dict + newline) are padded to this multiple, so the
/// data of every item starts aligned for any dtype.
const NPY_ALIGN: usize = 64;
/// Copies at least this large run with the GIL released.
const COPY_RELEASED_BYTES_MIN: usize = 64 * 1024;

/// How a put copies bytes in: the output connection's `copy_in` (a recycled buffer).
/// It may refuse (e.g. an oversized payload) before copying.
pub(crate) type CopyIn<'a> = &'a (dyn Fn(&[&[u8]]) -> PyResult<Bytes> + Sync);

/// Converts the value given to `put(ts, ...)` on `name` into a payload, copying its bytes once
/// with `copy_in`. `codec` overrides the codec name of `bytes`-like and `str` data (e.g.
/// `"json"`); such data with codec `"npy"` must be a valid `.npy` file (see the module docs).
pub(crate) fn to_payload(
    data: &Bound<'_, PyAny>,
    codec: Option<&str>,
    name: &str,
    ts: Timestamp,
    copy_in: CopyIn<'_>,
) -> PyResult<Payload> {
    let py = data.py();
    if let Ok(item) = data.cast::<Item>() {
        // Items are immutable: forwarding one shares its buffer.
        return Ok(item.get().payload.clone());
    }
    if let Ok(text) = data.cast::<PyString>() {
        let codec = codec.map_or(Codec::Utf8, Codec::from_name);
        let text = text.to_str()?.as_bytes();
        check_npy(&codec, name, ts, text)?;
        return Ok(Payload { data: copy_in(&[text])?, codec });
    }
    if let Ok(array) = data.cast::<PyUntypedArray>() {
        if codec.is_some_and(|c| c != "npy") {
            return Err(PyValueError::new_err("a NumPy array is always stored with codec \"npy\""));
        }
        return npy_payload(array, copy_in);
    }
    let buffer = PyUntypedBuffer::get(data).map_err(|_| {
        PyTypeError::new_err(format!(
            "put data must be bytes-like (bytes, bytearray, memoryview, ...), str, a NumPy array or an Item, not {}",
            data.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    if !buffer.is_c_contiguous() {
        let copy = data.call_method0("tobytes").or_else(|_| py.import("builtins")?.getattr("bytes")?.call1((data,)))?;
        return to_payload(&copy, codec, name, ts, copy_in);
    }
    let len = buffer.len_bytes();
    let ptr = buffer.buf_ptr() as usize;
    // SAFETY: `buffer` holds a C-contiguous export of `data` (checked above), so `len` bytes from
    // `ptr` are readable; the export pins the exporter's memory (a bytearray cannot be resized
    // while exported) until `buffer` is dropped below, after the last use of the slice. The
    // memory is only read. Another thread may write the bytes meanwhile (a Python data race the
    // caller owns); we then copy some mix of old and new bytes, still from valid memory.
    let bytes_of = move || unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    let codec = codec.map_or(Codec::Raw, Codec::from_name);
    check_npy(&codec, name, ts, bytes_of())?;
    let copy = move || copy_in(&[bytes_of()]);
    let bytes = if len >= COPY_RELEASED_BYTES_MIN { py.detach(copy) } else { copy() };
    drop(buffer);
    Ok(Payload { data: bytes?, codec })
}

/// Encodes an array as a `.npy` payload with one copy of its data.
fn npy_payload(array: &Bound<'_, PyUntypedArray>, copy_in: CopyIn<'_>) -> PyResult<Payload> {
    let py = array.py();
    let dtype = array.dtype();
    if dtype.has_object() {
        return Err(PyTypeError::new_err("object arrays cannot be put (the npy codec stores plain data, not pickles)"));
    }
    let fortran = array.ndim() > 1 && array.is_fortran_contiguous() && !array.is_c_contiguous();
    if !array.is_c_contiguous() && !fortran {
        let contiguous = numpy_module(py)?.getattr("ascontiguousarray")?.call1((array,))?;
        return npy_payload(contiguous.cast::<PyUntypedArray>()?, copy_in);
    }
    let descr = if dtype.has_fields() || dtype.has_subarray() {
        let descr = numpy_module(py)?.getattr("lib")?.getattr("format")?.getattr("dtype_to_descr")?.call1((&dtype,))?;
        descr.repr()?.to_string()
    } else {
        format!("'{}'", dtype.getattr("str")?.extract::<String>()?)
    };
    let shape = array.shape();
    let nbytes = shape.iter().product::<usize>() * dtype.itemsize();
    let header = npy_header(&descr, fortran, shape);
    if header.len() > HEADER_BYTES_MAX {
        return Err(PyValueError::new_err(format!(
            "the .npy header of this array's dtype is {} bytes, over the limit of {HEADER_BYTES_MAX}",
            header.len()
        )));
    }
    // SAFETY: the array is C- or Fortran-contiguous (made so above), so its data is exactly
    // `nbytes` = elements × itemsize bytes from its data pointer (NumPy guarantees the product
    // fits in an intp). We hold a reference to the array and the GIL for the whole copy, so the
    // memory stays alive and NumPy code cannot resize it (the GIL is not released here).
    let data = unsafe { std::slice::from_raw_parts((*array.as_array_ptr()).fields.data as *const u8, nbytes) };
    Ok(Payload { data: copy_in(&[&header, data])?, codec: Codec::Npy })
}

/// Refuses `npy`-coded bytes that are not a valid, object-free `.npy` file.
fn check_npy(codec: &Codec, name: &str, ts: Timestamp, bytes: &[u8]) -> PyResult<()> {
    if *codec == Codec::Npy {
        stampede::npy::check(name, ts, bytes).py()?;
    }
    Ok(())
}

/// A `.npy` header for `descr` (a Python literal), order and shape: version 1.0 when the dict is
/// ASCII, else 3.0 (UTF-8, as NumPy writes non-Latin-1 field names); padded so the data starts
/// at a multiple of [`NPY_ALIGN`]. The caller bounds the length by `HEADER_BYTES_MAX` (64 KiB),
/// which a version 1.0 length (u16) always covers.
pub(crate) fn npy_header(descr: &str, fortran: bool, shape: &[usize]) -> Vec<u8> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let dict = format!("{{'descr': {descr}, 'fortran_order': {order}, 'shape': {shape_text}, }}");
    let (version, prefix) = if dict.is_ascii() { (1u8, 10) } else { (3u8, 12) };
    let header_bytes = (prefix + dict.len() + 1).div_ceil(NPY_ALIGN) * NPY_ALIGN;
    let dict_bytes = header_bytes - prefix;
    let mut buf = Vec::with_capacity(header_bytes);
    buf.extend_from_slice(NPY_MAGIC);
    buf.extend_from_slice(&[version, 0]);
    match version {
        1 => buf.extend_from_slice(&u16::try_from(dict_bytes).unwrap_or(u16::MAX).to_le_bytes()),
        _ => buf.extend_from_slice(&u32::try_from(dict_bytes).unwrap_or(u32::MAX).to_le_bytes()),
    }
    buf.extend_from_slice(dict.as_bytes());
    buf.resize(header_bytes - 1, b' ');
    buf.push(b'\n');
    buf
}

/// How to view a `.npy` payload's data, as NumPy's header reader described it and checked here.
pub(crate) struct NpyView {
    /// The dtype (`numpy.dtype`).
    pub(crate) dtype: Py<PyAny>,
    /// The shape (`tuple` of ints).
    pub(crate) shape: Py<PyTuple>,
    /// `"F"` for Fortran order, else `"C"`.
    pub(crate) order: &'static str,
    /// Where the data starts: the header's length.
    pub(crate) data_offset: usize,
    /// elements × itemsize.
    pub(crate) data_bytes: usize,
}

/// Parsed headers by their bytes; a hit is exactly as valid as a fresh parse (the key is the
/// whole header). Entries hold Python objects; they are only touched with the GIL held.
static NPY_VIEWS: Mutex<Option<NpyViews>> = Mutex::new(None);

/// Parsed `.npy` headers keyed by the header's bytes.
type NpyViews = HashMap<Box<[u8]>, Arc<NpyView>>;

/// Reads and checks the header of a `.npy` payload for a zero-copy view. The error is the
/// rule broken, for the caller to prefix with the item's timestamp.
pub(crate) fn npy_view(py: Python<'_>, data: &[u8]) -> Result<Arc<NpyView>, String> {
    let data_offset = stampede::npy::data_offset(data).map_err(|e| e.to_string())?;
    let key = &data[..data_offset];
    let cached = NPY_VIEWS.lock().as_ref().and_then(|views| views.get(key).cloned());
    let view = match cached {
        Some(view) => view,
        None => {
            let view = Arc::new(parse_npy_header(py, key).map_err(|e| clip(&e))?);
            cache_view(key, &view);
            view
        }
    };
    // `parse_npy_header` computed data_offset + data_bytes without overflow.
    if data.len() != view.data_offset + view.data_bytes {
        return Err(format!(
            "the header says {} data bytes but {} follow it",
            view.data_bytes,
            data.len() - view.data_offset
        ));
    }
    Ok(view)
}

/// Keeps a parsed header in [`NPY_VIEWS`] unless it is too long to be worth it.
fn cache_view(key: &[u8], view: &Arc<NpyView>) {
    if key.len() > HEADER_CACHE_KEY_BYTES_MAX {
        return;
    }
    let mut guard = NPY_VIEWS.lock();
    let views = guard.get_or_insert_with(HashMap::new);
    let old = if views.len() >= NPY_HEADER_CACHE_MAX { std::mem::take(views) } else { HashMap::new() };
    views.insert(key.into(), Arc::clone(view));
    drop(guard);
    // Dropped with the lock released: dropping the old entries' Python objects may run Python.
    drop(old);
}

/// Parses `header` (the payload up to its data) with `numpy.lib.format`, then refuses object
/// dtypes and sizes that overflow.
fn parse_npy_header(py: Python<'_>, header: &[u8]) -> Result<NpyView, String> {
    let describe = |e: PyErr| e.to_string();
    let format = numpy_module(py).and_then(|np| np.getattr("lib")?.getattr("format")).map_err(describe)?;
    let file =
        py.import("io").and_then(|io| io.getattr("BytesIO")?.call1((PyBytes::new(py, header),))).map_err(describe)?;
    let version: (u8, u8) = format.call_method1("read_magic", (&file,)).and_then(|v| v.extract()).map_err(describe)?;
    let kwargs = [("max_header_size", HEADER_BYTES_MAX)].into_py_dict(py).map_err(describe)?;
    let header_read = match version {
        (1, 0) => format.call_method("read_array_header_1_0", (&file,), Some(&kwargs)),
        (2, 0) => format.call_method("read_array_header_2_0", (&file,), Some(&kwargs)),
        // NumPy reads 3.0 (UTF-8) headers with a private function; without it, 3.0 is refused.
        (3, 0) => read_array_header_3_0(py).and_then(|read| read.call((&file, (3u8, 0u8)), Some(&kwargs))),
        (major, minor) => return Err(format!("unsupported version {major}.{minor} (1.0, 2.0 and 3.0 are read)")),
    };
    let (shape, fortran, dtype): (Bound<'_, PyAny>, bool, Bound<'_, PyAny>) =
        header_read.and_then(|r| r.extract()).map_err(describe)?;
    if dtype.getattr("hasobject").and_then(|h| h.extract::<bool>()).map_err(describe)? {
        return Err(format!(
            "dtype {} holds Python objects, which .npy stores as pickles; only plain data can be viewed",
            dtype.repr().map(|r| r.to_string()).unwrap_or_default()
        ));
    }
    let itemsize: usize = dtype.getattr("itemsize").and_then(|s| s.extract()).map_err(describe)?;
    let shape = shape.cast_into::<PyTuple>().map_err(|_| "the shape is not a tuple".to_owned())?;
    let dims: Vec<usize> =
        shape.extract().map_err(|_| format!("shape {shape} has an entry that is not a non-negative integer"))?;
    let data_bytes = dims
        .iter()
        .try_fold(itemsize, |n, &d| n.checked_mul(d))
        .filter(|&n| n.checked_add(header.len()).is_some_and(|end| end <= isize::MAX as usize))
        .ok_or_else(|| format!("shape {shape} × {itemsize} bytes per element overflows memory"))?;
    Ok(NpyView {
        dtype: dtype.unbind(),
        shape: shape.unbind(),
        order: if fortran { "F" } else { "C" },
        data_offset: header.len(),
        data_bytes,
    })
}

/// NumPy's reader of version 3.0 headers, `_read_array_header(fp, version, max_header_size)`
/// (private: in `numpy.lib._format_impl` since NumPy 2, in `numpy.lib.format` before).
fn read_array_header_3_0(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("numpy.lib._format_impl").or_else(|_| py.import("numpy.lib.format"))?.getattr("_read_array_header")
}

/// At most 300 characters of an error (NumPy quotes the whole header in some).
fn clip(text: &str) -> String {
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The `numpy` module, imported once.
pub(crate) fn numpy_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(NUMPY.get_or_try_init(py, || py.import("numpy").map(Bound::unbind))?.bind(py))
}

/// `numpy.ndarray`, looked up once.
pub(crate) fn ndarray_type(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static NDARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    Ok(NDARRAY.get_or_try_init(py, || numpy_module(py)?.getattr("ndarray").map(Bound::unbind))?.bind(py))
}
