//! The recorder: follows channels and writes every item to an MCAP file, losing none.
//!
//! Each followed channel gets an input connection of a task that starts at ts_min (so the items
//! present are unseen on it) and then moves to `INFINITY` (it never puts). An item unseen or open
//! on a connection is a claim on ts_min (SPEC §3), so nothing the recorder has not written and
//! consumed can be reclaimed: a recording is complete by construction. A slow disk makes items
//! wait in their channels; bounded channels then slow their producers (their puts wait for room),
//! unbounded ones grow. One thread does everything — gets in timestamp order (`OLDEST_UNSEEN`,
//! which also returns items put late below what was already read), merges the channels by
//! timestamp, writes, consumes — so there is no queue of its own to bound or to lose on a crash.
//!
//! Durability: a chunk is closed and flushed to the file at least every
//! [`RecorderOptions::flush_interval`]; a recorder killed mid-run leaves a file readable up to
//! its last closed chunk ([`crate::reader`]). [`Recorder::stop`] writes what is still present,
//! then the summary and index.
//!
//! Channels created later under a recorded name or prefix are followed too: the recorder watches
//! the names ([`Runtime::watch`]) and attaches within [`WATCH_POLL`]. Items such a channel had
//! already let go before that, and items still in a channel when it is destroyed, are counted in
//! [`ChannelStats::missed`] — reported, not silent.
//!
//! One consequence to know: a put with a reference count (`refcount=k`) counts the recorder's
//! consumption as one of its k, because the recorder is one more input connection.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::select_all;
use futures_util::FutureExt;
use mcap::records::MessageHeader;
use mcap::{WriteOptions, Writer};
use stampede::{
    Changed, Channel, ChannelInput, Codec, Container, Error, Item, Runtime, Task, Timestamp, Watch, WatchEvent,
    INFINITY, OLDEST_UNSEEN,
};
use tokio::sync::Notify;

use crate::error::{RecordError, RecordResult};
use crate::format::{ChannelMeta, JSON_SCHEMA, JSON_SCHEMA_ENCODING, JSON_SCHEMA_NAME, PROFILE};

/// How chunks are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    None,
    /// Fast (the default): keeps up with camera frames on one core.
    #[default]
    Lz4,
    /// Smaller files, more CPU.
    Zstd,
}

impl Compression {
    /// `none`, `lz4` or `zstd`.
    pub fn from_name(name: &str) -> Option<Compression> {
        match name {
            "none" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }

    fn mcap(self) -> Option<mcap::Compression> {
        match self {
            Compression::None => None,
            Compression::Lz4 => Some(mcap::Compression::Lz4),
            Compression::Zstd => Some(mcap::Compression::Zstd),
        }
    }
}

/// How often the recorder looks for channels created under what it records.
pub const WATCH_POLL: Duration = Duration::from_millis(20);

/// Most items written between two checks for a flush or a stop request.
const ITEMS_PER_DRAIN_MAX: usize = 256;

/// How the recorder writes.
#[derive(Clone, Debug)]
pub struct RecorderOptions {
    pub compression: Compression,
    /// A chunk is closed and written out at least this often (and when it reaches
    /// `chunk_bytes`): at most this much is lost if the recorder is killed.
    pub flush_interval: Duration,
    /// Target size of a chunk before compression.
    pub chunk_bytes: u64,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions { compression: Compression::Lz4, flush_interval: Duration::from_secs(1), chunk_bytes: 4 << 20 }
    }
}

/// What was recorded from one channel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    pub items: u64,
    pub bytes: u64,
    /// The lowest and highest timestamps recorded.
    pub first_ts: Option<Timestamp>,
    pub last_ts: Option<Timestamp>,
    /// The channel was destroyed (or its node went away) while recorded; this is why.
    pub ended: Option<String>,
    /// Items put into the channel while it was recorded that are not in the recording: those a
    /// channel created after the recorder started had let go before the recorder attached, and
    /// those still in a channel destroyed before they were written (counted when the runtime
    /// can still tell: always embedded, not for a channel of a node that is gone). A put with a
    /// reference count reclaimed by other readers first may count too.
    pub missed: u64,
}

/// What the recorder did so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    pub items: u64,
    /// Payload bytes recorded.
    pub bytes: u64,
    /// Per channel name.
    pub channels: BTreeMap<String, ChannelStats>,
    /// Queues a prefix selected, which are not recorded (a recorder would take their items).
    pub skipped_queues: Vec<String>,
    /// Chunks closed and written so far.
    pub flushes: u64,
}

