//! The four kinds of connection: puts into channels and queues (from a `byte[]`, a direct
//! `ByteBuffer` or another item), gets, ranges and consumes, and detaching.
//!
//! Copy-in: a put copies the caller's bytes exactly once, into a buffer from the connection's
//! recycling pool (`copy_in`), after `check_fits` has accepted their size (an item larger than
//! the container's byte bound fails `Full` before a byte is copied); then it puts that buffer,
//! waiting as long as the timeout allows. A put of an item shares the item's bytes: no copy.

use std::sync::Arc;

use bytes::Bytes;
use jni::objects::{JByteArray, JByteBuffer, JClass, JObject, JString};
use jni::sys::{jint, jlong, jobject};
use jni::JNIEnv;
use stampede::{ChannelOutput, Codec, Item, Payload, PutOptions, QueueItem, QueueOutput, Timestamp};

use crate::handles::{self, Entry};
use crate::item::{copy_array, direct_slice, new_item};
use crate::jvm::{self, invalid, run, Failure, Result};

/// An output connection of either kind.
enum Output {
    Channel(Arc<ChannelOutput>),
    Queue(Arc<QueueOutput>),
}

impl Output {
    fn of(handle: jlong) -> Result<Output> {
        match handles::get(handle) {
            Some(Entry::ChannelOutput(out)) => Ok(Output::Channel(out)),
            Some(Entry::QueueOutput(out)) => Ok(Output::Queue(out)),
            _ => Err(Failure::Stampede(stampede::Error::Closed {
                name: format!("output connection handle {handle}"),
                reason: "the Java object holding it was released",
            })),
        }
    }

    fn name(&self) -> &str {
        match self {
            Output::Channel(out) => out.channel().name(),
            Output::Queue(out) => out.queue().name(),
        }
    }

    fn check_fits(&self, ts: Timestamp, payload_bytes: usize) -> Result<()> {
        Ok(match self {
            Output::Channel(out) => out.check_fits(ts, payload_bytes),
            Output::Queue(out) => out.check_fits(ts, payload_bytes),
        }?)
    }

    fn copy_in(&self, bytes: &[u8]) -> Bytes {
        match self {
            Output::Channel(out) => out.copy_in(&[bytes]),
            Output::Queue(out) => out.copy_in(&[bytes]),
        }
    }

    /// Puts `payload`; `refcount` negative for none (a queue refuses one).
    fn put(&self, ts: Timestamp, payload: Payload, refcount: jlong, timeout_nanos: jlong) -> Result<()> {
        let timeout = jvm::timeout(timeout_nanos);
        match self {
            Output::Channel(out) => {
                let refcount = match refcount {
                    -1 => None,
                    r => Some(u32::try_from(r).map_err(|_| {
                        invalid(
                            "put",
                            self.name(),
                            format!("refcount={r} is out of range (1 ..= 2^32-1, or -1 for none)"),
                        )
                    })?),
                };
                Ok(out.put_with(ts, payload, PutOptions { refcount, timeout })?)
            }
            Output::Queue(_) if refcount >= 0 => Err(invalid(
                "put",
                self.name(),
                "a queue item goes to exactly one getter: a reference count is for channels",
            )),
            Output::Queue(out) => Ok(out.put(ts, payload, timeout)?),
        }
    }
}

/// Puts `length` bytes of a `byte[]` from `offset`, copied once.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a put's arguments, flattened for JNI
pub extern "system" fn Java_org_stampede_Native_putArray<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    out: jlong,
    ts: jlong,
    data: JByteArray<'l>,
    offset: jint,
    length: jint,
    codec_kind: jint,
    codec_name: JString<'l>,
    refcount: jlong,
    timeout_nanos: jlong,
) {
    run(&mut env, |env| {
        let out = Output::of(out)?;
        let codec = jvm::codec(env, codec_kind, &codec_name)?;
        out.check_fits(ts, length.max(0) as usize)?;
        let data = copy_array(env, &data, offset, length, |bytes| out.copy_in(bytes))?;
        out.put(ts, Payload { data, codec }, refcount, timeout_nanos)
    })
}

/// Puts `length` bytes of a direct `ByteBuffer` from `offset`, copied once.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a put's arguments, flattened for JNI
pub extern "system" fn Java_org_stampede_Native_putDirect<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    out: jlong,
    ts: jlong,
    data: JByteBuffer<'l>,
    offset: jint,
    length: jint,
    codec_kind: jint,
    codec_name: JString<'l>,
    refcount: jlong,
    timeout_nanos: jlong,
) {
    run(&mut env, |env| {
        let out = Output::of(out)?;
        let codec = jvm::codec(env, codec_kind, &codec_name)?;
        out.check_fits(ts, length.max(0) as usize)?;
        let data = out.copy_in(direct_slice(env, &data, offset, length, "put")?);
        out.put(ts, Payload { data, codec }, refcount, timeout_nanos)
    })
}

