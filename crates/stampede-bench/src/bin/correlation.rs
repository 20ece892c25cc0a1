//! Temporal correlation (docs/CORRELATION.md, issue "Temporal correlation"): three measurements.
//!
//! - `exact_join`: 4 camera threads paced at 30 fps put frame `ts` into their channels; a joiner
//!   releases the 4-tuple with [`ExactJoin`] (Skip policy, closed producer sets). Latency =
//!   release time − the time the last of the 4 puts started (so it includes that put's copy). Reference in the same run: a joiner
//!   that does a blocking exact `get(ts)` on each of the 4 channels in turn (the least any join
//!   over the channel API can do).
//! - `approx_join`: video at 30 fps (ts in ms: 33.33·k) and audio blocks at 50 Hz (ts 20·k),
//!   tolerance 10 ms, both paced in real time, each producer advancing its virtual time to the
//!   next timestamp it will put. Release latency of [`ApproxJoin`] (measured) versus the classic
//!   rule of ROS 2's ApproximateTime — a match is final only once a *later* message has arrived
//!   on the other channel — computed on the very same recorded arrival times with zero
//!   processing cost (a lower bound for the classic algorithm).
//! - `pipeline_memory`: source → stage 1 → stage 2 → slow stage 3, each stage reading
//!   NEWEST_UNSEEN and `consume_until`; live items summed over the 3 channels, sampled every put.
//!   Plain ts_min GC (`Retention::History`) versus `Retention::CurrentReaders` with the source
//!   honouring `demand()`, next to the ideal: items that some stage actually gets later.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stampede::{
    ApproxJoin, Channel, ExactJoin, JoinPolicy, Limits, Pacer, Result, Retention, Runtime, Timestamp, INFINITY,
    NEWEST_UNSEEN,
};
use stampede_bench::cli::Options;
use stampede_bench::payload::{source, IMAGE_BYTES};
use stampede_bench::report::Line;
use stampede_bench::stats::Summary;

fn main() -> Result<()> {
    let options = Options::from_args();
    exact_join(options.scale(150, 15))?;
    approx_join(options.scale(3_000, 400))?;
    pipeline_memory(options.scale(600, 60))?;
    Ok(())
}

/// Nanoseconds from `start` to `at`.
fn ns_since(start: Instant, at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
}

fn exact_join(frames: usize) -> Result<()> {
    const CAMERAS: usize = 4;
    let mut results = Vec::new();
    for reference in [false, true] {
        let rt = Runtime::new();
        let channels: Vec<Channel> =
            (0..CAMERAS).map(|k| rt.create_channel(&format!("cam/{k}"), Limits::unbounded())).collect::<Result<_>>()?;
        let cameras: Vec<_> = channels.iter().map(|c| Ok((rt.task(0)?, c.clone()))).collect::<Result<_>>()?;
        let outs: Vec<_> = cameras.iter().map(|(t, c)| t.attach_output(c)).collect::<Result<_>>()?;
        channels.iter().try_for_each(Channel::close_producers)?;
        let joiner = rt.task(INFINITY)?;
        let inputs: Vec<_> = channels.iter().map(|c| joiner.attach_input(c)).collect::<Result<_>>()?;
        let start = Instant::now();
        let put_started: Arc<Mutex<Vec<Vec<u64>>>> = Arc::new(Mutex::new(vec![vec![0; frames]; CAMERAS]));
        let handles: Vec<_> = cameras
            .into_iter()
            .zip(outs)
            .enumerate()
            .map(|(k, ((task, _), out))| {
                let put_started = put_started.clone();
                thread::spawn(move || -> Result<()> {
                    let frame = source(IMAGE_BYTES, k as u8);
                    let mut pacer = Pacer::new(Duration::from_secs_f64(1.0 / 30.0), Duration::from_millis(5))?;
                    for ts in 0..frames as Timestamp {
                        pacer.sync(ts);
                        // Stamped before the put: a woken joiner may run before this thread
                        // returns from `put`, so the latency includes the put itself.
                        put_started.lock().expect("lock")[k][ts as usize] = ns_since(start, Instant::now());
                        out.put(ts, frame.as_slice())?;
                        task.set_virtual_time(ts + 1)?;
                    }
                    task.close();
                    Ok(())
                })
            })
            .collect();
        let mut released = vec![0u64; frames];
        if reference {
            for ts in 0..frames as Timestamp {
                for inp in &inputs {
                    inp.get(ts, None)?;
                }
                released[ts as usize] = ns_since(start, Instant::now());
                inputs.iter().try_for_each(|inp| inp.consume(ts))?;
            }
        } else {
            let mut join = ExactJoin::new(inputs, JoinPolicy::Skip)?;
            for _ in 0..frames {
                let tuple = join.next(Some(Duration::from_secs(10)))?;
                released[tuple.ts as usize] = ns_since(start, Instant::now());
            }
            assert_eq!(join.stats().complete, frames as u64, "every 4-tuple must complete");
        }
        for h in handles {
            h.join().expect("camera thread")?;
        }
        let put_started = put_started.lock().expect("lock");
        let mut added: Vec<u64> = (0..frames)
            .map(|i| released[i].saturating_sub((0..CAMERAS).map(|k| put_started[k][i]).max().unwrap_or(0)))
            .collect();
        results.push(Summary::of(&mut added));
    }
    let (join, manual) = (results[0], results[1]);
    let case = "4 channels, 30 fps, 230400 B";
    Line::new("exact_join_latency", case, "blocking get(ts) on each channel").latency_us("", &manual).emit();
    Line::new("exact_join_latency", case, "stampede ExactJoin(Skip)")
        .latency_us("", &join)
        .ratio("blocking get(ts) on each channel", join.p50_ns / manual.p50_ns)
        .emit();
    Ok(())
}

