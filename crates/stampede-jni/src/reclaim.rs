//! GC handlers written in Java (docs/SEMANTICS.md, "Virtual time, visibility, GC"):
//! `channel.onReclaim(ts -> ...)` and `runtime.onReclaim((name, ts) -> ...)`.
//!
//! The Rust runtime only adds handlers; Java may replace or remove one (`null`). So the first
//! `onReclaim` of a container (or of the runtime) registers a trampoline with the Rust runtime,
//! and every later call only changes the slot the trampoline reads. The trampoline holds the
//! slots weakly and the slots hold the Java handlers as JNI global references; `Runtime.close()`
//! empties the slots, so a handler that captures its own runtime does not keep it alive forever.
//!
//! A handler runs on the thread whose operation made the item garbage (a Java thread inside a
//! native call, or, through a client, a thread of the fabric, attached to the JVM as a daemon the
//! first time), outside every runtime lock, before that operation returns.
//! `ReclaimDispatch` (Java) calls it and catches whatever it throws: the exception goes to the
//! thread's uncaught-exception handler and is counted in `handlerErrors` of the container's and
//! the runtime's stats; it never reaches the runtime.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use jni::objects::{GlobalRef, JClass, JObject, JValue};
use jni::signature::{Primitive, ReturnType};
use jni::JNIEnv;
use parking_lot::Mutex;
use stampede::{Container, Item};

use crate::jvm::{cache, Result};

/// Which slot a trampoline reads: the runtime's, or one container's (by kind and id: channel and
/// queue ids are unique within their kind).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Runtime,
    Channel(u64),
    Queue(u64),
}

fn slot_of(container: &Container) -> Slot {
    match container {
        Container::Channel(ch) => Slot::Channel(ch.id()),
        Container::Queue(q) => Slot::Queue(q.id()),
    }
}

/// The GC handlers of one runtime, and the count of exceptions they threw.
#[derive(Default)]
pub struct Handlers {
    /// Per slot: the handler, `None` once removed (its trampoline stays registered and does
    /// nothing). A slot present here has its trampoline registered.
    slots: Mutex<HashMap<Slot, Option<GlobalRef>>>,
    errors_total: AtomicU64,
    errors_by_name: Mutex<HashMap<String, u64>>,
}

impl Handlers {
    /// Exceptions thrown by handlers of this runtime.
    pub fn errors(&self) -> u64 {
        self.errors_total.load(Ordering::Relaxed)
    }

    /// Exceptions thrown by the handler of the container called `name`.
    pub fn errors_of(&self, name: &str) -> u64 {
        self.errors_by_name.lock().get(name).copied().unwrap_or(0)
    }

    fn record_error(&self, name: &str) {
        self.errors_total.fetch_add(1, Ordering::Relaxed);
        *self.errors_by_name.lock().entry(name.to_owned()).or_default() += 1;
    }

    /// Sets (or, with `None`, removes) the handler of `container`.
    pub fn set(self: &Arc<Self>, container: &Container, handler: Option<GlobalRef>) -> Result<()> {
        let slot = slot_of(container);
        if !self.replace(slot, handler) {
            return Ok(());
        }
        let (weak, name) = (Arc::downgrade(self), container.name().to_owned());
        let trampoline = move |item: &Item| dispatch(&weak, slot, &name, item.ts);
        let registered = match container {
            Container::Channel(ch) => ch.on_reclaim(trampoline),
            Container::Queue(q) => q.on_reclaim(trampoline),
        };
        self.undo_if_failed(slot, registered)
    }

    /// Sets (or removes) the runtime-wide handler.
    pub fn set_runtime(self: &Arc<Self>, runtime: &stampede::Runtime, handler: Option<GlobalRef>) -> Result<()> {
        if !self.replace(Slot::Runtime, handler) {
            return Ok(());
        }
        let weak = Arc::downgrade(self);
        let registered =
            runtime.on_reclaim(move |name: &str, item: &Item| dispatch(&weak, Slot::Runtime, name, item.ts));
        self.undo_if_failed(Slot::Runtime, registered)
    }

