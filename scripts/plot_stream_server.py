"""Plots the stream server benchmark (GigaView §5 on Stampede) from its per-frame CSV.

Usage:
    cargo run --release -p stampede-bench --bin stream_server -- --csv target/stream_server.csv
    .venv/bin/python scripts/plot_stream_server.py target/stream_server.csv [--out docs/figures]

Reads one row per frame (``k,fps,size,stream,frame,delay_us,utilisation,case``) and writes:

- ``stream_server_pdf.png``: frame delay distribution (fraction of frames per log-spaced bin),
  one panel per number of streams K, one curve per utilisation (the seed's Figure 4);
- ``stream_server_cdf.png``: the same as cumulative distributions (the seed's Figure 5);
- ``stream_server_load.png``: p50 / p99 / max delay against utilisation, per K;
- ``stream_server_fit.png``: mean delay of a cold unpaced frame read against frame size, the
  least-squares line Delay = Latency + Size/Throughput, and the seed's component models.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

# Agg: PNGs without a display. The figures are made without pyplot, so no global state either.
matplotlib.use("Agg")

# The seed's models (GigaView, §3.1–3.2): Delay = Latency + Size/Throughput per component.
SEED_DISK = (10_000.0, 4.0)  # latency µs, throughput MB/s: the disks, rated
SEED_LINK = (5.0, 8.0)  # T9000 transputer links, rated

Rows = list[dict[str, str]]


def load(path: Path) -> Rows:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def delays_ms(rows: Rows) -> list[float]:
    return sorted(max(float(r["delay_us"]), 1.0) / 1e3 for r in rows)


def paced_configs(rows: Rows) -> dict[str, dict[float, list[float]]]:
    """Delays (ms) per panel (``K=1`` ... and the seed's loads) and per utilisation."""
    panels: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["case"] == "grid":
            panel = f"K={r['k']} stream{'s' if r['k'] != '1' else ''}"
        elif r["case"] in ("seed_load", "seed_mixed"):
            panel = "seed loads"
        else:
            continue
        panels[panel][float(r["utilisation"])].append(
            max(float(r["delay_us"]), 1.0) / 1e3
        )
    return {p: {u: sorted(d) for u, d in sorted(c.items())} for p, c in panels.items()}


def panel_order(panels: dict[str, dict[float, list[float]]]) -> list[str]:
    grid = sorted(
        (p for p in panels if p.startswith("K=")), key=lambda p: int(p[2:].split()[0])
    )
    return grid + [p for p in panels if not p.startswith("K=")]


def log_bins(lo: float, hi: float, per_decade: int = 12) -> list[float]:
    lo, hi = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    n = (hi - lo) * per_decade
    return [10 ** (lo + i / per_decade) for i in range(n + 1)]


def label(panel: str, utilisation: float) -> str:
    if panel == "seed loads":
        return f"{utilisation:.0%}" + (
            " (32 fps)" if utilisation < 0.05 else " (3 streams, 8:7:6)"
        )
    return f"{utilisation:.0%}"


def distribution_figure(
    panels: dict[str, dict[float, list[float]]], cumulative: bool, out: Path
) -> None:
    order = panel_order(panels)
    all_delays = [d for c in panels.values() for ds in c.values() for d in ds]
    bins = log_bins(min(all_delays), max(all_delays))
    fig = Figure(figsize=(4.2 * len(order), 3.8))
    axes = fig.subplots(1, len(order), sharey=True, squeeze=False)
    cmap = matplotlib.colormaps["viridis"]
    for ax, panel in zip(axes[0], order):
        configs = panels[panel]
        top = max(max(configs), 1.2)
        for utilisation, ds in configs.items():
            colour = cmap(min(utilisation / top, 1.0))
            if cumulative:
                ys = [(i + 1) / len(ds) for i in range(len(ds))]
                ax.step(
                    ds, ys, where="post", color=colour, label=label(panel, utilisation)
                )
            else:
                weights = [1.0 / len(ds)] * len(ds)
                ax.hist(
                    ds,
                    bins=bins,
                    weights=weights,
                    histtype="step",
                    color=colour,
                    label=label(panel, utilisation),
                )
        ax.set_xscale("log")
        ax.set_title(panel)
        ax.set_xlabel("frame delay (ms, log)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(title="utilisation", fontsize=7, title_fontsize=7)
    axes[0][0].set_ylabel(
        "cumulative fraction of frames" if cumulative else "fraction of frames per bin"
    )
    kind = "cdf" if cumulative else "pdf"
    fig.suptitle(
        f"Stream server on the disk tier: frame delay {kind} against utilisation (400 KB frames)"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def percentile(sorted_values: list[float], p: float) -> float:
    rank = math.ceil(p / 100 * len(sorted_values))
    return sorted_values[min(max(rank, 1), len(sorted_values)) - 1]


def load_figure(panels: dict[str, dict[float, list[float]]], out: Path) -> None:
    fig = Figure(figsize=(6.4, 5.2))
    ax = fig.subplots()
    for panel in (p for p in panel_order(panels) if p.startswith("K=")):
        configs = panels[panel]
        us = list(configs)
        line = ax.plot(
            us,
            [percentile(configs[u], 50) for u in us],
            marker="o",
            label=f"{panel}: p50",
        )[0]
        ax.plot(
            us,
            [percentile(configs[u], 99) for u in us],
            marker="s",
            ls="--",
            color=line.get_color(),
            label="p99",
        )
        ax.plot(
            us,
            [configs[u][-1] for u in us],
            marker="^",
            ls=":",
            color=line.get_color(),
            label="max",
        )
    ax.set_yscale("log")
    ax.set_xlabel("utilisation (offered bytes/s / measured max read throughput)")
    ax.set_ylabel("frame delay (ms, log)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    ax.set_title("Frame delay against load")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares y = a + b x: returns (a, b, r2)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    syy = sum((y - my) ** 2 for _, y in points)
    b = sxy / sxx
    a = my - b * mx
    sse = sum((y - a - b * x) ** 2 for x, y in points)
    return a, b, 1 - sse / syy if syy > 0 else 1.0


def fit_figure(rows: Rows, out: Path) -> None:
    by_size: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        if r["case"] == "fit":
            by_size[int(r["size"])].append(float(r["delay_us"]))
    sizes = sorted(by_size)
    means = [(s, sum(by_size[s]) / len(by_size[s])) for s in sizes]
    latency_us, us_per_byte, r2 = fit(means)
    throughput = 1 / us_per_byte  # bytes per µs = MB/s
    # Dense: a straight line is a curve on the log axis, and two points would draw a chord.
    xs = [max(sizes) * 1.05 * i / 200 for i in range(201)]
    kb = [x / 1e3 for x in xs]

    fig = Figure(figsize=(11, 4.2))
    left, right = fig.subplots(1, 2)
    p50 = [percentile(sorted(by_size[s]), 50) for s in sizes]
    p99 = [percentile(sorted(by_size[s]), 99) for s in sizes]
    left.plot(
        [s / 1e3 for s in sizes], [m for _, m in means], "o", label="mean (fitted)"
    )
    left.plot([s / 1e3 for s in sizes], p50, "x", label="p50")
    left.plot(
        kb, [latency_us + x * us_per_byte for x in xs], "-", label="least-squares line"
    )
    left.set_xlabel("frame size (KB)")
    left.set_ylabel("delay of a cold frame read (µs)")
    left.set_title(
        f"Stampede disk tier: {latency_us:.1f} µs + size / {throughput:.0f} MB/s (R² {r2:.3f})",
        fontsize=9,
    )
    left.grid(True, alpha=0.3)
    left.legend(fontsize=8)

    right.plot(
        [s / 1e3 for s in sizes], [m for _, m in means], "o", label="Stampede, mean"
    )
    right.plot([s / 1e3 for s in sizes], p99, "s", mfc="none", label="Stampede, p99")
    right.plot(
        kb, [latency_us + x * us_per_byte for x in xs], "-", label="Stampede fit"
    )
    for name, (lat, mb_s) in (
        ("seed disk, rated: 10 ms + size / 4 MB/s", SEED_DISK),
        ("seed T9000 link: 5 µs + size / 8 MB/s", SEED_LINK),
    ):
        right.plot(kb, [lat + x / mb_s for x in xs], "--", label=name)
    right.set_yscale("log")
    right.set_xlabel("frame size (KB)")
    right.set_ylabel("delay (µs, log)")
    right.set_title("Next to the seed's component models", fontsize=9)
    right.grid(True, which="major", alpha=0.3)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "csv", type=Path, help="per-frame CSV written by stream_server --csv"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("docs/figures"), help="directory for the PNGs"
    )
    args = parser.parse_args()
    rows = load(args.csv)
    args.out.mkdir(parents=True, exist_ok=True)
    panels = paced_configs(rows)
    written = []
    if panels:
        for cumulative, name in (
            (False, "stream_server_pdf.png"),
            (True, "stream_server_cdf.png"),
        ):
            distribution_figure(panels, cumulative, args.out / name)
            written.append(name)
        load_figure(panels, args.out / "stream_server_load.png")
        written.append("stream_server_load.png")
    if (
        sum(1 for r in rows if r["case"] == "fit")
        and len({r["size"] for r in rows if r["case"] == "fit"}) >= 2
    ):
        fit_figure(rows, args.out / "stream_server_fit.png")
        written.append("stream_server_fit.png")
    for name in written:
        print(args.out / name)


if __name__ == "__main__":
    main()
