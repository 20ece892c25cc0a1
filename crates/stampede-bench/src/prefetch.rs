//! Stampede's side of `prefetch` (docs/PREFETCH.md): readers of a remote channel with prefetch
//! `off` and `auto`, side by side on one node, each its own client session.
//!
//! - [`skipping`]: a 30 fps camera puts frames; a display reads the freshest one
//!   (`NEWEST_UNSEEN`) at its own rate and consumes up to it. Counted: its gets, those its cache
//!   answered (the node's `used`), the node's notices and pushes, its requests; timed: each get,
//!   and each frame's age when the display got it (from the start of its put).
//! - [`cache_gets`]: the cost of a get the cache answers, at a size: a frame is put, the push is
//!   given time to arrive, and the `NEWEST_UNSEEN` get is timed (with `off`: the same get through
//!   the node, the frame present there).

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stampede::prefetch::Pushes;
use stampede::{
    connect_with, ConnectOptions, ConnectionKind, Limits, Prefetch, Runtime, Task, INFINITY, NEWEST_UNSEEN,
};

use crate::process::START_TIMEOUT;
use crate::stats::elapsed_ns;
use crate::BoxResult;
use stampede_wire::CONSUME_DELAY_MAX;

/// What one skipping reader did.
pub struct Skipping {
    pub gets: u64,
    /// Gets that found nothing new within their timeout.
    pub empty: u64,
    /// Requests the display's session sent while it read (gets that went to the node, consumes
    /// sent on their own or carried by another request: `Runtime::requests_sent`).
    pub requests: u64,
    /// The node's report: notices, pushes, and pushes used.
    pub pushes: Pushes,
    pub get_ns: Vec<u64>,
    pub age_ns: Vec<u64>,
    pub frames: u64,
    pub frame_bytes: u64,
}

/// A client session with `prefetch` for the inputs that choose none.
fn session(endpoint: &str, prefetch: Prefetch) -> BoxResult<Runtime> {
    let options = ConnectOptions { timeout: Some(START_TIMEOUT), prefetch, ..ConnectOptions::default() };
    Ok(connect_with(endpoint, &options)?)
}

/// What the node reports of `task`'s input connection.
fn pushes(rt: &Runtime, task: &Task) -> Pushes {
    let graph = rt.graph().ok();
    let view = graph.as_ref().and_then(|g| g.tasks.iter().find(|t| t.id == task.id()));
    let connection = view.and_then(|v| v.connections.iter().find(|c| c.kind == ConnectionKind::Input));
    connection.and_then(|c| c.prefetch).unwrap_or_default()
}

/// A camera putting `frames` frames of `frame_bytes` at `camera_fps` into `name`, and a display
/// reading the freshest at `display_fps`, with `prefetch`, both through the node at `endpoint`.
pub fn skipping(
    endpoint: &str,
    name: &str,
    prefetch: Prefetch,
    (camera_fps, display_fps): (f64, f64),
    (frames, frame_bytes): (u64, usize),
) -> BoxResult<Skipping> {
    let camera_rt = session(endpoint, prefetch)?;
    let channel = camera_rt.create_channel(name, Limits::unbounded())?;
    // The node's ts_min only grows: each run's frames start there.
    let base = camera_rt.stats().ts_min;
    let camera = camera_rt.task(base)?;
    let out = camera.attach_output(&channel)?;
    let display_rt = session(endpoint, prefetch)?;
    let display = display_rt.task(INFINITY)?;
    let stampede::Container::Channel(looked_up) = display_rt.lookup(name)? else {
        return Err(format!("{name} is not a channel").into());
    };
    let input = display.attach_input(&looked_up)?;
    let started: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let frame_every = Duration::from_secs_f64(1.0 / camera_fps);
    let producer = {
        let started = started.clone();
        thread::spawn(move || -> BoxResult<()> {
            let origin = Instant::now();
            let payload = vec![7u8; frame_bytes];
            for ts in 0..frames {
                let due = origin + frame_every * ts as u32;
                thread::sleep(due.saturating_duration_since(Instant::now()));
                started.lock().expect("not poisoned").push(Instant::now());
                out.put(base + ts as i64, payload.as_slice())?;
                camera.set_virtual_time(base + ts as i64 + 1)?;
            }
            Ok(())
        })
    };
    let read_every = Duration::from_secs_f64(1.0 / display_fps);
    let sent_before = display_rt.requests_sent().unwrap_or(0);
    let origin = Instant::now();
    let mut got = Skipping {
        gets: 0,
        empty: 0,
        requests: 0,
        pushes: Pushes::default(),
        get_ns: Vec::new(),
        age_ns: Vec::new(),
        frames,
        frame_bytes: frame_bytes as u64,
    };
    let mut last = base - 1;
    for i in 0.. {
        thread::sleep((origin + read_every * i).saturating_duration_since(Instant::now()));
        if last == base + frames as i64 - 1 {
            break;
        }
        let start = Instant::now();
        let item = input.get(NEWEST_UNSEEN, Some(read_every));
        got.get_ns.push(elapsed_ns(start));
        got.gets += 1;
        let Ok(item) = item else {
            got.empty += 1;
            continue;
        };
        let put_at = started.lock().expect("not poisoned").get((item.ts - base) as usize).copied();
        if let Some(put_at) = put_at {
            got.age_ns.push(elapsed_ns(put_at));
        }
        input.consume_until(item.ts)?;
        last = item.ts;
    }
    producer.join().map_err(|_| "the camera thread panicked")??;
    // Deferred consumes go on their own within their bound: counted, before the graph's request
    // (which would carry them) is sent.
    thread::sleep(CONSUME_DELAY_MAX * 2);
    got.requests = display_rt.requests_sent().unwrap_or(0) - sent_before;
    got.pushes = pushes(&display_rt, &display);
    Ok(got)
}

/// Times of `gets` `NEWEST_UNSEEN` gets of a present `frame_bytes` frame, each put just before
/// (and, with prefetch on, given `settle` to be pushed), through the node at `endpoint`.
pub fn cache_gets(
    endpoint: &str,
    name: &str,
    prefetch: Prefetch,
    frame_bytes: usize,
    (gets, settle): (usize, Duration),
) -> BoxResult<(Vec<u64>, Pushes)> {
    let rt = session(endpoint, prefetch)?;
    let channel = rt.create_channel(name, Limits::unbounded())?;
    let base = rt.stats().ts_min;
    let (camera, display) = (rt.task(base)?, rt.task(INFINITY)?);
    let out = camera.attach_output(&channel)?;
    let input = display.attach_input(&channel)?;
    let payload = vec![3u8; frame_bytes];
    let mut samples = Vec::with_capacity(gets);
    for ts in base..base + gets as i64 {
        out.put(ts, payload.as_slice())?;
        camera.set_virtual_time(ts + 1)?;
        thread::sleep(settle);
        let start = Instant::now();
        let item = input.get(NEWEST_UNSEEN, Some(Duration::ZERO))?;
        samples.push(elapsed_ns(start));
        input.consume_until(item.ts)?;
    }
    Ok((samples, pushes(&rt, &display)))
}
