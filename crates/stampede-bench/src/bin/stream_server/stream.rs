//! The stored streams and their readers: a channel with a disk tier filled once with distinct
//! frames (their checksums kept), and one reader replaying a stream — paced at its frame rate or
//! back to back — that reads every byte, checks it, and records each frame's delay.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use stampede::{Channel, ChannelInput, ChannelOptions, DiskTier, Pacer, Runtime, Selector, Task};
use stampede_bench::payload::{checksum, fill_random};
use stampede_bench::pipe::ts_of;

use crate::{BoxResult, MEMORY_ITEMS};

/// A get of a stored frame never waits for a put; the timeout only bounds a bug.
const GET_TIMEOUT: Duration = Duration::from_secs(10);

/// A stored stream: its channel, and each frame's checksum taken at the put.
pub(crate) struct Stream {
    pub(crate) channel: Channel,
    pub(crate) sums: Vec<u64>,
    pub(crate) frame_bytes: usize,
    /// Frames on disk (the oldest ones): the only ones read.
    pub(crate) on_disk: usize,
}

/// One reader's part of a configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub(crate) stream: usize,
    /// `None`: unpaced, each frame due when it is asked for.
    pub(crate) fps: Option<f64>,
    pub(crate) frames: usize,
}

/// What one reader saw.
pub(crate) struct Outcome {
    pub(crate) plan: Plan,
    /// Each frame's delay (completion − due), in frame order; shorter than planned if the
    /// reader hit its time limit.
    pub(crate) delays_ns: Vec<u64>,
    /// From the start to the last completion.
    pub(crate) span_ns: u64,
    /// Frames whose bytes did not sum to what was put.
    pub(crate) bad_frames: usize,
}

/// Creates channel `name` with `tier` and puts `frames` distinct frames of `frame_bytes` at
/// timestamps 0, 1, …; returns their checksums.
pub(crate) fn store(
    runtime: &Runtime,
    producer: &Task,
    tier: &DiskTier,
    name: &str,
    frames: usize,
    frame_bytes: usize,
) -> BoxResult<Stream> {
    let channel =
        runtime.create_channel(name, ChannelOptions { disk: Some(tier.clone()), ..ChannelOptions::default() })?;
    let out = producer.attach_output(&channel)?;
    let seed = u64::from(name.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))));
    let mut frame = vec![0u8; frame_bytes];
    let mut sums = Vec::with_capacity(frames);
    for i in 0..frames {
        fill_random(&mut frame, seed << 32 | i as u64);
        sums.push(checksum(&frame));
        out.put(ts_of(i), frame.as_slice())?;
    }
    let disk = channel.disk_stats().ok_or_else(|| format!("{name}: created with a disk tier, but has none"))?;
    if disk.items != frames - MEMORY_ITEMS || disk.bytes != disk.items * frame_bytes {
        return Err(format!(
            "{name}: {frames} frames put with memory_items={MEMORY_ITEMS}, but the tier holds {} items, {} bytes",
            disk.items, disk.bytes
        )
        .into());
    }
    Ok(Stream { channel, sums, frame_bytes, on_disk: disk.items })
}

/// One reader: waits for `barrier`, then gets frames `0..plan.frames` of its stream, each at its
/// due time (`plan.fps`) or back to back, reading every byte. Stops early at twice the planned
/// duration + 2 s.
pub(crate) fn read(input: &ChannelInput, sums: &[u64], plan: Plan, barrier: &Barrier) -> BoxResult<Outcome> {
    barrier.wait();
    let tick = plan.fps.map(|fps| Duration::from_secs_f64(1.0 / fps));
    let mut pacer = tick.map(|tick| Pacer::new(tick, tick)).transpose()?;
    let start = Instant::now();
    let limit = tick.map_or(Duration::from_secs(60), |tick| tick * plan.frames as u32 * 2 + Duration::from_secs(2));
    let mut delays_ns = Vec::with_capacity(plan.frames);
    let (mut bad_frames, mut last_done) = (0, start);
    for (i, &put_sum) in sums.iter().enumerate().take(plan.frames) {
        if start.elapsed() > limit {
            break;
        }
        let ts = ts_of(i);
        let due = match (pacer.as_mut(), tick) {
            (Some(pacer), Some(tick)) => {
                let vt = ts + 1;
                pacer.sync(vt);
                start + tick * u32::try_from(vt)?
            }
            _ => Instant::now(),
        };
        let item = input.get(Selector::At(ts), Some(GET_TIMEOUT))?;
        let sum = checksum(item.data());
        let done = Instant::now();
        bad_frames += usize::from(sum != put_sum);
        drop(item);
        input.consume(ts)?;
        delays_ns.push(u64::try_from(done.saturating_duration_since(due).as_nanos()).unwrap_or(u64::MAX));
        last_done = done;
    }
    let span_ns = u64::try_from((last_done - start).as_nanos()).unwrap_or(u64::MAX);
    Ok(Outcome { plan, delays_ns, span_ns, bad_frames })
}
