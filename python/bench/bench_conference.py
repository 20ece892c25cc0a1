"""The videoconference as D-Stampede's application benchmark (its Figures 14-15 and Table 1).

For each configuration, a conference of real processes on this machine
(:class:`stampede.apps.conference.Conference`): K participant processes (a paced synthetic camera
putting frames of the given size, and a display reading the composite) and a mixer, either serving
the one node itself (``one``: D-Stampede's mixer lived in its server) or a client of the first of
three nodes sharing ts_min, with the participants spread over the three (``mesh``). It runs
``--warmup`` + ``--seconds``, then every process is told to end at once.

Figures, over the steady seconds (after the warm-up, without the last partial second):

- ``display_fps``: composites per second that show the display's own frame (the exact join got it
  in time), for the slowest participant, as D-Stampede reports the slowest display; and the mean;
- ``displayed_fps``: composites per second each display got at all (the slowest);
- ``MBps``: delivered bandwidth, the bytes of composites all displays got per second (K^2 S F, as
  D-Stampede's Table 1), and its ratio to D-Stampede's figure where it has one;
- ``skipped_per_s``: frames the mixer skipped (not there by their deadline) per second, summed
  over participants, over the steady seconds.

Prints one JSON object per line (docs/BENCHMARKS.md, "How every benchmark measures and reports"),
and with ``--plot DIR`` draws PNGs beside D-Stampede's figures. Nothing here asserts a speed.

    python bench/bench_conference.py [--quick] [--fps 30] [--ks 2,3,...] [--sizes 74,...]
        [--nodes one,mesh] [--mixers single,threads] [--plot docs/figures]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from build_check import warn_if_not_release

from stampede.apps.conference import SIZES_KB, Conference

#: D-Stampede's Table 1: delivered bandwidth (MB/s) by client image size (KB) and clients (2..7),
#: for its multi-threaded mixer; None where the display fell below 10 fps.
D_STAMPEDE_MBPS: dict[int, list[int | None]] = {
    74: [11, 18, 28, 28, 39, 42],
    89: [11, 21, 26, 28, 40, 46],
    125: [13, 20, 29, 36, 48, None],
    145: [14, 21, 29, 35, 50, None],
    190: [13, 25, 30, None, None, None],
}


def d_stampede_fps(size_kb: int, k: int) -> float | None:
    """D-Stampede's display rate implied by Table 1 (bandwidth / (K^2 S)), as its Figure 15 plots."""
    row = D_STAMPEDE_MBPS.get(size_kb)
    if row is None or not 2 <= k <= 7 or row[k - 2] is None:
        return None
    mbps = row[k - 2]
    assert mbps is not None
    return round(mbps * 1e6 / (k * k * size_kb * 1e3), 1)


def steady(per_second: list[int], warmup: int) -> float:
    window = per_second[warmup:-1]
    return statistics.fmean(window) if window else 0.0


def measure(nodes: str, mixer: str, k: int, size_kb: int, fps: float, warmup: int, seconds: int) -> dict:
    with Conference(fps, size_kb, mixer == "threads", nodes == "mesh") as c:
        for n in range(k):
            c.join(f"p{n}")
        time.sleep(warmup + seconds + 1.5)
        participants = c.leave_all()  # first: the mixer may be serving their node
        summary = c.mixer_summary()
    own = [steady(p["own_per_s"], warmup) for p in participants]
    displayed = [steady(p["displayed_per_s"], warmup) for p in participants]
    frame = participants[0]["frame_bytes"]
    # Each display gets composites of K tiles; the steady bandwidth is what all displays got.
    mbps = sum(d * k * frame for d in displayed) / 1e6
    theirs = D_STAMPEDE_MBPS.get(size_kb, [None] * 6)[k - 2] if 2 <= k <= 7 else None
    errors = [p["error"] for p in participants if p["error"]] + (
        [summary["error"]] if summary["error"] else []
    )
    return {
        "bench": "conference",
        "case": {"nodes": nodes, "mixer": mixer, "k": k, "size_kb": size_kb, "fps": fps},
        "frame_bytes": frame,
        "display_fps": round(min(own), 2),
        "display_fps_mean": round(statistics.fmean(own), 2),
        "displayed_fps": round(min(displayed), 2),
        "MBps": round(mbps, 1),
        "latency_p50_ms": max(p["latency_ms"]["p50"] or 0.0 for p in participants),
        # The mixer started a second before the participants and saw them leave in its last two.
        "skipped_per_s": round(statistics.fmean(summary["skipped_per_s"][warmup + 1 : -2] or [0]), 2),
        "mismatched": sum(p["mismatched"] + p["wrong"] for p in participants),
        "d_stampede_fps": d_stampede_fps(size_kb, k),
        "d_stampede_MBps": theirs,
        "ratio_vs": "D-Stampede Table 1 (delivered MB/s)" if theirs else None,
        "ratio": round(mbps / theirs, 2) if theirs else None,
        "errors": errors,
    }


