//! Items handed to Java, the zero-copy `ByteBuffer`s over their bytes, and `.npy` headers.
//!
//! A get stores the item (its reference-counted [`Bytes`](bytes::Bytes)) in the handle table and
//! returns an `org.stampede.Item` holding the id. `Native.itemBuffer` makes a direct `ByteBuffer`
//! over those bytes — no copy — which `Item` keeps private and only hands out as read-only views.
//! The bytes stay in the table, alive and unchanged, until Java releases the id, and Java does
//! that only once the `Item` is closed (or unreachable) **and** the buffer and every view of it
//! are unreachable (`java.lang.ref.Cleaner`; `Item.java` says how). So no Java code can reach the
//! bytes after they are freed or recycled for another item.
//!
//! `.npy` headers are read by [`stampede::npy::header`], the parser every client shares (bounded,
//! safe on hostile input); the dtype `descr` comes back without its quotes when it is a plain type
//! string (`|u1`, `<f4`), as NumPy's `dtype.str` writes it, else as the header's Python literal.

use std::sync::Arc;

use jni::objects::{JByteArray, JByteBuffer, JClass, JLongArray, JObject, JString, JValue, ReleaseMode};
use jni::sys::{jint, jlong, jobject, jvalue};
use jni::JNIEnv;
use stampede::npy::NpyHeader;
use stampede::{Payload, Timestamp};

use crate::handles::{self, Entry, ItemEntry};
use crate::jvm::{self, cache, invalid, run, Result};

/// A Java `Item` for an item gotten at `ts` (with its queue sequence number, for queue items).
pub fn new_item<'l>(env: &mut JNIEnv<'l>, ts: Timestamp, seq: Option<u64>, payload: Payload) -> Result<JObject<'l>> {
    let (codec_kind, codec_name) = jvm::codec_kind(&payload.codec);
    let codec_name = match codec_name {
        Some(name) => JObject::from(env.new_string(name)?),
        None => JObject::null(),
    };
    let size = payload.len() as jlong;
    let handle = handles::insert(Entry::Item(Arc::new(ItemEntry { payload })));
    let args: [jvalue; 7] = [
        JValue::Long(handle).as_jni(),
        JValue::Long(ts).as_jni(),
        JValue::Long(seq.map_or(0, |s| s as i64)).as_jni(),
        JValue::Bool(jvm::boolean(seq.is_some())).as_jni(),
        JValue::Int(codec_kind).as_jni(),
        JValue::Object(&codec_name).as_jni(),
        JValue::Long(size).as_jni(),
    ];
    let cache = cache();
    let class = <&JClass>::from(cache.item.as_obj());
    // SAFETY: the constructor id was resolved on this class with signature
    // (long, long, long, boolean, int, String, long) (jvm::load), which the arguments match.
    let item = unsafe { env.new_object_unchecked(class, cache.item_new, &args) };
    // Gets of a range make many items in one native call: local references must not pile up.
    if !codec_name.is_null() {
        env.delete_local_ref(codec_name)?;
    }
    match item {
        Ok(item) => Ok(item),
        Err(e) => {
            handles::release(handle); // no Java object holds it
            Err(e.into())
        }
    }
}

/// A direct `ByteBuffer` over the item's bytes (writable as far as the JVM knows: `Item` keeps it
/// private and hands out read-only views). Not called for empty items.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_itemBuffer(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    item: jlong,
) -> jobject {
    run(&mut env, |env| {
        let entry = handles::item(item)?;
        let data = &entry.payload.data;
        if data.is_empty() || data.len() > i32::MAX as usize {
            let reason = format!("a ByteBuffer holds 1 ..= 2^31-1 bytes; this item has {}", data.len());
            return Err(invalid("data", "item", reason));
        }
        // SAFETY: the pointer is non-null and valid for `len` bytes for as long as the entry
        // holds the Bytes, and the Java side releases the entry only once this buffer and every
        // view of it are unreachable (see the module doc). Nothing writes through it: the buffer
        // stays private to `Item`, which hands out read-only views only.
        let buffer = unsafe { env.new_direct_byte_buffer(data.as_ptr() as *mut u8, data.len()) }?;
        Ok(buffer.into_raw())
    })
}

