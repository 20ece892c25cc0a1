//! The event log's writer (SPEC §9; the record and file formats and everything post mortem are
//! `stampede-trace`'s, see `docs/TRACING.md`): per-thread buffers of fixed-size records, handed
//! whole to a writer thread that appends them to this process's log file.
//!
//! Enabled at run time, once per process: [`enable`], or `STAMPEDE_TRACE=<dir>` read when the
//! first [`Runtime`](crate::Runtime) is made (`Runtime::new`, `connect`). Until then every event
//! costs one relaxed load of a flag, predictably false.
//!
//! Guarantees:
//! - The hot path never blocks and never allocates but once per [`RECORDS_PER_BUFFER`] records:
//!   a record is a cycle-counter read and a push into the thread's own buffer. A full buffer is
//!   handed to the writer thread and the thread goes on in a fresh one (double buffering).
//! - Bounded: at most [`BUFFERS_WAITING_MAX`] full buffers wait for the writer thread; past it a
//!   buffer's records are dropped and counted ([`dropped`]), never waited for.
//! - A thread's records reach the file when its buffer fills, when the thread ends, when it
//!   calls [`flush`] (and the main thread's when the process exits normally) (which returns once the writer thread wrote everything handed to it); a
//!   process that crashes keeps every record handed over before (`stampede-trace`'s reader keeps
//!   every whole chunk).
//! - Times are ns since [`enable`], from the cycle counter (x86_64: `rdtsc`, calibrated against the
//!   monotonic clock when enabled), else from the monotonic clock.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use stampede_trace::file::{self, Chunk};
use stampede_trace::record::Record;
pub use stampede_trace::record::{Kind, Phase};

/// Records a thread buffers before handing them to the writer thread (128 KiB).
pub const RECORDS_PER_BUFFER: usize = 4096;

/// Most full buffers waiting for the writer thread.
pub const BUFFERS_WAITING_MAX: usize = 64;

/// The environment variable naming the directory a process logs into.
pub const TRACE_ENV: &str = "STAMPEDE_TRACE";

static ENABLED: AtomicBool = AtomicBool::new(false);
static LOG: OnceLock<Log> = OnceLock::new();

/// The process's log while tracing.
struct Log {
    path: PathBuf,
    to_writer: SyncSender<Message>,
    names: Mutex<HashMap<String, u32>>,
    next_thread: AtomicU64,
    dropped: AtomicU64,
    clock: Clock,
}

enum Message {
    Chunk(Chunk),
    /// Answered once every message before it is written.
    Flush(SyncSender<()>),
}

/// The cycle counter, and how to turn its ticks into ns since [`enable`].
struct Clock {
    ticks0: u64,
    ns_per_tick: f64,
}

impl Clock {
    /// Calibrated over [`CALIBRATION`] against the monotonic clock.
    fn calibrate() -> Clock {
        let (start, ticks0) = (Instant::now(), ticks());
        std::thread::sleep(CALIBRATION);
        let (elapsed, ticked) = (start.elapsed(), ticks().wrapping_sub(ticks0));
        let ns_per_tick =
            if cfg!(target_arch = "x86_64") && ticked > 0 { elapsed.as_nanos() as f64 / ticked as f64 } else { 1.0 };
        Clock { ticks0, ns_per_tick }
    }

    fn ns(&self, ticks: u64) -> u64 {
        (ticks.saturating_sub(self.ticks0) as f64 * self.ns_per_tick) as u64
    }
}

/// How long [`enable`] calibrates the cycle counter.
const CALIBRATION: Duration = Duration::from_millis(20);

/// The cycle counter (x86_64), else ns of the monotonic clock since the first call.
#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; every x86_64 has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Starts logging this process into `dir` (created if missing), as `<host>-<pid>.stlog`; the
/// file's path. Once per process: a second call returns the first one's path.
pub fn enable(dir: &Path) -> std::io::Result<PathBuf> {
    if let Some(log) = LOG.get() {
        return Ok(log.path.clone());
    }
    std::fs::create_dir_all(dir)?;
    let host =
        std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "host".into(), |h| h.trim().to_owned());
    let pid = std::process::id();
    let path = dir.join(format!("{host}-{pid}.stlog"));
    let mut out = File::create(&path)?;
    let name = std::env::args().next().unwrap_or_default();
    out.write_all(&file::header(&host, pid, &name))?;
    let (to_writer, from_threads) = sync_channel(BUFFERS_WAITING_MAX);
    let log = Log {
        path: path.clone(),
        to_writer,
        names: Mutex::new(HashMap::from([(String::new(), 0)])),
        next_thread: AtomicU64::new(1),
        dropped: AtomicU64::new(0),
        clock: Clock::calibrate(),
    };
    out.write_all(&Chunk::Name { index: 0, name: String::new() }.encode())?;
    if LOG.set(log).is_err() {
        // Another thread enabled it meanwhile: its log stands.
        return Ok(LOG.get().expect("set").path.clone());
    }
    std::thread::Builder::new().name("stampede-trace".into()).spawn(move || write_chunks(out, &from_threads))?;
    // The main thread's buffer is never dropped (a process's exit does not run its thread-local
    // destructors): it is flushed when the process exits normally.
    // SAFETY: `flush_at_exit` is a plain function, safe to run during exit.
    unsafe { libc::atexit(flush_at_exit) };
    ENABLED.store(true, Ordering::Release);
    Ok(path)
}

extern "C" fn flush_at_exit() {
    flush();
}

