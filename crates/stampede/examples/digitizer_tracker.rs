//! The Stampede paper's vision pipeline (STM paper, Figs. 6 and 7) on the embedded runtime.
//!
//! A digitizer, paced by a [`Pacer`], puts synthetic 320×240 RGB frames (230 400 bytes) with a
//! bright square moving along a known path; its virtual time is the frame number. A tracker with
//! virtual time `INFINITY` repeatedly gets the *newest unseen* frame, finds the square, puts its
//! location at the frame's timestamp, and `consume_until`s the frame — skipping whatever it was
//! too slow to look at. GC reclaims every skipped frame at once, so live items stay bounded
//! however much slower the tracker is.
//!
//! ```text
//! cargo run --release --example digitizer_tracker -- --frames 300 --fps 30 --tracker-ms 50
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stampede::{Limits, Pacer, Runtime, Selector, INFINITY};

/// Frame geometry: 320×240 RGB, the seeds' 230 400-byte image.
pub const WIDTH: usize = 320;
pub const HEIGHT: usize = 240;
pub const SQUARE: usize = 16;

/// How to run the pipeline.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Frames the digitizer produces.
    pub frames: i64,
    /// Digitizer pace (frames per second of real time).
    pub fps: f64,
    /// Extra work the tracker does per frame, making it slower than the digitizer.
    pub tracker_ms: u64,
}

/// What one run measured.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    pub frames_put: i64,
    pub frames_tracked: i64,
    pub frames_skipped: i64,
    /// Tracked frames whose location did not match the ground truth.
    pub wrong_locations: i64,
    pub digitizer_fps: f64,
    pub tracker_fps: f64,
    /// Highest number of frames stored at once, sampled after every put and every track.
    pub live_items_max: usize,
    pub frames_reclaimed: u64,
    /// Items left in the frame channel at the end (0: nothing leaked).
    pub live_items_end: usize,
}

/// Top-left corner of the square in frame `ts`: the ground truth.
pub fn square_at(ts: i64) -> (usize, usize) {
    let ts = ts as usize;
    ((7 * ts) % (WIDTH - SQUARE), (3 * ts) % (HEIGHT - SQUARE))
}

/// Renders frame `ts` into `frame` (dark background, one bright square).
pub fn render(ts: i64, frame: &mut [u8]) {
    frame.fill(16);
    let (x0, y0) = square_at(ts);
    for y in y0..y0 + SQUARE {
        let row = (y * WIDTH + x0) * 3;
        frame[row..row + SQUARE * 3].fill(240);
    }
}

/// Finds the top-left corner of the bright square, if any.
pub fn locate(frame: &[u8]) -> Option<(usize, usize)> {
    let first = frame.iter().position(|&v| v > 128)? / 3;
    Some((first % WIDTH, first / WIDTH))
}

/// Runs the pipeline to completion and reports.
pub fn run(config: Config) -> stampede::Result<Report> {
    let rt = Runtime::new();
    let frames = rt.create_channel("video/frames", Limits::unbounded())?;
    let locations = rt.create_channel("tracker/locations", Limits::unbounded())?;
    let reclaimed = Arc::new(AtomicU64::new(0));
    let counter = reclaimed.clone();
    frames.on_reclaim(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
    })?;
    let live_max = Arc::new(AtomicU64::new(0));
    let sample = {
        let frames = frames.clone();
        let live_max = live_max.clone();
        move || {
            live_max.fetch_max(frames.stats().live_items as u64, Ordering::Relaxed);
        }
    };

    // The source first: a root task starts at or above ts_min, and while only INFINITY tasks
    // exist ts_min is INFINITY.
    let digitizer = rt.task(0)?;
    let frames_out = digitizer.attach_output(&frames)?;

    // Fig. 7: virtual time INFINITY, then attach: every new frame is unseen on the connection.
    let tracker = rt.task(INFINITY)?;
    let frames_in = tracker.attach_input(&frames)?;
    let locations_out = tracker.attach_output(&locations)?;

    let started = Instant::now();
    let producer = {
        let sample = sample.clone();
        std::thread::spawn(move || -> stampede::Result<f64> {
            // Fig. 6: put frame `vt`, advance virtual time, synchronise with real time.
            let mut pacer = Pacer::new(Duration::from_secs_f64(1.0 / config.fps), Duration::from_millis(5))?;
            let mut frame = vec![0u8; WIDTH * HEIGHT * 3];
            for vt in 0..config.frames {
                render(vt, &mut frame);
                frames_out.put(vt, frame.as_slice())?;
                digitizer.set_virtual_time(vt + 1)?;
                sample();
                pacer.sync(vt + 1);
            }
            let fps = config.frames as f64 / started.elapsed().as_secs_f64();
            digitizer.close();
            Ok(fps)
        })
    };

    let mut tracked = 0;
    let mut wrong = 0;
    let last = config.frames - 1;
    loop {
        let frame = frames_in.get(Selector::NewestUnseen, None)?;
        let location = locate(frame.data());
        if location != Some(square_at(frame.ts)) {
            wrong += 1;
        }
        std::thread::sleep(Duration::from_millis(config.tracker_ms));
        let (x, y) = location.unwrap_or((usize::MAX, usize::MAX));
        locations_out.put(frame.ts, format!("{{\"x\":{x},\"y\":{y}}}").as_str())?;
        frames_in.consume_until(frame.ts)?;
        tracked += 1;
        sample();
        if frame.ts == last {
            break;
        }
    }
    let tracker_fps = tracked as f64 / started.elapsed().as_secs_f64();
    let digitizer_fps = producer.join().expect("digitizer thread panicked")?;
    tracker.close();
    Ok(Report {
        frames_put: config.frames,
        frames_tracked: tracked,
        frames_skipped: config.frames - tracked,
        wrong_locations: wrong,
        digitizer_fps,
        tracker_fps,
        live_items_max: live_max.load(Ordering::Relaxed) as usize,
        frames_reclaimed: reclaimed.load(Ordering::Relaxed),
        live_items_end: frames.stats().live_items,
    })
}

#[allow(dead_code)] // the test suite includes this file as a module and calls `run` directly
fn main() -> stampede::Result<()> {
    let mut config = Config { frames: 300, fps: 30.0, tracker_ms: 50 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        let bad = |flag: &str| -> ! {
            eprintln!("{flag} needs a number, got {value:?}\nusage: digitizer_tracker [--frames N] [--fps F] [--tracker-ms MS]");
            std::process::exit(2)
        };
        match pair[0].as_str() {
            "--frames" => config.frames = value.parse().unwrap_or_else(|_| bad("--frames")),
            "--fps" => config.fps = value.parse().unwrap_or_else(|_| bad("--fps")),
            "--tracker-ms" => config.tracker_ms = value.parse().unwrap_or_else(|_| bad("--tracker-ms")),
            other => bad(other),
        }
    }
    eprintln!(
        "digitizer: {} frames at {} fps; tracker: +{} ms per frame (NEWEST_UNSEEN + consume_until)",
        config.frames, config.fps, config.tracker_ms
    );
    let report = run(config)?;
    println!("frames put        {}", report.frames_put);
    println!("frames tracked    {}", report.frames_tracked);
    println!("frames skipped    {}", report.frames_skipped);
    println!("wrong locations   {}", report.wrong_locations);
    println!("digitizer fps     {:.1}", report.digitizer_fps);
    println!("tracker fps       {:.1}", report.tracker_fps);
    println!("live items max    {}", report.live_items_max);
    println!("frames reclaimed  {}", report.frames_reclaimed);
    println!("live items at end {}", report.live_items_end);
    Ok(())
}
