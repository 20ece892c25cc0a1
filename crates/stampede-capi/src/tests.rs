//! The C ABI called from Rust: what is easier to prove here than from C — every error variant's
//! code and name, messages equal to the Rust API's for the same operation, a panic becoming
//! `STP_INTERNAL`. The C side's own tests are in `c/tests/`.

use std::ffi::{c_int, CStr};
use std::ptr::{null, null_mut};

use stampede::{Error, Limits, Runtime, Selector};

use crate::args::*;
use crate::channel::*;
use crate::error::*;
use crate::item::*;
use crate::runtime::*;
use crate::task::*;

fn last_message() -> String {
    // SAFETY: never NULL, NUL-terminated, valid until the next failing call on this thread.
    unsafe { CStr::from_ptr(stp_last_error_message()) }.to_str().expect("UTF-8").to_owned()
}

fn error_name(code: c_int) -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(stp_error_name(code)) }.to_str().expect("UTF-8").to_owned()
}

/// One error of every variant (an exhaustive match below keeps the list complete).
fn one_of_each() -> Vec<Error> {
    let name = || "c".to_owned();
    let all = vec![
        Error::BelowVisibility { op: "put", name: name(), ts: 1, what: "the task's visibility", limit: 2 },
        Error::DuplicateTimestamp { name: name(), ts: 1 },
        Error::InvalidTimestamp { op: "put", name: name(), ts: -1 },
        Error::Full { name: name(), ts: 1, reason: "r".into(), can_never_fit: false },
        Error::NotAvailable {
            op: "get",
            name: name(),
            selector: Selector::Oldest,
            previous: None,
            next: Some(3),
            settled: false,
        },
        Error::AlreadyConsumed { name: name(), ts: 1 },
        Error::Reclaimed { name: name(), ts: 1, reason: "r".into() },
        Error::Closed { name: name(), reason: "r" },
        Error::NotFound { name: name() },
        Error::AlreadyExists { name: name() },
        Error::InvalidArgument { op: "put", name: name(), reason: "r".into() },
        Error::Unreachable { op: "get", name: name(), reason: "r".into() },
        Error::PermissionDenied { op: "get", name: name(), right: "read", reason: "r".into() },
        Error::Storage { op: "put", name: name(), reason: "r".into() },
    ];
    for error in &all {
        // Adding a variant to stampede::Error fails to compile here until it is listed above.
        match error {
            Error::BelowVisibility { .. }
            | Error::DuplicateTimestamp { .. }
            | Error::InvalidTimestamp { .. }
            | Error::Full { .. }
            | Error::NotAvailable { .. }
            | Error::AlreadyConsumed { .. }
            | Error::Reclaimed { .. }
            | Error::Closed { .. }
            | Error::NotFound { .. }
            | Error::AlreadyExists { .. }
            | Error::InvalidArgument { .. }
            | Error::Unreachable { .. }
            | Error::PermissionDenied { .. }
            | Error::Storage { .. } => {}
        }
    }
    all
}

/// Every variant has its own negative code, named as the variant; the message the C side reads
/// is the variant's `Display`.
#[test]
fn every_variant_has_a_code_a_name_and_its_message() {
    let mut codes = Vec::new();
    for error in one_of_each() {
        let variant = format!("{error:?}").split([' ', '{']).next().expect("a variant name").to_owned();
        let code = fail(error.clone());
        assert!(code < 0, "{variant}: {code}");
        assert!(!codes.contains(&code), "{variant}: code {code} reused");
        codes.push(code);
        assert_eq!(error_name(code), variant);
        assert_eq!(stp_last_error_code(), code);
        assert_eq!(last_message(), error.to_string());
    }
    assert_eq!(error_name(STP_OK), "Ok");
    assert_eq!(error_name(STP_INTERNAL), "Internal");
    assert_eq!(error_name(12345), "Unknown");
    assert!(!codes.contains(&STP_INTERNAL));
}

/// A panic inside an entry point is caught: `STP_INTERNAL`, with the panic's text in the message.
#[test]
fn a_panic_becomes_internal() {
    let code = guard("stp_test", || panic!("boom {}", 42));
    assert_eq!(code, STP_INTERNAL);
    let message = last_message();
    assert!(message.starts_with("stp_test: internal error in Stampede"), "{message}");
    assert!(message.ends_with("boom 42"), "{message}");
    assert_eq!(guard_value("stp_test", -7, || panic!("again")), -7);
}

