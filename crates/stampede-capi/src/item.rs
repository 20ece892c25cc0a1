//! `stp_item`: a zero-copy, read-only view of an item gotten from a channel or queue (copy-out:
//! docs/SEMANTICS.md, "Channels"), and `stp_items`, the list `get_range` returns.
//!
//! The handle holds the Rust [`Item`], whose payload is a reference-counted `Bytes`: the pointer
//! `stp_item_data` returns is into the very buffer the channel stores, shared by every getter,
//! never copied. Holding the handle keeps that buffer alive — after the item is consumed and
//! reclaimed, after its channel is destroyed, after its runtime is closed and freed — until
//! `stp_item_release`. The bytes must not be written to: others see the same memory.

use std::borrow::Cow;
use std::ffi::{c_char, CStr};

use stampede::{Codec, Item, QueueItem};

use crate::args::{handle, invalid};
use crate::error::{c_text, guard, guard_value};

/// One item: timestamp, codec, and a read-only view of its bytes.
pub struct stp_item {
    pub(crate) item: Item,
    /// The queue's insertion sequence number, for items gotten from a queue (what
    /// `stp_queue_input_consume` tells same-timestamp items apart with).
    pub(crate) seq: Option<u64>,
    /// The codec's name, NUL-terminated (the standard names are static; no allocation for them).
    codec: Cow<'static, CStr>,
}

impl stp_item {
    pub(crate) fn from_channel(item: Item) -> stp_item {
        let codec = codec_name(item.codec());
        stp_item { item, seq: None, codec }
    }

    pub(crate) fn from_queue(item: QueueItem) -> stp_item {
        let codec = codec_name(item.item.codec());
        stp_item { item: item.item, seq: Some(item.seq), codec }
    }

    pub(crate) fn boxed(self) -> *mut stp_item {
        Box::into_raw(Box::new(self))
    }
}

impl Clone for stp_item {
    /// Another reference to the same bytes (no copy).
    fn clone(&self) -> stp_item {
        stp_item { item: self.item.clone(), seq: self.seq, codec: self.codec.clone() }
    }
}

fn codec_name(codec: &Codec) -> Cow<'static, CStr> {
    match codec {
        Codec::Raw => Cow::Borrowed(c"raw"),
        Codec::Utf8 => Cow::Borrowed(c"utf8"),
        Codec::Json => Cow::Borrowed(c"json"),
        Codec::Npy => Cow::Borrowed(c"npy"),
        Codec::Other(name) => Cow::Owned(c_text(name)),
    }
}

/// The item's timestamp; -1 when `item` is NULL.
///
/// # Safety
/// `item` is NULL or a live item handle.
#[no_mangle]
pub unsafe extern "C" fn stp_item_ts(item: *const stp_item) -> i64 {
    // SAFETY: NULL or live per the contract.
    guard_value("stp_item_ts", -1, || Ok(unsafe { handle(item, "stp_item_ts", "item") }?.item.ts))
}

/// The item's codec name (`"raw"`, `"utf8"`, `"json"`, `"npy"` or an application's name; an
/// interior NUL in a name put by another language shows as `\0`). NULL when `item` is NULL.
/// Valid until the item is released.
///
/// # Safety
/// `item` is NULL or a live item handle.
#[no_mangle]
pub unsafe extern "C" fn stp_item_codec(item: *const stp_item) -> *const c_char {
    guard_value("stp_item_codec", std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(item, "stp_item_codec", "item") }?.codec.as_ptr())
    })
}

/// The item's bytes: a read-only, zero-copy view, valid until the item is released (whatever
/// happens to its channel or runtime meanwhile). Never written to. NULL when `item` is NULL; a
/// non-NULL pointer (possibly dangling-but-aligned) for an empty payload — use `stp_item_len`.
///
/// # Safety
/// `item` is NULL or a live item handle.
#[no_mangle]
pub unsafe extern "C" fn stp_item_data(item: *const stp_item) -> *const u8 {
    guard_value("stp_item_data", std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(item, "stp_item_data", "item") }?.item.data().as_ptr())
    })
}

/// The payload's size in bytes; 0 when `item` is NULL.
///
/// # Safety
/// `item` is NULL or a live item handle.
#[no_mangle]
pub unsafe extern "C" fn stp_item_len(item: *const stp_item) -> usize {
    // SAFETY: NULL or live per the contract.
    guard_value("stp_item_len", 0, || Ok(unsafe { handle(item, "stp_item_len", "item") }?.item.data().len()))
}

/// Another handle to the same item (the bytes are shared, not copied); release each. NULL when
/// `item` is NULL.
///
/// # Safety
/// `item` is NULL or a live item handle (one borrowed from a `stp_items` list too).
#[no_mangle]
pub unsafe extern "C" fn stp_item_clone(item: *const stp_item) -> *mut stp_item {
    guard_value("stp_item_clone", std::ptr::null_mut(), || {
        // SAFETY: NULL or live per the contract.
        Ok(unsafe { handle(item, "stp_item_clone", "item") }?.clone().boxed())
    })
}

/// Releases an item handle: its view of the bytes ends (the buffer is freed or recycled once no
/// one else holds it). NULL is a no-op.
///
/// # Safety
/// `item` is NULL or a live item handle that the caller owns (not one borrowed from a
/// `stp_items` list), not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_item_release(item: *mut stp_item) {
    if !item.is_null() {
        guard("stp_item_release", || {
            // SAFETY: made by `Box::into_raw`, released once per the contract.
            drop(unsafe { Box::from_raw(item) });
            Ok(())
        });
    }
}

/// The items `stp_channel_input_get_range` returns, in timestamp order.
pub struct stp_items {
    pub(crate) items: Vec<stp_item>,
}

/// How many items the list holds (0 for NULL).
///
/// # Safety
/// `items` is NULL or a live list.
#[no_mangle]
pub unsafe extern "C" fn stp_items_len(items: *const stp_items) -> usize {
    // SAFETY: NULL or live per the contract.
    guard_value("stp_items_len", 0, || Ok(unsafe { handle(items, "stp_items_len", "items") }?.items.len()))
}

/// The `index`th item, borrowed from the list: valid until the list is released, not to be
/// released itself (`stp_item_clone` it to keep it longer). NULL when out of range or `items` is
/// NULL.
///
/// # Safety
/// `items` is NULL or a live list.
#[no_mangle]
pub unsafe extern "C" fn stp_items_at(items: *const stp_items, index: usize) -> *const stp_item {
    const OP: &str = "stp_items_at";
    guard_value(OP, std::ptr::null(), || {
        // SAFETY: NULL or live per the contract.
        let items = unsafe { handle(items, OP, "items") }?;
        let len = items.items.len();
        let item = items.items.get(index).ok_or_else(|| invalid(OP, "index", format!("{index} >= {len} items")))?;
        Ok(item as *const stp_item)
    })
}

/// Releases a list and every item it holds. NULL is a no-op.
///
/// # Safety
/// `items` is NULL or a live list, not used afterwards (nor are the items borrowed from it).
#[no_mangle]
pub unsafe extern "C" fn stp_items_release(items: *mut stp_items) {
    if !items.is_null() {
        guard("stp_items_release", || {
            // SAFETY: made by `Box::into_raw`, released once per the contract.
            drop(unsafe { Box::from_raw(items) });
            Ok(())
        });
    }
}
