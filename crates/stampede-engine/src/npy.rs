//! `.npy` payloads (docs/SEMANTICS.md, "npy payloads"): reading and checking the header of NumPy's
//! format, so that an item stored with codec `"npy"` is one that every client can view safely,
//! zero-copy.
//!
//! A `.npy` payload is a preamble (magic `\x93NUMPY`, version, header length), a Python dict
//! literal `{'descr': …, 'fortran_order': …, 'shape': (…)}` padded with spaces and ended by a
//! newline, then the raw data. The dict is parsed by [`ndarray_npy::npy::header::Header`] (a
//! maintained crate; it refuses unknown and missing keys, a `fortran_order` that is not a bool,
//! a shape that is not a tuple of integers fitting `usize`, non-ASCII text in versions 1.0/2.0,
//! and a header without its newline). This module adds what a shared store needs before trusting
//! the bytes:
//!
//! - **Bounds before parsing.** The header must lie within the payload and within
//!   [`HEADER_BYTES_MAX`] (the crate allocates the declared length up front), and the dict may
//!   nest brackets at most [`NESTING_MAX`] deep: the crate's parser (pest, via `py_literal`)
//!   backtracks in time exponential in the nesting depth (measured: 22 levels, 17 s).
//! - **The dtype.** `descr` must be a type string as NumPy writes it (`dtype.str`: `'<f4'`,
//!   `'|u1'`, `'<U3'`, `'<M8[ns]'`, …), a list of fields (`[('x', '<f4'), ('y', '<i2', (2,))]`),
//!   or a `(descr, shape)` subarray. Its item size is computed, and a dtype holding Python
//!   objects (`'|O'`, anywhere in a structure) is refused: `.npy` stores those as pickles, and
//!   a view over raw bytes would treat them as pointers (a crash in NumPy).
//! - **Sizes.** elements = product of the shape, data bytes = elements × item size and the end
//!   of the data are computed with checked arithmetic (an overflow is an error, never a panic or
//!   a wrap), and the payload must hold exactly the header plus that many bytes.
//!
//! [`header`] returns what the header says; [`check`] turns a refusal into
//! [`Error::InvalidArgument`] for a put. Headers already seen are cached (at most
//! [`HEADER_CACHE_MAX`] of them), so checking the puts of a stream of same-shaped arrays costs a
//! hash lookup, not a parse (about 30 µs).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use ndarray_npy::npy::header::{Header, Layout, ParseHeaderError, ReadHeaderError};
use num_traits::ToPrimitive;
use py_literal::Value;
use stampede_core::{Error, Result, Timestamp};

/// The first six bytes of every `.npy` payload.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Largest header accepted (preamble, dict and padding), in bytes. NumPy itself refuses dicts
/// over 10 000 characters unless told otherwise; this leaves room for structures of some
/// thousands of fields while bounding the parse (linear, about 5 µs per field).
pub const HEADER_BYTES_MAX: usize = 64 * 1024;
/// Deepest nesting of `(`, `[` and `{` in the header dict (the dict's own braces count). A
/// structure of structures with subarray fields needs 8.
pub const NESTING_MAX: usize = 8;
/// Most parsed headers kept by the cache; when full it is emptied and refilled.
pub const HEADER_CACHE_MAX: usize = 64;
/// Headers longer than this are parsed every time rather than cached (bounds the cache's
/// memory to `HEADER_CACHE_MAX × HEADER_CACHE_KEY_BYTES_MAX`).
pub const HEADER_CACHE_KEY_BYTES_MAX: usize = 4096;

/// What a `.npy` header says, with the sizes it implies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version, `(1, 0)`, `(2, 0)` or `(3, 0)`.
    pub version: (u8, u8),
    /// The dtype description as a Python literal (`'<f4'`, `[('x', '<f4')]`, …).
    pub descr: String,
    /// `true` if the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Bytes per element (for an object dtype, the size of a pointer).
    pub itemsize: usize,
    /// `true` if the dtype holds Python objects anywhere (refused by [`check`]).
    pub has_object: bool,
    /// Where the data starts: the length of the header.
    pub data_offset: usize,
    /// elements × itemsize: how many data bytes follow the header.
    pub data_bytes: usize,
}