/// The same failing operations through the C ABI and through the Rust API give the same codes'
/// variants and the same message text.
#[test]
fn messages_equal_the_rust_api() {
    let rust = Runtime::new();
    let frames = rust.create_channel("cam", Limits::items(1)).expect("channel");
    let producer = rust.task(10).expect("task");
    let reader = rust.task(stampede::INFINITY).expect("task");
    let out = producer.attach_output(&frames).expect("out");
    let inp = reader.attach_input(&frames).expect("in");
    let rust_errors = [
        out.put(9, b"x").expect_err("below"),
        out.put(-1, b"x").expect_err("invalid"),
        inp.get(Selector::Newest, Some(std::time::Duration::ZERO)).expect_err("not available"),
        rust.create_channel("cam", Limits::unbounded()).expect_err("exists"),
        rust.lookup("nothing").expect_err("not found"),
        rust.create_channel("bad//name", Limits::unbounded()).expect_err("bad name"),
        rust.task(-3).expect_err("task"),
    ];

    // SAFETY: every pointer below is NULL, a handle made here and freed once, or a local.
    unsafe {
        let mut rt = null_mut();
        assert_eq!(stp_runtime_new(&mut rt), STP_OK);
        let mut ch = null_mut();
        assert_eq!(stp_runtime_create_channel(rt, c"cam".as_ptr(), 1, STP_UNBOUNDED, &mut ch), STP_OK);
        let (mut p, mut r) = (null_mut(), null_mut());
        assert_eq!(stp_runtime_task(rt, 10, &mut p), STP_OK);
        assert_eq!(stp_runtime_task(rt, i64::MAX, &mut r), STP_OK);
        let (mut o, mut i) = (null_mut(), null_mut());
        assert_eq!(stp_task_attach_output(p, ch, &mut o), STP_OK);
        assert_eq!(stp_task_attach_input(r, ch, &mut i), STP_OK);
        let mut item = null_mut();
        let mut scratch = null_mut();
        let mut other = null_mut();
        // One call per Rust error, reading its message before the next failure.
        for (k, expected) in rust_errors.iter().enumerate() {
            let code = match k {
                0 => stp_channel_output_put(o, 9, null(), b"x".as_ptr(), 1, -1, STP_FOREVER),
                1 => stp_channel_output_put(o, -1, null(), b"x".as_ptr(), 1, -1, STP_FOREVER),
                2 => stp_channel_input_get(i, STP_NEWEST, 0, 0, &mut item),
                3 => stp_runtime_create_channel(rt, c"cam".as_ptr(), STP_UNBOUNDED, STP_UNBOUNDED, &mut scratch),
                4 => stp_runtime_lookup(rt, c"nothing".as_ptr(), null_mut()),
                5 => stp_runtime_create_channel(rt, c"bad//name".as_ptr(), STP_UNBOUNDED, STP_UNBOUNDED, &mut other),
                _ => {
                    let mut t = null_mut();
                    stp_runtime_task(rt, -3, &mut t)
                }
            };
            assert_eq!(code, crate::error::code(expected), "call {k}: {expected}");
            assert_eq!(last_message(), expected.to_string(), "call {k}");
        }
        assert!(item.is_null() && scratch.is_null() && other.is_null());
        stp_channel_output_free(o);
        stp_channel_input_free(i);
        stp_task_free(p);
        stp_task_free(r);
        stp_channel_free(ch);
        stp_runtime_free(rt);
    }
}

