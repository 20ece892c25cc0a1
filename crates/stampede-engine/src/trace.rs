//! The event log's writer (the record and file formats and everything post mortem are
//! `stampede-trace`'s, see `docs/TRACING.md`): per-thread buffers of fixed-size records, handed
//! whole to a writer thread that appends them to this process's log file.
//!
//! Enabled at run time, once per process: [`enable`], or `STAMPEDE_TRACE=<dir>` read when the
//! first runtime is made (`stampede::Runtime::new`, `stampede::connect`: [`enable_from_env`]).
//! Until then every event costs one relaxed load of a flag, predictably false.
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
//! - Records carry the cycle counter (x86_64: `rdtsc`; elsewhere ns of a process-local clock);
//!   the writer thread logs a reading of the counter with the host's monotonic clock when enabled
//!   and every [`CLOCK_READING_EVERY`], and the reader maps the records through them, so the logs
//!   of every process of a host share one clock. [`exchange_clocks`] logs timestamp exchanges
//!   with another host (a client's with its node) that map hosts onto one another.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use stampede_trace::clock::{Exchange, Reading};
use stampede_trace::file::{self, Chunk};
use stampede_trace::record::Record;
pub use stampede_trace::record::{Kind, Phase, NO_ITEM};

/// Records a thread buffers before handing them to the writer thread (128 KiB).
pub const RECORDS_PER_BUFFER: usize = 4096;

/// Most full buffers waiting for the writer thread.
pub const BUFFERS_WAITING_MAX: usize = 64;

/// The environment variable overriding the host name logs and exchanges use (processes on one
/// machine that should be reconciled as hosts of their own, as the tests do).
pub const TRACE_HOST_ENV: &str = "STAMPEDE_TRACE_HOST";

/// How often the writer thread logs a reading of the cycle counter with the monotonic clock
/// (the reader interpolates between readings).
pub const CLOCK_READING_EVERY: Duration = Duration::from_millis(100);

/// Timestamp exchanges [`exchange_clocks`] makes at a time (the reader keeps the quickest).
pub const EXCHANGES_PER_ROUND: usize = 5;

/// The environment variable naming the directory a process logs into.
pub const TRACE_ENV: &str = "STAMPEDE_TRACE";

static ENABLED: AtomicBool = AtomicBool::new(false);
static LOG: OnceLock<Log> = OnceLock::new();

/// The process's log while tracing.
struct Log {
    path: PathBuf,
    to_writer: SyncSender<Message>,
    /// The name table: each name's index, in the order the writer thread writes them.
    names: Mutex<HashMap<String, u32>>,
    /// Names, thread names and exchanges for the writer thread, which writes them before its
    /// next chunk (logged without waiting for it).
    pending: Mutex<Vec<Chunk>>,
    next_thread: AtomicU64,
    dropped: AtomicU64,
}

enum Message {
    Chunk(Chunk),
    /// Answered once every message before it is written.
    Flush(SyncSender<()>),
}

/// The cycle counter (x86_64), else ns of a process-local monotonic clock since the first call.
#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        crate::os::cycle_counter()
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
    // One thread at a time: two racing would both create (and truncate) the same file.
    static ENABLING: Mutex<()> = Mutex::new(());
    let _enabling = ENABLING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(log) = LOG.get() {
        return Ok(log.path.clone());
    }
    std::fs::create_dir_all(dir)?;
    let host = host_name();
    let pid = std::process::id();
    let path = dir.join(log_file_name(&host, pid));
    let mut out = File::create(&path)?;
    let name = process_name(std::env::args());
    out.write_all(&file::header(&host, pid, &name))?;
    let (to_writer, from_threads) = sync_channel(BUFFERS_WAITING_MAX);
    let log = Log {
        path: path.clone(),
        to_writer,
        names: Mutex::new(HashMap::from([(String::new(), 0)])),
        pending: Mutex::new(vec![Chunk::Name { index: 0, name: String::new() }]),
        next_thread: AtomicU64::new(1),
        dropped: AtomicU64::new(0),
    };
    out.write_all(&Chunk::Clock(reading()).encode())?;
    if let Err(log) = LOG.set(log) {
        // Only a thread holding ENABLING sets the log, and it was not set above.
        return Ok(log.path);
    }
    std::thread::Builder::new().name("stampede-trace".into()).spawn(move || write_chunks(out, &from_threads))?;
    // The main thread's buffer is never dropped (a process's exit does not run its thread-local
    // destructors): it is flushed when the process exits normally.
    crate::os::at_exit(flush_at_exit);
    ENABLED.store(true, Ordering::Release);
    Ok(path)
}

/// `<host>-<pid>.stlog`, the host name made a plain file name: `$STAMPEDE_TRACE_HOST` may hold
/// anything (`/`, `..`), and the log must stay in its directory.
fn log_file_name(host: &str, pid: u32) -> String {
    let host: String =
        host.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    format!("{}-{pid}.stlog", host.trim_start_matches('.'))
}

extern "C" fn flush_at_exit() {
    flush();
}

