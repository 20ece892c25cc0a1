//! Benchmark programs for Stampede (docs/BENCHMARKS.md,
//! "How every benchmark measures and reports"): each measures the runtime side by side with its
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
//! - [`process`] — the processes of a cross-process benchmark: this program re-executed in a
//!   role (the other side of an exchange), a `stampede serve` node, a server a reference needs;
//!   each killed when dropped, and with this process.
//! - [`remote`] — Stampede's side of `remote`: the ping-pong, frame throughput and single calls
//!   through a node, every side its own process and session.
//! - [`mod@prefetch`] — Stampede's side of `prefetch`: skipping readers and cache-answered gets
//!   through a node, with prefetch `off` and `auto`.
//! - [`python`] — the Python row of `remote`: `python/bench/bench_remote.py` run against the
//!   same node, its lines forwarded.
//! - [`mod@reference`] — `remote`'s references, across processes too: raw TCP, a Unix socket, bare
//!   zenoh pub/sub and query, Redis Streams; and the seeds' own figures.
//! - [`kernel`] — [`kernel::Probe`]: the wake-ups, CPU time and system calls of the processes
//!   of an exchange, read from `/proc` around a run.
//! - [`page_cache`] — [`page_cache::evict`]: a disk tier made cold between measurements, and
//!   how much of it is still resident.

pub mod cli;
pub mod kernel;
pub mod page_cache;
pub mod payload;
pub mod ping_pong;
pub mod pipe;
pub mod prefetch;
pub mod process;
pub mod python;
pub mod reference;
pub mod relay;
pub mod remote;
pub mod report;
pub mod stats;

/// What every benchmark step returns: any error, to be printed by `main`.
pub type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