def plot(results: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = []
    fps = results[0]["case"]["fps"]
    groups = sorted({(r["case"]["nodes"], r["case"]["mixer"]) for r in results}, reverse=True)
    # Figure 15's counterpart: display fps against participants, one line per image size.
    fig, axes = plt.subplots(
        1, len(groups) + 1, figsize=(5 * (len(groups) + 1), 4), sharey=True, squeeze=False
    )
    for ax, (nodes, mixer) in zip(axes[0], groups):
        for size in sorted({r["case"]["size_kb"] for r in results}):
            rows = sorted(
                (r["case"]["k"], r["display_fps"])
                for r in results
                if r["case"]["nodes"] == nodes
                and r["case"]["mixer"] == mixer
                and r["case"]["size_kb"] == size
            )
            ax.plot([k for k, _ in rows], [f for _, f in rows], marker="o", label=f"{size} KB")
        ax.set_title(f"Stampede: {nodes} node{'s' if nodes == 'mesh' else ''}, {mixer} mixer")
        ax.set_xlabel("participants (K)")
        ax.axhline(fps, color="grey", linewidth=0.5)
    ax = axes[0][-1]
    for size in SIZES_KB:
        rows = [(k, d_stampede_fps(size, k)) for k in range(2, 8)]
        rows = [(k, f) for k, f in rows if f is not None]
        ax.plot([k for k, _ in rows], [f for _, f in rows], marker="s", linestyle="--", label=f"{size} KB")
    ax.set_title("D-Stampede (Figure 15, from Table 1)")
    ax.set_xlabel("participants (K)")
    axes[0][0].set_ylabel("sustained display fps (slowest participant)")
    axes[0][0].legend()
    fig.tight_layout()
    path = out / f"conference-fps-{fps:g}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    drawn.append(path)
    # Table 1's counterpart: delivered bandwidth against participants.
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (nodes, mixer), style in zip(groups, ("-", "-.", ":", "-")):
        for size in (min(SIZES_KB), max(SIZES_KB)):
            rows = sorted(
                (r["case"]["k"], r["MBps"])
                for r in results
                if (r["case"]["nodes"], r["case"]["mixer"], r["case"]["size_kb"]) == (nodes, mixer, size)
            )
            if rows:
                label = f"Stampede {nodes}/{mixer}, {size} KB"
                ax.plot([k for k, _ in rows], [m for _, m in rows], linestyle=style, marker="o", label=label)
    for size in (min(SIZES_KB), max(SIZES_KB)):
        theirs = [(k, v) for k, v in zip(range(2, 8), D_STAMPEDE_MBPS[size]) if v is not None]
        ax.plot(
            [k for k, _ in theirs], [v for _, v in theirs], "k--", marker="s", label=f"D-Stampede, {size} KB"
        )
    ax.set_xlabel("participants (K)")
    ax.set_ylabel("delivered bandwidth (MB/s)")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / f"conference-bandwidth-{fps:g}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    drawn.append(path)
    return drawn


def main() -> None:
    warn_if_not_release()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="K=2 and 3 at 74 KB, one node, 2 s (a smoke run)"
    )
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--ks", default="2,3,4,5,6,7,8")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES_KB)))
    parser.add_argument("--nodes", default="one,mesh")
    parser.add_argument("--mixers", default="single,threads")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--plot", metavar="DIR", help="draw the PNGs into DIR")
    parser.add_argument(
        "--from",
        dest="saved",
        nargs="+",
        metavar="FILE",
        help="plot the result lines of earlier runs; run nothing",
    )
    args = parser.parse_args()
    if args.saved:
        lines = [json.loads(line) for f in args.saved for line in Path(f).read_text().splitlines()]
        for path in plot([r for r in lines if "case" in r], Path(args.plot or ".")):
            print(f"drew {path}", flush=True)
        return
    if args.quick:
        args.ks, args.sizes, args.nodes, args.mixers, args.seconds = "2,3", "74", "one", "threads", 2
    print(
        json.dumps(
            {"bench": "conference", "machine": platform.machine(), "cpus": os.cpu_count(), "fps": args.fps}
        ),
        flush=True,
    )
    results = []
    for nodes in args.nodes.split(","):
        for mixer in args.mixers.split(","):
            for size in map(int, args.sizes.split(",")):
                for k in map(int, args.ks.split(",")):
                    result = measure(nodes, mixer, k, size, args.fps, args.warmup, args.seconds)
                    results.append(result)
                    print(json.dumps(result), flush=True)
    if args.plot:
        for path in plot(results, Path(args.plot)):
            print(f"drew {path}", flush=True)


if __name__ == "__main__":
    main()