impl NpyHeader {
    /// The dtype as the C and Java clients (and the shared test vectors) show it: a simple quoted
    /// type string without its quotes (`'<f4'` → `<f4`), anything else (a structure, a subarray,
    /// an odd literal) as written.
    pub fn plain_descr(&self) -> &str {
        for quote in ['\'', '"'] {
            if let Some(inner) = self.descr.strip_prefix(quote).and_then(|rest| rest.strip_suffix(quote)) {
                if !inner.contains(['\'', '"', '\\']) {
                    return inner;
                }
            }
        }
        &self.descr
    }
}

/// Why a payload is not an acceptable `.npy` file; the text names the rule broken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyError {
    reason: String,
}

impl NpyError {
    fn new(reason: impl Into<String>) -> NpyError {
        NpyError { reason: reason.into() }
    }

    /// The rule the payload breaks.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for NpyError {}

/// Checks a payload put with codec `"npy"` into `name` at `ts`: a well-formed header, a dtype
/// without Python objects, and exactly as many data bytes as the header says. A refusal is
/// `Error::InvalidArgument { op: "put", .. }` whose reason names the rule.
pub fn check(name: &str, ts: Timestamp, payload: &[u8]) -> Result<()> {
    check_payload(payload).map_err(|e| Error::InvalidArgument {
        op: "put",
        name: name.to_owned(),
        reason: format!("ts={ts}: not a valid .npy payload: {e}"),
    })
}

/// [`check`] without the put's context.
pub fn check_payload(payload: &[u8]) -> Result<(), NpyError> {
    let header = header(payload)?;
    if header.has_object {
        return Err(NpyError::new(format!(
            "dtype {} holds Python objects, which .npy stores as pickles; only plain data can be shared",
            clip(&header.descr)
        )));
    }
    // `header` computed data_offset + data_bytes without overflow.
    let end = header.data_offset + header.data_bytes;
    if payload.len() != end {
        return Err(NpyError::new(format!(
            "the header says {} data bytes (shape {:?} × {} bytes per element) but {} follow it",
            header.data_bytes,
            header.shape,
            header.itemsize,
            payload.len() - header.data_offset
        )));
    }
    Ok(())
}

/// The header of a C-order `.npy` array of dtype `descr` (a Python literal, as
/// [`NpyHeader::descr`] holds it: `'|u1'`, `'<f4'`) and `shape`, as numpy writes it: version 1.0,
/// padded with spaces to a multiple of 64 bytes. What a Rust producer puts before the array's
/// bytes to make an `"npy"` payload. A header longer than 1.0's length field can say is refused
/// (it would be over [`HEADER_BYTES_MAX`] too).
pub fn encode_header(descr: &str, shape: &[usize]) -> Result<Vec<u8>, NpyError> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = match dims.as_slice() {
        [one] => format!("({one},)"),
        dims => format!("({})", dims.join(", ")),
    };
    let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}");
    // The magic, the version and the 2-byte length, then the dict and a newline, padded.
    let prefix = MAGIC.len() + 2 + 2;
    let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
    let length = u16::try_from(total - prefix)
        .map_err(|_| NpyError::new(format!("a header of {total} bytes is over the limit of {HEADER_BYTES_MAX}")))?;
    let mut header = MAGIC.to_vec();
    header.extend_from_slice(&[1, 0]);
    header.extend_from_slice(&length.to_le_bytes());
    header.extend_from_slice(dict.as_bytes());
    header.resize(total - 1, b' ');
    header.push(b'\n');
    Ok(header)
}

/// A whole `.npy` payload: the header of an array of `descr` and `shape` (as
/// [`encode_header`]), then `data`, the elements in C order, as they are (their length is the
/// caller's to match; [`check_payload`] says whether it does).
pub fn encode(descr: &str, shape: &[usize], data: &[u8]) -> Result<Vec<u8>, NpyError> {
    let mut payload = encode_header(descr, shape)?;
    payload.extend_from_slice(data);
    Ok(payload)
}

/// Parses and validates the header of a `.npy` payload without reading its data. Object dtypes
/// are reported (`has_object`), not refused; the data length is not compared with the payload's.
pub fn header(payload: &[u8]) -> Result<NpyHeader, NpyError> {
    let (version, dict_start, data_offset) = preamble(payload)?;
    let bytes = &payload[..data_offset];
    if let Some(cached) = cache_lookup(bytes) {
        return Ok((*cached).clone());
    }
    let parsed = Arc::new(parse(version, bytes, dict_start)?);
    cache_insert(bytes, &parsed);
    Ok(Arc::unwrap_or_clone(parsed))
}