/// A copy of the item's bytes as a `byte[]`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_itemCopy(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    item: jlong,
) -> jobject {
    run(&mut env, |env| {
        let entry = handles::item(item)?;
        let data = &entry.payload.data;
        if data.len() > i32::MAX as usize {
            let reason = format!("a byte[] holds at most 2^31-1 bytes; this item has {}", data.len());
            return Err(invalid("bytes", "item", reason));
        }
        Ok(env.byte_array_from_slice(data)?.into_raw())
    })
}

/// The `.npy` header of the item gotten at `ts` (`InvalidArgument` naming the rule broken).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_itemNpy(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    item: jlong,
    ts: jlong,
) -> jobject {
    run(&mut env, |env| {
        let entry = handles::item(item)?;
        let header = stampede::npy::header(&entry.payload.data)
            .map_err(|e| invalid("npy", &format!("item ts={ts}"), format!("not a valid .npy payload: {e}")))?;
        npy_header(env, &header)
    })
}

/// The `.npy` header of `length` bytes of a `byte[]` from `offset`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_npyHeaderArray<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    data: JByteArray<'l>,
    offset: jint,
    length: jint,
) -> jobject {
    run(&mut env, |env| {
        let total = env.get_array_length(&data)?;
        let range = bounds(offset, length, total as usize, "npy")?;
        let mut bytes = vec![0i8; range.len()];
        env.get_byte_array_region(&data, offset, &mut bytes)?;
        let bytes: Vec<u8> = bytes.into_iter().map(|b| b as u8).collect();
        let header = parse(&bytes)?;
        npy_header(env, &header)
    })
}

/// The `.npy` header of `length` bytes of a direct `ByteBuffer` from `offset`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_npyHeaderDirect<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    data: JByteBuffer<'l>,
    offset: jint,
    length: jint,
) -> jobject {
    run(&mut env, |env| {
        let header = {
            let bytes = direct_slice(env, &data, offset, length, "npy")?;
            parse(bytes)?
        };
        npy_header(env, &header)
    })
}

/// The header of a C-order `.npy` array of dtype `descr` (NumPy's `dtype.str`, `|u1`, or a
/// Python literal) and `shape`: what a producer puts before the array's bytes.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_npyEncodeHeader<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    descr: JString<'l>,
    shape: JLongArray<'l>,
) -> jobject {
    run(&mut env, |env| {
        let descr = jvm::string(env, &descr, "descr")?;
        let length = env.get_array_length(&shape)?;
        let mut dims = vec![0i64; length as usize];
        env.get_long_array_region(&shape, 0, &mut dims)?;
        let dims = dims
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| invalid("npy", "shape", format!("a dimension is negative: {d}"))))
            .collect::<Result<Vec<usize>>>()?;
        let literal = if descr.starts_with(['\'', '[', '(']) { descr } else { format!("'{descr}'") };
        let header =
            stampede::npy::encode_header(&literal, &dims).map_err(|e| invalid("npy", "header", e.to_string()))?;
        // Refuse what no reader would accept (unknown dtypes, sizes that overflow).
        let checked = stampede::npy::header(&header).map_err(|e| invalid("npy", "header", e.to_string()))?;
        if checked.has_object {
            return Err(invalid("npy", "header", format!("dtype {literal} holds Python objects")));
        }
        Ok(env.byte_array_from_slice(&header)?.into_raw())
    })
}

/// The address a direct `ByteBuffer` points at (for tests: two gets of one item share memory).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_bufferAddress<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    buffer: JByteBuffer<'l>,
) -> jlong {
    run(&mut env, |env| {
        if buffer.is_null() {
            return Err(invalid("bufferAddress", "buffer", "the buffer is null"));
        }
        Ok(env
            .get_direct_buffer_address(&buffer)
            .map_err(|_| invalid("bufferAddress", "buffer", "not a direct buffer"))? as jlong)
    })
}

fn parse(bytes: &[u8]) -> Result<NpyHeader> {
    stampede::npy::header(bytes).map_err(|e| invalid("npy", "header", format!("not a valid .npy payload: {e}")))
}