/// [`enable`] into `$STAMPEDE_TRACE` if it is set (once per process); a failure is printed, not
/// returned: tracing never stops the application.
pub(crate) fn enable_from_env() {
    static TRIED: AtomicBool = AtomicBool::new(false);
    if TRIED.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Some(dir) = std::env::var_os(TRACE_ENV).filter(|d| !d.is_empty()) {
        if let Err(e) = enable(Path::new(&dir)) {
            eprintln!("stampede: {TRACE_ENV}={}: tracing is off: {e}", Path::new(&dir).display());
        }
    }
}

/// The writer thread: appends each chunk, times converted to ns, and answers flushes.
fn write_chunks(mut out: File, from_threads: &Receiver<Message>) {
    let Some(log) = LOG.get() else { return };
    while let Ok(message) = from_threads.recv() {
        match message {
            Message::Chunk(mut chunk) => {
                if let Chunk::Records { records, .. } = &mut chunk {
                    for record in records.iter_mut() {
                        record.t = log.clock.ns(record.t);
                    }
                }
                // A write that fails loses this chunk, not the application.
                let _ = out.write_all(&chunk.encode());
            }
            Message::Flush(done) => {
                let _ = out.flush();
                let _ = done.send(());
            }
        }
    }
}

/// Whether this process logs events.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Records handed over but dropped because the writer thread was [`BUFFERS_WAITING_MAX`] buffers
/// behind.
pub fn dropped() -> u64 {
    LOG.get().map_or(0, |log| log.dropped.load(Ordering::Relaxed))
}

/// The index of `name` in the log's name table (0 when tracing is off).
pub fn intern(name: &str) -> u32 {
    let Some(log) = LOG.get() else { return 0 };
    let mut names = log.names.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&index) = names.get(name) {
        return index;
    }
    let index = names.len() as u32;
    names.insert(name.to_owned(), index);
    // Under the lock: the table's entries reach the file in index order. Waits if the writer is
    // behind (rare: once per name).
    let _ = log.to_writer.send(Message::Chunk(Chunk::Name { index, name: name.to_owned() }));
    index
}

/// A thread's records not yet handed over.
struct Buffer {
    tid: u64,
    named: bool,
    records: Vec<Record>,
}

impl Buffer {
    fn new() -> Buffer {
        let tid = LOG.get().map_or(0, |log| log.next_thread.fetch_add(1, Ordering::Relaxed));
        Buffer { tid, named: false, records: Vec::with_capacity(RECORDS_PER_BUFFER) }
    }

    /// Hands the records over (and the thread's name, the first time).
    fn hand_over(&mut self) {
        let Some(log) = LOG.get() else { return };
        if !self.named {
            self.named = true;
            let name = std::thread::current().name().map_or_else(|| format!("thread {}", self.tid), str::to_owned);
            let _ = log.to_writer.send(Message::Chunk(Chunk::Thread { tid: self.tid, name }));
        }
        if self.records.is_empty() {
            return;
        }
        let records = std::mem::replace(&mut self.records, Vec::with_capacity(RECORDS_PER_BUFFER));
        let count = records.len() as u64;
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            log.to_writer.try_send(Message::Chunk(Chunk::Records { tid: self.tid, records }))
        {
            log.dropped.fetch_add(count, Ordering::Relaxed);
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.hand_over();
    }
}

thread_local! {
    static BUFFER: RefCell<Buffer> = RefCell::new(Buffer::new());
}

/// Logs one event (when tracing is on).
#[inline]
pub fn event(kind: Kind, phase: Phase, name: u32, ts: u64, bytes: u64) {
    if enabled() {
        push(Record { t: ticks(), kind, phase, name, ts, bytes });
    }
}

#[cold]
fn push(record: Record) {
    // A thread ending (its buffer already gone) logs nothing more.
    let _ = BUFFER.try_with(|buffer| {
        let Ok(mut buffer) = buffer.try_borrow_mut() else { return };
        buffer.records.push(record);
        if buffer.records.len() >= RECORDS_PER_BUFFER {
            buffer.hand_over();
        }
    });
}

/// Hands the calling thread's records over and waits until the writer thread wrote everything
/// handed over so far (at most `FLUSH_TIMEOUT`). `Runtime::close` calls it.
pub fn flush() {
    let Some(log) = LOG.get() else { return };
    let _ = BUFFER.try_with(|buffer| {
        if let Ok(mut buffer) = buffer.try_borrow_mut() {
            buffer.hand_over();
        }
    });
    let (done, written) = sync_channel(1);
    if log.to_writer.send(Message::Flush(done)).is_ok() {
        let _ = written.recv_timeout(FLUSH_TIMEOUT);
    }
}

/// Longest [`flush`] waits for the writer thread.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// A span: its begin is logged when made, its end when dropped (or by [`end_with`](Self::end_with)).
#[must_use = "a span ends when dropped"]
pub struct Span {
    kind: Kind,
    name: u32,
    ts: u64,
    bytes: u64,
    on: bool,
}

/// Begins a span of `kind` (its end is logged when the span drops).
#[inline]
pub fn span(kind: Kind, name: u32, ts: u64, bytes: u64) -> Span {
    let on = enabled();
    if on {
        push(Record { t: ticks(), kind, phase: Phase::Begin, name, ts, bytes });
    }
    Span { kind, name, ts, bytes, on }
}

/// A span of the application's own, named `name` (`with stampede.span("track"):` in Python).
pub fn user_span(name: &str) -> Span {
    let name = if enabled() { intern(name) } else { 0 };
    span(Kind::User, name, 0, 0)
}

impl Span {
    /// Ends the span, its end carrying `ts` and `bytes` (a get's item).
    pub fn end_with(mut self, ts: u64, bytes: u64) {
        (self.ts, self.bytes) = (ts, bytes);
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if self.on {
            push(Record {
                t: ticks(),
                kind: self.kind,
                phase: Phase::End,
                name: self.name,
                ts: self.ts,
                bytes: self.bytes,
            });
        }
    }
}