/// A recorder running in its own thread until [`stop`](Self::stop) (or drop).
pub struct Recorder {
    path: PathBuf,
    stop: Arc<Stop>,
    stats: Arc<Mutex<RecorderStats>>,
    thread: Option<JoinHandle<RecordResult<RecorderStats>>>,
}

/// The stop request: a flag (checked between turns) and a wake-up for the thread's wait.
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    notify: Notify,
}

impl Recorder {
    /// Starts recording into a new file at `path` (replaced if it exists) the channels that
    /// `names` select: each is a channel's name or a hierarchical prefix (`"camera/"`, or `""`
    /// for every channel), as [`Runtime::names`] reads it. A name that is a queue is refused;
    /// queues under a prefix are skipped and listed in [`RecorderStats::skipped_queues`].
    pub fn start(
        rt: &Runtime,
        names: &[String],
        path: impl AsRef<Path>,
        options: RecorderOptions,
    ) -> RecordResult<Recorder> {
        let path = path.as_ref().to_owned();
        // Watched first, so that no channel created from now on can be missed.
        let watches = names.iter().map(|name| rt.watch(name, None)).collect::<stampede::Result<Vec<_>>>()?;
        let (channels, skipped_queues) = select(rt, names)?;
        let followed = channels.iter().map(|ch| Followed::attach(rt, ch)).collect::<RecordResult<Vec<_>>>()?;
        let writer = McapWriter::create(&path, &options)?;
        let stats = Arc::new(Mutex::new(RecorderStats {
            skipped_queues,
            channels: followed.iter().map(|f| (f.name.clone(), ChannelStats::default())).collect(),
            ..RecorderStats::default()
        }));
        let stop = Arc::new(Stop::default());
        let thread = {
            let (stop, stats) = (stop.clone(), stats.clone());
            let flush_interval = options.flush_interval;
            let watching = Watching { rt: rt.clone(), watches, names: names.to_vec() };
            std::thread::Builder::new()
                .name("stampede-recorder".into())
                .spawn(move || run(writer, followed, watching, flush_interval, &stop, &stats))
                .map_err(|e| RecordError::io(&path, e))?
        };
        Ok(Recorder { path, stop, stats, thread: Some(thread) })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was recorded so far (items written, possibly not yet flushed).
    pub fn stats(&self) -> RecorderStats {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// `true` once the recorder stopped by itself: writing failed (then [`stop`](Self::stop)
    /// returns the error).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Writes every item still present on the followed channels, finishes the file (summary and
    /// index) and returns what was recorded.
    pub fn stop(mut self) -> RecordResult<RecorderStats> {
        self.finish()
    }

    fn finish(&mut self) -> RecordResult<RecorderStats> {
        self.stop.requested.store(true, Ordering::SeqCst);
        self.stop.notify.notify_one();
        let Some(thread) = self.thread.take() else { return Ok(self.stats()) };
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.finish();
        }
    }
}

/// The channels `names` select (each once), and the queues a prefix selected.
fn select(rt: &Runtime, names: &[String]) -> RecordResult<(Vec<Channel>, Vec<String>)> {
    let mut channels: Vec<Channel> = Vec::new();
    let mut queues = Vec::new();
    for selector in names {
        let found = rt.names(selector)?;
        if found.is_empty() {
            return Err(Error::NotFound { name: format!("{selector} (no channel is named so or under it)") }.into());
        }
        for name in found {
            match rt.lookup(&name)? {
                Container::Channel(ch) if !channels.iter().any(|c| c.name() == ch.name()) => channels.push(ch),
                Container::Channel(_) => {}
                Container::Queue(_) if name == *selector => {
                    return Err(Error::InvalidArgument {
                        op: "record",
                        name,
                        reason: "is a queue; queues are not recorded (a recorder would take items from the workers)"
                            .into(),
                    }
                    .into())
                }
                Container::Queue(_) => queues.push(name),
            }
        }
    }
    Ok((channels, queues))
}

/// A channel followed by the recorder.
struct Followed {
    name: String,
    channel: Channel,
    input: ChannelInput,
    /// The task holding `input` (it must live as long as the connection).
    _task: Task,
    /// The channel's next item, gotten (so open: still claimed) and not yet written.
    head: Option<Item>,
    /// Without a head: completes when an item may have arrived since the last look (registered
    /// before it), so an empty channel costs no get — no round trip through a node — until then.
    changed: Option<Pin<Box<Changed>>>,
    ended: bool,
    /// Puts into the channel before the recording (those already gone when it attached).
    before: u64,
    /// Items of this channel written.
    written: u64,
}

impl Followed {
    /// Attaches at ts_min, so every item present is recorded, then lets the task's virtual time
    /// go to `INFINITY` (its connection's claims alone hold what it has not written).
    fn attach(rt: &Runtime, channel: &Channel) -> RecordResult<Followed> {
        let task = root_task_at_ts_min(rt)?;
        let _ = task.set_name(&format!("recorder:{}", channel.name()));
        let input = task.attach_input(channel)?;
        task.set_virtual_time(INFINITY)?;
        // Every item put from now on, and every one present, is unseen on `input` (so held).
        let present = channel.stats();
        Ok(Followed {
            name: channel.name().to_owned(),
            channel: channel.clone(),
            input,
            _task: task,
            head: None,
            changed: None,
            ended: false,
            before: present.puts.saturating_sub(present.live_items as u64),
            written: 0,
        })
    }

