//! Errors cross the wire unchanged: [`WireError`] mirrors the core's [`Error`] variant by
//! variant, and converting it back yields an equal error with the same message text. The
//! `&'static str` fields of errors decoded from the wire are kept once per distinct text, a
//! bounded number of them ([`KEPT_TEXTS_MAX`]).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use stampede_core::{Error, Selector, Timestamp};

/// [`Error`] on the wire, variant by variant; `&'static str` fields travel as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireError {
    BelowVisibility {
        op: String,
        name: String,
        ts: Timestamp,
        what: String,
        limit: Timestamp,
    },
    DuplicateTimestamp {
        name: String,
        ts: Timestamp,
    },
    InvalidTimestamp {
        op: String,
        name: String,
        ts: Timestamp,
    },
    Full {
        name: String,
        ts: Timestamp,
        reason: String,
        can_never_fit: bool,
    },
    NotAvailable {
        op: String,
        name: String,
        selector: Selector,
        previous: Option<Timestamp>,
        next: Option<Timestamp>,
        settled: bool,
    },
    AlreadyConsumed {
        name: String,
        ts: Timestamp,
    },
    Reclaimed {
        name: String,
        ts: Timestamp,
        reason: String,
    },
    Closed {
        name: String,
        reason: String,
    },
    NotFound {
        name: String,
    },
    AlreadyExists {
        name: String,
    },
    InvalidArgument {
        op: String,
        name: String,
        reason: String,
    },
    Unreachable {
        op: String,
        name: String,
        reason: String,
    },
    PermissionDenied {
        op: String,
        name: String,
        right: String,
        reason: String,
    },
    Storage {
        op: String,
        name: String,
        reason: String,
    },
}

impl From<&Error> for WireError {
    fn from(e: &Error) -> Self {
        let text = |s: &str| s.to_owned();
        match e {
            Error::BelowVisibility { op, name, ts, what, limit } => WireError::BelowVisibility {
                op: text(op),
                name: name.clone(),
                ts: *ts,
                what: text(what),
                limit: *limit,
            },
            Error::DuplicateTimestamp { name, ts } => WireError::DuplicateTimestamp { name: name.clone(), ts: *ts },
            Error::InvalidTimestamp { op, name, ts } => {
                WireError::InvalidTimestamp { op: text(op), name: name.clone(), ts: *ts }
            }
            Error::Full { name, ts, reason, can_never_fit } => {
                WireError::Full { name: name.clone(), ts: *ts, reason: reason.clone(), can_never_fit: *can_never_fit }
            }
            Error::NotAvailable { op, name, selector, previous, next, settled } => WireError::NotAvailable {
                op: text(op),
                name: name.clone(),
                selector: *selector,
                previous: *previous,
                next: *next,
                settled: *settled,
            },
            Error::AlreadyConsumed { name, ts } => WireError::AlreadyConsumed { name: name.clone(), ts: *ts },
            Error::Reclaimed { name, ts, reason } => {
                WireError::Reclaimed { name: name.clone(), ts: *ts, reason: reason.clone() }
            }
            Error::Closed { name, reason } => WireError::Closed { name: name.clone(), reason: text(reason) },
            Error::NotFound { name } => WireError::NotFound { name: name.clone() },
            Error::AlreadyExists { name } => WireError::AlreadyExists { name: name.clone() },
            Error::InvalidArgument { op, name, reason } => {
                WireError::InvalidArgument { op: text(op), name: name.clone(), reason: reason.clone() }
            }
            Error::Unreachable { op, name, reason } => {
                WireError::Unreachable { op: text(op), name: name.clone(), reason: reason.clone() }
            }
            Error::PermissionDenied { op, name, right, reason } => WireError::PermissionDenied {
                op: text(op),
                name: name.clone(),
                right: text(right),
                reason: reason.clone(),
            },
            Error::Storage { op, name, reason } => {
                WireError::Storage { op: text(op), name: name.clone(), reason: reason.clone() }
            }
        }
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Self {
        match e {
            WireError::BelowVisibility { op, name, ts, what, limit } => {
                Error::BelowVisibility { op: keep(&op), name, ts, what: keep(&what), limit }
            }
            WireError::DuplicateTimestamp { name, ts } => Error::DuplicateTimestamp { name, ts },
            WireError::InvalidTimestamp { op, name, ts } => Error::InvalidTimestamp { op: keep(&op), name, ts },
            WireError::Full { name, ts, reason, can_never_fit } => Error::Full { name, ts, reason, can_never_fit },
            WireError::NotAvailable { op, name, selector, previous, next, settled } => {
                Error::NotAvailable { op: keep(&op), name, selector, previous, next, settled }
            }
            WireError::AlreadyConsumed { name, ts } => Error::AlreadyConsumed { name, ts },
            WireError::Reclaimed { name, ts, reason } => Error::Reclaimed { name, ts, reason },
            WireError::Closed { name, reason } => Error::Closed { name, reason: keep(&reason) },
            WireError::NotFound { name } => Error::NotFound { name },
            WireError::AlreadyExists { name } => Error::AlreadyExists { name },
            WireError::InvalidArgument { op, name, reason } => Error::InvalidArgument { op: keep(&op), name, reason },
            WireError::Unreachable { op, name, reason } => Error::Unreachable { op: keep(&op), name, reason },
            WireError::PermissionDenied { op, name, right, reason } => {
                Error::PermissionDenied { op: keep(&op), name, right: keep(&right), reason }
            }
            WireError::Storage { op, name, reason } => Error::Storage { op: keep(&op), name, reason },
        }
    }
}

/// Most distinct texts this process keeps for the `&'static str` fields of errors decoded from
/// the wire (operation names, `Closed` reasons: a few dozen exist). Past it, or for a text longer
/// than [`KEPT_TEXT_BYTES_MAX`], the field reads [`TEXT_NOT_KEPT`]: a hostile node cannot grow a
/// client's memory without bound.
pub const KEPT_TEXTS_MAX: usize = 1024;
/// Longest text kept for a `&'static str` error field.
pub const KEPT_TEXT_BYTES_MAX: usize = 256;
/// What a `&'static str` error field reads when its text was not kept.
pub const TEXT_NOT_KEPT: &str = "(text not kept: the node sent too many distinct texts)";

/// `text` as a `&'static str`: each distinct text is allocated once and kept for the life of the
/// process (bounded by [`KEPT_TEXTS_MAX`]), so an error decoded from the wire equals, and prints
/// exactly as, the node's.
fn keep(text: &str) -> &'static str {
    static KEPT: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut kept = KEPT.get_or_init(Default::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = kept.get(text) {
        return known;
    }
    if text.len() > KEPT_TEXT_BYTES_MAX || kept.len() >= KEPT_TEXTS_MAX {
        return TEXT_NOT_KEPT;
    }
    let leaked: &'static str = Box::leak(text.into());
    kept.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_reply, encode, Reply};

