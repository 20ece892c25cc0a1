//! What recording and replay can fail with: each variant names the file or channel and says what
//! to do next.

use std::path::PathBuf;

/// A recording or replay error.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be created, read or written.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The file is not a readable MCAP file, or a Stampede record in it is malformed.
    #[error("{path}: not a readable MCAP recording ({reason}); is it a file `stampede record` wrote?")]
    Corrupt { path: PathBuf, reason: String },
    /// Writing the recording failed for a reason other than I/O (what the format cannot hold).
    #[error("{path}: writing the recording failed: {reason}")]
    Write { path: PathBuf, reason: String },
    /// The recording holds a channel whose payloads Stampede cannot put back as they are.
    #[error("{path}: channel {topic:?} has message encoding {encoding:?} and no Stampede codec; only recordings of Stampede channels, MCAP channels with encoding json, and ROS 2 bags (cdr messages with ros2msg schemas) can be replayed")]
    UnknownCodec { path: PathBuf, topic: String, encoding: String },
    /// A bound of this crate was reached (the bound is named in `reason`).
    #[error("{0}")]
    TooLarge(String),
    /// The runtime refused an operation.
    #[error(transparent)]
    Stampede(#[from] stampede::Error),
    /// Stopped on request (Ctrl-C) before the end.
    #[error("stopped before the end")]
    Stopped,
}

/// The result of recording and replay operations.
pub type RecordResult<T> = Result<T, RecordError>;

impl RecordError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> RecordError {
        RecordError::Io { path: path.to_owned(), source }
    }

    pub(crate) fn corrupt(path: &std::path::Path, reason: impl std::fmt::Display) -> RecordError {
        RecordError::Corrupt { path: path.to_owned(), reason: reason.to_string() }
    }
}
