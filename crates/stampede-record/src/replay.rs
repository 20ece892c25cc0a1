//! Replay: puts a recording's items back into channels, in the recorded order, paced at the
//! recorded timing (scaled, or as fast as possible).
//!
//! - Channels get the recorded names (or remapped ones); one that does not exist is created as
//!   recorded (declared codec, bounds, description); a queue of that name is refused.
//! - One producer task puts everything. Its virtual time is always the lowest timestamp still to
//!   be put (a first read of the file computes it for every position), so it never holds the
//!   target's ts_min lower than the replay needs: consumers' items are reclaimed as they go.
//! - Pacing: a [`Pacer`] whose virtual time is the recording's clock (`log_time`, µs since the
//!   first item), at `rate` times the original speed; `None` puts as fast as the channels take.
//! - Looping: each pass adds the recording's timestamp span, so timestamps keep rising.
//! - A put into a full bounded channel waits for room (the consumers set the pace), so nothing
//!   is dropped.
//! - A ROS 2 bag replays like a recording ([`crate::ros2`]); two of its messages at one
//!   timestamp in a channel: the first is put, the later ones are skipped and counted.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use stampede::{
    Channel, ChannelOptions, ChannelOutput, Container, Error, Pace, Pacer, Payload, PutOptions, Runtime, Timestamp,
    TS_MAX,
};

use crate::error::{RecordError, RecordResult};
use crate::format::ChannelMeta;
use crate::reader::{RecordedItem, Recording};
use crate::ros2::Ros2Time;

/// Most items of a recording replayed: the first read keeps 8 bytes per item.
pub const REPLAY_ITEMS_MAX: usize = 1 << 26;

/// Fastest pacing rate; beyond it, replay as fast as possible (`rate: None`).
pub const RATE_MAX: f64 = 1000.0;

/// Longest a replay waits (for room in a channel, or for an item's time) before asking its
/// `progress` callback whether to go on.
pub const SLICE: Duration = Duration::from_millis(50);

/// How late an item may be put before it counts in [`ReplayStats::late`].
const LATE_TOLERANCE: Duration = Duration::from_millis(10);

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Speed relative to the recording: `Some(1.0)` the original timing, `Some(2.0)` twice as
    /// fast; `None` as fast as the channels take items.
    pub rate: Option<f64>,
    /// How many passes over the recording (`None`: until stopped).
    pub passes: Option<u64>,
    /// `(from, to)`: a channel named `from`, or under it (`from/...`), is replayed into `to`
    /// (`to/...`). The first matching pair applies.
    pub remap: Vec<(String, String)>,
    /// Added to every timestamp (to replay above a runtime's ts_min).
    pub offset: Timestamp,
    /// How a ROS 2 bag's messages are timed (header stamp or log time, and the tick).
    pub ros2: Ros2Time,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { rate: Some(1.0), passes: Some(1), remap: Vec::new(), offset: 0, ros2: Ros2Time::default() }
    }
}

/// What a replay did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Items put.
    pub items: u64,
    /// Payload bytes put.
    pub bytes: u64,
    /// Items in one pass of the recording.
    pub items_per_pass: u64,
    /// Passes finished.
    pub passes: u64,
    /// Items put later than their time by more than 10 ms (the target could not keep up).
    pub late: u64,
    /// Items put per target channel name.
    pub channels: BTreeMap<String, u64>,
    /// Set when the recording ends early (a recorder that was killed): why. Its items up to
    /// there were replayed.
    pub cut_off: Option<String>,
    /// Items not put because their channel already held their timestamp (two messages of a ROS 2
    /// topic at one timestamp: the later ones).
    pub duplicates: u64,
    /// Messages of a ROS 2 bag that were not what their schema says, per pass, and why the first
    /// was not.
    pub skipped: u64,
    pub skip_reason: Option<String>,
}

