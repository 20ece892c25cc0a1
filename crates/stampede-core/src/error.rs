//! The one error type of Stampede (docs/SEMANTICS.md, "Errors").
//!
//! Every message names the channel (or queue, or task), the timestamp, and the rule that was
//! broken, so that a log line alone tells the user what happened and what to do. Bindings map
//! each variant onto the exception of the same name (`stampede.BelowVisibility`, …) with the same
//! text.

use crate::time::{show, Selector, Timestamp};

/// Result of a Stampede operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a Stampede operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A put, `set_virtual_time`, `spawn` or new root task (`op` "task") asked for a timestamp
    /// below what the task (or, for a root task, ts_min) allows.
    #[error("{}", below_visibility(op, name, *.ts, what, *.limit))]
    BelowVisibility {
        op: &'static str,
        name: String,
        ts: Timestamp,
        /// "the task's visibility" or "ts_min".
        what: &'static str,
        limit: Timestamp,
    },

    /// The channel holds, or has reclaimed early by reference count, an item at this timestamp.
    #[error("put ts={ts} on \"{name}\": the channel already holds or has reclaimed an item at this timestamp (one item per timestamp)")]
    DuplicateTimestamp { name: String, ts: Timestamp },

    /// Negative timestamp, or `INFINITY` used as an item timestamp; or a negative virtual time
    /// for a new task (`op` "task" or "spawn").
    #[error("{}", invalid_timestamp(op, name, *.ts))]
    InvalidTimestamp { op: &'static str, name: String, ts: Timestamp },

    /// A bounded channel or queue stayed full until the timeout, or the item can never fit.
    #[error("put ts={ts} on \"{name}\": full ({reason})")]
    Full {
        name: String,
        ts: Timestamp,
        reason: String,
        /// The item is larger than the bound: no amount of reclamation makes room, so waiting is
        /// pointless.
        can_never_fit: bool,
    },

    /// Nothing suitable was present before the timeout (`op` "get" or "join"), or a consume named
    /// nothing this connection can consume (`op` "consume"). `previous` and `next` are the
    /// neighbouring timestamps present and not consumed on this connection. `settled`: nothing
    /// suitable can ever come — the timestamps the selector asks for are settled
    /// (docs/CORRELATION.md, "Settled timestamps": the channel's producer set is closed and its
    /// producers are done or past them) — so waiting is pointless and the error is final, not
    /// transient.
    #[error("{}", not_available(op, name, *.selector, *.previous, *.next, *.settled))]
    NotAvailable {
        op: &'static str,
        name: String,
        selector: Selector,
        previous: Option<Timestamp>,
        next: Option<Timestamp>,
        settled: bool,
    },

    /// Exact get of an item this connection has already consumed.
    #[error(
        "get ts={ts} on \"{name}\": already consumed on this connection (consumed by this connection, or present \
         below the task's visibility when it attached: attach from a task at or below ts={ts} to read it)"
    )]
    AlreadyConsumed { name: String, ts: Timestamp },

    /// Exact get below ts_min, or of an item reclaimed early by its reference count.
    #[error("get ts={ts} on \"{name}\": reclaimed ({reason})")]
    Reclaimed { name: String, ts: Timestamp, reason: String },

    /// The channel or queue was destroyed, the connection detached, the task closed, or the
    /// runtime closed, before or while the operation ran.
    #[error("\"{name}\" is closed: {reason}")]
    Closed { name: String, reason: &'static str },

    /// No channel or queue has this name.
    #[error("no channel or queue is named \"{name}\"; create it first or check rt.names()")]
    NotFound { name: String },

    /// A channel or queue of this name exists already.
    #[error("a channel or queue named \"{name}\" already exists; use rt.lookup(\"{name}\")")]
    AlreadyExists { name: String },

    /// An argument outside its documented range (refcount 0, a tick of 0, …).
    #[error("{op} on \"{name}\": {reason}")]
    InvalidArgument { op: &'static str, name: String, reason: String },

    /// The fabric failed a remote call (docs/NODES.md, "Errors"): the node `name` (or endpoint)
    /// could not be reached, stopped answering, or the client's session on it ended. What the call
    /// did on the node is unknown unless `reason` says otherwise; items it may have taken go back
    /// there.
    #[error("{op} on \"{name}\": unreachable ({reason})")]
    Unreachable { op: &'static str, name: String, reason: String },

    /// The node's access policy does not give this client's user the `right` (`"read"`,
    /// `"write"`, `"create"`, or `"connect"` for a missing or wrong password) on `name`. Nothing
    /// was done and nothing is returned.
    #[error("{op} on \"{name}\": permission denied: {reason}")]
    PermissionDenied { op: &'static str, name: String, right: &'static str, reason: String },

    /// A channel's disk tier could not write, sync, allocate or open its extents (a full disk, a
    /// missing or unwritable directory, another runtime using them). `reason` names the directory
    /// and the OS error. Nothing was lost: every item the channel held is still held (in memory);
    /// a put that needed the disk was refused.
    #[error("{op} on \"{name}\": disk tier failed ({reason})")]
    Storage { op: &'static str, name: String, reason: String },
}

/// Which error an [`Error`] is, without its fields: a stable number (the variant's position, what
/// the C and Java clients carry) and the name every client gives it (`"NotAvailable"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorKind {
    BelowVisibility = 0,
    DuplicateTimestamp = 1,
    InvalidTimestamp = 2,
    Full = 3,
    NotAvailable = 4,
    AlreadyConsumed = 5,
    Reclaimed = 6,
    Closed = 7,
    NotFound = 8,
    AlreadyExists = 9,
    InvalidArgument = 10,
    Unreachable = 11,
    PermissionDenied = 12,
    Storage = 13,
}

impl ErrorKind {
    /// Every kind, in number order.
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::BelowVisibility,
        ErrorKind::DuplicateTimestamp,
        ErrorKind::InvalidTimestamp,
        ErrorKind::Full,
        ErrorKind::NotAvailable,
        ErrorKind::AlreadyConsumed,
        ErrorKind::Reclaimed,
        ErrorKind::Closed,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::InvalidArgument,
        ErrorKind::Unreachable,
        ErrorKind::PermissionDenied,
        ErrorKind::Storage,
    ];

    /// The name every client gives this error (Python's exception, Java's without `Exception`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BelowVisibility => "BelowVisibility",
            ErrorKind::DuplicateTimestamp => "DuplicateTimestamp",
            ErrorKind::InvalidTimestamp => "InvalidTimestamp",
            ErrorKind::Full => "Full",
            ErrorKind::NotAvailable => "NotAvailable",
            ErrorKind::AlreadyConsumed => "AlreadyConsumed",
            ErrorKind::Reclaimed => "Reclaimed",
            ErrorKind::Closed => "Closed",
            ErrorKind::NotFound => "NotFound",
            ErrorKind::AlreadyExists => "AlreadyExists",
            ErrorKind::InvalidArgument => "InvalidArgument",
            ErrorKind::Unreachable => "Unreachable",
            ErrorKind::PermissionDenied => "PermissionDenied",
            ErrorKind::Storage => "Storage",
        }
    }
}

