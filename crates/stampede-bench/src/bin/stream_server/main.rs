//! GigaView §5 on Stampede (docs/RECORDING.md, "The disk tier: history beyond memory"; seed
//! `001_*`): a stream server feeding K stored streams at F frames/s from channels' disk tiers,
//! reporting each frame's delay and the delay jitter against utilisation, next to the seed's
//! figures.
//!
//! - **Setup.** One channel per stream (`stream/<k>`), each with a disk tier over the scratch
//!   directories (`--dirs d1,d2,...`: one per disk; default one under the system temp dir),
//!   holding N frames of 409 600 bytes (the seed's 400 KB) of distinct pseudo-random content, put
//!   once by a producer task that stays at virtual time 0 so nothing is ever reclaimed.
//!   `memory_items = 1`: every frame but the last is on disk, and only those are read.
//! - **Cold cache.** Before every measurement the tiers' pages are unmapped from this process and
//!   dropped from the page cache (`sync` + `/proc/sys/vm/drop_caches`, or `--evict fadvise`: per
//!   extent file); `mincore` then says how much is still resident (`resident_mib`, and `cache`:
//!   `"cold"` or `"warm"`).
//! - **Maximal read throughput.** One reader gets cold frames back to back, unpaced: the bytes/s
//!   that utilisation is measured against (best of the rounds).
//! - **Streams.** K reader threads (each a task at virtual time 0 with an input connection) start
//!   together and each replays its stream at F frames/s: frame `i` is due at `start + (i+1)/F`
//!   (a `Pacer`); the reader gets `At(i)`, checksums every byte (the item is a view of the extent's
//!   mapping, so this is what reads the disk), checks the sum against the one taken at the put,
//!   consumes it, and records delay = completion − due. A late reader does not skip: the next
//!   frame keeps its own due time, so delays accumulate as in a real server. F is chosen so that
//!   the offered bytes/s hit each target utilisation, for K = 1, 2, 4. Then the seed's own loads:
//!   one stream at 32 frames/s, and its multi-user case (three streams at rates 8:7:6, starting
//!   together, 60 % utilisation).
//! - **Size fit.** One cold unpaced reader per frame size (25 KB … 800 KB); Delay = Latency +
//!   Size/Throughput fitted by least squares on the per-size mean delays (as the seed fits its
//!   components, §3.1), and on every frame's delay.
//!
//! Bounded: frames per stream per configuration (`FRAMES_MIN` ≤ F × `--seconds` ≤ stored), and
//! time (a reader stops at twice its planned duration + 2 s). `--csv path` writes every frame's
//! delay (`k,fps,size,stream,frame,delay_us,utilisation,case`) for
//! `scripts/plot_stream_server.py`. MB = 10^6 bytes.
//!
//! Here: the settings, the setup, the grid and the measurements; beside it, `stream` (the stored
//! streams and their readers), `figures` (what a result line reports) and `seed` (the seed's own
//! loads and the size fit, against its figures).

mod figures;
mod seed;
mod stream;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Barrier;
use std::thread;
use std::time::Instant;

use stampede::{DiskTier, Runtime, Task};
use stampede_bench::cli::Options;
use stampede_bench::page_cache;
use stampede_bench::report::Line;
use stampede_bench::stats::{elapsed_ns, mb_per_s};

use crate::figures::{Cache, Figures};
use crate::stream::{read, store, Outcome, Plan, Stream};

use stampede_bench::BoxResult;

const BENCH: &str = "stream_server";
const SUBJECT: &str = "stampede disk tier";

/// The seed's frames: 400 KB.
const FRAME_BYTES: usize = 409_600;
/// Newest items a channel keeps in memory: all frames but the last are on disk.
const MEMORY_ITEMS: usize = 1;
/// Frame sizes of the fit: 25 KB … 800 KB.
const FIT_SIZES: [usize; 6] = [25_600, 51_200, 102_400, 204_800, 409_600, 819_200];
/// At most this fraction of the tier resident after eviction, and a measurement counts as cold.
const COLD_RESIDENT_MAX: f64 = 0.05;

