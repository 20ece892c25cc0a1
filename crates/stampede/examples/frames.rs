//! Two processes sharing a channel through a `stampede serve` node: a camera putting paced frames
//! and a viewer reading the freshest one.
//!
//! ```sh
//! cargo run --release -p stampede-cli -- serve --listen tcp/127.0.0.1:7447     # terminal 1
//! cargo run --release -p stampede --example frames -- camera                    # terminal 2
//! cargo run --release -p stampede --example frames -- viewer                    # terminal 3
//! ```
//!
//! A second argument names another endpoint (default `tcp/127.0.0.1:7447`).

use std::time::Duration;

use stampede::{connect, Channel, Runtime};
use stampede::{Error, Limits, Pacer, Result, INFINITY, NEWEST_UNSEEN};

/// Frames the camera puts (10 s at 30 fps).
const FRAMES: i64 = 300;
/// One 320×240 RGB frame.
const FRAME_BYTES: usize = 230_400;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let endpoint = args.get(1).map_or("tcp/127.0.0.1:7447", String::as_str);
    let rt = connect(endpoint, Some(Duration::from_secs(5)))?;
    println!("connected to node {:?} at {endpoint}", rt.node());
    match args.first().map(String::as_str) {
        Some("camera") => camera(&rt)?,
        Some("viewer") => viewer(&rt)?,
        _ => eprintln!("usage: frames camera|viewer [endpoint]"),
    }
    rt.close();
    Ok(())
}

/// The channel `camera/frames`, created by whoever comes first.
fn frames(rt: &Runtime) -> Result<Channel> {
    match rt.create_channel("camera/frames", Limits::items(8)) {
        Err(Error::AlreadyExists { .. }) => rt.channel("camera/frames"),
        created => created,
    }
}

/// Puts [`FRAMES`] frames at 30 fps, its virtual time following the frame number.
fn camera(rt: &Runtime) -> Result<()> {
    let channel = frames(rt)?;
    let start = rt.ts_min(); // a camera that restarts carries on above everything put so far
    let task = rt.task(start)?;
    let out = task.attach_output(&channel)?;
    let mut pacer = Pacer::new(Duration::from_secs(1) / 30, Duration::from_millis(5))?;
    for n in 0..FRAMES {
        let ts = start + n;
        pacer.sync(n);
        out.put(ts, vec![(ts % 256) as u8; FRAME_BYTES])?;
        task.set_virtual_time(ts + 1)?;
        if n % 30 == 0 {
            println!("camera: put frame {ts}");
        }
    }
    Ok(())
}

/// Reads the freshest frame until none comes for 2 s, skipping the rest.
fn viewer(rt: &Runtime) -> Result<()> {
    let task = rt.task(INFINITY)?;
    let inp = task.attach_input(&frames(rt)?)?;
    let (mut shown, mut skipped, mut last) = (0, 0, None);
    loop {
        let item = match inp.get(NEWEST_UNSEEN, Some(Duration::from_secs(2))) {
            Err(Error::NotAvailable { .. }) => break,
            other => other?,
        };
        skipped += last.map_or(0, |last| item.ts - last - 1);
        last = Some(item.ts);
        shown += 1;
        if shown % 30 == 0 {
            println!("viewer: frame {} ({} bytes), {shown} shown, {skipped} skipped", item.ts, item.data().len());
        }
        inp.consume_until(item.ts)?;
    }
    println!("viewer: no frame for 2 s; {shown} shown, {skipped} skipped");
    Ok(())
}
