//! An `.npy` array's values as JSON, for viewers that show numbers (Foxglove's Raw Messages and
//! Plot panels): `{"dtype", "shape", "values"}` with `values` nested as the shape says.
//!
//! Guarantees: only a small array of a plain number or bool type is given values — at most
//! [`VALUES_MAX`] elements, C order, any byte order; anything else (larger, a structure, complex,
//! half floats, Fortran order, a malformed payload) is refused with the reason, which the viewer
//! shows instead of the values. Floats that JSON cannot hold (NaN, ±inf) become `null`; 64-bit
//! integers are exact in the JSON text (a JavaScript reader rounds those beyond 2^53). Pure.

use serde_json::{json, Value};

/// Most elements an array is shown with its values.
pub const VALUES_MAX: usize = 4096;

/// The array `data` holds (a whole `.npy` payload) as `{"dtype", "shape", "values"}`, or why its
/// values are not shown.
pub fn values(data: &[u8]) -> Result<Value, String> {
    stampede::npy::check_payload(data).map_err(|e| format!("not a valid .npy payload: {e}"))?;
    let header = stampede::npy::header(data).map_err(|e| format!("not a valid .npy payload: {e}"))?;
    let dtype = header.plain_descr();
    let elements: usize = header.shape.iter().product();
    if elements > VALUES_MAX {
        return Err(format!("{elements} elements; values are shown for at most {VALUES_MAX}"));
    }
    if header.fortran_order && header.shape.len() > 1 {
        return Err("Fortran order; values are shown for C-ordered (row-major) arrays".into());
    }
    let element = Element::of(dtype)?;
    // check_payload made sure the payload is exactly header + elements × itemsize.
    let bytes = &data[header.data_offset..];
    debug_assert_eq!(bytes.len(), elements * element.size);
    let flat: Vec<Value> = bytes.chunks_exact(element.size).map(|b| element.value(b)).collect();
    debug_assert_eq!(flat.len(), elements);
    Ok(json!({ "dtype": dtype, "shape": header.shape, "values": nest(&flat, &header.shape) }))
}

/// `flat` (C order) nested as `shape` says: a scalar for shape `()`.
fn nest(flat: &[Value], shape: &[usize]) -> Value {
    match shape {
        [] => flat.first().cloned().unwrap_or(Value::Null),
        [_] => Value::Array(flat.to_vec()),
        [first, rest @ ..] => {
            let inner: usize = rest.iter().product();
            Value::Array((0..*first).map(|i| nest(&flat[i * inner..(i + 1) * inner], rest)).collect())
        }
    }
}

/// One element's type: kind, size in bytes and byte order.
struct Element {
    kind: u8,
    size: usize,
    big_endian: bool,
}

impl Element {
    /// The element of a plain type string (`<f4`, `|u1`, `>i8`, `|b1`, …), or why none.
    fn of(dtype: &str) -> Result<Element, String> {
        let refuse = || format!("dtype {dtype}; values are shown for bool, integer and float32/64 arrays");
        let mut chars = dtype.chars();
        let (order, kind) = (chars.next().ok_or_else(refuse)?, chars.next().ok_or_else(refuse)?);
        let size: usize = chars.as_str().parse().map_err(|_| refuse())?;
        let big_endian = match order {
            '<' | '|' | '=' => false,
            '>' => true,
            _ => return Err(refuse()),
        };
        match (kind, size) {
            ('b', 1) | ('i' | 'u', 1 | 2 | 4 | 8) | ('f', 4 | 8) => Ok(Element { kind: kind as u8, size, big_endian }),
            _ => Err(refuse()),
        }
    }

    /// The value of the element in `bytes` (exactly its size).
    fn value(&self, bytes: &[u8]) -> Value {
        let mut word = [0u8; 8];
        word[..self.size].copy_from_slice(bytes);
        if self.big_endian {
            word[..self.size].reverse();
        }
        let unsigned = u64::from_le_bytes(word);
        // Sign-extends an integer of `size` bytes.
        let shift = 64 - 8 * self.size as u32;
        let signed = ((unsigned << shift) as i64) >> shift;
        match (self.kind, self.size) {
            (b'b', _) => Value::Bool(unsigned != 0),
            (b'u', _) => Value::from(unsigned),
            (b'i', _) => Value::from(signed),
            (b'f', 4) => finite(f64::from(f32::from_bits(unsigned as u32))),
            _ => finite(f64::from_bits(unsigned)),
        }
    }
}

/// A float as JSON: `null` for NaN and ±inf, which JSON cannot hold.
fn finite(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
        stampede::npy::encode(descr, shape, data).unwrap()
    }

    #[test]
    fn small_arrays_show_their_values_nested_by_shape() {
        let floats: Vec<u8> = [1.5f32, -2.0, f32::NAN, 4.0, 5.0, 6.25].iter().flat_map(|x| x.to_le_bytes()).collect();
        let shown = values(&npy("'<f4'", &[2, 3], &floats)).unwrap();
        assert_eq!(shown, json!({ "dtype": "<f4", "shape": [2, 3], "values": [[1.5, -2.0, null], [4.0, 5.0, 6.25]] }));
        let ints: Vec<u8> = [-1i16, 300].iter().flat_map(|x| x.to_be_bytes()).collect();
        assert_eq!(values(&npy("'>i2'", &[2], &ints)).unwrap()["values"], json!([-1, 300]));
        assert_eq!(values(&npy("'|b1'", &[], &[1])).unwrap()["values"], json!(true));
        let big = u64::MAX.to_le_bytes();
        assert_eq!(values(&npy("'<u8'", &[1], &big)).unwrap()["values"], json!([u64::MAX]));
        assert_eq!(values(&npy("'<i8'", &[1], &i64::MIN.to_le_bytes())).unwrap()["values"], json!([i64::MIN]));
        assert_eq!(values(&npy("'<f8'", &[0, 2], &[])).unwrap()["values"], json!([]));
    }

    #[test]
    fn what_is_not_shown_says_why() {
        let many = vec![0u8; VALUES_MAX + 1];
        assert!(values(&npy("'|u1'", &[VALUES_MAX + 1], &many)).unwrap_err().contains("at most 4096"));
        assert!(values(&npy("'<c8'", &[1], &[0; 8])).unwrap_err().contains("dtype <c8"));
        assert!(values(&npy("'<f2'", &[1], &[0; 2])).unwrap_err().contains("dtype <f2"));
        assert!(values(&[1, 2, 3]).unwrap_err().contains("not a valid .npy"));
        let mut fortran = stampede::npy::encode_header("'<f4'", &[2, 2]).unwrap();
        let (from, to) = (b"'fortran_order': False", b"'fortran_order': True ");
        let at = fortran.windows(from.len()).position(|w| w == from).unwrap();
        fortran[at..at + to.len()].copy_from_slice(to);
        fortran.extend_from_slice(&[0; 16]);
        assert!(values(&fortran).unwrap_err().contains("Fortran order"));
    }
}