/// NULL handles, NULL required out-parameters, non-UTF-8 names and out-of-range numbers are
/// `STP_INVALID_ARGUMENT` with a message naming the function and the parameter.
#[test]
fn bad_arguments_are_invalid_arguments() {
    // SAFETY: every pointer below is NULL, a handle made here and freed once, or a local.
    unsafe {
        assert_eq!(stp_runtime_new(null_mut()), STP_INVALID_ARGUMENT);
        assert_eq!(last_message(), "stp_runtime_new on \"out\": a NULL out-parameter");
        let mut rt = null_mut();
        assert_eq!(stp_runtime_new(&mut rt), STP_OK);
        let mut ch = null_mut();
        assert_eq!(stp_runtime_create_channel(null(), c"a".as_ptr(), -1, -1, &mut ch), STP_INVALID_ARGUMENT);
        assert_eq!(last_message(), "stp_runtime_create_channel on \"rt\": a NULL handle");
        let latin1 = b"caf\xe9\0";
        assert_eq!(stp_runtime_create_channel(rt, latin1.as_ptr().cast(), -1, -1, &mut ch), STP_INVALID_ARGUMENT);
        assert!(last_message().starts_with("stp_runtime_create_channel on \"name\": not UTF-8 text"));
        assert_eq!(stp_runtime_create_channel(rt, c"a".as_ptr(), -2, -1, &mut ch), STP_INVALID_ARGUMENT);
        assert_eq!(stp_runtime_create_channel(rt, c"a".as_ptr(), 0, -1, &mut ch), STP_INVALID_ARGUMENT);
        assert!(ch.is_null());
        assert_eq!(stp_runtime_create_channel(rt, c"a".as_ptr(), -1, -1, &mut ch), STP_OK);
        let mut task = null_mut();
        assert_eq!(stp_runtime_task(rt, 0, &mut task), STP_OK);
        let mut inp = null_mut();
        assert_eq!(stp_task_attach_input(task, ch, &mut inp), STP_OK);
        let mut item = null_mut();
        assert_eq!(stp_channel_input_get(inp, 99, 0, 0, &mut item), STP_INVALID_ARGUMENT);
        assert!(last_message().contains("99 is no selector"));
        assert_eq!(stp_channel_input_get(inp, STP_OLDEST, 0, -2, &mut item), STP_INVALID_ARGUMENT);
        assert_eq!(stp_channel_input_get(inp, STP_OLDEST, 0, 0, null_mut()), STP_INVALID_ARGUMENT);
        let mut out = null_mut();
        assert_eq!(stp_task_attach_output(task, ch, &mut out), STP_OK);
        assert_eq!(stp_channel_output_put(out, 1, null(), null(), 3, -1, 0), STP_INVALID_ARGUMENT);
        assert_eq!(stp_channel_output_put(out, 1, null(), b"x".as_ptr(), usize::MAX, -1, 0), STP_INVALID_ARGUMENT);
        assert_eq!(stp_channel_output_put(out, 1, null(), null(), 0, -2, 0), STP_INVALID_ARGUMENT);
        assert_eq!(stp_channel_output_put(out, 1, null(), null(), 0, 1 << 40, 0), STP_INVALID_ARGUMENT);
        assert_eq!(stp_channel_output_put(out, 1, null(), null(), 0, -1, 0), STP_OK);
        // Accessors: sentinels for NULL, and the last error says why.
        assert_eq!(stp_item_ts(null()), -1);
        assert_eq!(last_message(), "stp_item_ts on \"item\": a NULL handle");
        assert!(stp_item_data(null()).is_null());
        assert_eq!(stp_item_len(null()), 0);
        assert!(stp_item_codec(null()).is_null());
        assert_eq!(stp_runtime_ts_min(null()), -1);
        assert_eq!(stp_task_virtual_time(null()), -1);
        assert!(stp_channel_name(null()).is_null());
        // Freeing NULL is a no-op.
        stp_item_release(null_mut());
        stp_items_release(null_mut());
        stp_channel_free(null_mut());
        stp_runtime_free(null_mut());
        stp_channel_output_free(out);
        stp_channel_input_free(inp);
        stp_task_free(task);
        stp_channel_free(ch);
        stp_runtime_free(rt);
    }
}

/// `stp_connect_options` as a connect takes it: every field read, the prefetch policy a client's
/// default (NULL: `auto`), a word that is no policy refused before anything is reached.
#[test]
fn connect_options_carry_a_clients_prefetch_default() {
    let options = |prefetch| stp_connect_options {
        timeout_ms: 250,
        node: c"b".as_ptr(),
        user: null(),
        password: null(),
        tls_root_ca: null(),
        tls_certificate: null(),
        tls_private_key: null(),
        prefetch,
    };
    // SAFETY: every string is NULL or a C string literal.
    unsafe {
        let off = connect_options(Some(&options(c"off".as_ptr())), "tcp/127.0.0.1:7447").unwrap();
        assert_eq!((off.prefetch, off.node.as_deref()), (stampede::Prefetch::Off, Some("b")));
        assert_eq!(off.timeout, Some(std::time::Duration::from_millis(250)));
        let default = connect_options(Some(&options(null())), "tcp/127.0.0.1:7447").unwrap();
        assert_eq!(default.prefetch, stampede::Prefetch::Auto);
        assert_eq!(connect_options(None, "tcp/127.0.0.1:7447").unwrap().prefetch, stampede::Prefetch::Auto);
        let mut rt = null_mut();
        let refused = options(c"sometimes".as_ptr());
        assert_eq!(stp_connect_with(c"tcp/127.0.0.1:1".as_ptr(), &refused, &mut rt), STP_INVALID_ARGUMENT);
        assert_eq!(
            last_message(),
            "stp_connect_with on \"prefetch\": \"sometimes\" is no prefetch policy: off, newest or auto"
        );
        assert!(rt.is_null());
    }
}
