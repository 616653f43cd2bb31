#!/usr/bin/env python3
"""Draws a server suite's results as a PNG beside its table: for every row of SUITE.json (a
result whose name has no '.' suffix), one bar chart of its value (requests/s) and one of its
ROW.cpu (the server's CPU time per request), one bar per program, weft's in red, in the
table's order (weft, then the peers as SUITE.json lists them). A program without a value gets
a "—" instead of a bar.

    python3 bench/plot.py bench/results/http.json bench/results/http.png

run.py calls it after writing SUITE.md for the suites that want a plot (suite http), with
Debian's /usr/bin/python3 where there is one (python3-matplotlib is installed for it, whatever
python3 comes first on PATH). Exits 3 when matplotlib is missing (run.py then says so and goes
on), 1 on unreadable input, 0 when the file is written (atomically).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MISSING_MATPLOTLIB = 3


def values(result: dict, names: list[str]) -> list[float | None]:
    found = dict(result["peers"])
    weft = result["weft"]
    if isinstance(weft, dict):  # a weft program with variants: one value per column
        found.update(weft)
    else:
        found["weft"] = weft
    return [found.get(name) for name in names]


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: plot.py SUITE.json SUITE.png", file=sys.stderr)
        return 1
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display: draw into the file
        import matplotlib.pyplot as pyplot
    except ImportError:
        return MISSING_MATPLOTLIB
    try:
        document = json.loads(source.read_text())
        results = document["results"]
        suite = document["suite"]
    except (OSError, ValueError, KeyError) as error:
        print(f"plot.py: cannot read {source}: {error}", file=sys.stderr)
        return 1
    names: list[str] = []
    for result in results:
        weft = result["weft"]
        columns = list(weft) if isinstance(weft, dict) else ["weft"]
        for name in columns + list(result["peers"]):
            if name not in names:
                names.append(name)
    by_name = {result["name"]: result for result in results}
    rows = [result for result in results if "." not in result["name"]]
    if not rows:
        print(f"plot.py: no rows in {source}", file=sys.stderr)
        return 1
    figure, axes = pyplot.subplots(2, len(rows), figsize=(4.2 * len(rows), 7.5), squeeze=False)
    colours = ["#d62728" if name.startswith("weft") else "#1f77b4" for name in names]
    for column, row in enumerate(rows):
        cpu = by_name.get(row["name"] + ".cpu")
        charts = [(row["name"], row["unit"] + " (higher is better)", values(row, names))]
        if cpu is not None:
            charts.append((row["name"] + ": server CPU", cpu["unit"] + " (lower is better)",
                           values(cpu, names)))
        for line, (title, label, heights) in enumerate(charts):
            axis = axes[line][column]
            axis.bar(names, [height or 0.0 for height in heights], color=colours)
            for index, height in enumerate(heights):
                if height is None:
                    axis.text(index, 0, "—", ha="center", va="bottom")
            axis.set_title(title, fontsize=10)
            axis.set_ylabel(label, fontsize=8)
            axis.tick_params(axis="x", labelrotation=45, labelsize=8)
            axis.tick_params(axis="y", labelsize=8)
        if cpu is None:
            axes[1][column].set_visible(False)
    figure.suptitle(f"Suite {suite}: requests/s and the server's CPU time per request "
                    "(medians; — means no value)", fontsize=11)
    figure.tight_layout()
    temporary = target.with_name(target.name + ".tmp")
    figure.savefig(temporary, dpi=90, format="png")
    pyplot.close(figure)
    temporary.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