/// Timestamp (ms) of video frame k at 30 fps and of audio block k at 50 Hz.
fn video_ts(k: usize) -> Timestamp {
    (k as f64 * 1000.0 / 30.0).round() as Timestamp
}
fn audio_ts(k: usize) -> Timestamp {
    20 * k as Timestamp
}

fn approx_join(duration_ms: usize) -> Result<()> {
    const TOLERANCE: Timestamp = 10;
    let rt = Runtime::new();
    let video = rt.create_channel("av/video", Limits::unbounded())?;
    let audio = rt.create_channel("av/audio", Limits::unbounded())?;
    let (pv, pa) = (rt.task(0)?, rt.task(0)?);
    let (ov, oa) = (pv.attach_output(&video)?, pa.attach_output(&audio)?);
    video.close_producers().unwrap();
    audio.close_producers().unwrap();
    let joiner = rt.task(INFINITY)?;
    let mut join = ApproxJoin::new(vec![joiner.attach_input(&video)?, joiner.attach_input(&audio)?], TOLERANCE)?;
    let start = Instant::now();
    let n_video = (0..).take_while(|&k| video_ts(k) < duration_ms as Timestamp).count();
    let n_audio = (0..).take_while(|&k| audio_ts(k) < duration_ms as Timestamp).count();
    // Each producer puts at real time = its timestamp (ms), then advances its virtual time to
    // the next timestamp it will put. Arrival times are recorded for the classic rule.
    let spawn = |task: stampede::Task, out: stampede::ChannelOutput, ts_of: fn(usize) -> Timestamp, n: usize| {
        thread::spawn(move || -> Result<Vec<(Timestamp, u64)>> {
            let mut pacer = Pacer::new(Duration::from_millis(1), Duration::from_millis(5))?;
            let mut arrivals = Vec::with_capacity(n);
            for k in 0..n {
                pacer.sync(ts_of(k));
                out.put(ts_of(k), &[0u8; 64][..])?;
                arrivals.push((ts_of(k), ns_since(start, Instant::now())));
                task.set_virtual_time(ts_of(k + 1))?;
            }
            task.close();
            Ok(arrivals)
        })
    };
    let hv = spawn(pv, ov, video_ts, n_video);
    let ha = spawn(pa, oa, audio_ts, n_audio);
    let mut released = Vec::with_capacity(n_video);
    for _ in 0..n_video {
        let m = join.next(Some(Duration::from_secs(10)))?;
        released.push((m.pivot.ts, m.matches[0].as_ref().map(|i| i.ts), ns_since(start, Instant::now())));
    }
    let video_arrivals = hv.join().expect("video thread")?;
    let audio_arrivals = ha.join().expect("audio thread")?;
    let mut ours = Vec::new();
    let mut classic = Vec::new();
    for (&(t, matched, at), &(vt, v_arrival)) in released.iter().zip(&video_arrivals) {
        assert_eq!(t, vt);
        ours.push(at.saturating_sub(v_arrival));
        // Classic: final once the other channel delivered a message beyond the best distance.
        let d = matched.map_or(TOLERANCE, |m| (m - t).abs());
        let later = audio_arrivals.iter().find(|&&(ts, _)| ts > t + d).map_or(u64::MAX, |&(_, arr)| arr);
        let best_arrival = matched.and_then(|m| audio_arrivals.iter().find(|a| a.0 == m)).map_or(0, |a| a.1);
        if later != u64::MAX {
            classic.push(later.max(best_arrival).max(v_arrival) - v_arrival);
        }
    }
    let (ours, classic) = (Summary::of(&mut ours), Summary::of(&mut classic));
    let case = "video 30 fps x audio 50 Hz, tolerance 10 ms";
    Line::new("approx_join_release", case, "classic: wait for a later message (ROS 2 ApproximateTime rule)")
        .latency_us("", &classic)
        .emit();
    Line::new("approx_join_release", case, "stampede ApproxJoin (visibility proof)")
        .latency_us("", &ours)
        .ratio("classic: wait for a later message (ROS 2 ApproximateTime rule)", ours.p50_ns / classic.p50_ns)
        .emit();
    Ok(())
}