/// The length of a `.npy` payload's header, i.e. where its data starts: the magic, the version
/// (1.0, 2.0 or 3.0) and the declared length checked against the payload and
/// [`HEADER_BYTES_MAX`]. The dict itself is not parsed.
pub fn data_offset(payload: &[u8]) -> Result<usize, NpyError> {
    preamble(payload).map(|(_, _, data_offset)| data_offset)
}

/// Magic, version and header length: `(version, where the dict starts, where the data starts)`.
fn preamble(payload: &[u8]) -> Result<((u8, u8), usize, usize), NpyError> {
    if payload.len() < 8 || payload[..6] != MAGIC[..] {
        return Err(NpyError::new("bad magic: a .npy payload starts with \\x93NUMPY"));
    }
    let version = (payload[6], payload[7]);
    let (dict_start, dict_bytes) = match (version, payload.get(8..12)) {
        ((1, 0), _) if payload.len() >= 10 => (10, u16::from_le_bytes([payload[8], payload[9]]) as usize),
        ((2, 0) | (3, 0), Some(&[a, b, c, d])) => (12, u32::from_le_bytes([a, b, c, d]) as usize),
        ((1, 0) | (2, 0) | (3, 0), _) => return Err(NpyError::new("truncated: the header length is missing")),
        ((major, minor), _) => {
            return Err(NpyError::new(format!("unsupported version {major}.{minor} (1.0, 2.0 and 3.0 are read)")))
        }
    };
    let data_offset = dict_start + dict_bytes; // at most 12 + u32::MAX: no overflow in a usize of 64 bits
    if data_offset > HEADER_BYTES_MAX {
        return Err(NpyError::new(format!(
            "the header declares {data_offset} bytes, over the limit of {HEADER_BYTES_MAX}"
        )));
    }
    if data_offset > payload.len() {
        return Err(NpyError::new(format!(
            "truncated: the header declares {data_offset} bytes but the payload has {}",
            payload.len()
        )));
    }
    Ok((version, dict_start, data_offset))
}

/// Parses a header that [`preamble`] has bounded: the dict by ndarray-npy, the dtype here.
fn parse(version: (u8, u8), bytes: &[u8], dict_start: usize) -> Result<NpyHeader, NpyError> {
    let depth = nesting_depth(&bytes[dict_start..]);
    if depth > NESTING_MAX {
        return Err(NpyError::new(format!("the header dict nests {depth} deep, over the limit of {NESTING_MAX}")));
    }
    let parsed = Header::from_reader(&mut &bytes[..]).map_err(|e| NpyError::new(read_error(e)))?;
    let (itemsize, has_object) = dtype_size(&parsed.type_descriptor, 0)?;
    let elements = parsed
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| NpyError::new(format!("shape {:?} has more elements than fit in memory", parsed.shape)))?;
    let data_bytes = elements
        .checked_mul(itemsize)
        .filter(|&n| n.checked_add(bytes.len()).is_some_and(|end| end <= isize::MAX as usize))
        .ok_or_else(|| {
            NpyError::new(format!("shape {:?} × {itemsize} bytes per element overflows memory", parsed.shape))
        })?;
    Ok(NpyHeader {
        version,
        descr: literal(&parsed.type_descriptor),
        fortran_order: parsed.layout == Layout::Fortran,
        shape: parsed.shape,
        itemsize,
        has_object,
        data_offset: bytes.len(),
        data_bytes,
    })
}

