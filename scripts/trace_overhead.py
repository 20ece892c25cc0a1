"""What tracing costs whole pipelines (issue 13, docs/BENCHMARKS.md): the digitizer/tracker
pipeline unpaced (wall time for a fixed number of frames) and the Smart Kiosk at a fixed rate (CPU
time per frame the digitizer put), each run alternately with STAMPEDE_TRACE unset and set, in the
same session. Prints one JSON line per run and one per pipeline with the median ratio.

    python3 scripts/trace_overhead.py [--runs 7] [--frames 50000] [--kiosk-seconds 8]

Needs the release example (`cargo build --release -p stampede --example digitizer_tracker`) and
the .venv with the Python package (`./scripts/test.sh` or `. scripts/python-env.sh; python_env`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "target" / "release" / "examples" / "digitizer_tracker"
PYTHON = ROOT / ".venv" / "bin" / "python"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], traced: bool) -> tuple[str, float, float]:
    """Runs `command` (traced into a fresh directory or not): its stdout, wall and CPU seconds."""
    with tempfile.TemporaryDirectory(prefix="stampede-trace-") as logs:
        env = dict(os.environ)
        env.pop("STAMPEDE_TRACE", None)
        if traced:
            env["STAMPEDE_TRACE"] = logs
        cpu, start = children_cpu_s(), time.perf_counter()
        out = subprocess.run(
            command, env=env, capture_output=True, text=True, check=True, timeout=600
        ).stdout
        return out, time.perf_counter() - start, children_cpu_s() - cpu


def pipeline(name: str, runs: int, measure) -> None:
    costs: dict[bool, list[float]] = {False: [], True: []}
    for i in range(runs):
        for traced in (False, True):
            cost, details = measure(traced)
            costs[traced].append(cost)
            print(
                json.dumps(
                    {
                        "pipeline": name,
                        "run": i,
                        "traced": traced,
                        "cost": round(cost, 6),
                        **details,
                    }
                )
            )
    off, on = statistics.median(costs[False]), statistics.median(costs[True])
    print(
        json.dumps(
            {
                "pipeline": name,
                "median_off": off,
                "median_on": on,
                "slowdown": round(on / off - 1, 4),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--frames", type=int, default=50000)
    parser.add_argument("--kiosk-seconds", type=float, default=8.0)
    args = parser.parse_args()

    def digitizer(traced: bool) -> tuple[float, dict]:
        command = [
            str(EXAMPLE),
            "--frames",
            str(args.frames),
            "--fps",
            "1000000",
            "--tracker-ms",
            "0",
        ]
        out, wall, cpu = run(command, traced)
        tracked = int(
            next(
                line.split()[-1]
                for line in out.splitlines()
                if line.startswith("frames tracked")
            )
        )
        return wall, {
            "unit": "wall s",
            "frames": args.frames,
            "tracked": tracked,
            "cpu_s": round(cpu, 3),
        }

    def kiosk(traced: bool) -> tuple[float, dict]:
        command = [str(PYTHON), "-m", "stampede.apps.kiosk", "--headless", "--quiet"]
        command += ["--seconds", str(args.kiosk_seconds), "--fps", "30"]
        out, _, cpu = run(command, traced)
        result = json.loads(out.strip().splitlines()[-1])
        frames = result["frames"]
        return cpu / frames * 1e3, {
            "unit": "CPU ms per frame",
            "frames": frames,
            "fps": result["fps"],
        }

    pipeline("digitizer_tracker (unpaced, wall time)", args.runs, digitizer)
    pipeline("kiosk (30 fps, CPU time per frame)", args.runs, kiosk)


if __name__ == "__main__":
    main()
