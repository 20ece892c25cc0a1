//! The Python row of `remote`: `python/bench/bench_remote.py` (two Python processes exchanging
//! through the node with `stampede.connect`, beside `multiprocessing.Queue`) run by `remote`
//! itself against the same node, so its lines come from the same run. Its JSON lines are printed
//! as they come; anything else it prints goes to stderr.
//!
//! The interpreter is `$STAMPEDE_PYTHON`, else the workspace's `.venv/bin/python` (made by
//! `./scripts/test.sh`, or `. scripts/python-env.sh && python_env`); without one, or when it
//! cannot import `stampede`, the row is skipped, and a line says so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Spawned;
use crate::report::Line;

use crate::BoxResult;

/// Longest wait for the script's next line: one payload size of both its rows, with room.
const LINE_TIMEOUT: Duration = Duration::from_secs(180);

/// The workspace's root (two levels above this crate).
fn workspace() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The script, in this workspace.
fn script() -> PathBuf {
    workspace().join("python/bench/bench_remote.py")
}

/// The interpreter to run the script with, if there is one.
fn interpreter() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("STAMPEDE_PYTHON") {
        return Some(PathBuf::from(path));
    }
    let venv = workspace().join(".venv/bin/python");
    venv.exists().then_some(venv)
}

/// Runs the script against the node at `endpoint` (`--quick` when `quick`), printing its JSON
/// lines; prints a line saying the row is skipped (`bench`, `subject`) when there is no Python
/// with the package. An error if the script fails or goes silent for `LINE_TIMEOUT` (3 min).
pub fn run(bench: &str, subject: &str, endpoint: &str, quick: bool) -> BoxResult<()> {
    let skipped = |reason: &str| {
        Line::new(bench, "all sizes", subject)
            .field("skipped", true)
            .field("reason", reason)
            .field("install", "./scripts/test.sh, or: . scripts/python-env.sh && python_env")
            .emit();
    };
    let Some(python) = interpreter() else {
        skipped("no .venv/bin/python (and no $STAMPEDE_PYTHON)");
        return Ok(());
    };
    let mut import = Command::new(&python);
    import.args(["-c", "import stampede"]);
    if Spawned::spawn("python -c 'import stampede'", import)?.finish().is_err() {
        skipped(&format!("{} cannot import stampede", python.display()));
        return Ok(());
    }
    let mut command = Command::new(python);
    command.arg(script()).args(["--connect", endpoint]);
    if quick {
        command.arg("--quick");
    }
    let mut script = Spawned::spawn("python/bench/bench_remote.py", command)?;
    while let Some(line) = script.next_line(LINE_TIMEOUT)? {
        if line.starts_with('{') {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    }
    script.finish()
}
