//! The one way every native method runs, what the library caches from the JVM at load time, and
//! the conversions of arguments that cross from Java.
//!
//! [`run`] wraps the body of every `Java_org_stampede_Native_*` function: a [`Failure`] becomes a
//! pending Java exception ([`errors::throw`]) and the function returns its type's null value
//! ([`Null`]); a panic is caught with `catch_unwind` and becomes an `IllegalStateException`, so no
//! unwinding ever crosses into the JVM.
//!
//! `JNI_OnLoad` caches the classes and method ids the library calls (item construction, exception
//! creation, GC handler dispatch): calls made from threads the JVM did not start (the fabric's
//! threads running GC handlers) cannot find application classes by name, since `FindClass` there
//! sees only the system class loader.

use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::Duration;

use jni::objects::{GlobalRef, JMethodID, JObject, JStaticMethodID, JString};
use jni::sys::{jboolean, jint, jlong, jobject, JNI_ERR, JNI_VERSION_1_8};
use jni::{JNIEnv, JavaVM};
use stampede::{Codec, Error, Selector};

use crate::errors;

/// Why a native method failed.
pub enum Failure {
    /// A Stampede error: thrown as the exception of the same name.
    Stampede(Error),
    /// A JNI call failed; usually a Java exception (say, `OutOfMemoryError`) is already pending
    /// and is what the caller sees.
    Jni(jni::errors::Error),
    /// A bug: a panic caught at the boundary.
    Panic(String),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::Stampede(error)
    }
}

impl From<jni::errors::Error> for Failure {
    fn from(error: jni::errors::Error) -> Failure {
        Failure::Jni(error)
    }
}

/// The result of a native method's body.
pub type Result<T> = std::result::Result<T, Failure>;

/// `InvalidArgument` from `op` on `name`, for arguments checked here.
pub fn invalid(op: &'static str, name: &str, reason: impl Into<String>) -> Failure {
    Failure::Stampede(Error::InvalidArgument { op, name: name.to_owned(), reason: reason.into() })
}

/// What a native method returns when it throws (the JVM ignores it).
pub trait Null {
    fn null() -> Self;
}

impl Null for () {
    fn null() {}
}

impl Null for jlong {
    fn null() -> jlong {
        0
    }
}

impl Null for jint {
    fn null() -> jint {
        0
    }
}

impl Null for jboolean {
    fn null() -> jboolean {
        0
    }
}

impl Null for jobject {
    fn null() -> jobject {
        std::ptr::null_mut()
    }
}

/// Runs the body of a native method: its value, or its failure thrown as a Java exception (and
/// the type's null value returned). Panics are caught here.
pub fn run<'local, T: Null>(env: &mut JNIEnv<'local>, body: impl FnOnce(&mut JNIEnv<'local>) -> Result<T>) -> T {
    let outcome = catch_unwind(AssertUnwindSafe(|| body(env)));
    let failure = match outcome {
        Ok(Ok(value)) => return value,
        Ok(Err(failure)) => failure,
        Err(panic) => Failure::Panic(panic_message(panic.as_ref())),
    };
    // Throwing creates Java objects; a panic there (it should not happen) must not escape either.
    let _ = catch_unwind(AssertUnwindSafe(|| errors::throw(env, failure)));
    T::null()
}

/// The text a panic carried.
pub fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Classes and methods the library calls, resolved once by `JNI_OnLoad`.
pub struct Cache {
    pub vm: JavaVM,
    /// `org.stampede.Item` and its constructor `(JJJZILjava/lang/String;J)V`: handle, ts, seq,
    /// has seq, codec kind, codec name (for other codecs), size in bytes.
    pub item: GlobalRef,
    pub item_new: JMethodID,
    /// `org.stampede.StampedeException.fromNative`, the factory of every Stampede exception.
    pub exception: GlobalRef,
    pub exception_from_native: JStaticMethodID,
    /// `org.stampede.ReclaimDispatch.channel(ReclaimHandler, long)` and
    /// `.runtime(RuntimeReclaimHandler, String, long)`: call a GC handler, catching what it throws.
    pub dispatch: GlobalRef,
    pub dispatch_channel: JStaticMethodID,
    pub dispatch_runtime: JStaticMethodID,
    /// `java.lang.IllegalStateException`: what a caught panic becomes.
    pub illegal_state: GlobalRef,
}

static CACHE: OnceLock<Cache> = OnceLock::new();

