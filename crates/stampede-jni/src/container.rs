//! `org.stampede.Channel` and `org.stampede.Queue`: names, bounds, stats, info, GC handlers,
//! destruction, and the channel-only settledness and retention calls.

use jni::objects::{JClass, JObject};
use jni::sys::{jboolean, jint, jlong, jobject};
use jni::JNIEnv;
use stampede::{Channel, Codec, Container, Retention, Stats};

use crate::handles;
use crate::jvm::{self, invalid, run, Result};

/// The channel of `handle`; `InvalidArgument` for a queue (the Java side never asks).
fn channel(handle: jlong) -> Result<Channel> {
    match &handles::container(handle)?.container {
        Container::Channel(ch) => Ok(ch.clone()),
        Container::Queue(q) => Err(invalid("channel", q.name(), "a queue, not a channel")),
    }
}

/// `true` for a queue, `false` for a channel.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerIsQueue(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jboolean {
    run(&mut env, |_| Ok(jvm::boolean(matches!(handles::container(handle)?.container, Container::Queue(_)))))
}

/// The container's name.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerName(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jobject {
    run(&mut env, |env| {
        let entry = handles::container(handle)?;
        jvm::new_string(env, entry.container.name())
    })
}

/// The container's id, unique within its runtime and kind.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerId(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jlong {
    run(&mut env, |_| {
        Ok(match &handles::container(handle)?.container {
            Container::Channel(ch) => ch.id(),
            Container::Queue(q) => q.id(),
        } as jlong)
    })
}

/// `[capacity, max_bytes]`, `-1` for none.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerLimits(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jobject {
    run(&mut env, |env| {
        let limits = match &handles::container(handle)?.container {
            Container::Channel(ch) => ch.limits(),
            Container::Queue(q) => q.limits(),
        };
        jvm::long_array(env, &[jvm::or_minus_one(limits.capacity), jvm::or_minus_one(limits.bytes_max)])
    })
}

/// `[live_items, live_bytes, reclaimed, puts, gets, inputs, outputs, tombstones, tombstone_runs,
/// claim (-1: none), ts_min, handler_errors]`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerStats(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jobject {
    run(&mut env, |env| {
        let entry = handles::container(handle)?;
        let stats: Stats = match &entry.container {
            Container::Channel(ch) => ch.stats(),
            Container::Queue(q) => q.stats(),
        };
        let values = [
            stats.live_items as i64,
            stats.live_bytes as i64,
            stats.reclaimed as i64,
            stats.puts as i64,
            stats.gets as i64,
            stats.inputs as i64,
            stats.outputs as i64,
            stats.tombstones as i64,
            stats.tombstone_runs as i64,
            jvm::or_minus_one(stats.claim),
            stats.ts_min,
            entry.handlers.errors_of(entry.container.name()) as i64,
        ];
        jvm::long_array(env, &values)
    })
}

/// `[name, kind, node, codec, description]` (node and codec null when absent).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerInfo(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jobject {
    run(&mut env, |env| {
        let info = match &handles::container(handle)?.container {
            Container::Channel(ch) => ch.info(),
            Container::Queue(q) => q.info(),
        };
        let fields =
            [Some(info.name.as_str()), Some(info.kind), info.node.as_deref(), info.codec.as_ref().map(Codec::name)];
        let array = env.new_object_array(5, "java/lang/String", JObject::null())?;
        for (i, field) in fields.into_iter().chain([Some(info.description.as_str())]).enumerate() {
            if let Some(field) = field {
                let s = env.new_string(field)?;
                env.set_object_array_element(&array, i as i32, &s)?;
                env.delete_local_ref(s)?;
            }
        }
        Ok(array.into_raw())
    })
}

/// Destroys the container.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerDestroy(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) {
    run(&mut env, |_| match &handles::container(handle)?.container {
        Container::Channel(ch) => Ok(ch.destroy()?),
        Container::Queue(q) => Ok(q.destroy()?),
    })
}

/// Sets (or, with null, removes) the container's GC handler, a `ReclaimHandler`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerOnReclaim<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    handler: JObject<'l>,
) {
    run(&mut env, |env| {
        let entry = handles::container(handle)?;
        let handler = crate::runtime::handler_ref(env, &handler, "org/stampede/ReclaimHandler")?;
        entry.handlers.set(&entry.container, handler)
    })
}

/// `true` when both handles refer to the same channel or queue through the same runtime.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_containerEquals(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    a: jlong,
    b: jlong,
) -> jboolean {
    run(&mut env, |_| {
        let (a, b) = (handles::container(a)?, handles::container(b)?);
        Ok(jvm::boolean(match (&a.container, &b.container) {
            (Container::Channel(a), Container::Channel(b)) => a == b,
            (Container::Queue(a), Container::Queue(b)) => a == b,
            _ => false,
        }))
    })
}

/// The timestamps a channel stores now, in order.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelTimestamps(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jobject {
    run(&mut env, |env| {
        let timestamps = channel(handle)?.timestamps();
        jvm::long_array(env, &timestamps)
    })
}

/// 0 for history, 1 for current readers.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelRetention(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jint {
    run(&mut env, |_| {
        Ok(match channel(handle)?.retention() {
            Retention::History => 0,
            Retention::CurrentReaders => 1,
        })
    })
}

/// Every timestamp below the returned one is settled.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelSettledBelow(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jlong {
    run(&mut env, |_| Ok(channel(handle)?.settled_below()))
}

/// Closes the channel's producer set.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelCloseProducers(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) {
    run(&mut env, |_| Ok(channel(handle)?.close_producers()?))
}

/// `true` once the channel's producer set is closed.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelProducersClosed(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jboolean {
    run(&mut env, |_| Ok(jvm::boolean(channel(handle)?.producers_closed())))
}

/// `[items, bytes, extents, written, recovered]` of the channel's disk tier, or null.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_channelDiskStats(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    handle: jlong,
) -> jobject {
    run(&mut env, |env| {
        let Some(stats) = channel(handle)?.disk_stats() else {
            return Ok(std::ptr::null_mut());
        };
        let values = [
            stats.items as i64,
            stats.bytes as i64,
            stats.extents as i64,
            stats.written as i64,
            stats.recovered as i64,
        ];
        jvm::long_array(env, &values)
    })
}
