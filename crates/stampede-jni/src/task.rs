//! `org.stampede.Task`: virtual time, visibility, children, names, attaching connections, close.

use std::sync::Arc;

use jni::objects::{JClass, JString};
use jni::sys::{jboolean, jlong, jobject};
use jni::JNIEnv;
use stampede::{Container, InputOptions, OutputOptions};

use crate::handles::{self, Entry};
use crate::jvm::{self, run};

/// The task's id, unique within its runtime.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskId(mut env: JNIEnv<'_>, _class: JClass<'_>, task: jlong) -> jlong {
    run(&mut env, |_| Ok(handles::task(task)?.id() as jlong))
}

/// The task's virtual time.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskVirtualTime(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    task: jlong,
) -> jlong {
    run(&mut env, |_| Ok(handles::task(task)?.virtual_time()))
}

/// The task's visibility.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskVisibility(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    task: jlong,
) -> jlong {
    run(&mut env, |_| Ok(handles::task(task)?.visibility()))
}

/// Sets the task's virtual time.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskSetVirtualTime(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    task: jlong,
    virtual_time: jlong,
) {
    run(&mut env, |_| Ok(handles::task(task)?.set_virtual_time(virtual_time)?))
}

/// A child task at `virtual_time`.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskSpawn(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    task: jlong,
    virtual_time: jlong,
) -> jlong {
    run(&mut env, |_| {
        let child = handles::task(task)?.spawn(virtual_time)?;
        Ok(handles::insert(Entry::Task(Arc::new(child))))
    })
}

/// Labels the task for tools.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskSetName<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
    name: JString<'l>,
) {
    run(&mut env, |env| {
        let task = handles::task(task)?;
        let name = jvm::string(env, &name, "name")?;
        Ok(task.set_name(&name)?)
    })
}

/// The task's label, or null.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskName(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    task: jlong,
) -> jobject {
    run(&mut env, |env| {
        let name = handles::task(task)?.name();
        jvm::new_optional_string(env, name.as_deref())
    })
}

/// Ends the task: its connections detach, its claim on ts_min goes.
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskClose(mut env: JNIEnv<'_>, _class: JClass<'_>, task: jlong) {
    run(&mut env, |_| {
        handles::task(task)?.close();
        Ok(())
    })
}

/// Attaches an input (`input` true) or output connection of the task to a channel or queue;
/// the connection's handle. A channel's input takes its bound on lag (`max_lag_items`,
/// `max_lag_ts`, -1 for none; docs/SEMANTICS.md, "Slow readers: max_lag") and its prefetch
/// policy (`off`, `newest`, `auto`; null: the runtime's default; docs/PREFETCH.md); a channel's
/// output its put window (0: every put waits; docs/NODES.md, "Pipelined puts").
#[no_mangle]
pub extern "system" fn Java_org_stampede_Native_taskAttach(
    mut env: JNIEnv<'_>,
    _class: JClass<'_>,
    task: jlong,
    container: jlong,
    input: jboolean,
    max_lag_items: jlong,
    max_lag_ts: jlong,
    prefetch: JString<'_>,
    put_window: jlong,
) -> jlong {
    run(&mut env, |env| {
        let task = handles::task(task)?;
        let container = handles::container(container)?;
        let name = container.container.name();
        let options = InputOptions {
            max_lag_items: jvm::optional_count(max_lag_items, "attach_input", name, "maxLagItems")?,
            max_lag_ts: jvm::optional_count(max_lag_ts, "attach_input", name, "maxLagTs")?.map(|d| d as u64),
            prefetch: jvm::prefetch(env, &prefetch, "attach_input", name)?,
        };
        let entry = match (&container.container, input != 0) {
            (Container::Channel(ch), true) => Entry::ChannelInput(Arc::new(task.attach_input_with(ch, options)?)),
            (Container::Channel(ch), false) if put_window != 0 => {
                let put_window = usize::try_from(put_window).map_err(|_| {
                    jvm::invalid(
                        "attach_output",
                        name,
                        format!("putWindow={put_window} is out of range (a count >= 0)"),
                    )
                })?;
                Entry::ChannelOutput(Arc::new(task.attach_output_with(ch, OutputOptions { put_window })?))
            }
            (Container::Channel(ch), false) => Entry::ChannelOutput(Arc::new(task.attach_output(ch)?)),
            (Container::Queue(q), true) => Entry::QueueInput(Arc::new(task.attach_input(q)?)),
            (Container::Queue(q), false) => Entry::QueueOutput(Arc::new(task.attach_output(q)?)),
        };
        Ok(handles::insert(entry))
    })
}