/// Replays the recording at `path` into `rt`. `progress` is called at the start, after every
/// item, and at least every [`SLICE`] while the replay waits (for room in a full channel, or for
/// an item's time); returning `false` stops the replay (`Err(Stopped)`).
pub fn replay(
    rt: &Runtime,
    path: impl AsRef<Path>,
    options: &ReplayOptions,
    progress: &mut dyn FnMut(&ReplayStats) -> bool,
) -> RecordResult<ReplayStats> {
    let path = path.as_ref();
    let plan = Plan::read(path, options)?;
    let mut stats = ReplayStats {
        items_per_pass: plan.floors.len() as u64,
        cut_off: plan.cut_off.clone(),
        skipped: plan.skipped.0,
        skip_reason: plan.skipped.1.clone(),
        ..Default::default()
    };
    if plan.floors.is_empty() {
        return Ok(stats);
    }
    let start = plan.floors[0].checked_add(options.offset).filter(|ts| (0..=TS_MAX).contains(ts)).ok_or_else(|| {
        RecordError::TooLarge(format!("offset {} takes the recording's timestamps out of 0 ..= TS_MAX", options.offset))
    })?;
    let producer = rt.task(start).map_err(|e| match e {
        Error::BelowVisibility { .. } => RecordError::TooLarge(format!(
            "{}: the recording starts at ts {}, below the runtime's ts_min {}: replay it later in time with an offset of at least {} (--offset)",
            path.display(),
            start,
            rt.ts_min(),
            rt.ts_min() - plan.floors[0]
        )),
        e => e.into(),
    })?;
    let _ = producer.set_name("replay");
    let mut outputs = BTreeMap::new();
    for meta in &plan.channels {
        let name = remapped(&meta.name, &options.remap);
        if let std::collections::btree_map::Entry::Vacant(slot) = outputs.entry(name) {
            let channel = channel_for(rt, slot.key(), meta)?;
            slot.insert(producer.attach_output(&channel)?);
        }
    }
    let mut pacer = match options.rate {
        None => None,
        Some(rate) => Some(Pacer::new(tick(rate)?, LATE_TOLERANCE)?),
    };
    if !progress(&stats) {
        return Err(RecordError::Stopped);
    }
    let mut pass = 0u64;
    while options.passes.is_none_or(|passes| pass < passes) {
        let shift = plan.span.checked_mul(pass as i64).and_then(|s| s.checked_add(options.offset));
        let shift = shift.ok_or_else(|| RecordError::TooLarge(format!("pass {pass}: timestamps beyond TS_MAX")))?;
        let mut recording = Recording::open_with(path, options.ros2)?;
        if let Some(pacer) = pacer.as_mut() {
            pacer.reset();
        }
        let mut index = 0;
        let mut clock_us = 0;
        let mut first_log_time = None;
        while let Some(item) = recording.next_item()? {
            // The first read saw these same items; a file that changed since is refused.
            let floor = plan.floors.get(index).copied().ok_or_else(|| changed(path))?;
            let ts = shifted(item.ts, shift)?;
            let floor = shifted(floor, shift)?;
            if floor > producer.virtual_time() {
                producer.set_virtual_time(floor)?;
            }
            if let Some(pacer) = pacer.as_mut() {
                let first = *first_log_time.get_or_insert(item.log_time);
                clock_us =
                    clock_us.max(Timestamp::try_from(item.log_time.saturating_sub(first) / 1000).unwrap_or(TS_MAX));
                if let Pace::Late(_) = paced(pacer, clock_us, &stats, progress)? {
                    stats.late += 1;
                }
            }
            let name = remapped(&item.channel.meta.name, &options.remap);
            let output = outputs.get(&name).ok_or_else(|| changed(path))?;
            if put(output, ts, &item, &stats, progress)? {
                stats.items += 1;
                stats.bytes += item.data.len() as u64;
                *stats.channels.entry(name).or_default() += 1;
            } else {
                stats.duplicates += 1;
            }
            index += 1;
            if !progress(&stats) {
                return Err(RecordError::Stopped);
            }
        }
        if index != plan.floors.len() {
            return Err(changed(path));
        }
        pass += 1;
        stats.passes = pass;
    }
    producer.close();
    Ok(stats)
}

/// What the first read of a recording learns.
struct Plan {
    /// For each item, in order: the lowest timestamp at or after it — the producer's virtual
    /// time when it puts that item.
    floors: Vec<Timestamp>,
    /// Highest minus lowest timestamp, plus one: what a loop adds per pass.
    span: Timestamp,
    /// Every channel of the recording, in order of appearance.
    channels: Vec<ChannelMeta>,
    cut_off: Option<String>,
    /// ROS 2 messages skipped, and why the first was.
    skipped: (u64, Option<String>),
}

impl Plan {
    fn read(path: &Path, options: &ReplayOptions) -> RecordResult<Plan> {
        if let Some(rate) = options.rate {
            tick(rate)?;
        }
        let mut recording = Recording::open_with(path, options.ros2)?;
        let mut floors = Vec::new();
        let mut channels: Vec<ChannelMeta> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let (mut lowest, mut highest) = (TS_MAX, 0);
        recording.for_each(|item| {
            if floors.len() >= REPLAY_ITEMS_MAX {
                return Err(RecordError::TooLarge(format!(
                    "{}: more than {REPLAY_ITEMS_MAX} items (REPLAY_ITEMS_MAX); split the recording",
                    path.display()
                )));
            }
            if seen.insert(item.channel.id) {
                channels.push(item.channel.meta.clone());
            }
            lowest = lowest.min(item.ts);
            highest = highest.max(item.ts);
            floors.push(item.ts);
            Ok(())
        })?;
        for i in (0..floors.len().saturating_sub(1)).rev() {
            floors[i] = floors[i].min(floors[i + 1]);
        }
        let span = if floors.is_empty() { 1 } else { highest - lowest + 1 };
        let (skipped, reason) = recording.skipped();
        let skipped = (skipped, reason.map(str::to_owned));
        Ok(Plan { floors, span, channels, cut_off: recording.cut_off().map(str::to_owned), skipped })
    }
}

