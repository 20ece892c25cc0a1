//! `org.stampede.Runtime` and `Stampede.connect`: an embedded runtime or a session on a node, its
//! names, tasks, ts_min, GC pass, handlers, stats, graph and watches; and the library's own calls
//! (`abiVersion`, `release`, `handleCount`).

use std::sync::Arc;

use jni::objects::{JClass, JObject, JObjectArray, JString};
use jni::sys::{jboolean, jint, jlong, jobject};
use jni::JNIEnv;
use parking_lot::Mutex;
use stampede::{
    ChannelOptions, ClientTls, ConnectOptions, Container, Credentials, DiskTier, Limits, QueueOptions, Retention,
    WatchEvent,
};

use crate::handles::{self, ContainerEntry, Entry, RuntimeEntry};
use crate::jvm::{self, invalid, run, Result};

/// The contract version this library implements (`Native.ABI_VERSION` must match).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_abiVersion(_env: JNIEnv<'_>, _class: JClass<'_>) -> jint {
    crate::ABI_VERSION
}

/// Drops the native object of `handle` (idempotent).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_release(mut env: JNIEnv<'_>, _class: JClass<'_>, handle: jlong) {
    run(&mut env, |_| {
        handles::release(handle);
        Ok(())
    })
}

/// How many native objects Java holds (for tests).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_handleCount(mut env: JNIEnv<'_>, _class: JClass<'_>) -> jlong {
    run(&mut env, |_| Ok(handles::count() as jlong))
}

fn insert_runtime(runtime: stampede::Runtime) -> jlong {
    handles::insert(Entry::Runtime(Arc::new(RuntimeEntry { runtime, handlers: Arc::default() })))
}

/// A new embedded runtime.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeNew(mut env: JNIEnv<'_>, _class: JClass<'_>) -> jlong {
    run(&mut env, |_| Ok(insert_runtime(stampede::Runtime::new())))
}

/// A session on the node at `endpoint` (`stampede::connect_with`); every string but the endpoint
/// may be null.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the fields of ConnectOptions, flattened for JNI
pub extern "system" fn Java_org_stampede_Native_connect<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    endpoint: JString<'l>,
    timeout_nanos: jlong,
    node: JString<'l>,
    user: JString<'l>,
    password: JString<'l>,
    root_ca: JString<'l>,
    certificate: JString<'l>,
    private_key: JString<'l>,
    prefetch: JString<'l>,
) -> jlong {
    run(&mut env, |env| {
        let endpoint = jvm::string(env, &endpoint, "endpoint")?;
        let user =
            Credentials::pair(jvm::optional_string(env, &user)?, jvm::optional_string(env, &password)?, &endpoint)?;
        let tls = ClientTls::from_paths(
            jvm::optional_string(env, &root_ca)?,
            jvm::optional_string(env, &certificate)?,
            jvm::optional_string(env, &private_key)?,
        );
        let options = ConnectOptions {
            timeout: jvm::timeout(timeout_nanos),
            node: jvm::optional_string(env, &node)?,
            tls,
            user,
            placement: None,
            prefetch: jvm::prefetch(env, &prefetch, "connect", &endpoint)?.unwrap_or_default(),
            ..ConnectOptions::default()
        };
        Ok(insert_runtime(stampede::connect_with(&endpoint, &options)?))
    })
}

/// The node a client's session is on (null when embedded).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeNode(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jobject {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        jvm::new_optional_string(env, rt.runtime.node())
    })
}

fn limits(capacity: jlong, max_bytes: jlong, op: &'static str, name: &str) -> Result<Limits> {
    Ok(Limits {
        capacity: jvm::optional_count(capacity, op, name, "capacity")?,
        bytes_max: jvm::optional_count(max_bytes, op, name, "max_bytes")?,
    })
}

fn container(rt: &RuntimeEntry, container: Container) -> jlong {
    handles::insert(Entry::Container(Arc::new(ContainerEntry { container, handlers: rt.handlers.clone() })))
}