    /// Gets the channel's next item as its head, if there is none and one is present. Returns
    /// why the channel ended, when it just did (destroyed, or its node went away).
    fn fill_head(&mut self) -> RecordResult<Option<Error>> {
        if self.head.is_some() || self.ended {
            return Ok(None);
        }
        if let Some(changed) = self.changed.as_mut() {
            if changed.as_mut().now_or_never().is_none() {
                return Ok(None); // nothing arrived since the last look
            }
        }
        // Registered before the get: an item arriving after a "not yet" completes it.
        self.changed = Some(Box::pin(self.input.changed(OLDEST_UNSEEN)));
        match self.input.get(OLDEST_UNSEEN, Some(Duration::ZERO)) {
            Ok(item) => {
                self.head = Some(item);
                self.changed = None;
            }
            Err(Error::NotAvailable { .. }) => {}
            Err(e @ (Error::Closed { .. } | Error::Unreachable { .. })) => {
                self.ended = true;
                return Ok(Some(e));
            }
            Err(e) => return Err(e.into()),
        }
        Ok(None)
    }
}

/// Most tries to start a task at ts_min while ts_min keeps moving past it.
const TS_MIN_TRIES_MAX: usize = 100;

/// A root task at the current ts_min. ts_min may pass the value read before the task is made;
/// then it is read again.
fn root_task_at_ts_min(rt: &Runtime) -> RecordResult<Task> {
    let mut last = None;
    for _ in 0..TS_MIN_TRIES_MAX {
        match rt.task(rt.ts_min()) {
            Ok(task) => return Ok(task),
            Err(e @ Error::BelowVisibility { .. }) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.expect("at least one try").into())
}

/// The watches on the recorded names: channels created under them are followed too.
struct Watching {
    rt: Runtime,
    watches: Vec<Watch>,
    names: Vec<String>,
}

impl Watching {
    /// Attaches to every channel created under the recorded names since the last look (again
    /// to one destroyed and created anew); after a lag, to every one the names list.
    fn follow_new(&mut self, followed: &mut Vec<Followed>, stats: &Mutex<RecorderStats>) -> RecordResult<()> {
        let mut created = Vec::new();
        for (watch, selector) in self.watches.iter_mut().zip(&self.names) {
            loop {
                match watch.next_event(Some(Duration::ZERO)) {
                    Ok(WatchEvent::Created { name, kind, .. }) if kind == "channel" => created.push(name),
                    Ok(WatchEvent::Lagged { .. }) => created.extend(self.rt.names(selector)?),
                    Ok(_) => {}
                    Err(Error::NotAvailable { .. } | Error::Closed { .. } | Error::Unreachable { .. }) => break,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        for name in created {
            let channel = match self.rt.lookup(&name) {
                Ok(Container::Channel(channel)) => channel,
                // Gone again, or a queue (a `Lagged` relisting names both).
                Ok(Container::Queue(_)) | Err(Error::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            if followed.iter().any(|f| f.channel.id() == channel.id()) {
                continue;
            }
            // Created after the recorder started: every put into it belongs to the recording.
            // (A channel of the same name destroyed before stays followed until it ends.)
            let joined = Followed::attach(&self.rt, &channel)?;
            let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
            let entry = stats.channels.entry(name.clone()).or_default();
            entry.missed += joined.before;
            entry.ended = None;
            followed.push(joined);
        }
        Ok(())
    }
}

/// The MCAP writer and the channel ids given so far.
struct McapWriter {
    path: PathBuf,
    writer: Writer<BufWriter<File>>,
    /// The MCAP channel of each (Stampede channel, codec): a channel that declares no codec may
    /// carry several.
    channel_ids: HashMap<(String, Codec), u16>,
    sequences: HashMap<u16, u32>,
    json_schema: Option<u16>,
}

impl McapWriter {
    fn create(path: &Path, options: &RecorderOptions) -> RecordResult<McapWriter> {
        let file = File::create(path).map_err(|e| RecordError::io(path, e))?;
        let writer = WriteOptions::new()
            .profile(PROFILE)
            .library(format!("stampede-record {}", env!("CARGO_PKG_VERSION")))
            .compression(options.compression.mcap())
            .chunk_size(Some(options.chunk_bytes))
            .create(BufWriter::new(file))
            .map_err(|e| RecordError::corrupt(path, e))?;
        Ok(McapWriter {
            path: path.to_owned(),
            writer,
            channel_ids: HashMap::new(),
            sequences: HashMap::new(),
            json_schema: None,
        })
    }

    fn failed(&self, e: mcap::McapError) -> RecordError {
        match e {
            mcap::McapError::Io(e) => RecordError::io(&self.path, e),
            e => RecordError::corrupt(&self.path, e),
        }
    }

    /// Writes one item of `channel`.
    fn write(&mut self, channel: &Channel, item: &Item) -> RecordResult<()> {
        let key = (channel.name().to_owned(), item.codec().clone());
        let id = match self.channel_ids.get(&key) {
            Some(&id) => id,
            None => {
                let meta = ChannelMeta::new(&channel.info(), item.codec().clone());
                let schema = if *item.codec() == Codec::Json { self.json_schema()? } else { 0 };
                let id = self
                    .writer
                    .add_channel(schema, &meta.name, meta.encoding(), &meta.metadata())
                    .map_err(|e| self.failed(e))?;
                self.channel_ids.insert(key, id);
                id
            }
        };
        let sequence = self.sequences.entry(id).or_default();
        let header = MessageHeader {
            channel_id: id,
            sequence: *sequence,
            log_time: now_ns(),
            publish_time: u64::try_from(item.ts).expect("items live at 0 ..= TS_MAX"),
        };
        *sequence = sequence.wrapping_add(1);
        self.writer.write_to_known_channel(&header, item.data()).map_err(|e| self.failed(e))
    }

    fn json_schema(&mut self) -> RecordResult<u16> {
        if let Some(id) = self.json_schema {
            return Ok(id);
        }
        let id = self
            .writer
            .add_schema(JSON_SCHEMA_NAME, JSON_SCHEMA_ENCODING, JSON_SCHEMA.as_bytes())
            .map_err(|e| self.failed(e))?;
        self.json_schema = Some(id);
        Ok(id)
    }

    fn flush(&mut self) -> RecordResult<()> {
        self.writer.flush().map_err(|e| self.failed(e))
    }

    fn finish(mut self) -> RecordResult<()> {
        self.writer.finish().map_err(|e| self.failed(e))?;
        let mut file = self.writer.into_inner();
        std::io::Write::flush(&mut file).map_err(|e| RecordError::io(&self.path, e))
    }
}

/// Nanoseconds since the Unix epoch (0 on a clock before it).
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The recorder's thread: drains, writes, waits, until stopped or every channel ended.
fn run(
    mut writer: McapWriter,
    mut followed: Vec<Followed>,
    mut watching: Watching,
    flush_interval: Duration,
    stop: &Stop,
    stats: &Mutex<RecorderStats>,
) -> RecordResult<RecorderStats> {
    let waiter = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| RecordError::io(&writer.path, e))?;
    let mut last_flush = Instant::now();
    let mut written_since_flush = false;
    loop {
        let stopping = stop.requested.load(Ordering::SeqCst);
        watching.follow_new(&mut followed, stats)?;
        let wrote = drain(&mut writer, &mut followed, stats)?;
        written_since_flush |= wrote > 0;
        if written_since_flush && last_flush.elapsed() >= flush_interval {
            writer.flush()?;
            last_flush = Instant::now();
            written_since_flush = false;
            stats.lock().unwrap_or_else(PoisonError::into_inner).flushes += 1;
        }
        // Stopping writes what is present: it ends at the first turn that finds nothing.
        if stopping && wrote == 0 {
            break;
        }
        if wrote > 0 {
            continue;
        }
        let until_flush =
            if written_since_flush { flush_interval.saturating_sub(last_flush.elapsed()) } else { flush_interval };
        // Nothing was written, so no channel has a head: each live one waits on its `changed`.
        let changed: Vec<_> = followed.iter_mut().filter_map(|f| f.changed.as_mut()).collect();
        let any_live = !changed.is_empty();
        waiter.block_on(async {
            tokio::select! {
                _ = select_all(changed), if any_live => {}
                _ = stop.notify.notified() => {}
                _ = tokio::time::sleep(until_flush.min(WATCH_POLL)) => {}
            }
        });
    }
    writer.finish()?;
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    stats.flushes += 1;
    Ok(stats.clone())
}

/// Writes and consumes what is present on the followed channels, merged in timestamp order
/// (each channel's next item is held open as its head; the lowest head is written first, after
/// every channel without a head looked again — a zero-timeout get for each one whose `changed`
/// fired), at most
/// [`ITEMS_PER_DRAIN_MAX`] items; returns the number written. Items arrive in timestamp order
/// within a channel (`OLDEST_UNSEEN`), so the file is in timestamp order across channels too,
/// except for items put late, below what was already written — which keeps a replay's producer
/// close to the timestamps it puts.
fn drain(writer: &mut McapWriter, followed: &mut Vec<Followed>, stats: &Mutex<RecorderStats>) -> RecordResult<usize> {
    let mut ends = Vec::new();
    let mut written = 0;
    while written < ITEMS_PER_DRAIN_MAX {
        // Every channel without a head looks again: one that was empty a moment ago may now
        // hold an item below the others' heads.
        for (i, f) in followed.iter_mut().enumerate() {
            if let Some(why) = f.fill_head()? {
                ends.push((i, why));
            }
        }
        let lowest = followed.iter().enumerate().filter_map(|(i, f)| Some((f.head.as_ref()?.ts, i))).min();
        let Some((_, i)) = lowest else { break };
        let f = &mut followed[i];
        let item = f.head.take().expect("chosen for its head");
        writer.write(&f.channel, &item)?;
        f.written += 1;
        note(stats, &f.name, &item);
        written += 1;
        match f.input.consume(item.ts) {
            Ok(()) => {}
            // Destroyed (or its node gone) since the get: the item is written all the same.
            Err(e @ (Error::Closed { .. } | Error::Unreachable { .. })) => {
                f.ended = true;
                ends.push((i, e));
            }
            Err(e) => return Err(e.into()),
        }
    }
    ended(followed, ends, stats);
    Ok(written)
}

/// Accounts for channels that just ended, and forgets them. Items still in a channel destroyed
/// before they were written went with it: an embedded channel still counts its puts (a remote
/// one that is gone reports none). A channel of the same name created anew and already followed
/// keeps the name's stats live.
fn ended(followed: &mut Vec<Followed>, ends: Vec<(usize, Error)>, stats: &Mutex<RecorderStats>) {
    if ends.is_empty() {
        return;
    }
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    for (i, why) in &ends {
        let f = &followed[*i];
        let gone = f.channel.stats().puts.saturating_sub(f.before + f.written);
        let entry = stats.channels.entry(f.name.clone()).or_default();
        entry.missed += gone;
        if !followed.iter().any(|g| g.name == f.name && !g.ended) {
            entry.ended = Some(why.to_string());
        }
    }
    followed.retain(|f| !f.ended);
}

/// Counts one written item.
fn note(stats: &Mutex<RecorderStats>, name: &str, item: &Item) {
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    let bytes = item.data().len() as u64;
    stats.items += 1;
    stats.bytes += bytes;
    let channel = stats.channels.entry(name.to_owned()).or_default();
    channel.items += 1;
    channel.bytes += bytes;
    channel.first_ts = Some(channel.first_ts.map_or(item.ts, |first| first.min(item.ts)));
    channel.last_ts = Some(channel.last_ts.map_or(item.ts, |last| last.max(item.ts)));
}
