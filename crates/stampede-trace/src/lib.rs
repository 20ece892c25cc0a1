//! Stampede's event log, post mortem (docs/TRACING.md, issue 13): what one record holds, how the
//! logs of several threads, processes and hosts become one timeline, where each thread's time went,
//! and the timeline as a Perfetto / Chrome trace.
//!
//! This crate is pure: it turns bytes and records into records, timelines, tables and JSON, with
//! no clock, no file and no thread of its own. The writers (per-thread buffers on the runtime's
//! hot path) and the command line (`stampede trace`) are drivers around it.
//!
//! - [`record`]: the fixed-size binary record and the event kinds; decoding hostile bytes is a
//!   typed error, never a panic.
//! - [`mod@file`]: a process's log file, chunk after chunk as the writer flushes; read back whole up
//!   to a crash's cut.
//! - [`clock`]: a log's clock mapped onto a reference clock from timestamp exchanges (offset and
//!   drift, with the error bound the exchanges allow).
//! - [`merge`]: logs of threads, processes and hosts as one timeline on the reference clock.
//! - [`breakdown`]: each thread's wall time split into application logic, blocking, runtime (with
//!   allocation, locking and GC inside it) and messaging; the parts add up to the wall time.
//! - [`perfetto`]: the timeline as Chrome trace JSON, one track per thread, a slice per span,
//!   flow arrows from each put to the gets that received its item.

pub mod breakdown;
pub mod clock;
pub mod file;
pub mod merge;
pub mod perfetto;
pub mod record;