/// The cache `JNI_OnLoad` filled (it runs before any native method can be called).
pub fn cache() -> &'static Cache {
    CACHE.get().expect("JNI_OnLoad ran before any native method")
}

/// Called by the JVM when `org.stampede.Native` loads the library: caches what [`Cache`] holds.
/// Returns `JNI_ERR` (the load fails with `UnsatisfiedLinkError`) if a class is missing, e.g. a
/// library loaded by something other than `org.stampede.Native`.
///
/// # Safety
///
/// Called by the JVM with its own `JavaVM` pointer.
#[no_mangle]
pub unsafe extern "system" fn JNI_OnLoad(vm: *mut jni::sys::JavaVM, _reserved: *mut c_void) -> jint {
    let loaded = catch_unwind(|| {
        // SAFETY: the JVM passes its own, valid JavaVM pointer.
        let vm = unsafe { JavaVM::from_raw(vm) }.ok()?;
        let cache = load(vm).ok()?;
        // A second load (the same library in another class loader) keeps the first cache; the
        // JVM refuses that anyway.
        let _ = CACHE.set(cache);
        Some(())
    });
    match loaded {
        Ok(Some(())) => JNI_VERSION_1_8,
        _ => JNI_ERR,
    }
}

fn load(vm: JavaVM) -> jni::errors::Result<Cache> {
    let (item, item_new, exception, exception_from_native, dispatch, dispatch_channel, dispatch_runtime, illegal_state) = {
        let mut env = vm.get_env()?;
        let item = env.find_class("org/stampede/Item")?;
        let item_new = env.get_method_id(&item, "<init>", "(JJJZILjava/lang/String;J)V")?;
        let exception = env.find_class("org/stampede/StampedeException")?;
        let exception_from_native = env.get_static_method_id(
            &exception,
            "fromNative",
            "(ILjava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;JJJI)\
             Lorg/stampede/StampedeException;",
        )?;
        let dispatch = env.find_class("org/stampede/ReclaimDispatch")?;
        let dispatch_channel = env.get_static_method_id(&dispatch, "channel", "(Lorg/stampede/ReclaimHandler;J)Z")?;
        let dispatch_runtime = env.get_static_method_id(
            &dispatch,
            "runtime",
            "(Lorg/stampede/RuntimeReclaimHandler;Ljava/lang/String;J)Z",
        )?;
        let illegal_state = env.find_class("java/lang/IllegalStateException")?;
        (
            env.new_global_ref(item)?,
            item_new,
            env.new_global_ref(exception)?,
            exception_from_native,
            env.new_global_ref(dispatch)?,
            dispatch_channel,
            dispatch_runtime,
            env.new_global_ref(illegal_state)?,
        )
    };
    Ok(Cache {
        vm,
        item,
        item_new,
        exception,
        exception_from_native,
        dispatch,
        dispatch_channel,
        dispatch_runtime,
        illegal_state,
    })
}

// ---- arguments -----------------------------------------------------------------------------

/// A Java string the caller must give (`InvalidArgument` for null: the Java side checks first,
/// this is the backstop).
pub fn string(env: &mut JNIEnv<'_>, s: &JString<'_>, what: &str) -> Result<String> {
    if s.is_null() {
        return Err(invalid("argument", what, format!("{what} is null")));
    }
    Ok(env.get_string(s)?.into())
}

/// A Java string that may be null.
pub fn optional_string(env: &mut JNIEnv<'_>, s: &JString<'_>) -> Result<Option<String>> {
    if s.is_null() {
        return Ok(None);
    }
    Ok(Some(env.get_string(s)?.into()))
}

/// A prefetch policy by name (null: the default), for `name` of `op`.
pub fn prefetch(
    env: &mut JNIEnv<'_>,
    policy: &JString<'_>,
    op: &'static str,
    name: &str,
) -> Result<Option<stampede::Prefetch>> {
    match optional_string(env, policy)? {
        None => Ok(None),
        Some(policy) => stampede::Prefetch::parse(&policy).map(Some).map_err(|why| invalid(op, name, why)),
    }
}

/// A new Java string, as a raw local reference.
pub fn new_string(env: &mut JNIEnv<'_>, s: &str) -> Result<jobject> {
    Ok(env.new_string(s)?.into_raw())
}

/// A new Java string, or null.
pub fn new_optional_string(env: &mut JNIEnv<'_>, s: Option<&str>) -> Result<jobject> {
    match s {
        Some(s) => new_string(env, s),
        None => Ok(std::ptr::null_mut()),
    }
}

