//! The native half of Stampede's Java client (`java/`, package `org.stampede`): JNI functions over
//! the Rust client (`stampede`), loaded by `org.stampede.Native` as `libstampede_jni.so`.
//!
//! # Layout
//!
//! - [`jvm`] — the one way every native method runs ([`jvm::run`]: panics caught, failures
//!   thrown), the classes and methods cached at load time (`JNI_OnLoad`), argument conversions.
//! - [`errors`] — the one mapping from [`stampede::Error`] to the Java exception of the same name
//!   (`BelowVisibilityException`, …) with the Rust message text.
//! - [`handles`] — the table of native objects Java refers to by id: no Java value is ever
//!   dereferenced as a pointer, so a stale or released handle is an exception, never a crash.
//! - [`runtime`] — `Runtime` (embedded or `connect`), names, tasks, ts_min, stats, watch.
//! - [`container`] — `Channel` and `Queue`: stats, info, destroy, settledness.
//! - [`task`] — `Task`: virtual time, spawn, attach.
//! - [`connection`] — puts, gets, ranges and consumes on the four kinds of connection.
//! - [`item`] — items handed to Java, their zero-copy `ByteBuffer`s, and `.npy` headers.
//! - [`reclaim`] — GC handlers written in Java, called from whichever thread reclaims.
//!
//! # Contract with the Java side
//!
//! Every `Java_org_stampede_Native_*` function is a static native method of `org.stampede.Native`
//! (package-private; `java/src/main/java/org/stampede/Native.java` lists them with their
//! argument encodings). Handles are `long` ids from [`handles`]; Java releases each exactly once,
//! from a `java.lang.ref.Cleaner` when its object is unreachable (an item's: once the item is
//! closed or unreachable and its buffers are unreachable, see [`item`]), so a handle is valid while
//! the Java object that holds it is. Timeouts are nanoseconds, negative meaning "wait forever".
//! Blocking calls block the calling Java thread in native code (the JVM's GC is not held up).

pub mod connection;
pub mod container;
pub mod errors;
pub mod handles;
pub mod item;
pub mod jvm;
pub mod reclaim;
pub mod runtime;
pub mod task;

/// The version of the contract between this library and `org.stampede.Native` (its
/// `ABI_VERSION`): the Java side refuses to run over a library of another version.
pub const ABI_VERSION: i32 = 1;