/// Creates a channel. `capacity`, `max_bytes`: negative for none; `retention`: 0 history, 1
/// current readers; `codec_kind` negative for no declared codec; `disk_dirs` null for no disk
/// tier, `extent_bytes` and `memory_items` negative for the defaults.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the fields of ChannelOptions, flattened for JNI
pub extern "system" fn Java_org_stampede_Native_runtimeCreateChannel<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    rt: jlong,
    name: JString<'l>,
    capacity: jlong,
    max_bytes: jlong,
    retention: jint,
    codec_kind: jint,
    codec_name: JString<'l>,
    description: JString<'l>,
    node: JString<'l>,
    disk_dirs: JObjectArray<'l>,
    extent_bytes: jlong,
    memory_items: jlong,
) -> jlong {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let name = jvm::string(env, &name, "name")?;
        let retention = match retention {
            0 => Retention::History,
            1 => Retention::CurrentReaders,
            other => return Err(invalid("create_channel", &name, format!("unknown retention {other}"))),
        };
        let codec = if codec_kind < 0 { None } else { Some(jvm::codec(env, codec_kind, &codec_name)?) };
        let disk = if disk_dirs.is_null() {
            None
        } else {
            let mut tier = DiskTier::new(Vec::<std::path::PathBuf>::new());
            for i in 0..env.get_array_length(&disk_dirs)? {
                let dir = JString::from(env.get_object_array_element(&disk_dirs, i)?);
                tier.dirs.push(jvm::string(env, &dir, "a disk directory")?.into());
                env.delete_local_ref(dir)?;
            }
            if let Some(bytes) = jvm::optional_count(extent_bytes, "create_channel", &name, "extent_bytes")? {
                tier.extent_bytes = bytes as u64;
            }
            if let Some(items) = jvm::optional_count(memory_items, "create_channel", &name, "memory_items")? {
                tier.memory_items = items;
            }
            Some(tier)
        };
        let options = ChannelOptions {
            limits: limits(capacity, max_bytes, "create_channel", &name)?,
            retention,
            codec,
            description: jvm::optional_string(env, &description)?.unwrap_or_default(),
            node: jvm::optional_string(env, &node)?,
            disk,
        };
        let channel = rt.runtime.create_channel(&name, options)?;
        Ok(container(&rt, Container::Channel(channel)))
    })
}

/// Creates a queue (`capacity`, `max_bytes` -1 for none).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeCreateQueue<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    rt: jlong,
    name: JString<'l>,
    capacity: jlong,
    max_bytes: jlong,
    description: JString<'l>,
    node: JString<'l>,
) -> jlong {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let name = jvm::string(env, &name, "name")?;
        let options = QueueOptions {
            limits: limits(capacity, max_bytes, "create_queue", &name)?,
            description: jvm::optional_string(env, &description)?.unwrap_or_default(),
            node: jvm::optional_string(env, &node)?,
        };
        let queue = rt.runtime.create_queue(&name, options)?;
        Ok(container(&rt, Container::Queue(queue)))
    })
}

/// The channel or queue called `name` (`Native.containerIsQueue` tells which).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeLookup<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    rt: jlong,
    name: JString<'l>,
) -> jlong {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let name = jvm::string(env, &name, "name")?;
        let found = rt.runtime.lookup(&name)?;
        Ok(container(&rt, found))
    })
}

/// Names under `prefix`, sorted.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeNames<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    rt: jlong,
    prefix: JString<'l>,
) -> jobject {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let prefix = jvm::string(env, &prefix, "prefix")?;
        let names = rt.runtime.names(&prefix)?;
        jvm::string_array(env, &names)
    })
}

/// The nodes this runtime reaches.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeNodes(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jobject {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let nodes = rt.runtime.nodes()?;
        jvm::string_array(env, &nodes)
    })
}

/// A root task at `virtual_time`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeTask(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
    virtual_time: jlong,
) -> jlong {
    run(&mut env, |_| {
        let rt = handles::runtime(rt)?;
        let task = rt.runtime.task(virtual_time)?;
        Ok(handles::insert(Entry::Task(Arc::new(task))))
    })
}

/// The runtime's ts_min.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeTsMin(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jlong {
    run(&mut env, |_| Ok(handles::runtime(rt)?.runtime.ts_min()))
}

/// A GC pass now; the number of items reclaimed.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeCollect(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jlong {
    run(&mut env, |_| Ok(handles::runtime(rt)?.runtime.collect() as jlong))
}

/// Sets (or, with null, removes) the runtime-wide GC handler, a `RuntimeReclaimHandler`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeOnReclaim<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    rt: jlong,
    handler: JObject<'l>,
) {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let handler = handler_ref(env, &handler, "org/stampede/RuntimeReclaimHandler")?;
        rt.handlers.set_runtime(&rt.runtime, handler)
    })
}

/// A global reference to `handler` after checking its type; `None` for null.
pub(crate) fn handler_ref(
    env: &mut JNIEnv<'_>,
    handler: &JObject<'_>,
    class: &str,
) -> Result<Option<jni::objects::GlobalRef>> {
    if handler.is_null() {
        return Ok(None);
    }
    if !env.is_instance_of(handler, class)? {
        return Err(invalid("on_reclaim", "handler", format!("the handler is not a {class}")));
    }
    Ok(Some(env.new_global_ref(handler)?))
}

