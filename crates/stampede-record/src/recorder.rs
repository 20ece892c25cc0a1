//! The recorder: follows channels and writes every item to an MCAP file, losing none.
//!
//! Each followed channel gets an input connection of a task that starts at ts_min (so the items
//! present are unseen on it) and then moves to `INFINITY` (it never puts). An item unseen or open
//! on a connection is a claim on ts_min (docs/SEMANTICS.md, "Virtual time, visibility, GC"), so
//! nothing the recorder has not written and consumed can be reclaimed: a recording is complete by
//! construction. A slow disk makes items wait in their channels; bounded channels then slow their
//! producers (their puts wait for room), unbounded ones grow. One thread does everything — gets in
//! timestamp order (`OLDEST_UNSEEN`, which also returns items put late below what was already
//! read), merges the channels by timestamp, writes, consumes — so there is no queue of its own to
//! bound or to lose on a crash.
//!
//! Durability: a chunk is closed and flushed to the file at least every
//! [`RecorderOptions::flush_interval`]; a recorder killed mid-run leaves a file readable up to
//! its last closed chunk ([`crate::reader`]). [`Recorder::stop`] writes what the channels hold
//! when it is called, then the summary and index; it returns even while producers go on.
//!
//! Channels created later under a recorded name or prefix are followed too: the recorder watches
//! the names ([`Runtime::watch`]) and attaches within [`WATCH_POLL`]. What it cannot have is
//! counted in [`ChannelStats::missed`] — reported, not silent: items such a channel had let go
//! before that, items still in a channel when it is destroyed, and items put with a reference
//! count that other readers used up first (a put with `refcount=k` counts the recorder's
//! consumption as one of its k, because the recorder is one more input connection: give such
//! channels `k + 1`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures_util::future::select_all;
use stampede::{Item, Runtime, Timestamp};
use stampede_view::foxglove::Tick;
use tokio::sync::Notify;

