"""`stampede trace report`'s chart: where each thread's time went, as stacked bars of shares of
its wall time (the third seed's Figures 7-8). Reads the rows as JSON on standard input and
writes the PNG named by its one argument. Run by the command line with matplotlib's Agg backend;
exits 3 when matplotlib is missing, so that the caller can say what to install."""

import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(3)

PARTS = [
    ("application", "application", "#4c72b0"),
    ("blocking", "blocking", "#dd8452"),
    ("runtime", "runtime", "#55a868"),
    ("allocation", "allocation", "#8172b3"),
    ("locking", "locking", "#c44e52"),
    ("gc", "GC", "#937860"),
    ("messaging", "messaging", "#da8bc3"),
]

report = json.load(sys.stdin)
rows = report["rows"]
labels = [f"{row['label']}  ({row['wall_ms']:.0f} ms)" for row in rows]
fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * len(rows)))
left = [0.0] * len(rows)
for key, name, colour in PARTS:
    shares = [
        100.0 * row[key] / row["wall_ns"] if row["wall_ns"] else 0.0 for row in rows
    ]
    # Positions, not labels: two threads of one name (a node's workers) keep a bar each.
    ax.barh(range(len(rows)), shares, left=left, color=colour, label=name)
    left = [a + b for a, b in zip(left, shares)]
ax.set_yticks(range(len(rows)), labels)
ax.invert_yaxis()
ax.set_xlim(0, 100)
ax.set_xlabel("share of the thread's wall time (%)")
ax.set_title(report["title"])
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
fig.savefig(sys.argv[1], dpi=110, bbox_inches="tight")