/// A `String[]`.
pub fn string_array(env: &mut JNIEnv<'_>, strings: &[impl AsRef<str>]) -> Result<jobject> {
    let length = i32::try_from(strings.len()).map_err(|_| invalid("names", "", "more than 2^31-1 names"))?;
    let array = env.new_object_array(length, "java/lang/String", JObject::null())?;
    for (i, s) in strings.iter().enumerate() {
        let element = env.new_string(s.as_ref())?;
        env.set_object_array_element(&array, i as i32, &element)?;
        env.delete_local_ref(element)?;
    }
    Ok(array.into_raw())
}

/// A `long[]`.
pub fn long_array(env: &mut JNIEnv<'_>, values: &[i64]) -> Result<jobject> {
    let array = env.new_long_array(values.len() as i32)?;
    env.set_long_array_region(&array, 0, values)?;
    Ok(array.into_raw())
}

/// Longest timeout kept as such; longer ones wait forever (no deadline arithmetic can overflow).
pub const TIMEOUT_MAX: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A timeout in nanoseconds: negative waits forever (Java's `null`), 0 never waits.
pub fn timeout(nanos: jlong) -> Option<Duration> {
    if nanos < 0 {
        return None;
    }
    Some(Duration::from_nanos(nanos as u64)).filter(|t| *t <= TIMEOUT_MAX)
}

/// The encodings of `org.stampede.Selector`'s kinds.
pub const SELECTOR_AT: jint = 0;
pub const SELECTOR_OLDEST: jint = 1;
pub const SELECTOR_NEWEST: jint = 2;
pub const SELECTOR_OLDEST_UNSEEN: jint = 3;
pub const SELECTOR_NEWEST_UNSEEN: jint = 4;

/// A selector from its kind and (for `SELECTOR_AT`) timestamp.
pub fn selector(kind: jint, ts: jlong) -> Result<Selector> {
    Ok(match kind {
        SELECTOR_AT => Selector::At(ts),
        SELECTOR_OLDEST => Selector::Oldest,
        SELECTOR_NEWEST => Selector::Newest,
        SELECTOR_OLDEST_UNSEEN => Selector::OldestUnseen,
        SELECTOR_NEWEST_UNSEEN => Selector::NewestUnseen,
        other => return Err(invalid("get", "selector", format!("unknown selector kind {other}"))),
    })
}

/// The encodings of codecs (`org.stampede.Codecs`): the standard ones by number, so a get of a
/// standard codec creates no Java string; others by name.
pub const CODEC_OTHER: jint = 0;
pub const CODEC_RAW: jint = 1;
pub const CODEC_UTF8: jint = 2;
pub const CODEC_JSON: jint = 3;
pub const CODEC_NPY: jint = 4;

/// A codec from its kind and, for `CODEC_OTHER`, its name.
pub fn codec(env: &mut JNIEnv<'_>, kind: jint, name: &JString<'_>) -> Result<Codec> {
    Ok(match kind {
        CODEC_RAW => Codec::Raw,
        CODEC_UTF8 => Codec::Utf8,
        CODEC_JSON => Codec::Json,
        CODEC_NPY => Codec::Npy,
        CODEC_OTHER => Codec::from_name(&string(env, name, "codec")?),
        other => return Err(invalid("put", "codec", format!("unknown codec kind {other}"))),
    })
}

/// A codec's kind, and its name for `CODEC_OTHER`.
pub fn codec_kind(codec: &Codec) -> (jint, Option<&str>) {
    match codec {
        Codec::Raw => (CODEC_RAW, None),
        Codec::Utf8 => (CODEC_UTF8, None),
        Codec::Json => (CODEC_JSON, None),
        Codec::Npy => (CODEC_NPY, None),
        Codec::Other(name) => (CODEC_OTHER, Some(name)),
    }
}

/// An optional count from Java's encoding (negative: none).
pub fn optional_count(value: jlong, op: &'static str, name: &str, what: &str) -> Result<Option<usize>> {
    match value {
        -1 => Ok(None),
        n => usize::try_from(n)
            .map(Some)
            .map_err(|_| invalid(op, name, format!("{what}={n} is out of range (a count >= 0, or -1 for none)"))),
    }
}

/// A timestamp or count back to Java's encoding (`-1`: none).
pub fn or_minus_one(value: Option<impl TryInto<i64>>) -> i64 {
    value.and_then(|v| v.try_into().ok()).unwrap_or(-1)
}

/// A Java boolean.
pub fn boolean(value: bool) -> jboolean {
    jboolean::from(value)
}