use crate::error::{RecordError, RecordResult};
use crate::follow::{select, Followed, Found, Watching};
use crate::writer::{Conversion, McapWriter, ITEM_BYTES_MAX};

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

    pub(crate) fn mcap(self) -> Option<mcap::Compression> {
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
    /// Also write what Foxglove draws, beside the raw items (never instead of them), with
    /// timestamps placed on its timeline by this tick: `npy` frames as `foxglove.RawImage`,
    /// JSON documents with `boxes` as `foxglove.ImageAnnotations`, text as `foxglove.Log`
    /// ([`crate::format`]). `None` (the default): the raw items only.
    pub foxglove: Option<Tick>,
    /// Write a ROS 2 bag instead of a Stampede recording (rosbag2's MCAP storage, one file):
    /// images as `sensor_msgs/msg/Image` stamped by this tick, JSON and text as
    /// `std_msgs/msg/String`, `ros2:<type>` items as themselves; other items are not written
    /// (counted in [`RecorderStats::not_converted`]). `foxglove` is then not used.
    pub ros2: Option<Tick>,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            compression: Compression::Lz4,
            flush_interval: Duration::from_secs(1),
            chunk_bytes: 4 << 20,
            foxglove: None,
            ros2: None,
        }
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
    /// channel created after the recorder started had let go before the recorder attached; those
    /// still in a channel destroyed before they were written; those a put with a reference count
    /// let other readers reclaim before the recorder got them; items too large to read back
    /// ([`ITEM_BYTES_MAX`]). The last three are counted when the channel ends or the recorder
    /// stops, and only where the runtime can still tell (always embedded; not for a channel of a
    /// node that is gone).
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
    /// Channels created under the names and destroyed again before the recorder could look
    /// them up (it looks every [`WATCH_POLL`]): what was put into them is not known.
    pub vanished: u64,
    /// Messages written for Foxglove beside the raw items ([`RecorderOptions::foxglove`]), or
    /// ROS 2 messages written ([`RecorderOptions::ros2`]).
    pub converted: u64,
    /// Items that looked convertible but were not (an `npy` array that is no image, an overlay
    /// that is no valid overlay): recorded raw only; writing a ROS 2 bag, items with no ROS 2
    /// message, which are not in the bag.
    pub not_converted: u64,
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
        let followed = channels.iter().map(|ch| Followed::attach(rt, ch)).collect::<stampede::Result<Vec<_>>>()?;
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
            let watching =
                Watching { rt: rt.clone(), watches, names: names.to_vec(), retry: Vec::new(), relist: Vec::new() };
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

    /// Writes every item the followed channels hold now that it has not written, finishes the
    /// file (summary and index) and returns what was recorded. Items put after the call are left
    /// out; producers that go on do not keep it from returning.
    pub fn stop(mut self) -> RecordResult<RecorderStats> {
        self.finish()
    }

    /// Asks the recorder to stop and does not wait: its thread finishes the file on its own (if
    /// the process lives long enough; else the file is cut off at its last chunk). For a caller
    /// that must not block, e.g. an interpreter shutting down.
    pub fn stop_in_background(mut self) {
        self.request_stop();
        self.thread.take();
    }

    fn request_stop(&self) {
        self.stop.requested.store(true, Ordering::SeqCst);
        self.stop.notify.notify_one();
    }

    fn finish(&mut self) -> RecordResult<RecorderStats> {
        self.request_stop();
        let Some(thread) = self.thread.take() else { return Ok(self.stats()) };
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// The recorder's thread: looks for new channels, drains, writes, waits; until stopped, then
/// writes what the channels hold ([`stop_writing`]).
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
        .map_err(|e| RecordError::io(writer.path(), e))?;
    let mut last_flush = Instant::now();
    let mut written_since_flush = false;
    while !stop.requested.load(Ordering::SeqCst) {
        for found in watching.look(|id| followed.iter().any(|f| f.channel.id() == id))? {
            joined(&mut followed, found, stats);
        }
        let wrote = drain(&mut writer, &mut followed, stats)?;
        written_since_flush |= wrote > 0;
        if written_since_flush && last_flush.elapsed() >= flush_interval {
            writer.flush()?;
            last_flush = Instant::now();
            written_since_flush = false;
            stats.lock().unwrap_or_else(PoisonError::into_inner).flushes += 1;
        }
        if wrote > 0 {
            continue;
        }
        let until_flush =
            if written_since_flush { flush_interval.saturating_sub(last_flush.elapsed()) } else { flush_interval };
        // Nothing was written, so no channel has a head: each live one waits on its `changed`.
        let changed: Vec<_> = followed.iter_mut().filter_map(Followed::changed).collect();
        let any = !changed.is_empty();
        waiter.block_on(async {
            tokio::select! {
                _ = select_all(changed), if any => {}
                _ = stop.notify.notified() => {}
                _ = tokio::time::sleep(until_flush.min(WATCH_POLL)) => {}
            }
        });
    }
    stop_writing(&mut writer, &mut followed, stats)?;
    writer.finish()?;
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    for f in &followed {
        stats.channels.entry(f.name.clone()).or_default().missed += f.unrecorded();
    }
    stats.flushes += 1;
    Ok(stats.clone())
}

/// The stop: writes every item the channels hold now that this recorder has not (their heads
/// and what a snapshot of each channel's timestamps names), merged in timestamp order, by exact
/// gets — a bounded amount of work whatever producers do meanwhile; items put later are left,
/// and not counted (each channel's put count is read with its snapshot).
fn stop_writing(
    writer: &mut McapWriter,
    followed: &mut Vec<Followed>,
    stats: &Mutex<RecorderStats>,
) -> RecordResult<()> {
    let mut due: Vec<(Timestamp, usize)> = Vec::new();
    for (i, f) in followed.iter_mut().enumerate() {
        let held = f.at_stop();
        due.extend(f.head.as_ref().map(|head| (head.ts, i)));
        due.extend(held.into_iter().map(|ts| (ts, i)));
    }
    due.sort_unstable();
    due.dedup();
    let mut ends = Vec::new();
    for (ts, i) in due {
        let f = &mut followed[i];
        match f.take_at(ts)? {
            Ok(Some(item)) => {
                if let Some(why) = write(writer, f, &item, stats)? {
                    ends.push((i, why));
                }
            }
            Ok(None) => {}
            Err(why) => ends.push((i, why)),
        }
    }
    ended(followed, ends, stats);
    Ok(())
}