    /// Puts `handler` in `slot`; `true` if the slot is new (its trampoline must be registered).
    fn replace(&self, slot: Slot, handler: Option<GlobalRef>) -> bool {
        let (first, previous) = {
            let mut slots = self.slots.lock();
            let first = !slots.contains_key(&slot);
            (first, slots.insert(slot, handler))
        };
        drop(previous); // after the lock: releasing a global reference calls into the JVM
        first
    }

    fn undo_if_failed(&self, slot: Slot, registered: stampede::Result<()>) -> Result<()> {
        if let Err(e) = registered {
            let removed = self.slots.lock().remove(&slot);
            drop(removed);
            return Err(e.into());
        }
        Ok(())
    }

    /// Removes every handler (the trampolines stay, and do nothing): `Runtime.close()`.
    pub fn clear(&self) {
        let removed: Vec<GlobalRef> = self.slots.lock().values_mut().filter_map(Option::take).collect();
        drop(removed);
    }

    fn handler(&self, slot: Slot) -> Option<GlobalRef> {
        self.slots.lock().get(&slot).cloned().flatten()
    }
}

/// Calls the Java handler in `slot` for an item of `name` at `ts`, if the handlers and the
/// handler still exist; counts what it throws. Never unwinds into the runtime.
fn dispatch(weak: &Weak<Handlers>, slot: Slot, name: &str, ts: i64) {
    // Attached first: the handlers, and the global references they hold, may be dropped here if
    // the runtime was released meanwhile, and releasing a global reference calls into the JVM.
    if cache().vm.attach_current_thread_as_daemon().is_err() {
        return; // the JVM is shutting down
    }
    let Some(handlers) = weak.upgrade() else { return };
    let Some(handler) = handlers.handler(slot) else { return };
    let called = catch_unwind(AssertUnwindSafe(|| call(&handler, slot, name, ts)));
    if !matches!(called, Ok(Ok(true))) {
        handlers.record_error(name);
    }
}

/// Calls `ReclaimDispatch.channel(handler, ts)` or `.runtime(handler, name, ts)` on this thread
/// (attaching it to the JVM as a daemon if the JVM did not start it); `Ok(true)` when the handler
/// returned normally. A Java exception already pending on this thread (a native call that is
/// failing) is set aside for the call and restored after it.
fn call(handler: &GlobalRef, slot: Slot, name: &str, ts: i64) -> Result<bool> {
    let cache = cache();
    let mut env = cache.vm.attach_current_thread_as_daemon()?;
    let pending = if env.exception_check()? {
        let pending = env.exception_occurred()?;
        env.exception_clear()?;
        Some(pending)
    } else {
        None
    };
    let returned = env.with_local_frame(4, |env| invoke(env, handler, slot, name, ts));
    // A JNI failure inside (say, no memory for the name) leaves an exception: report and clear it.
    if env.exception_check()? {
        env.exception_describe()?;
        env.exception_clear()?;
    }
    if let Some(pending) = pending {
        env.throw(pending)?;
    }
    returned
}

fn invoke(env: &mut JNIEnv<'_>, handler: &GlobalRef, slot: Slot, name: &str, ts: i64) -> Result<bool> {
    let cache = cache();
    let class = <&JClass>::from(cache.dispatch.as_obj());
    let handler = JValue::Object(handler.as_obj()).as_jni();
    let returned = match slot {
        Slot::Runtime => {
            let name = JObject::from(env.new_string(name)?);
            let args = [handler, JValue::Object(&name).as_jni(), JValue::Long(ts).as_jni()];
            // SAFETY: resolved on this class with signature (RuntimeReclaimHandler, String, long)
            // -> boolean, and the handler slot of the runtime holds a RuntimeReclaimHandler.
            unsafe {
                env.call_static_method_unchecked(
                    class,
                    cache.dispatch_runtime,
                    ReturnType::Primitive(Primitive::Boolean),
                    &args,
                )
            }
        }
        Slot::Channel(_) | Slot::Queue(_) => {
            let args = [handler, JValue::Long(ts).as_jni()];
            // SAFETY: resolved on this class with signature (ReclaimHandler, long) -> boolean, and
            // container slots hold ReclaimHandlers.
            unsafe {
                env.call_static_method_unchecked(
                    class,
                    cache.dispatch_channel,
                    ReturnType::Primitive(Primitive::Boolean),
                    &args,
                )
            }
        }
    };
    Ok(returned?.z()?)
}