/// `offset .. offset + length` when it lies within `total` bytes; `InvalidArgument` from `op`
/// otherwise.
pub fn bounds(offset: jint, length: jint, total: usize, op: &'static str) -> Result<std::ops::Range<usize>> {
    let (Ok(offset), Ok(length)) = (usize::try_from(offset), usize::try_from(length)) else {
        return Err(invalid(op, "data", format!("offset {offset} and length {length} must not be negative")));
    };
    match offset.checked_add(length) {
        Some(end) if end <= total => Ok(offset..end),
        _ => Err(invalid(op, "data", format!("offset {offset} + length {length} is beyond the {total} bytes there"))),
    }
}

/// `length` bytes from `offset` of a direct `ByteBuffer`.
///
/// The slice borrows memory the JVM owns: valid while the caller's local reference keeps the
/// buffer alive (the whole native call), unless Java code frees it explicitly meanwhile (an
/// unsafe `Unsafe.invokeCleaner`, the caller's own doing). Java threads writing to the buffer
/// during the call race with the copy; `put`'s documentation tells callers not to.
pub fn direct_slice<'b>(
    env: &JNIEnv<'_>,
    buffer: &'b JByteBuffer<'_>,
    offset: jint,
    length: jint,
    op: &'static str,
) -> Result<&'b [u8]> {
    if buffer.is_null() {
        return Err(invalid(op, "data", "the buffer is null"));
    }
    let address = env.get_direct_buffer_address(buffer).map_err(|_| invalid(op, "data", "not a direct buffer"))?;
    let capacity = env.get_direct_buffer_capacity(buffer)?;
    let range = bounds(offset, length, capacity, op)?;
    if range.is_empty() {
        return Ok(&[]);
    }
    // SAFETY: `address` is the start of the buffer's `capacity` bytes, `range` lies within them,
    // and the buffer stays alive for the call (see above).
    Ok(unsafe { std::slice::from_raw_parts(address.add(range.start), range.len()) })
}

/// A Java `NpyHeader`.
fn npy_header(env: &mut JNIEnv<'_>, header: &NpyHeader) -> Result<jobject> {
    let descr = JObject::from(env.new_string(header.plain_descr())?);
    let dims: Vec<i64> = header.shape.iter().map(|&d| d as i64).collect();
    let shape = env.new_long_array(dims.len() as i32)?;
    env.set_long_array_region(&shape, 0, &dims)?;
    let object = env.new_object(
        "org/stampede/NpyHeader",
        "(Ljava/lang/String;Z[JJZJJII)V",
        &[
            JValue::Object(&descr),
            JValue::Bool(jvm::boolean(header.fortran_order)),
            JValue::Object(&shape),
            JValue::Long(header.itemsize as i64),
            JValue::Bool(jvm::boolean(header.has_object)),
            JValue::Long(header.data_offset as i64),
            JValue::Long(header.data_bytes as i64),
            JValue::Int(i32::from(header.version.0)),
            JValue::Int(i32::from(header.version.1)),
        ],
    )?;
    Ok(object.into_raw())
}

/// Copies `length` bytes from `offset` of a `byte[]` in through `copy_in` (one copy, through the
/// JVM's critical access: no JNI call and no wait happens while the array is held).
pub fn copy_array(
    env: &mut JNIEnv<'_>,
    data: &JByteArray<'_>,
    offset: jint,
    length: jint,
    copy_in: impl FnOnce(&[u8]) -> bytes::Bytes,
) -> Result<bytes::Bytes> {
    if data.is_null() {
        return Err(invalid("put", "data", "the data is null"));
    }
    let total = env.get_array_length(data)?;
    let range = bounds(offset, length, total as usize, "put")?;
    // SAFETY: one critical access to this array at a time (this function's); it is released
    // (dropped) before any other JNI call, and `copy_in` only copies memory.
    let elements = unsafe { env.get_array_elements_critical(data, ReleaseMode::NoCopyBack) }?;
    let signed: &[i8] = &elements[range];
    // SAFETY: i8 and u8 have the same size and alignment; the slice is valid while `elements` is.
    let bytes = unsafe { std::slice::from_raw_parts(signed.as_ptr().cast::<u8>(), signed.len()) };
    Ok(copy_in(bytes))
}
