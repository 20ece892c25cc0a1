//! The one conversion from a failure to a Java exception (STYLE habit 6).
//!
//! Every variant of [`stampede::Error`] becomes the exception of the same name in
//! `org.stampede` (`BelowVisibility` → `BelowVisibilityException`, all subclasses of the checked
//! `StampedeException`), with the message text of the Rust `Display` unchanged and the variant's
//! fields as accessors, as Python sets them as attributes: `name`, `ts`, `reason` on every
//! exception; `selector`, `previous`, `next`, `settled` on `NotAvailableException` (whose `ts` is
//! the exact timestamp asked for, if any); `limit` on `BelowVisibilityException`; `right` on
//! `PermissionDeniedException`; `canNeverFit` on `FullException`. The kind numbers below and the
//! `switch` of `StampedeException.fromNative` are the two halves of this one mapping.
//!
//! A panic becomes an `IllegalStateException` naming it as a bug; a failed JNI call leaves the
//! Java exception it raised (say, `OutOfMemoryError`) pending.

use jni::objects::{JClass, JObject, JThrowable, JValue};
use jni::signature::ReturnType;
use jni::sys::jvalue;
use jni::JNIEnv;
use stampede::{Error, Selector};

use crate::jvm::{cache, Failure};

/// Flags of `StampedeException.fromNative`: which optional fields are present.
const HAS_TS: i32 = 1;
const HAS_A: i32 = 2;
const HAS_B: i32 = 4;
const SETTLED: i32 = 8;
const CAN_NEVER_FIT: i32 = 16;

/// Throws `failure` as a Java exception on `env`'s thread.
pub fn throw(env: &mut JNIEnv<'_>, failure: Failure) {
    match failure {
        // The JNI call that failed raised the exception the caller should see; if it did not,
        // say what failed.
        Failure::Jni(error) => {
            if !env.exception_check().unwrap_or(true) {
                throw_bug(env, &format!("a JNI call failed: {error}"));
            }
        }
        Failure::Panic(message) => {
            if !env.exception_check().unwrap_or(true) {
                throw_bug(env, &format!("panic: {message}"));
            }
        }
        Failure::Stampede(error) => {
            // The Stampede error is the outcome; a Java exception left pending by the way (none
            // should be) would forbid creating the exception object.
            let _ = env.exception_clear();
            if throw_stampede(env, &error).is_err() && !env.exception_check().unwrap_or(true) {
                throw_bug(env, &format!("could not create the exception for: {error}"));
            }
        }
    }
}

fn throw_bug(env: &mut JNIEnv<'_>, message: &str) {
    let class = <&JClass>::from(cache().illegal_state.as_obj());
    let _ = env.throw_new(class, format!("stampede: internal error (a bug, please report it): {message}"));
}

/// The fields of one error as `fromNative` takes them.
struct Fields<'a> {
    kind: i32,
    name: &'a str,
    reason: Option<&'a str>,
    /// `NotAvailable`'s selector or `PermissionDenied`'s right.
    detail: Option<String>,
    ts: Option<i64>,
    /// `NotAvailable`'s previous or `BelowVisibility`'s limit.
    a: Option<i64>,
    /// `NotAvailable`'s next.
    b: Option<i64>,
    flags: i32,
}

fn fields(error: &Error) -> Fields<'_> {
    // The kind's number is what `StampedeException.fromNative` switches on.
    let kind = error.kind() as i32;
    let plain = |name, ts, reason| Fields { kind, name, reason, detail: None, ts, a: None, b: None, flags: 0 };
    match error {
        Error::BelowVisibility { name, ts, limit, .. } => Fields { a: Some(*limit), ..plain(name, Some(*ts), None) },
        Error::DuplicateTimestamp { name, ts } => plain(name, Some(*ts), None),
        Error::InvalidTimestamp { name, ts, .. } => plain(name, Some(*ts), None),
        Error::Full { name, ts, reason, can_never_fit } => {
            Fields { flags: if *can_never_fit { CAN_NEVER_FIT } else { 0 }, ..plain(name, Some(*ts), Some(reason)) }
        }
        Error::NotAvailable { name, selector, previous, next, settled, .. } => {
            let ts = match selector {
                Selector::At(ts) => Some(*ts),
                _ => None,
            };
            Fields {
                detail: Some(selector.to_string()),
                a: *previous,
                b: *next,
                flags: if *settled { SETTLED } else { 0 },
                ..plain(name, ts, None)
            }
        }
        Error::AlreadyConsumed { name, ts } => plain(name, Some(*ts), None),
        Error::Reclaimed { name, ts, reason } => plain(name, Some(*ts), Some(reason)),
        Error::Closed { name, reason } => plain(name, None, Some(reason)),
        Error::NotFound { name } => plain(name, None, None),
        Error::AlreadyExists { name } => plain(name, None, None),
        Error::InvalidArgument { name, reason, .. } => plain(name, None, Some(reason)),
        Error::Unreachable { name, reason, .. } => plain(name, None, Some(reason)),
        Error::PermissionDenied { name, right, reason, .. } => {
            Fields { detail: Some((*right).to_owned()), ..plain(name, None, Some(reason)) }
        }
        Error::Storage { name, reason, .. } => plain(name, None, Some(reason)),
    }
}

fn throw_stampede(env: &mut JNIEnv<'_>, error: &Error) -> jni::errors::Result<()> {
    let f = fields(error);
    let message = env.new_string(error.to_string())?;
    let name = env.new_string(f.name)?;
    let reason = match f.reason {
        Some(reason) => JObject::from(env.new_string(reason)?),
        None => JObject::null(),
    };
    let detail = match &f.detail {
        Some(detail) => JObject::from(env.new_string(detail)?),
        None => JObject::null(),
    };
    let flags = f.flags
        | if f.ts.is_some() { HAS_TS } else { 0 }
        | if f.a.is_some() { HAS_A } else { 0 }
        | if f.b.is_some() { HAS_B } else { 0 };
    let args: [jvalue; 9] = [
        JValue::Int(f.kind).as_jni(),
        JValue::Object(&message).as_jni(),
        JValue::Object(&name).as_jni(),
        JValue::Object(&reason).as_jni(),
        JValue::Object(&detail).as_jni(),
        JValue::Long(f.ts.unwrap_or(0)).as_jni(),
        JValue::Long(f.a.unwrap_or(0)).as_jni(),
        JValue::Long(f.b.unwrap_or(0)).as_jni(),
        JValue::Int(flags).as_jni(),
    ];
    let cache = cache();
    let class = <&JClass>::from(cache.exception.as_obj());
    // SAFETY: the method id was resolved on this class with this signature (jvm::load), and the
    // arguments match it: (int, String, String, String, String, long, long, long, int).
    let exception =
        unsafe { env.call_static_method_unchecked(class, cache.exception_from_native, ReturnType::Object, &args) }?
            .l()?;
    env.throw(JThrowable::from(exception))
}
