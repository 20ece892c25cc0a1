//! Python values in, Stampede payloads out (SPEC §8): `bytes`-like objects (codec `raw`), `str`
//! (codec `utf8`), NumPy arrays (codec `npy`) and `Item`s (forwarded without copying).
//!
//! Copy-in: a put copies the caller's data exactly once, into the buffer the channel will hold.
//! For an array that buffer is a complete `.npy` file (format 1.0, or 2.0 for a header over
//! 64 KiB): the header is written first, then the array data is copied behind it in the array's
//! own C or Fortran order. Only an array that is neither C- nor Fortran-contiguous is first made
//! contiguous by NumPy (a second copy). Object arrays are refused: `.npy` would need pickles.

use bytes::Bytes;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use stampede::{Codec, Payload};

use crate::item::Item;

/// The `.npy` magic string.
const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";
/// `.npy` headers (magic + version + length + dict + newline) are padded to this multiple, so the
/// data of every item starts aligned for any dtype.
const NPY_ALIGN: usize = 64;
/// Copies at least this large run with the GIL released.
const COPY_RELEASED_BYTES_MIN: usize = 64 * 1024;

/// How a put copies bytes in: the output connection's `copy_in` (a recycled buffer).
pub(crate) type CopyIn<'a> = &'a (dyn Fn(&[&[u8]]) -> Bytes + Sync);

/// Converts the value given to `put` into a payload, copying its bytes once with `copy_in`.
/// `codec` overrides the codec name of `bytes`-like and `str` data (e.g. `"json"`).
pub(crate) fn to_payload(data: &Bound<'_, PyAny>, codec: Option<&str>, copy_in: CopyIn<'_>) -> PyResult<Payload> {
    let py = data.py();
    if let Ok(item) = data.cast::<Item>() {
        // Items are immutable: forwarding one shares its buffer.
        return Ok(item.get().payload.clone());
    }
    if let Ok(text) = data.cast::<PyString>() {
        let codec = codec.map_or(Codec::Utf8, Codec::from_name);
        return Ok(Payload { data: copy_in(&[text.to_str()?.as_bytes()]), codec });
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
        return to_payload(&copy, codec, copy_in);
    }
    let len = buffer.len_bytes();
    let ptr = buffer.buf_ptr() as usize;
    // SAFETY: the buffer export pins the exporter's memory (a bytearray cannot be resized while
    // exported) and `buffer` outlives the copy; the memory is only read.
    let copy = move || copy_in(&[unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }]);
    let bytes = if len >= COPY_RELEASED_BYTES_MIN { py.detach(copy) } else { copy() };
    drop(buffer);
    Ok(Payload { data: bytes, codec: codec.map_or(Codec::Raw, Codec::from_name) })
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
    // SAFETY: a contiguous array's data is `nbytes` bytes from its data pointer; we hold a
    // reference to the array and the GIL for the duration of the copy, so it stays alive.
    let data = unsafe { std::slice::from_raw_parts((*array.as_array_ptr()).fields.data as *const u8, nbytes) };
    Ok(Payload { data: copy_in(&[&header, data]), codec: Codec::Npy })
}

/// A `.npy` header for `descr` (a Python literal), order and shape.
pub(crate) fn npy_header(descr: &str, fortran: bool, shape: &[usize]) -> Vec<u8> {
    let shape_text = match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    let dict = format!("{{'descr': {descr}, 'fortran_order': {order}, 'shape': {shape_text}, }}");
    let (version, prefix) = if dict.len() + 1 + 10 <= u16::MAX as usize { (1u8, 10) } else { (2u8, 12) };
    let header_bytes = (prefix + dict.len() + 1).div_ceil(NPY_ALIGN) * NPY_ALIGN;
    let dict_bytes = header_bytes - prefix;
    let mut buf = Vec::with_capacity(header_bytes);
    buf.extend_from_slice(NPY_MAGIC);
    buf.extend_from_slice(&[version, 0]);
    if version == 1 {
        buf.extend_from_slice(&(dict_bytes as u16).to_le_bytes());
    } else {
        buf.extend_from_slice(&(dict_bytes as u32).to_le_bytes());
    }
    buf.extend_from_slice(dict.as_bytes());
    buf.resize(header_bytes - 1, b' ');
    buf.push(b'\n');
    buf
}