/// One item a stage read: (ts, when it was gotten, when the stage was done with it), in ns.
type Read = (Timestamp, u64, u64);

/// One run of the 4-stage pipeline; returns (mean, max) live items summed over its channels and
/// the ideal mean (items that will still be gotten by some stage).
fn pipeline_run(frames: usize, retention: Retention, honour_demand: bool) -> Result<(f64, usize, f64)> {
    const STAGES: usize = 3;
    let rt = Runtime::new();
    let channels: Vec<Channel> =
        (0..STAGES).map(|k| rt.create_channel(&format!("stage/{k}"), retention)).collect::<Result<_>>()?;
    let gotten: Arc<Mutex<Vec<Vec<Read>>>> = Arc::new(Mutex::new(vec![Vec::new(); STAGES]));
    // The source first: a root task starts at or above ts_min, which is INFINITY while only
    // the INFINITY stages exist.
    let src = rt.task(0)?;
    let out = src.attach_output(&channels[0])?;
    let start = Instant::now();
    let stages: Vec<_> = (0..STAGES)
        .map(|k| {
            let task = rt.task(INFINITY)?;
            let inp = task.attach_input(&channels[k])?;
            let out = channels.get(k + 1).map(|c| task.attach_output(c)).transpose()?;
            let work = if k == STAGES - 1 { Duration::from_millis(20) } else { Duration::from_micros(200) };
            let gotten = gotten.clone();
            Ok(thread::spawn(move || -> Result<()> {
                loop {
                    let item = match inp.get(NEWEST_UNSEEN, Some(Duration::from_millis(300))) {
                        Ok(item) => item,
                        Err(stampede::Error::NotAvailable { .. }) => return Ok(()),
                        Err(e) => return Err(e),
                    };
                    let got_at = ns_since(start, Instant::now());
                    thread::sleep(work);
                    if let Some(out) = &out {
                        out.put(item.ts, item.data().clone())?;
                    }
                    inp.consume_until(item.ts)?;
                    gotten.lock().expect("lock")[k].push((item.ts, got_at, ns_since(start, Instant::now())));
                }
            }))
        })
        .collect::<Result<_>>()?;
    let frame = source(IMAGE_BYTES, 1);
    let mut pacer = Pacer::new(Duration::from_millis(2), Duration::from_millis(50))?;
    let mut samples = Vec::with_capacity(frames);
    let mut put_times = Vec::with_capacity(frames);
    for ts in 0..frames as Timestamp {
        pacer.sync(ts);
        if !honour_demand || ts >= out.demand() {
            out.put(ts, frame.as_slice())?;
        }
        src.set_virtual_time(ts + 1)?;
        let now = ns_since(start, Instant::now());
        put_times.push(now);
        samples.push((now, channels.iter().map(|c| c.stats().live_items).sum::<usize>()));
    }
    src.close();
    for s in stages {
        s.join().expect("stage thread")?;
    }
    // Ideal at sample time `now`: items put into stage k's channel by `now` that stage k has
    // not finished with yet (an item read later is needed from its put until its reader is done;
    // one never read is not needed at all).
    let gotten = gotten.lock().expect("lock");
    let put_at = |k: usize, ts: Timestamp| -> u64 {
        if k == 0 {
            put_times[ts as usize]
        } else {
            gotten[k - 1].iter().find(|g| g.0 == ts).map_or(u64::MAX, |g| g.2)
        }
    };
    let ideal: f64 = samples
        .iter()
        .map(|&(now, _)| {
            let needed =
                |k: usize| gotten[k].iter().filter(|&&(ts, _, done)| put_at(k, ts) <= now && done > now).count();
            (0..STAGES).map(needed).sum::<usize>() as f64
        })
        .sum::<f64>()
        / samples.len() as f64;
    let mean = samples.iter().map(|s| s.1 as f64).sum::<f64>() / samples.len() as f64;
    let max = samples.iter().map(|s| s.1).max().unwrap_or(0);
    Ok((mean, max, ideal))
}

fn pipeline_memory(frames: usize) -> Result<()> {
    let case = "source 500 fps -> 3 stages, last one 20 ms/frame, 230400 B";
    let (plain_mean, plain_max, ideal_plain) = pipeline_run(frames, Retention::History, false)?;
    let (fb_mean, fb_max, ideal_fb) = pipeline_run(frames, Retention::CurrentReaders, true)?;
    Line::new("pipeline_live_items", case, "plain ts_min GC")
        .field("live_items_mean", plain_mean)
        .field("live_items_max", plain_max as u64)
        .field("ideal_mean", ideal_plain)
        .emit();
    Line::new("pipeline_live_items", case, "demand + Retention::CurrentReaders")
        .field("live_items_mean", fb_mean)
        .field("live_items_max", fb_max as u64)
        .field("ideal_mean", ideal_fb)
        .ratio("plain ts_min GC", fb_mean / plain_mean)
        .emit();
    Ok(())
}