/// `[ts_min, containers, claims, handler_errors]`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeStats(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jobject {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let stats = rt.runtime.stats();
        let values = [stats.ts_min, stats.containers as i64, stats.claims as i64, rt.handlers.errors() as i64];
        jvm::long_array(env, &values)
    })
}

/// The runtime's graph (tasks, connections, containers) as JSON.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeGraph(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jobject {
    run(&mut env, |env| {
        let graph = handles::runtime(rt)?.runtime.graph()?;
        let json = serde_json::to_string(&graph).map_err(|e| invalid("graph", "runtime", e.to_string()))?;
        jvm::new_string(env, &json)
    })
}

/// Ends the runtime (embedded) or the session (client), then drops its Java GC handlers.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeClose(mut env: JNIEnv<'_>, _class: JClass<'_>, rt: jlong) {
    run(&mut env, |_| {
        let rt = handles::runtime(rt)?;
        rt.runtime.close();
        rt.handlers.clear();
        Ok(())
    })
}

/// `true` once the runtime is closed.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeIsClosed(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    rt: jlong,
) -> jboolean {
    run(&mut env, |_| Ok(jvm::boolean(handles::runtime(rt)?.runtime.is_closed())))
}

/// A watch of the names under `prefix`; `timeout_nanos` ends it when nothing happens that long.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_runtimeWatch<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    rt: jlong,
    prefix: JString<'l>,
    timeout_nanos: jlong,
) -> jlong {
    run(&mut env, |env| {
        let rt = handles::runtime(rt)?;
        let prefix = jvm::string(env, &prefix, "prefix")?;
        let watch = rt.runtime.watch(&prefix, jvm::timeout(timeout_nanos))?;
        Ok(handles::insert(Entry::Watch(Arc::new(Mutex::new(watch)))))
    })
}

/// Longest a `watchNext` waits before it looks whether its watch was closed.
const WATCH_SLICE: std::time::Duration = std::time::Duration::from_millis(50);

/// The next event as `[event, name, kind, node, missed]` (absent fields null), or null when
/// nothing happened within the timeout, or the watch or the runtime closed (a closed watch ends
/// a waiting call within [`WATCH_SLICE`]).
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_watchNext(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    watch: jlong,
    timeout_nanos: jlong,
) -> jobject {
    run(&mut env, |env| {
        let id = watch;
        let watch = handles::watch(id)?;
        let deadline = jvm::timeout(timeout_nanos).and_then(|t| std::time::Instant::now().checked_add(t));
        let event = loop {
            let slice = deadline
                .map_or(WATCH_SLICE, |d| d.saturating_duration_since(std::time::Instant::now()).min(WATCH_SLICE));
            // Another call waiting on this watch holds it: this one waits its turn, a slice at a time.
            match watch.try_lock_for(slice).map(|mut watch| watch.next_event(Some(slice))) {
                Some(Ok(event)) => break event,
                None | Some(Err(stampede::Error::NotAvailable { .. })) => {
                    let closed = handles::watch(id).is_err();
                    if closed || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        return Ok(std::ptr::null_mut());
                    }
                }
                Some(Err(stampede::Error::Closed { .. })) => return Ok(std::ptr::null_mut()),
                Some(Err(e)) => return Err(e.into()),
            }
        };
        // `WatchEvent.of`'s order: kind, name, container kind, node, missed.
        let kind = Some(event.kind().to_owned());
        let fields: [Option<String>; 5] = match event {
            WatchEvent::Created { name, container_kind, node }
            | WatchEvent::Destroyed { name, container_kind, node } => {
                [kind, Some(name), Some(container_kind), node, None]
            }
            WatchEvent::NodeUp { node } | WatchEvent::NodeDown { node } => [kind, None, None, Some(node), None],
            WatchEvent::Lagged { missed } => [kind, None, None, None, Some(missed.to_string())],
        };
        let array = env.new_object_array(5, "java/lang/String", JObject::null())?;
        for (i, field) in fields.iter().enumerate() {
            if let Some(field) = field {
                let s = env.new_string(field)?;
                env.set_object_array_element(&array, i as i32, &s)?;
                env.delete_local_ref(s)?;
            }
        }
        Ok(array.into_raw())
    })
}

/// Unwinds inside [`run`] as a panic does: for the Java tests that check no panic crosses into the
/// JVM (it becomes an `IllegalStateException`). `resume_unwind` skips the panic hook, so the tests'
/// output stays clean.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_panicForTests(mut env: JNIEnv<'_>, _class: JClass<'_>) {
    run(&mut env, |_| -> Result<()> { std::panic::resume_unwind(Box::new("a panic the Java tests asked for")) })
}
