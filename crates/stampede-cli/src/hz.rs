//! `stampede hz <name>`: how a channel on a node is doing, once a second — its rate with the
//! min, max and standard deviation of the intervals between puts, its bandwidth and item sizes —
//! over the last `--window` puts, like `ros2 topic hz` and `bw`. Read from the channel's put log
//! on its node (when each put came and how large it was; `Channel::put_log`): no payload moves,
//! nothing attaches, GC is never held back. The first ask turns the log on, so the first line
//! comes once two puts were logged.

use std::io::Write;
use std::time::{Duration, Instant};

use stampede::{connect_with, ConnectOptions, PutRecord};

/// What `hz` was asked for.
pub struct Options {
    pub name: String,
    pub endpoint: String,
    /// Puts each line is computed over (the newest ones).
    pub window: usize,
    /// Lines to print before exiting (`None`: until Ctrl-C).
    pub count: Option<u64>,
    pub connect: ConnectOptions,
}

/// Between two lines.
const PERIOD: Duration = Duration::from_secs(1);
/// Puts a line is computed over unless told (`--window`).
pub const WINDOW_DEFAULT: usize = 100;

/// Prints a line a second until `count` lines were printed (or for ever).
pub fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let rt = connect_with(&options.endpoint, &options.connect)?;
    let result = follow(&rt, &options);
    rt.close();
    result
}

fn follow(rt: &stampede::Runtime, options: &Options) -> Result<(), Box<dyn std::error::Error>> {
    let channel = rt
        .channel(&options.name)
        .map_err(|e| format!("no channel named {:?} on {}: {e}", options.name, options.endpoint))?;
    channel.put_log()?; // turns the log on
    let mut out = std::io::stdout().lock();
    let mut printed = 0;
    let mut next = Instant::now() + PERIOD;
    while options.count.is_none_or(|count| printed < count) {
        std::thread::sleep(next.saturating_duration_since(Instant::now())); // the period between lines
        next += PERIOD;
        let log = channel.put_log()?;
        let window = &log[log.len().saturating_sub(options.window)..];
        writeln!(out, "{}", line(window))?;
        out.flush()?;
        printed += 1;
    }
    Ok(())
}

/// One line of the report over `window` (puts oldest first).
pub fn line(window: &[PutRecord]) -> String {
    let [first, .., last] = window else { return "no puts yet (waiting for two)".into() };
    let intervals: Vec<f64> = window.windows(2).map(|w| w[1].at_us.saturating_sub(w[0].at_us) as f64 / 1e6).collect();
    let span = last.at_us.saturating_sub(first.at_us) as f64 / 1e6;
    let n = intervals.len() as f64;
    let mean = span / n;
    let std = (intervals.iter().map(|i| (i - mean).powi(2)).sum::<f64>() / n).sqrt();
    let (min, max) = intervals.iter().fold((f64::MAX, 0f64), |(lo, hi), &i| (lo.min(i), hi.max(i)));
    let bytes: u64 = window[1..].iter().map(|p| p.bytes).sum();
    let sizes = window.iter().map(|p| p.bytes);
    let (small, large) = sizes.fold((u64::MAX, 0), |(lo, hi), b| (lo.min(b), hi.max(b)));
    let rate = if span > 0.0 { n / span } else { f64::INFINITY };
    format!(
        "rate {rate:.2} Hz over {} puts: interval min {min:.4} s, max {max:.4} s, std {std:.4} s; bandwidth {}/s; \
         sizes {} .. {}; ts {} .. {}",
        window.len(),
        human(if span > 0.0 { bytes as f64 / span } else { 0.0 }),
        human(small as f64),
        human(large as f64),
        first.ts,
        last.ts
    )
}

/// Bytes in B, KB, MB or GB (powers of 1000).
fn human(bytes: f64) -> String {
    match bytes {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} KB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thirty 6 MB frames a second read 30 Hz and 180 MB/s; fewer than two puts say so.
    #[test]
    fn a_line_says_rate_jitter_and_bandwidth() {
        let window: Vec<PutRecord> = (0..31)
            .map(|i| PutRecord { at_us: i * 33_333 + if i == 10 { 1_000 } else { 0 }, ts: i as i64, bytes: 6_000_000 })
            .collect();
        let text = line(&window);
        assert!(text.starts_with("rate 30.00 Hz over 31 puts"), "{text}");
        assert!(text.contains("min 0.0323 s, max 0.0343 s"), "{text}");
        assert!(text.contains("bandwidth 180.00 MB/s; sizes 6.00 MB .. 6.00 MB; ts 0 .. 30"), "{text}");
        assert_eq!(line(&window[..1]), "no puts yet (waiting for two)");
    }
}