/// [`enable`] into `$STAMPEDE_TRACE` if it is set (once per process); a failure is printed, not
/// returned: tracing never stops the application.
pub fn enable_from_env() {
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

/// The writer thread: appends each chunk (after the names, thread names and exchanges logged
/// since the last), a clock reading every [`CLOCK_READING_EVERY`], and answers flushes.
fn write_chunks(mut out: File, from_threads: &Receiver<Message>) {
    let Some(log) = LOG.get() else { return };
    let mut last_reading = Instant::now();
    loop {
        let message = match from_threads.recv_timeout(CLOCK_READING_EVERY) {
            Ok(message) => Some(message),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // A write that fails loses its chunk, not the application.
        let pending = std::mem::take(&mut *log.pending.lock().unwrap_or_else(|e| e.into_inner()));
        for chunk in pending {
            let _ = out.write_all(&chunk.encode());
        }
        let flushing = matches!(message, Some(Message::Flush(_)));
        if flushing || last_reading.elapsed() >= CLOCK_READING_EVERY {
            let _ = out.write_all(&Chunk::Clock(reading()).encode());
            last_reading = Instant::now();
        }
        match message {
            Some(Message::Chunk(chunk)) => {
                let _ = out.write_all(&chunk.encode());
            }
            Some(Message::Flush(done)) => {
                let _ = out.flush();
                let _ = done.send(());
            }
            None => {}
        }
    }
}

/// The cycle counter and the host's monotonic clock, read together (the counter's reading is
/// the middle of two around the clock's).
fn reading() -> Reading {
    let before = ticks();
    let ns = monotonic_ns();
    let after = ticks();
    Reading { ticks: before + after.wrapping_sub(before) / 2, ns }
}

/// The host's monotonic clock (`CLOCK_MONOTONIC`, shared by its processes), ns.
pub fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
}

/// What a process is called in tables and tracks: its program's name and subcommand (`stampede
/// serve`), or for a Python interpreter its module (`-m`) or script.
fn process_name(mut args: impl Iterator<Item = String>) -> String {
    let base =
        |path: &str| Path::new(path).file_name().map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
    let program = base(&args.next().unwrap_or_default());
    let first = args.next();
    match first.as_deref() {
        Some("-m") if program.starts_with("python") => args.next().unwrap_or(program),
        Some("-c") if program.starts_with("python") => format!("{program} -c"),
        Some(script) if program.starts_with("python") && !script.starts_with('-') => base(script),
        Some(command) if !command.starts_with('-') => format!("{program} {command}"),
        _ => program,
    }
}

/// This host's name, as logs and clock exchanges name it: `$STAMPEDE_TRACE_HOST` if set, else
/// the kernel's host name. Logs of one host name are read as sharing one monotonic clock.
pub fn host_name() -> String {
    if let Some(host) = std::env::var(TRACE_HOST_ENV).ok().filter(|h| !h.is_empty()) {
        return host;
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "host".into(), |h| h.trim().to_owned())
}

/// Logs [`EXCHANGES_PER_ROUND`] timestamp exchanges with another host (when tracing is on):
/// `ask` sends a request and returns the peer's host and its monotonic clock on the request's
/// receipt and on its reply, or `None` (then no further exchange is made, so that a close never
/// waits on an unreachable node five times over). `at_end`: the run's end (else its start);
/// exchanges at both ends give the drift between the hosts' clocks.
pub fn exchange_clocks(at_end: bool, mut ask: impl FnMut() -> Option<(String, u64, u64)>) {
    let Some(log) = LOG.get() else { return };
    for _ in 0..EXCHANGES_PER_ROUND {
        let t0 = monotonic_ns();
        // A peer that does not answer one exchange is not asked again (each may wait seconds).
        let Some((peer, t1, t2)) = ask() else { break };
        let t3 = monotonic_ns();
        let exchange = Exchange { t0, t1, t2, t3 };
        log.pending.lock().unwrap_or_else(|e| e.into_inner()).push(Chunk::Exchange { at_end, peer, exchange });
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
    // Under the names' lock: the entries reach the writer in index order. Never waits for it.
    log.pending.lock().unwrap_or_else(|e| e.into_inner()).push(Chunk::Name { index, name: name.to_owned() });
    index
}

/// `name`'s index in the log, looked up once per `cell` (0 while tracing is off).
#[inline]
pub fn cached_name(cell: &OnceLock<u32>, name: &str) -> u32 {
    if enabled() {
        *cell.get_or_init(|| intern(name))
    } else {
        0
    }
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
            log.pending.lock().unwrap_or_else(|e| e.into_inner()).push(Chunk::Thread { tid: self.tid, name });
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

/// Names the calling thread in the log (by default it is the thread's own name, or `thread
/// <n>`): for threads the runtime cannot name, such as a Python interpreter's.
pub fn name_thread(name: &str) {
    let Some(log) = LOG.get() else { return };
    let _ = BUFFER.try_with(|buffer| {
        let Ok(mut buffer) = buffer.try_borrow_mut() else { return };
        buffer.named = true;
        let chunk = Chunk::Thread { tid: buffer.tid, name: name.to_owned() };
        log.pending.lock().unwrap_or_else(|e| e.into_inner()).push(chunk);
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

#[cfg(test)]
mod tests {
    use super::{log_file_name, process_name};

    #[test]
    fn a_log_file_stays_in_its_directory_whatever_the_host_name() {
        assert_eq!(log_file_name("vm-1", 42), "vm-1-42.stlog");
        assert_eq!(log_file_name("../../etc/x", 7), "_.._etc_x-7.stlog");
        assert_eq!(log_file_name("..", 7), "-7.stlog");
        assert_eq!(log_file_name("a b/c", 1), "a_b_c-1.stlog");
    }

    #[test]
    fn processes_are_named_after_their_program_module_or_script() {
        let name = |args: &[&str]| process_name(args.iter().map(|a| (*a).to_owned()));
        assert_eq!(name(&["/usr/bin/stampede", "serve", "--listen", "x"]), "stampede serve");
        assert_eq!(name(&["/x/.venv/bin/python", "-m", "stampede.apps.kiosk", "--headless"]), "stampede.apps.kiosk");
        assert_eq!(name(&["python3.11", "/tmp/camera.py"]), "camera.py");
        assert_eq!(name(&["python3", "-c", "print()"]), "python3 -c");
        assert_eq!(name(&["./digitizer_tracker", "--frames", "3"]), "digitizer_tracker");
        assert_eq!(name(&[]), "");
    }
}
