//! Fuzzing the `.npy` header check (issue 8): valid headers of many dtypes and shapes, then
//! mutated (bytes flipped, inserted, deleted, truncated, dims made huge). The decoder never
//! panics, and it accepts exactly the payloads that follow the rule: a parseable header, no
//! object dtype, data exactly as long as the header says.

use proptest::prelude::*;
use stampede::npy::{check, check_payload, encode_header, header, HEADER_BYTES_MAX, MAGIC};

/// Type strings as NumPy writes them (`dtype.str`), with their item sizes; `'|O'` has none.
const TYPES: [(&str, usize); 12] = [
    ("'<f4'", 4),
    ("'>i2'", 2),
    ("'|u1'", 1),
    ("'|b1'", 1),
    ("'<c16'", 16),
    ("'<M8[ns]'", 8),
    ("'<m8[10ms]'", 8),
    ("'|S5'", 5),
    ("'<U3'", 12),
    ("'|V7'", 7),
    ("[('a', '<i4'), ('b', '<f8', (2,))]", 20),
    ("[('x', [('y', '<u2', (3, 2))]), ('', '|V4')]", 16),
];

/// A `.npy` file: version 1.0 header for `dict`, padded to 64 bytes, then `data_bytes` bytes.
fn npy(dict: &str, data_bytes: usize) -> Vec<u8> {
    let total = (10 + dict.len() + 1).div_ceil(64) * 64;
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out.resize(total + data_bytes, 0xAB);
    out
}

fn dict(descr: &str, fortran: bool, shape: &[usize]) -> String {
    let dims = match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let order = if fortran { "True" } else { "False" };
    format!("{{'descr': {descr}, 'fortran_order': {order}, 'shape': {dims}, }}")
}

/// One edit of a payload.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    HugeDim(u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Truncate),
        prop_oneof![Just(u64::MAX), Just(1 << 32), Just(1 << 62), any::<u64>()].prop_map(Mutation::HugeDim),
    ]
}

fn apply(payload: &mut Vec<u8>, m: &Mutation) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match *m {
        Mutation::Flip(i, b) if !payload.is_empty() => {
            let i = at(i, payload.len());
            payload[i] ^= b.max(1);
        }
        Mutation::Insert(i, b) => {
            let i = at(i, payload.len() + 1);
            payload.insert(i, b);
        }
        Mutation::Delete(i) if !payload.is_empty() => {
            payload.remove(at(i, payload.len()));
        }
        Mutation::Truncate(i) => payload.truncate(at(i, payload.len() + 1)),
        Mutation::HugeDim(d) => {
            let key = b"'shape': (";
            if let Some(at) = payload.windows(key.len()).position(|w| w == key) {
                let at = at + key.len();
                let mut edited = payload[..at].to_vec();
                edited.extend_from_slice(format!("{d}, ").as_bytes());
                edited.extend_from_slice(&payload[at..]);
                *payload = edited;
            }
        }
        _ => {}
    }
}

/// A plain array's header gives its dtype, shape, order and sizes.
#[test]
fn plain_header() {
    let payload = npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", 48);
    let h = header(&payload).unwrap();
    assert_eq!((h.descr.as_str(), h.fortran_order, h.shape.as_slice()), ("'<f4'", true, &[3, 4][..]));
    assert_eq!((h.itemsize, h.data_offset, h.data_bytes, h.has_object), (4, 128, 48, false));
    check_payload(&payload).unwrap();
}

/// What `encode_header` writes reads back as the same dtype and shape, in C order, 64-byte
/// aligned; a header too long for version 1.0 is refused, not written wrong.
#[test]
fn encoded_headers_read_back() {
    for (descr, shape) in [("'|u1'", &[480, 640, 3][..]), ("'<f4'", &[5][..]), ("'<i8'", &[][..])] {
        let mut payload = encode_header(descr, shape).unwrap();
        assert_eq!(payload.len() % 64, 0);
        let h = header(&payload).unwrap();
        assert_eq!((h.descr.as_str(), h.shape.as_slice(), h.fortran_order), (descr, shape, false));
        payload.resize(payload.len() + h.data_bytes, 0);
        check_payload(&payload).unwrap();
    }
    let long = format!("[('{}', '<f8')]", "x".repeat(70_000));
    assert!(encode_header(&long, &[2]).is_err());
}

/// Structured dtypes add up their fields, padding and subarrays included.
#[test]
fn structured_sizes() {
    let dict = "{'descr': [('a', '<i4'), ('', '|V4'), (('t', 'b'), '<f8', (2, 3)), ('c', [('d', '<U2')])], \
                'fortran_order': False, 'shape': (2,), }";
    let h = header(&npy(dict, 0)).unwrap();
    assert_eq!(h.itemsize, 4 + 4 + 48 + 8);
    assert_eq!(h.data_bytes, 2 * 64);
}