/// What the command line and `--quick` decide.
struct Settings {
    /// Parent directories: one scratch directory is made in each, one per disk.
    dirs: Vec<PathBuf>,
    csv: Option<PathBuf>,
    drop_caches: bool,
    /// Target duration of a paced configuration.
    seconds: f64,
    /// Frames stored per stream.
    frames: usize,
    /// Fewest frames a paced stream reads in a configuration, whatever its rate.
    frames_min: usize,
    streams: usize,
    grid_k: Vec<usize>,
    grid_utilisation: Vec<f64>,
    fit_sizes: Vec<usize>,
    /// Bytes of frames per size in the fit, and the bounds on their number.
    fit_bytes: usize,
    fit_frames: (usize, usize),
    /// Frames and rounds of the maximal-throughput measurement.
    max_frames: usize,
    max_rounds: usize,
}

impl Settings {
    fn from_args() -> BoxResult<Settings> {
        let (options, values) = Options::with_values(&["--dirs", "--csv", "--evict", "--seconds", "--frames"]);
        let quick = options.quick;
        let mut settings = Settings {
            dirs: vec![std::env::temp_dir()],
            csv: None,
            drop_caches: true,
            seconds: if quick { 0.25 } else { 2.0 },
            frames: options.scale(1_500, 100),
            frames_min: options.scale(60, 20),
            streams: options.scale(4, 3),
            grid_k: if quick { vec![1, 2] } else { vec![1, 2, 4] },
            grid_utilisation: if quick { vec![0.3, 0.9] } else { vec![0.1, 0.3, 0.5, 0.7, 0.9, 1.2] },
            fit_sizes: if quick { vec![51_200, 204_800, 819_200] } else { FIT_SIZES.to_vec() },
            fit_bytes: options.scale(48 << 20, 8 << 20),
            fit_frames: if quick { (8, 64) } else { (32, 512) },
            max_frames: options.scale(1_500, 60),
            max_rounds: options.scale(3, 1),
        };
        for (name, value) in values {
            match name.as_str() {
                "--dirs" => settings.dirs = value.split(',').filter(|d| !d.is_empty()).map(PathBuf::from).collect(),
                "--csv" => settings.csv = Some(PathBuf::from(value)),
                "--evict" => {
                    settings.drop_caches = match value.as_str() {
                        "drop_caches" => true,
                        "fadvise" => false,
                        other => return Err(format!("--evict {other:?}: give drop_caches or fadvise").into()),
                    }
                }
                "--seconds" => settings.seconds = value.parse().map_err(|e| format!("--seconds {value:?}: {e}"))?,
                "--frames" => settings.frames = value.parse().map_err(|e| format!("--frames {value:?}: {e}"))?,
                _ => unreachable!("only declared options are returned"),
            }
        }
        if settings.dirs.is_empty() || !(0.01..=60.0).contains(&settings.seconds) || settings.frames < 2 {
            return Err("--dirs needs a directory, --seconds 0.01..=60, --frames 2 or more".into());
        }
        settings.max_frames = settings.max_frames.min(settings.frames - MEMORY_ITEMS);
        Ok(settings)
    }
}

/// Scratch directories, removed (with every extent in them) when dropped.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
/// The whole run: the runtime, its stored streams and what is being written out.
struct Server {
    runtime: Runtime,
    /// Virtual time 0 for the whole run: ts_min stays 0, so no frame is ever reclaimed.
    _producer: Task,
    tier_dirs: Vec<PathBuf>,
    drop_caches: bool,
    streams: Vec<Stream>,
    csv: Option<BufWriter<File>>,
}