/// Writes one item of `f` (unless too large to read back: then it counts as missed), then
/// consumes it. Returns why the channel ended, if it just did.
fn write(
    writer: &mut McapWriter,
    f: &mut Followed,
    item: &Item,
    stats: &Mutex<RecorderStats>,
) -> RecordResult<Option<String>> {
    if item.data().len() <= ITEM_BYTES_MAX {
        let converted = writer.write(&f.channel, item)?;
        f.written += 1;
        note(stats, &f.name, item, converted);
    }
    f.consume(item.ts)
}

/// Takes in what a look at the names found.
fn joined(followed: &mut Vec<Followed>, found: Found, stats: &Mutex<RecorderStats>) {
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    match found {
        // Created after the recorder started: every put into it belongs to the recording.
        // (A channel of the same name destroyed before stays followed until it ends.)
        Found::Follow(joined) => {
            let entry = stats.channels.entry(joined.name.clone()).or_default();
            entry.missed += joined.before();
            entry.ended = None;
            followed.push(*joined);
        }
        Found::Gone { name, puts } => stats.channels.entry(name).or_default().missed += puts,
        Found::Vanished => stats.vanished += 1,
    }
}

/// Writes and consumes what is present on the followed channels, merged in timestamp order
/// (each channel's next item is held open as its head; the lowest head is written first, after
/// every channel without a head looked again — a zero-timeout get for each one whose `changed`
/// fired), at most [`ITEMS_PER_DRAIN_MAX`] items; returns the number written. Items arrive in
/// timestamp order within a channel (`OLDEST_UNSEEN`), so the file is in timestamp order across
/// channels too, except for items put late, below what was already written — which keeps a
/// replay's producer close to the timestamps it puts.
fn drain(writer: &mut McapWriter, followed: &mut Vec<Followed>, stats: &Mutex<RecorderStats>) -> RecordResult<usize> {
    let mut ends = Vec::new();
    let mut written = 0;
    while written < ITEMS_PER_DRAIN_MAX {
        for (i, f) in followed.iter_mut().enumerate() {
            if let Some(why) = f.fill_head()? {
                ends.push((i, why));
            }
        }
        let lowest = followed.iter().enumerate().filter_map(|(i, f)| Some((f.head.as_ref()?.ts, i))).min();
        let Some((_, i)) = lowest else { break };
        let f = &mut followed[i];
        let item = f.head.take().expect("chosen for its head");
        written += 1;
        if let Some(why) = write(writer, f, &item, stats)? {
            ends.push((i, why));
        }
    }
    ended(followed, ends, stats);
    Ok(written)
}

/// Accounts for channels that just ended, and forgets them. A channel of the same name created
/// anew and already followed keeps the name's stats live.
fn ended(followed: &mut Vec<Followed>, ends: Vec<(usize, String)>, stats: &Mutex<RecorderStats>) {
    if ends.is_empty() {
        return;
    }
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    for (i, why) in ends {
        let f = &followed[i];
        let entry = stats.channels.entry(f.name.clone()).or_default();
        entry.missed += f.unrecorded();
        if !followed.iter().any(|g| g.name == f.name && g.ended.is_none()) {
            entry.ended = Some(why);
        }
    }
    followed.retain(|f| f.ended.is_none());
}

/// Counts one written item.
fn note(stats: &Mutex<RecorderStats>, name: &str, item: &Item, conversion: Conversion) {
    let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
    let bytes = item.data().len() as u64;
    stats.items += 1;
    stats.bytes += bytes;
    match conversion {
        Conversion::Written => stats.converted += 1,
        Conversion::Refused => stats.not_converted += 1,
        Conversion::None => {}
    }
    let channel = stats.channels.entry(name.to_owned()).or_default();
    channel.items += 1;
    channel.bytes += bytes;
    channel.first_ts = Some(channel.first_ts.map_or(item.ts, |first: Timestamp| first.min(item.ts)));
    channel.last_ts = Some(channel.last_ts.map_or(item.ts, |last| last.max(item.ts)));
}