    /// Every error variant crosses the wire as an equal error with the same message text.
    #[test]
    fn errors_cross_unchanged() {
        let errors = [
            Error::BelowVisibility { op: "put", name: "cam".into(), ts: 4, what: "the task's visibility", limit: 5 },
            Error::DuplicateTimestamp { name: "cam".into(), ts: 3 },
            Error::InvalidTimestamp { op: "task", name: String::new(), ts: -1 },
            Error::Full { name: "cam".into(), ts: 3, reason: "capacity 1".into(), can_never_fit: false },
            Error::NotAvailable {
                op: "get",
                name: "cam".into(),
                selector: Selector::NewestUnseen,
                previous: Some(1),
                next: None,
                settled: false,
            },
            Error::AlreadyConsumed { name: "cam".into(), ts: 3 },
            Error::Reclaimed { name: "cam".into(), ts: 3, reason: "below ts_min 4".into() },
            Error::detached("cam"),
            Error::NotFound { name: "cam".into() },
            Error::AlreadyExists { name: "cam".into() },
            Error::InvalidArgument { op: "put", name: "cam".into(), reason: "refcount 0".into() },
            Error::Unreachable { op: "get", name: "node".into(), reason: "no reply".into() },
        ];
        for error in errors {
            let reply = Reply::Error(WireError::from(&error));
            let message = encode(&reply);
            let (decoded, payload) = decode_reply(&message).expect("decodes");
            assert!(payload.is_empty());
            let Reply::Error(wire) = decoded else { panic!("not an error: {decoded:?}") };
            let back = Error::from(wire);
            assert_eq!(back, error);
            assert_eq!(back.to_string(), error.to_string());
        }
    }

    /// Kept texts are shared; too long a text is replaced, not kept.
    #[test]
    fn kept_texts_are_bounded() {
        let a = keep("the connection was detached");
        let b = keep(&String::from("the connection was detached"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(keep(&"x".repeat(KEPT_TEXT_BYTES_MAX + 1)), TEXT_NOT_KEPT);
    }
}