impl Error {
    /// Which error this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BelowVisibility { .. } => ErrorKind::BelowVisibility,
            Error::DuplicateTimestamp { .. } => ErrorKind::DuplicateTimestamp,
            Error::InvalidTimestamp { .. } => ErrorKind::InvalidTimestamp,
            Error::Full { .. } => ErrorKind::Full,
            Error::NotAvailable { .. } => ErrorKind::NotAvailable,
            Error::AlreadyConsumed { .. } => ErrorKind::AlreadyConsumed,
            Error::Reclaimed { .. } => ErrorKind::Reclaimed,
            Error::Closed { .. } => ErrorKind::Closed,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            Error::Unreachable { .. } => ErrorKind::Unreachable,
            Error::PermissionDenied { .. } => ErrorKind::PermissionDenied,
            Error::Storage { .. } => ErrorKind::Storage,
        }
    }
}

/// The reason of the `Closed` error of an operation on a detached connection.
pub const DETACHED: &str = "the connection was detached";

impl Error {
    /// `true` for the "not yet" errors a blocking call waits out: `NotAvailable` unless settled,
    /// and `Full` for an item that could fit once items are reclaimed. Every other error is final.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::NotAvailable { settled: false, .. } | Error::Full { can_never_fit: false, .. })
    }

    /// The error for an operation on a connection that was detached (explicitly, or by closing
    /// its task).
    pub fn detached(name: &str) -> Error {
        Error::Closed { name: name.to_owned(), reason: DETACHED }
    }
}