fn main() -> BoxResult<()> {
    let settings = Settings::from_args()?;
    let pid = std::process::id();
    let scratch = Scratch(settings.dirs.iter().map(|d| d.join(format!("stampede-stream-server-{pid}"))).collect());
    for dir in &scratch.0 {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let tier =
        DiskTier { dirs: scratch.0.clone(), extent_bytes: DiskTier::EXTENT_BYTES_DEFAULT, memory_items: MEMORY_ITEMS };
    let mut server = Server::set_up(&settings, &tier)?;
    if let Some(path) = &settings.csv {
        let mut csv = BufWriter::new(File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?);
        writeln!(csv, "k,fps,size,stream,frame,delay_us,utilisation,case")?;
        server.csv = Some(csv);
    }

    let max_bytes_per_s = server.max_throughput(&settings)?;
    let mut grid = Vec::new();
    for &k in &settings.grid_k {
        for &utilisation in &settings.grid_utilisation {
            let fps = utilisation * max_bytes_per_s / (k * FRAME_BYTES) as f64;
            let plans: Vec<Plan> = (0..k).map(|stream| settings.plan(stream, fps)).collect();
            let case = format!("K={k} F={fps:.1}fps S={FRAME_BYTES}B");
            let figures = server.measure(&case, "grid", &plans, max_bytes_per_s)?;
            grid.push((k, utilisation, fps, figures));
        }
    }
    server.seed_cases(&settings, max_bytes_per_s, &grid)?;
    server.size_fit(&settings)?;
    if let Some(mut csv) = server.csv.take() {
        csv.flush()?;
    }
    drop(server);
    drop(scratch);
    Ok(())
}

impl Settings {
    /// Stream `stream` at `fps` for about `seconds`, within the frames stored.
    fn plan(&self, stream: usize, fps: f64) -> Plan {
        let frames = ((fps * self.seconds).round() as usize).max(self.frames_min).min(self.frames - MEMORY_ITEMS);
        Plan { stream, fps: Some(fps), frames }
    }
}

impl Server {
    /// Creates the runtime and stores every stream and the fit's frames on disk.
    fn set_up(settings: &Settings, tier: &DiskTier) -> BoxResult<Server> {
        let runtime = Runtime::new();
        let producer = runtime.task(0)?;
        let start = Instant::now();
        let mut streams = Vec::new();
        for k in 0..settings.streams {
            streams.push(store(&runtime, &producer, tier, &format!("stream/{k}"), settings.frames, FRAME_BYTES)?);
        }
        for &size in &settings.fit_sizes {
            let frames = (settings.fit_bytes / size).clamp(settings.fit_frames.0, settings.fit_frames.1) + MEMORY_ITEMS;
            streams.push(store(&runtime, &producer, tier, &format!("fit/{size}"), frames, size)?);
        }
        let put_ns = elapsed_ns(start);
        let stats: Vec<_> = streams.iter().filter_map(|s| s.channel.disk_stats()).collect();
        let disk_bytes: usize = stats.iter().map(|s| s.bytes).sum();
        let put_bytes: usize = streams.iter().map(|s| s.sums.len() * s.frame_bytes).sum();
        Line::new(BENCH, "setup: frames put once, written to the disk tier", SUBJECT)
            .field("dirs", tier.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>())
            .field("streams", settings.streams as u64)
            .field("frames_per_stream", settings.frames as u64)
            .field("frame_bytes", FRAME_BYTES as u64)
            .field("fit_channels", settings.fit_sizes.len() as u64)
            .field("items_on_disk", stats.iter().map(|s| s.items as u64).sum::<u64>())
            .field("disk_mb", disk_bytes as f64 / 1e6)
            .field("extents", stats.iter().map(|s| s.extents as u64).sum::<u64>())
            .field("put_s", put_ns as f64 / 1e9)
            .field("put_mb_per_s", mb_per_s(put_bytes as u64, put_ns))
            .emit();
        Ok(Server {
            runtime,
            _producer: producer,
            tier_dirs: tier.dirs.clone(),
            drop_caches: settings.drop_caches,
            streams,
            csv: None,
        })
    }

    /// Drops the tier's pages from this process and the page cache; says how cold it is.
    fn evict(&self) -> BoxResult<Cache> {
        let eviction = page_cache::evict(&self.tier_dirs, self.drop_caches)?;
        let stored: usize = self.streams.iter().filter_map(|s| s.channel.disk_stats()).map(|s| s.bytes).sum();
        let cold = (eviction.resident_bytes as f64) <= COLD_RESIDENT_MAX * stored as f64;
        Ok(Cache { method: eviction.method, resident_bytes: eviction.resident_bytes, cold })
    }

    /// One reader getting cold frames of stream 0 back to back: the best bytes/s of the rounds.
    fn max_throughput(&mut self, settings: &Settings) -> BoxResult<f64> {
        let plan = Plan { stream: 0, fps: None, frames: settings.max_frames };
        let mut rounds = Vec::new();
        for round in 0..settings.max_rounds {
            let cache = self.evict()?;
            let outcomes = self.run(&[plan])?;
            let outcome = &outcomes[0];
            let mb_s = mb_per_s((outcome.delays_ns.len() * FRAME_BYTES) as u64, outcome.span_ns);
            self.write_csv(&outcomes, None, "max")?;
            let line = Line::new(BENCH, "max read throughput: 1 reader, cold, unpaced", SUBJECT)
                .field("round", round as u64)
                .field("frame_bytes", FRAME_BYTES as u64)
                .field("mb_per_s", mb_s);
            let line = Figures::of(&outcomes, FRAME_BYTES).fields(line);
            cache.fields(line).emit();
            rounds.push(mb_s);
        }
        let best = rounds.iter().copied().fold(0.0, f64::max);
        Line::new(BENCH, "max read throughput (reference for utilisation)", SUBJECT)
            .field("mb_per_s", best)
            .field("rounds_mb_per_s", rounds)
            .field("fps_of_400kb", best * 1e6 / FRAME_BYTES as f64)
            .emit();
        Ok(best * 1e6)
    }

    /// Evicts, runs `plans` together and reports them as one configuration.
    fn measure(&mut self, case: &str, kind: &str, plans: &[Plan], max_bytes_per_s: f64) -> BoxResult<Figures> {
        let cache = self.evict()?;
        let outcomes = self.run(plans)?;
        let figures = Figures::of(&outcomes, FRAME_BYTES);
        let offered_bytes_per_s = figures.offered_fps * FRAME_BYTES as f64;
        let utilisation = offered_bytes_per_s / max_bytes_per_s;
        self.write_csv(&outcomes, Some(utilisation), kind)?;
        let fps: Vec<f64> = plans.iter().filter_map(|p| p.fps).map(|f| (f * 1e3).round() / 1e3).collect();
        let line = Line::new(BENCH, case, SUBJECT)
            .field("k", plans.len() as u64)
            .field("fps", if fps.len() == 1 { serde_json::Value::from(fps[0]) } else { serde_json::Value::from(fps) })
            .field("frame_bytes", FRAME_BYTES as u64)
            .field("utilisation", utilisation)
            .field("offered_mb_per_s", offered_bytes_per_s / 1e6);
        let line = figures
            .fields(line)
            .field("achieved_fps", figures.achieved_fps)
            .field("achieved_mb_per_s", figures.achieved_mb_per_s)
            .ratio("offered fps", figures.achieved_fps / figures.offered_fps);
        cache.fields(line).emit();
        if figures.bad_frames > 0 {
            eprintln!("{case}: {} frames read back differ from what was put", figures.bad_frames);
        }
        Ok(figures)
    }

    /// Runs one reader thread per plan, all starting together.
    fn run(&self, plans: &[Plan]) -> BoxResult<Vec<Outcome>> {
        let readers = plans
            .iter()
            .map(|plan| {
                // Virtual time 0: an input attached by a task at virtual time v sees the items from v
                // on, and these frames are the past.
                let task = self.runtime.task(0)?;
                let input = task.attach_input(&self.streams[plan.stream].channel)?;
                Ok((task, input))
            })
            .collect::<stampede::Result<Vec<_>>>()?;
        let barrier = Barrier::new(plans.len());
        thread::scope(|scope| {
            let handles: Vec<_> = readers
                .into_iter()
                .zip(plans)
                .map(|((task, input), &plan)| {
                    let (barrier, sums) = (&barrier, &self.streams[plan.stream].sums);
                    scope.spawn(move || {
                        let outcome = read(&input, sums, plan, barrier);
                        drop((input, task));
                        outcome
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("reader thread panicked")).collect()
        })
    }

    fn write_csv(&mut self, outcomes: &[Outcome], utilisation: Option<f64>, case: &str) -> BoxResult<()> {
        let Some(csv) = self.csv.as_mut() else { return Ok(()) };
        let utilisation = utilisation.map_or(String::new(), |u| format!("{u:.4}"));
        for outcome in outcomes {
            let size = self.streams[outcome.plan.stream].frame_bytes;
            let fps = outcome.plan.fps.unwrap_or(0.0);
            for (frame, delay_ns) in outcome.delays_ns.iter().enumerate() {
                let (k, stream, delay_us) = (outcomes.len(), outcome.plan.stream, *delay_ns as f64 / 1e3);
                writeln!(csv, "{k},{fps:.3},{size},{stream},{frame},{delay_us:.1},{utilisation},{case}")?;
            }
        }
        Ok(())
    }
}
