//! `stampede replay run.mcap --connect <endpoint> [--rate 0.5|1|2|max] [--loop]`: puts a
//! recording's items back into channels of a node, paced at the recorded timing (see
//! [`stampede_record::replay`]). Prints a progress line per second and a summary; Ctrl-C stops.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stampede::ConnectOptions;
use stampede_record::{replay, RecordError, ReplayOptions};

/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

pub struct Options {
    pub input: PathBuf,
    pub endpoint: String,
    pub replay: ReplayOptions,
    pub connect: ConnectOptions,
}

/// A replay's speed: `None` as fast as possible.
#[derive(Clone, Copy, Debug)]
pub struct Rate(pub Option<f64>);

/// `max` (as fast as possible) or a positive factor.
pub fn rate(text: &str) -> Result<Rate, String> {
    if text == "max" {
        return Ok(Rate(None));
    }
    match text.parse::<f64>() {
        Ok(rate) if stampede_record::replay::is_rate(rate) => Ok(Rate(Some(rate))),
        _ => Err(format!("{text:?} is not a rate: a factor in (0, {}] or max", stampede_record::replay::RATE_MAX)),
    }
}

/// `FROM=TO`.
pub fn remap(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((from, to)) if !from.is_empty() && !to.is_empty() => Ok((from.to_owned(), to.to_owned())),
        _ => Err(format!("{text:?} is not FROM=TO (e.g. camera=old/camera)")),
    }
}

pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let rt = stampede::connect_with(&options.endpoint, &options.connect)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = std::thread::spawn({
        let stop = stop.clone();
        move || {
            if let Ok(signals) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                if signals.block_on(tokio::signal::ctrl_c()).is_ok() {
                    stop.store(true, Ordering::SeqCst);
                }
            }
        }
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "replaying {}", options.input.display())?;
    out.flush()?;
    let started = Instant::now();
    let mut last_line = Instant::now();
    let result = replay(&rt, &options.input, &options.replay, &mut |stats| {
        if last_line.elapsed() >= PROGRESS_EVERY {
            last_line = Instant::now();
            let _ = writeln!(
                out,
                "{:.0} s: {} items, pass {} ({} items each), {} late",
                started.elapsed().as_secs_f64(),
                stats.items,
                stats.passes + 1,
                stats.items_per_pass,
                stats.late
            );
            let _ = out.flush();
        }
        !stop.load(Ordering::SeqCst)
    });
    drop(watcher); // a detached thread waiting for a Ctrl-C that will not come
    let mut out = std::io::stdout().lock();
    match result {
        Ok(stats) => {
            for (name, items) in &stats.channels {
                writeln!(out, "  {name}: {items} items")?;
            }
            if let Some(why) = &stats.cut_off {
                writeln!(out, "the recording was cut off ({why}); replayed what it holds")?;
            }
            if stats.duplicates > 0 {
                writeln!(out, "{} items skipped: their channel held their timestamp already", stats.duplicates)?;
            }
            if let Some(why) = &stats.skip_reason {
                writeln!(
                    out,
                    "{} messages per pass skipped, not what their schema says; the first: {why}",
                    stats.skipped
                )?;
            }
            writeln!(
                out,
                "replayed {} items ({} bytes) in {:.1} s, {} late by more than 10 ms",
                stats.items,
                stats.bytes,
                started.elapsed().as_secs_f64(),
                stats.late
            )?;
        }
        Err(RecordError::Stopped) => writeln!(out, "stopped")?,
        Err(e) => return Err(e.into()),
    }
    rt.close();
    Ok(())
}

/// `header` or `log`: where a ROS 2 message's time comes from.
pub fn time_source(text: &str) -> Result<stampede_record::ros2::TimeSource, String> {
    match text {
        "header" => Ok(stampede_record::ros2::TimeSource::Header),
        "log" => Ok(stampede_record::ros2::TimeSource::Log),
        other => Err(format!("{other:?}: header (each message's header stamp) or log (when it was logged)")),
    }
}