/// Whether `rate` is a pacing rate replay takes: in `(0, RATE_MAX]`.
pub fn is_rate(rate: f64) -> bool {
    rate > 0.0 && rate <= RATE_MAX
}

/// The real time of one µs of the recording at `rate`.
fn tick(rate: f64) -> RecordResult<Duration> {
    if !is_rate(rate) {
        return Err(Error::InvalidArgument {
            op: "replay",
            name: "rate".into(),
            reason: format!("rate {rate} is not in (0, {RATE_MAX}]; use no rate (max) to replay as fast as possible"),
        }
        .into());
    }
    Ok(Duration::from_nanos((1000.0 / rate).round().max(1.0) as u64))
}

/// `name` after the first remap whose `from` is it or a prefix of it (hierarchically).
pub fn remapped(name: &str, remap: &[(String, String)]) -> String {
    for (from, to) in remap {
        if name == from {
            return to.clone();
        }
        if let Some(rest) = name.strip_prefix(from.as_str()) {
            if from.ends_with('/') || rest.starts_with('/') {
                return format!("{to}{rest}");
            }
        }
    }
    name.to_owned()
}

/// The channel to replay `meta`'s items into: the existing one, or a new one as recorded.
fn channel_for(rt: &Runtime, name: &str, meta: &ChannelMeta) -> RecordResult<Channel> {
    let options = ChannelOptions {
        limits: meta.limits,
        codec: meta.declared_codec.clone(),
        description: meta.description.clone(),
        ..ChannelOptions::default()
    };
    loop {
        match rt.lookup(name) {
            Ok(Container::Channel(channel)) => return Ok(channel),
            Ok(Container::Queue(_)) => {
                return Err(Error::InvalidArgument {
                    op: "replay",
                    name: name.to_owned(),
                    reason: "is a queue; a recording replays into channels (remap it to another name)".into(),
                }
                .into())
            }
            Err(Error::NotFound { .. }) => match rt.create_channel(name, options.clone()) {
                Ok(channel) => return Ok(channel),
                Err(Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
    }
}

fn shifted(ts: Timestamp, shift: Timestamp) -> RecordResult<Timestamp> {
    ts.checked_add(shift)
        .filter(|ts| (0..=TS_MAX).contains(ts))
        .ok_or_else(|| RecordError::TooLarge(format!("ts {ts} shifted by {shift} is not in 0 ..= TS_MAX")))
}

/// Puts `item` at `ts`, waiting for room in slices of [`SLICE`] and asking `progress` between
/// them, so a stop is heard while a full channel holds the replay up.
/// Puts `item` at `ts`, waiting for room in slices; `false` when the channel already holds `ts`
/// (the item is skipped).
fn put(
    output: &ChannelOutput,
    ts: Timestamp,
    item: &RecordedItem,
    stats: &ReplayStats,
    progress: &mut dyn FnMut(&ReplayStats) -> bool,
) -> RecordResult<bool> {
    let mut payload = Payload::from(item.data.clone());
    payload.codec = item.codec().clone();
    loop {
        match output.put_with(ts, payload.clone(), PutOptions { refcount: None, timeout: Some(SLICE) }) {
            Err(e) if e.is_transient() => {
                if !progress(stats) {
                    return Err(RecordError::Stopped);
                }
            }
            Err(Error::DuplicateTimestamp { .. }) => return Ok(false),
            done => return Ok(done.map(|()| true)?),
        }
    }
}

/// `pacer.sync(clock)`, sleeping in slices of [`SLICE`] and asking `progress` between them, so
/// a stop is heard during a long gap in the recording.
fn paced(
    pacer: &mut Pacer,
    clock: Timestamp,
    stats: &ReplayStats,
    progress: &mut dyn FnMut(&ReplayStats) -> bool,
) -> RecordResult<Pace> {
    while pacer.until(clock).is_some_and(|wait| wait > SLICE) {
        std::thread::sleep(SLICE);
        if !progress(stats) {
            return Err(RecordError::Stopped);
        }
    }
    Ok(pacer.sync(clock))
}

fn changed(path: &Path) -> RecordError {
    RecordError::corrupt(path, "the file changed during the replay")
}
