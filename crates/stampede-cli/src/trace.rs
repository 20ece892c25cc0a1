//! `stampede trace export <dir> -o trace.json` and `stampede trace report <dir>`: the event logs
//! of a directory (`STAMPEDE_TRACE=<dir>`, one `.stlog` file per process) merged on one clock
//! (`stampede-trace`), as a Perfetto / Chrome trace or as a table of where each thread's time
//! went (`docs/TRACING.md`).

use std::path::{Path, PathBuf};

use stampede_trace::breakdown::Breakdown;
use stampede_trace::merge::Timeline;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Every log of `dir`, read and merged.
fn timeline(dir: &Path) -> BoxResult<Timeline> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "stlog"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(
            format!("{} holds no .stlog file: run the application with STAMPEDE_TRACE={0}", dir.display()).into()
        );
    }
    let mut logs = Vec::with_capacity(paths.len());
    for path in &paths {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        logs.push(stampede_trace::file::read(&bytes).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    let unreconciled = stampede_trace::merge::reconcile(&mut logs);
    for host in &unreconciled.hosts {
        eprintln!(
            "note: no clock exchange links host {host} to host {} (a traced client exchanges with its node); \
             {host}'s times are taken as {}'s",
            unreconciled.reference, unreconciled.reference
        );
    }
    Ok(Timeline::merge(logs))
}

/// `stampede trace export`: writes the trace JSON to `output`.
pub fn export(dir: &Path, output: &Path) -> BoxResult<()> {
    let timeline = timeline(dir)?;
    let trace = stampede_trace::perfetto::export(&timeline);
    std::fs::write(output, serde_json::to_vec(&trace)?).map_err(|e| format!("{}: {e}", output.display()))?;
    let events = trace["traceEvents"].as_array().map_or(0, Vec::len);
    println!(
        "{}: {events} trace events from {} process(es); open it in https://ui.perfetto.dev",
        output.display(),
        timeline.processes.len()
    );
    Ok(())
}

/// `stampede trace report`: one row per thread that logged over some time, its wall time and the
/// share of each part; and the same as a chart, `chart` (a PNG drawn by matplotlib), unless `None`.
pub fn report(dir: &Path, chart: Option<&Path>) -> BoxResult<()> {
    let timeline = timeline(dir)?;
    if let Some(chart) = chart {
        // A chart that cannot be written fails the command before the table, with the reason.
        std::fs::File::create(chart).map_err(|e| format!("the chart {}: {e}", chart.display()))?;
    }
    println!(
        "{:<40} {:>10} {:>7} {:>8} {:>8} {:>6} {:>6} {:>6} {:>9}",
        "process / thread", "wall ms", "app %", "block %", "runtime%", "alloc", "lock", "gc", "message %"
    );
    let mut rows = Vec::new();
    for (p, process) in timeline.processes.iter().enumerate() {
        for (th, thread) in process.threads.iter().enumerate() {
            let records: Vec<_> = timeline.thread_events(p, th).map(|e| e.record).collect();
            let b = Breakdown::of_thread(&records);
            if b.wall == 0 {
                continue; // a thread that logged one moment: no time to split
            }
            let share = |part: u64| if b.wall == 0 { 0.0 } else { 100.0 * part as f64 / b.wall as f64 };
            let label = format!("{}[{}] / {}", process.name, process.pid, thread.name);
            println!(
                "{:<40} {:>10.1} {:>7.1} {:>8.1} {:>8.1} {:>6.1} {:>6.1} {:>6.1} {:>9.1}",
                label,
                b.wall as f64 / 1e6,
                share(b.application),
                share(b.blocking),
                share(b.runtime),
                share(b.allocation),
                share(b.locking),
                share(b.gc),
                share(b.messaging)
            );
            rows.push(serde_json::json!({
                "label": label, "wall_ns": b.wall, "wall_ms": b.wall as f64 / 1e6, "application": b.application,
                "blocking": b.blocking, "runtime": b.runtime, "allocation": b.allocation, "locking": b.locking,
                "gc": b.gc, "messaging": b.messaging,
            }));
        }
    }
    if let Some(chart) = chart {
        let run = dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        let title = format!("Where the time goes: {}", run.unwrap_or_else(|| dir.display().to_string()));
        draw(&serde_json::json!({"title": title, "rows": rows}), chart);
    }
    Ok(())
}

/// The chart's script, run by `$STAMPEDE_PYTHON` (default: the repository's `.venv` when run from
/// its root, where `./scripts/test.sh` installs matplotlib, else `python3`).
const CHART_SCRIPT: &str = include_str!("trace_chart.py");

/// Draws the chart of `report` into `chart`; says why not if it cannot (the table stands).
fn draw(report: &serde_json::Value, chart: &Path) {
    match run_chart_script(report, chart) {
        Ok(()) => println!("chart: {}", chart.display()),
        Err(why) => {
            // The empty file made to check the path is not left behind as a chart.
            let _ = std::fs::remove_file(chart);
            eprintln!("chart: not drawn: {why}");
        }
    }
}

/// Runs the chart's script on `report`; why it drew nothing, if it did not.
fn run_chart_script(report: &serde_json::Value, chart: &Path) -> Result<(), String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let venv = Path::new(".venv/bin/python");
    let python = std::env::var("STAMPEDE_PYTHON").unwrap_or_else(|_| {
        if venv.exists() {
            venv.display().to_string()
        } else {
            "python3".to_owned()
        }
    });
    let mut child = Command::new(&python)
        .arg("-c")
        .arg(CHART_SCRIPT)
        .arg(chart)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {python} ({e}); set STAMPEDE_PYTHON to a Python with matplotlib"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(report.to_string().as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    match out.status.code() {
        _ if out.status.success() => Ok(()),
        Some(3) => Err(format!(
            "{python} has no matplotlib (pip install matplotlib, or set STAMPEDE_PYTHON to a Python that has it)"
        )),
        _ => Err(format!("{python} failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
    }
}