/// The message of `BelowVisibility`: a new task's own wording (there is no task yet to name),
/// else the operation on the channel or task `name`.
fn below_visibility(op: &str, name: &str, ts: Timestamp, what: &str, limit: Timestamp) -> String {
    let (ts, limit) = (show(ts), show(limit));
    match op {
        "task" => format!(
            "rt.task(virtual_time={ts}) is below ts_min {limit}: a root task starts at or above ts_min, so start it at \
             {limit} or later (ts_min never runs ahead of 1 + the highest timestamp put, so that is above everything \
             that exists), or spawn it from a running task with task.spawn(virtual_time=...)"
        ),
        "spawn" => format!(
            "task.spawn(virtual_time={ts}) on {name} is below {what} {limit}: a child starts at or above its \
             parent's visibility"
        ),
        _ => format!("{op} ts={ts} on \"{name}\" is below {what} {limit}"),
    }
}

/// The message of `InvalidTimestamp`: an item timestamp, or a new task's virtual time.
fn invalid_timestamp(op: &str, name: &str, ts: Timestamp) -> String {
    match op {
        "task" | "spawn" => format!(
            "{}(virtual_time={ts}) is not a valid virtual time: virtual times are 0 ..= INFINITY",
            if op == "task" { "rt.task" } else { "task.spawn" }
        ),
        _ => format!(
            "{op} ts={} on \"{name}\" is not a valid item timestamp (items live at 0 ..= i64::MAX-1; INFINITY is \
             only a virtual time)",
            show(ts)
        ),
    }
}

/// The message of `NotAvailable`: what was asked, the neighbours, and what to do next.
fn not_available(
    op: &str,
    name: &str,
    selector: Selector,
    previous: Option<Timestamp>,
    next: Option<Timestamp>,
    settled: bool,
) -> String {
    let neighbours = format!("previous={}, next={}", neighbour(previous), neighbour(next));
    match (op, selector, settled) {
        ("consume", Selector::At(ts), _) => format!(
            "consume ts={ts} on \"{name}\": nothing to consume at this timestamp on this connection ({neighbours}); \
             consume a timestamp that was put (on a queue: one gotten on this connection and not yet consumed)"
        ),
        ("join", _, _) => format!("join on \"{name}\": nothing released before the timeout; wait longer"),
        (_, Selector::At(ts), true) => format!(
            "{op} ts={ts} on \"{name}\": not available and never will be: ts={ts} is settled (the channel's \
             producer set is closed and no producer can still put it) ({neighbours}); pick a neighbour"
        ),
        (_, _, true) => format!(
            "{op} {selector} on \"{name}\": nothing more can arrive: the channel's producer set is closed and its \
             producers are done ({neighbours}); stop reading this connection"
        ),
        (_, _, false) => {
            format!(
                "{op} {selector} on \"{name}\": not available ({neighbours}); wait with a timeout or pick a neighbour"
            )
        }
    }
}

/// A neighbouring timestamp as shown in messages: the number, or `none`.
fn neighbour(ts: Option<Timestamp>) -> String {
    ts.map_or_else(|| "none".to_owned(), |ts| ts.to_string())
}
