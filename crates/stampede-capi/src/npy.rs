//! `.npy` headers for C readers (docs/SEMANTICS.md, "npy payloads"): what an `"npy"` item holds —
//! dtype, shape, order and where the data starts — decoded by [`stampede::npy`] (the one parser
//! every client shares; this file only copies its answer out).
//!
//! The whole payload is checked as a put checks it (`stampede::npy::check_payload`): a
//! well-formed header, no Python objects, and exactly `data_bytes` bytes of data after the
//! header. So a C reader may index `data + data_offset` up to `data_bytes` without further
//! checks.

use std::ffi::{c_char, c_int};

use stampede::npy;

use crate::args::{bytes, invalid, write_opt};
use crate::error::guard;

/// What a `.npy` header says (`stp_npy_header`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct stp_npy_layout {
    /// Number of dimensions (0 for a scalar).
    pub ndim: usize,
    /// Bytes per element.
    pub itemsize: usize,
    /// Where the data starts: the header's length in bytes.
    pub data_offset: usize,
    /// How many data bytes follow the header (elements × itemsize).
    pub data_bytes: usize,
    /// The length of the dtype description, without its terminating NUL.
    pub descr_bytes: usize,
    /// `true` if the data is in Fortran (column-major) order.
    pub fortran_order: bool,
}

/// Decodes the header of the `.npy` payload of `len` bytes at `data` (e.g. an `"npy"` item's
/// `stp_item_data` / `stp_item_len`). Writes, for each non-NULL destination:
///
/// - `*layout_out`: dimensions, item size, data offset and size, descr length, order;
/// - `descr_out`: the dtype description, NUL-terminated — a simple dtype as NumPy's `dtype.str`
///   without quotes (`"<f4"`, `"|u1"`), a structured one as the header's Python literal
///   (`"[('x', '<f4')]"`); it needs `layout.descr_bytes + 1` bytes of `descr_capacity`;
/// - `shape_out`: the `ndim` dimensions; it needs `shape_capacity >= layout.ndim`.
///
/// `STP_INVALID_ARGUMENT` when the payload is not a valid `.npy` file (the message names the rule
/// broken) or a destination is too small (then `*layout_out` is still written, so a caller may
/// ask with NULL destinations first, then with buffers of the right size).
///
/// # Safety
/// `data` is NULL (with `len` 0) or valid for reading `len` bytes; `descr_out` NULL or valid for
/// writing `descr_capacity` bytes; `shape_out` NULL or valid for writing `shape_capacity`
/// `size_t`s; `layout_out` NULL or valid for writing a `stp_npy_layout`.
#[no_mangle]
pub unsafe extern "C" fn stp_npy_header(
    data: *const u8,
    len: usize,
    descr_out: *mut c_char,
    descr_capacity: usize,
    shape_out: *mut usize,
    shape_capacity: usize,
    layout_out: *mut stp_npy_layout,
) -> c_int {
    const OP: &str = "stp_npy_header";
    guard(OP, || {
        // SAFETY: NULL or valid for `len` bytes per the contract.
        let payload = unsafe { bytes(data, len, OP, "data") }?;
        let not_npy = |e: npy::NpyError| invalid(OP, "data", format!("not a valid .npy payload: {e}"));
        npy::check_payload(payload).map_err(not_npy)?;
        let header = npy::header(payload).map_err(not_npy)?;
        let descr = header.plain_descr();
        let layout = stp_npy_layout {
            ndim: header.shape.len(),
            itemsize: header.itemsize,
            data_offset: header.data_offset,
            data_bytes: header.data_bytes,
            descr_bytes: descr.len(),
            fortran_order: header.fortran_order,
        };
        // SAFETY: NULL or valid per the contract.
        unsafe { write_opt(layout_out, layout) };
        if !descr_out.is_null() {
            if descr_capacity <= descr.len() {
                let reason = format!("descr_capacity is {descr_capacity}; the descr needs {} bytes", descr.len() + 1);
                return Err(invalid(OP, "descr_out", reason));
            }
            // SAFETY: valid for `descr_capacity > descr.len()` bytes per the contract; the source
            // is a distinct Rust string.
            unsafe {
                std::ptr::copy_nonoverlapping(descr.as_ptr().cast::<c_char>(), descr_out, descr.len());
                descr_out.add(descr.len()).write(0);
            }
        }
        if !shape_out.is_null() {
            let ndim = header.shape.len();
            if shape_capacity < ndim {
                return Err(invalid(
                    OP,
                    "shape_out",
                    format!("shape_capacity is {shape_capacity}; the shape has {ndim}"),
                ));
            }
            // SAFETY: valid for `shape_capacity >= ndim` elements per the contract.
            unsafe { std::ptr::copy_nonoverlapping(header.shape.as_ptr(), shape_out, ndim) };
        }
        Ok(())
    })
}
