//! A pipeline to look at: a synthetic camera (a moving square on a gradient, 30 fps) into a
//! bounded channel, a tracker that reads the newest frame, finds the square and puts its box,
//! and a dashboard of it all.
//!
//! `cargo run -p stampede-dashboard --example demo [port]`, then open the printed URL.

use std::time::Duration;

use stampede::{Codec, Limits, Pacer, Payload, Runtime, Selector, INFINITY};
use stampede_dashboard::{Dashboard, DashboardOptions};

const WIDTH: usize = 320;
const HEIGHT: usize = 240;
const SIDE: usize = 40;

fn main() -> stampede::Result<()> {
    let port = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(8080);
    let rt = Runtime::new();
    let frames = rt.create_channel("camera/left", Limits::items(8))?;
    let boxes = rt.create_channel("tracker/boxes", Limits::unbounded())?;

    let camera = rt.task(0)?;
    camera.set_name("camera")?;
    let frames_out = camera.attach_output(&frames)?;
    let tracker = rt.task(INFINITY)?;
    tracker.set_name("tracker")?;
    let frames_in = tracker.attach_input(&frames)?;
    let boxes_out = tracker.attach_output(&boxes)?;

    let dashboard = Dashboard::serve(
        rt.clone(),
        DashboardOptions {
            port,
            image: Some("camera/left".into()),
            overlays: vec!["tracker/boxes".into()],
            ..DashboardOptions::default()
        },
    )?;
    println!("dashboard on {}", dashboard.url());

    std::thread::spawn(move || loop {
        let Ok(item) = frames_in.get(Selector::NewestUnseen, None) else { return };
        std::thread::sleep(Duration::from_millis(50)); // a slow tracker: it skips frames
        let (x, y) = square_at(item.ts);
        let json = format!(
            r#"{{"boxes": [{{"x": {x}, "y": {y}, "w": {SIDE}, "h": {SIDE}, "label": "square {}"}}]}}"#,
            item.ts
        );
        let _ = boxes_out.put(item.ts, Payload::copy_from(json.as_bytes(), Codec::Json));
        let _ = frames_in.consume_until(item.ts);
    });

    let mut pacer = Pacer::new(Duration::from_secs_f64(1.0 / 30.0), Duration::from_millis(5))?;
    for ts in 0.. {
        frames_out.put(ts, frame(ts))?;
        camera.set_virtual_time(ts + 1)?;
        pacer.sync(ts + 1);
    }
    Ok(())
}

/// Where the square is at frame `ts`.
fn square_at(ts: i64) -> (usize, usize) {
    let t = ts as f64 / 30.0;
    let x = (WIDTH - SIDE) as f64 * (0.5 + 0.5 * (t * 1.3).sin());
    let y = (HEIGHT - SIDE) as f64 * (0.5 + 0.5 * (t * 0.9).cos());
    (x as usize, y as usize)
}

/// Frame `ts` as an `.npy` (H, W, 3) uint8 array.
fn frame(ts: i64) -> Payload {
    let mut bytes = stampede::npy::encode_header("'|u1'", &[HEIGHT, WIDTH, 3]).expect("a short header");
    let (sx, sy) = square_at(ts);
    for y in 0..HEIGHT {
        for x in 0..WIDTH {
            let inside = (sx..sx + SIDE).contains(&x) && (sy..sy + SIDE).contains(&y);
            let pixel = if inside { [240, 80, 60] } else { [(x * 255 / WIDTH) as u8, (y * 255 / HEIGHT) as u8, 90] };
            bytes.extend_from_slice(&pixel);
        }
    }
    Payload { data: bytes.into(), codec: Codec::Npy }
}
