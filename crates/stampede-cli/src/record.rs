//! `stampede record <names or prefixes>... -o run.mcap --connect <endpoint>`: records channels
//! of a node to an MCAP file until Ctrl-C or `--seconds` (see
//! [`stampede_record::recorder`]). Prints `recording <n> channels to <file>` once attached, a
//! progress line per second, and a summary per channel at the end; exits 1 when items put were
//! not recorded (`missed`, e.g. a channel destroyed before its items were written).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use stampede::ConnectOptions;
use stampede_record::{Recorder, RecorderOptions, RecorderStats};

/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What to record and how.
pub struct Options {
    pub names: Vec<String>,
    pub output: PathBuf,
    pub endpoint: String,
    /// Stop after this long (`None`: until Ctrl-C).
    pub seconds: Option<f64>,
    pub recorder: RecorderOptions,
    pub connect: ConnectOptions,
}

pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let rt = stampede::connect_with(&options.endpoint, &options.connect)?;
    let recorder = Recorder::start(&rt, &options.names, &options.output, options.recorder.clone())?;
    let mut out = std::io::stdout().lock();
    let channels = recorder.stats().channels.len();
    writeln!(out, "recording {channels} channels to {}", options.output.display())?;
    out.flush()?;
    // A deadline too far for the clock is no deadline.
    let deadline = options.seconds.and_then(|s| Instant::now().checked_add(Duration::from_secs_f64(s)));
    let signals = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let started = Instant::now();
    loop {
        let interrupted = signals.block_on(async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => true,
                _ = tokio::time::sleep(PROGRESS_EVERY) => false,
            }
        });
        let stats = recorder.stats();
        writeln!(
            out,
            "{:.0} s: {} items, {:.1} MB from {} channels",
            started.elapsed().as_secs_f64(),
            stats.items,
            stats.bytes as f64 / 1e6,
            stats.channels.len()
        )?;
        out.flush()?;
        if interrupted || recorder.is_finished() || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    let stats = recorder.stop()?;
    summary(&mut out, &stats, &options.output)?;
    rt.close();
    let missed: u64 = stats.channels.values().map(|c| c.missed).sum();
    if missed > 0 {
        return Err(format!("the recording is incomplete: {missed} items put were not recorded (see above)").into());
    }
    Ok(())
}

/// One line per channel, then the total.
fn summary(out: &mut impl Write, stats: &RecorderStats, path: &std::path::Path) -> std::io::Result<()> {
    for (name, channel) in &stats.channels {
        let span = match (channel.first_ts, channel.last_ts) {
            (Some(first), Some(last)) => format!("ts {first}..={last}"),
            _ => "no items".to_owned(),
        };
        let ended = channel.ended.as_deref().map(|why| format!(" (ended: {why})")).unwrap_or_default();
        let missed = if channel.missed > 0 { format!(", {} MISSED", channel.missed) } else { String::new() };
        writeln!(out, "  {name}: {} items, {} bytes, {span}{missed}{ended}", channel.items, channel.bytes)?;
    }
    for queue in &stats.skipped_queues {
        writeln!(out, "  {queue}: a queue, not recorded")?;
    }
    let missed: u64 = stats.channels.values().map(|c| c.missed).sum();
    writeln!(out, "recorded {} items ({} bytes) to {}, {missed} missed", stats.items, stats.bytes, path.display())?;
    if stats.converted + stats.not_converted > 0 {
        let (converted, not) = (stats.converted, stats.not_converted);
        writeln!(
            out,
            "  for Foxglove: {converted} messages beside the items; {not} items not images, overlays or text"
        )?;
    }
    Ok(())
}
