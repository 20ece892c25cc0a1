//! Benchmark programs for Stampede (SPEC §13): each measures the runtime side by side with its
//! reference in the same run and prints one JSON object per result line to stdout.
//!
//! The binaries in `src/bin/` are thin: what they share lives here.
//!
//! # Layout
//!
//! - [`cli`] — the command line every binary accepts (`--quick` for a smoke run), and options
//!   with a value that a binary declares.
//! - [`stats`] — percentiles and summaries of timing samples, timer overhead, jitter and
//!   least-squares line fits.
//! - [`report`] — [`report::Line`]: one JSON object per result, rounded, printed at once.
//! - [`pipe`] — [`pipe::Pipe`]: a runtime with one channel, a producer task (virtual time 0,
//!   digitizer style) and a consumer task (virtual time `INFINITY`, tracker style).
//! - [`ping_pong`] — the hand-off ping-pong (`handoff`, `remote`) and [`ping_pong::timed`], the
//!   timing loop.
//! - [`payload`] — payload sizes used across benchmarks and [`payload::touch`], the read every
//!   receiver does so no side gets away without looking at what it received; pseudo-random
//!   frames and [`payload::checksum`], the read of every byte.
//! - [`page_cache`] — [`page_cache::evict`]: a disk tier made cold between measurements, and
//!   how much of it is still resident.

pub mod cli;
pub mod page_cache;
pub mod payload;
pub mod ping_pong;
pub mod pipe;
pub mod report;
pub mod stats;