/// What a `.npy` header says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NpyHeader {
    /// The dtype as written: a quoted string (`'<f4'`) or a list literal (structured dtypes).
    pub(crate) descr: String,
    pub(crate) fortran: bool,
    pub(crate) shape: Vec<usize>,
    /// Offset of the data from the start of the payload.
    pub(crate) data_offset: usize,
}

/// Parses the header of a `.npy` payload (versions 1.0, 2.0 and 3.0).
pub(crate) fn parse_npy(data: &[u8]) -> Result<NpyHeader, String> {
    if data.len() < 10 || &data[..6] != NPY_MAGIC {
        return Err("not a .npy payload (bad magic)".into());
    }
    let (dict_len, prefix) = match data[6] {
        1 => (u16::from_le_bytes([data[8], data[9]]) as usize, 10),
        2 | 3 if data.len() >= 12 => (u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let end = prefix + dict_len;
    let dict = data.get(prefix..end).ok_or("truncated .npy header")?;
    let dict = std::str::from_utf8(dict).map_err(|_| "the .npy header is not text")?;
    let descr = dict_value(dict, "descr")?;
    let descr = if descr.starts_with('\'') || descr.starts_with('"') {
        let quote = &descr[..1];
        let close = descr[1..].find(quote).ok_or("unterminated descr")? + 2;
        descr[..close].to_owned()
    } else if descr.starts_with('[') {
        list_literal(descr)?
    } else {
        return Err(format!("unsupported descr {descr:.40}"));
    };
    let fortran = dict_value(dict, "fortran_order")?.starts_with("True");
    let shape_text = dict_value(dict, "shape")?;
    let close = shape_text.find(')').ok_or("unterminated shape")?;
    let shape = shape_text[1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>().map_err(|_| format!("bad shape entry {s:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NpyHeader { descr, fortran, shape, data_offset: end })
}

/// The text after `'key':` in a header dict.
fn dict_value<'a>(dict: &'a str, key: &str) -> Result<&'a str, String> {
    let pattern = format!("'{key}':");
    let at = dict.find(&pattern).ok_or_else(|| format!("the .npy header has no '{key}'"))?;
    Ok(dict[at + pattern.len()..].trim_start())
}

/// The balanced `[...]` literal at the start of `text`.
fn list_literal(text: &str) -> Result<String, String> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(') => depth += 1,
            (None, ']' | ')') => {
                depth -= 1;
                if depth == 0 {
                    return Ok(text[..=i].to_owned());
                }
            }
            _ => {}
        }
    }
    Err("unterminated descr list".into())
}

/// The dtype a header's descr names.
pub(crate) fn dtype_of<'py>(py: Python<'py>, descr: &str) -> PyResult<Bound<'py, numpy::PyArrayDescr>> {
    if let Some(simple) = descr.strip_prefix('\'').and_then(|d| d.strip_suffix('\'')) {
        return numpy::PyArrayDescr::new(py, simple);
    }
    let literal = py.import("ast")?.getattr("literal_eval")?.call1((descr,))?;
    let dtype = numpy_module(py)?.getattr("lib")?.getattr("format")?.getattr("descr_to_dtype")?.call1((literal,))?;
    Ok(dtype.cast_into::<numpy::PyArrayDescr>()?)
}

/// The `numpy` module, imported once.
pub(crate) fn numpy_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(NUMPY.get_or_try_init(py, || py.import("numpy").map(Bound::unbind))?.bind(py))
}