/// The deepest nesting of brackets in `text`, outside string literals. Strings are skipped the
/// way the parser reads them: from a quote to the next same quote, a backslash escaping the next
/// byte (or, for `\N{…}`, everything up to the closing brace).
fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < text.len() {
        match text[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            quote @ (b'\'' | b'"') => {
                i += 1;
                while i < text.len() && text[i] != quote {
                    if text[i] == b'\\' {
                        i += 1;
                        if text.get(i..i + 2) == Some(b"N{") {
                            i += text[i..].iter().position(|&c| c == b'}').unwrap_or(text.len() - i);
                        }
                    }
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// The item size of a `descr` value and whether it holds objects. `depth` bounds the recursion
/// (the text's nesting already does; this keeps the bound local).
fn dtype_size(descr: &Value, depth: usize) -> Result<(usize, bool), NpyError> {
    if depth > NESTING_MAX {
        return Err(NpyError::new("descr nests too deep"));
    }
    match descr {
        Value::String(type_str) => type_size(type_str),
        Value::List(fields) => {
            let (mut itemsize, mut has_object) = (0usize, false);
            let mut names: Vec<&str> = Vec::with_capacity(fields.len());
            for field in fields {
                let (name, size, object) = field_size(field, depth)?;
                if !name.is_empty() {
                    names.push(name);
                }
                itemsize =
                    itemsize.checked_add(size).ok_or_else(|| NpyError::new("descr: the structure's size overflows"))?;
                has_object |= object;
            }
            names.sort_unstable();
            if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
                return Err(NpyError::new(format!("descr: field name {:?} appears twice", clip(pair[0]))));
            }
            Ok((itemsize, has_object))
        }
        Value::Tuple(parts) => match parts.as_slice() {
            [inner, shape] => {
                let (size, object) = dtype_size(inner, depth + 1)?;
                Ok((subarray_size(size, shape)?, object))
            }
            _ => Err(NpyError::new("descr: a subarray is a (descr, shape) pair")),
        },
        other => Err(NpyError::new(format!(
            "descr {} is neither a type string, a list of fields nor a (descr, shape) pair",
            clip(&literal(other))
        ))),
    }
}

/// One field of a structure: `(name, descr)` or `(name, descr, shape)`; the name may be a
/// `(title, name)` pair. Returns the name, the field's size and whether it holds objects.
fn field_size(field: &Value, depth: usize) -> Result<(&str, usize, bool), NpyError> {
    let parts = match field {
        Value::Tuple(parts) | Value::List(parts) if (2..=3).contains(&parts.len()) => parts,
        _ => return Err(NpyError::new("descr: a field is a (name, descr) or (name, descr, shape) tuple")),
    };
    let name = match &parts[0] {
        Value::String(name) => name.as_str(),
        Value::Tuple(pair) => match pair.as_slice() {
            [Value::String(_title), Value::String(name)] => name.as_str(),
            _ => return Err(NpyError::new("descr: a field's name is a string or a (title, name) pair")),
        },
        _ => return Err(NpyError::new("descr: a field's name is a string or a (title, name) pair")),
    };
    let (size, object) = dtype_size(&parts[1], depth + 1)?;
    let size = match parts.get(2) {
        Some(shape) => subarray_size(size, shape)?,
        None => size,
    };
    Ok((name, size, object))
}

/// `size` × the product of a subarray shape (an int or a tuple of ints).
fn subarray_size(size: usize, shape: &Value) -> Result<usize, NpyError> {
    let dims = match shape {
        Value::Integer(_) => std::slice::from_ref(shape),
        Value::Tuple(dims) => dims.as_slice(),
        _ => return Err(NpyError::new("descr: a subarray shape is an int or a tuple of ints")),
    };
    dims.iter().try_fold(size, |n, dim| {
        let dim = dim.as_integer().and_then(ToPrimitive::to_usize);
        let dim = dim.ok_or_else(|| NpyError::new("descr: a subarray dimension is not a non-negative integer"))?;
        n.checked_mul(dim).ok_or_else(|| NpyError::new("descr: a subarray's size overflows"))
    })
}

/// The size of a type string as NumPy writes it (`dtype.str`): an optional byte order
/// (`<`, `>`, `|`, `=`), a kind, a size (bytes; characters for `U`) and, for datetimes and
/// timedeltas, an optional `[unit]`. Returns `(itemsize, is_object)`.
fn type_size(type_str: &str) -> Result<(usize, bool), NpyError> {
    let bad = |why: &str| NpyError::new(format!("descr {:?}: {why}", clip(type_str)));
    let body = type_str.strip_prefix(['<', '>', '|', '=']).unwrap_or(type_str);
    let mut chars = body.chars();
    let kind = chars.next().ok_or_else(|| bad("empty type string"))?;
    let rest = chars.as_str();
    let (digits, unit) = match rest.find('[') {
        Some(at) => (&rest[..at], Some(&rest[at..])),
        None => (rest, None),
    };
    if unit.is_some() && !matches!(kind, 'm' | 'M') {
        return Err(bad("only datetimes and timedeltas have a [unit]"));
    }
    if let Some(unit) = unit {
        check_time_unit(unit).map_err(|()| bad("unknown time unit"))?;
    }
    let size = if digits.is_empty() {
        None
    } else if digits.bytes().all(|b| b.is_ascii_digit()) {
        Some(digits.parse::<usize>().map_err(|_| bad("size too large"))?)
    } else {
        return Err(bad("the size is not a number"));
    };
    let fixed = |sizes: &[usize]| match size {
        Some(n) if sizes.contains(&n) => Ok((n, false)),
        _ => Err(bad(&format!("kind '{kind}' has sizes {sizes:?}"))),
    };
    match kind {
        'b' => fixed(&[1]),
        'i' | 'u' => fixed(&[1, 2, 4, 8]),
        'f' => fixed(&[2, 4, 8, 12, 16]),
        'c' => fixed(&[8, 16, 24, 32]),
        'm' | 'M' => fixed(&[8]),
        'S' | 'V' => size.map(|n| (n, false)).ok_or_else(|| bad("a size is required")),
        'U' => {
            let chars = size.ok_or_else(|| bad("a size is required"))?;
            chars.checked_mul(4).map(|n| (n, false)).ok_or_else(|| bad("size too large"))
        }
        'O' => match size {
            None | Some(8) => Ok((size_of::<usize>(), true)),
            Some(_) => Err(bad("an object dtype has the size of a pointer")),
        },
        _ => Err(bad("unknown kind (b i u f c m M S U V O)")),
    }
}

/// `[unit]` of a datetime or timedelta: an optional multiplier and one of NumPy's units.
fn check_time_unit(unit: &str) -> Result<(), ()> {
    let inner = unit.strip_prefix('[').and_then(|u| u.strip_suffix(']')).ok_or(())?;
    let name = inner.trim_start_matches(|c: char| c.is_ascii_digit());
    const UNITS: [&str; 14] = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as", "generic"];
    UNITS.contains(&name).then_some(()).ok_or(())
}

/// A Python literal of `value` for messages (`format_ascii` fails only on an empty set).
fn literal(value: &Value) -> String {
    value.format_ascii().unwrap_or_else(|_| "<unprintable>".to_owned())
}

/// At most 60 characters of `text`, for messages.
fn clip(text: &str) -> String {
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The crate's error as a reason. Variants holding a parsed value are described without
/// formatting that value (its `Display` may fail, which `to_string` turns into a panic).
fn read_error(error: ReadHeaderError) -> String {
    let parse = match error {
        ReadHeaderError::Io(e) => return format!("truncated or unreadable header ({e})"),
        ReadHeaderError::Parse(parse) => parse,
    };
    match parse {
        ParseHeaderError::UnknownKey(key) => format!("unknown key {} in the header dict", clip(&literal(&key))),
        ParseHeaderError::IllegalValue { key, value } => {
            let want = match key.as_str() {
                "fortran_order" => "a bool",
                "shape" => "a tuple of non-negative integers",
                _ => "valid",
            };
            format!("'{key}' is {}, not {want}", clip(&literal(&value)))
        }
        ParseHeaderError::MetaNotDict(_) => "the header is not a dict".to_owned(),
        ParseHeaderError::MissingKey(key) => {
            let key = if key == "shaper" { "shape".to_owned() } else { key };
            format!("the header dict has no '{key}'")
        }
        ParseHeaderError::DictParse(e) => format!("the header is not a Python literal ({})", clip(&e.to_string())),
        other => other.to_string(),
    }
}

/// Parsed headers by their bytes. A cache hit is exactly as valid as a fresh parse: the key is
/// the whole header.
static CACHE: Mutex<Option<HeaderCache>> = Mutex::new(None);

/// Parsed headers keyed by the header's bytes (preamble, dict, padding).
type HeaderCache = HashMap<Box<[u8]>, Arc<NpyHeader>>;

fn cache_lookup(bytes: &[u8]) -> Option<Arc<NpyHeader>> {
    let cache = CACHE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    cache.as_ref()?.get(bytes).cloned()
}

fn cache_insert(bytes: &[u8], parsed: &Arc<NpyHeader>) {
    if bytes.len() > HEADER_CACHE_KEY_BYTES_MAX {
        return;
    }
    let mut cache = CACHE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    if map.len() >= HEADER_CACHE_MAX {
        map.clear();
    }
    map.insert(bytes.into(), Arc::clone(parsed));
}