/// Puts another item's bytes without copying them; `codec_kind` negative keeps its codec.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // a put's arguments, flattened for JNI
pub extern "system" fn Java_org_stampede_Native_putItem<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    out: jlong,
    ts: jlong,
    item: jlong,
    codec_kind: jint,
    codec_name: JString<'l>,
    refcount: jlong,
    timeout_nanos: jlong,
) {
    run(&mut env, |env| {
        let out = Output::of(out)?;
        let mut payload = handles::item(item)?.payload.clone();
        if codec_kind >= 0 {
            payload.codec = jvm::codec(env, codec_kind, &codec_name)?;
        }
        out.put(ts, payload, refcount, timeout_nanos)
    })
}

/// Demand feedback of a channel output: the lowest timestamp any consumer may still get.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_outputDemand(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    out: jlong,
) -> jlong {
    run(&mut env, |_| match Output::of(out)? {
        Output::Channel(out) => Ok(out.demand()),
        Output::Queue(out) => Err(invalid("demand", out.queue().name(), "demand is for channel outputs")),
    })
}

/// Waits until every put of a channel output landed or failed, and throws the oldest error of a
/// pipelined put not thrown yet (docs/NODES.md, "Pipelined puts").
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_outputFlush(mut env: JNIEnv<'_>, _class: JClass<'_>, out: jlong) {
    run(&mut env, |_| match Output::of(out)? {
        Output::Channel(out) => Ok(out.flush()?),
        Output::Queue(out) => Err(invalid("flush", out.queue().name(), "flush is for channel outputs")),
    })
}

/// Detaches a connection of any kind (idempotent); a call blocked on it returns `Closed`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_detach(mut env: JNIEnv<'_>, _class: JClass<'_>, conn: jlong) {
    run(&mut env, |_| {
        match handles::get(conn) {
            Some(Entry::ChannelInput(c)) => c.detach(),
            Some(Entry::ChannelOutput(c)) => c.detach(),
            Some(Entry::QueueInput(c)) => c.detach(),
            Some(Entry::QueueOutput(c)) => c.detach(),
            // Released already: nothing is attached through it any more.
            _ => {}
        }
        Ok(())
    })
}

/// Gets an item from a channel input (selector kind and timestamp as `jvm::selector`).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelGet(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    input: jlong,
    selector_kind: jint,
    ts: jlong,
    timeout_nanos: jlong,
) -> jobject {
    run(&mut env, |env| {
        let input = handles::channel_input(input)?;
        let selector = jvm::selector(selector_kind, ts)?;
        let Item { ts, payload } = input.get(selector, jvm::timeout(timeout_nanos))?;
        Ok(new_item(env, ts, None, payload)?.into_raw())
    })
}

/// Every item from `t0` to `t1` present and not consumed on the connection, as an `Item[]`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelGetRange(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    input: jlong,
    t0: jlong,
    t1: jlong,
) -> jobject {
    run(&mut env, |env| {
        let items = handles::channel_input(input)?.get_range(t0, t1)?;
        let length = i32::try_from(items.len()).map_err(|_| invalid("get_range", "", "more than 2^31-1 items"))?;
        let class = <&JClass>::from(jvm::cache().item.as_obj());
        let array = env.new_object_array(length, class, JObject::null())?;
        for (i, Item { ts, payload }) in items.into_iter().enumerate() {
            let item = new_item(env, ts, None, payload)?;
            env.set_object_array_element(&array, i as i32, &item)?;
            env.delete_local_ref(item)?;
        }
        Ok(array.into_raw())
    })
}

/// Marks the item at `ts` consumed on a channel input.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelConsume(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    input: jlong,
    ts: jlong,
) {
    run(&mut env, |_| Ok(handles::channel_input(input)?.consume(ts)?))
}

/// Marks every item up to `ts` consumed on a channel input.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelConsumeUntil(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    input: jlong,
    ts: jlong,
) {
    run(&mut env, |_| Ok(handles::channel_input(input)?.consume_until(ts)?))
}

/// Takes the oldest waiting item of a queue input.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_queueGet(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    input: jlong,
    timeout_nanos: jlong,
) -> jobject {
    run(&mut env, |env| {
        let QueueItem { seq, item } = handles::queue_input(input)?.get(jvm::timeout(timeout_nanos))?;
        Ok(new_item(env, item.ts, Some(seq), item.payload)?.into_raw())
    })
}

/// Consumes the queue item gotten with sequence number `seq` at `ts` (`seq` negative: the oldest
/// item open on the connection at `ts`).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_queueConsume(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    input: jlong,
    seq: jlong,
    ts: jlong,
) {
    run(&mut env, |_| {
        let input = handles::queue_input(input)?;
        if seq < 0 {
            return Ok(input.consume_ts(ts)?);
        }
        // Consuming names the item by sequence number and timestamp; its bytes play no part.
        let item = Item { ts, payload: Payload { data: Bytes::new(), codec: Codec::Raw } };
        Ok(input.consume(&QueueItem { seq: seq as u64, item })?)
    })
}