/// Object dtypes, top-level or inside a structure or subarray, are reported and refused.
#[test]
fn objects_refused() {
    for descr in ["'|O'", "'|O8'", "[('a', '<i8'), ('b', '|O')]", "('|O', (2,))", "[('a', [('b', '|O', 2)])]"] {
        let payload = npy(&format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}"), 64);
        assert!(header(&payload).unwrap().has_object, "{descr}");
        let err = check("cam", 5, &payload).unwrap_err();
        assert!(err.to_string().contains("ts=5") && err.to_string().contains("Python objects"), "{err}");
    }
}

/// Sizes that overflow are errors, not panics or wraps.
#[test]
fn overflowing_sizes() {
    for shape in ["(18446744073709551615, 2)", "(4294967296, 4294967296)", "(9223372036854775807,)"] {
        let payload = npy(&format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"), 0);
        assert!(header(&payload).unwrap_err().reason().contains("memory"), "{shape}");
    }
    let payload = npy("{'descr': ('<f8', (4294967296, 4294967296)), 'fortran_order': False, 'shape': (), }", 0);
    assert!(header(&payload).is_err());
}

/// Deep nesting is refused before the parser sees it.
#[test]
fn deep_nesting_refused() {
    let descr = format!("{}'<f4'{}", "[".repeat(30), "]".repeat(30));
    let payload = npy(&format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (1,), }}"), 4);
    assert!(header(&payload).unwrap_err().reason().contains("nests"));
    let hidden = "{'descr': '\\N{'}' , [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], }";
    assert!(header(&npy(hidden, 0)).unwrap_err().reason().contains("nests"));
}

/// The data must be exactly as long as the header says.
#[test]
fn data_length_checked() {
    let dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (5,), }";
    assert!(check_payload(&npy(dict, 10)).is_ok());
    assert!(check_payload(&npy(dict, 9)).unwrap_err().reason().contains("10 data bytes"));
    assert!(check_payload(&npy(dict, 11)).is_err());
}

proptest! {
    // PROPTEST_CASES=n runs longer (docs/CHECKS.md).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(3000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid headers of every dtype and shape are read back exactly, and accepted with exactly
    /// the right data length; object dtypes (top-level or in a field) are reported and refused.
    #[test]
    fn valid_headers_round_trip(t in 0..TYPES.len(), fortran: bool, shape in prop::collection::vec(0usize..5, 0..4),
                                object_field: bool, extra in 0usize..3) {
        let (descr, itemsize) = TYPES[t];
        let descr = if object_field { format!("[('o', '|O'), ('v', {descr})]") } else { descr.to_owned() };
        let elements: usize = shape.iter().product();
        let itemsize = if object_field { 8 + itemsize } else { itemsize };
        let payload = npy(&dict(&descr, fortran, &shape), elements * itemsize + extra);
        let h = header(&payload).expect("a valid header");
        prop_assert_eq!(&h.shape, &shape);
        prop_assert_eq!(h.fortran_order, fortran);
        prop_assert_eq!(h.itemsize, itemsize);
        prop_assert_eq!(h.has_object, object_field);
        prop_assert_eq!(h.data_bytes, elements * itemsize);
        prop_assert_eq!(check_payload(&payload).is_ok(), !object_field && extra == 0);
    }

    /// Mutated payloads never panic; whatever is accepted satisfies the rule.
    #[test]
    fn mutated_headers_never_panic(t in 0..TYPES.len(), fortran: bool, shape in prop::collection::vec(0usize..4, 0..3),
                                   object_field: bool, mutations in prop::collection::vec(mutation(), 1..4)) {
        let (descr, itemsize) = TYPES[t];
        let descr = if object_field { format!("[('o', '|O'), ('v', {descr})]") } else { descr.to_owned() };
        let elements: usize = shape.iter().product();
        let mut payload = npy(&dict(&descr, fortran, &shape), elements * itemsize);
        for m in &mutations {
            apply(&mut payload, m);
        }
        let parsed = header(&payload);
        let checked = check_payload(&payload);
        if let Ok(h) = &parsed {
            prop_assert!(h.data_offset <= payload.len() && h.data_offset <= HEADER_BYTES_MAX);
            prop_assert_eq!(checked.is_ok(), !h.has_object && h.data_offset + h.data_bytes == payload.len());
        } else {
            prop_assert!(checked.is_err());
        }
    }

    /// Random bytes behind a valid magic never panic either.
    #[test]
    fn random_headers_never_panic(version in prop_oneof![Just(1u8), Just(2), Just(3), any::<u8>()],
                                  body in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut payload = MAGIC.to_vec();
        payload.extend_from_slice(&[version, 0]);
        payload.extend_from_slice(&body);
        let _ = check_payload(&payload);
    }
}

/// The dtype as the C and Java clients show it: simple type strings without their quotes,
/// structures as written.
#[test]
fn plain_descr_drops_the_quotes_of_simple_types_only() {
    let descr_of = |descr: &str| {
        let mut payload = encode_header(descr, &[1]).unwrap();
        payload.resize(payload.len() + header(&payload).unwrap().itemsize, 0);
        header(&payload).unwrap().plain_descr().to_owned()
    };
    assert_eq!(descr_of("'<f4'"), "<f4");
    assert_eq!(descr_of("'|u1'"), "|u1");
    assert_eq!(descr_of("[('x', '<f4')]"), "[('x', '<f4')]");
}
