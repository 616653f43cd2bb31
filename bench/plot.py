#!/usr/bin/env python3
"""Draws a suite's results as one PNG beside its table: one bar chart per row of SUITE.json (every
result: NAME, and NAME.p99, NAME.cpu where the suite reports them), in the table's order, each
with one bar per program that has a value for that row: weft's (or its variants', such as
weft-coroutine and weft-callback) in red first, then the peers in blue, each bar labelled with
its value. The axis names the unit and which way is better (higher when the unit ends in /s,
lower otherwise, as in the tables); a chart whose largest bar is over 30 times its smallest
is drawn on a log scale, and its axis says so. A program listed in a row without a value (null)
gets a "—" where its bar would be.

    python3 bench/plot.py bench/results/io.json bench/results/io.png

run.py calls it after writing SUITE.md for every suite, with Debian's /usr/bin/python3 where
there is one (python3-matplotlib is installed for it, whatever python3 comes first on PATH).
Exits 3 when matplotlib is missing (run.py then says so and goes on), 1 on unreadable input, 0
when the file is written (atomically).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

MISSING_MATPLOTLIB = 3
WEFT_COLOURS = ["#d62728", "#ee6a6b", "#a51c1d", "#f4a3a3"]  # weft and its variants: reds
PEER_COLOUR = "#1f77b4"
COLUMNS = 4


def row_values(result: dict) -> list[tuple[str, float | None]]:
    """(program, value) for the row: weft's columns first, then the peers, as the table has
    them."""
    weft = result["weft"]
    columns = list(weft.items()) if isinstance(weft, dict) else [("weft", weft)]
    return columns + list(result["peers"].items())


def label(value: float) -> str:
    if value >= 10_000_000:
        return f"{value / 1e6:,.0f}M"
    if value >= 1_000_000:
        return f"{value / 1e6:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: plot.py SUITE.json SUITE.png", file=sys.stderr)
        return 1
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display: draw into the file
        import matplotlib.pyplot as pyplot
        import matplotlib.ticker as ticker
    except ImportError:
        return MISSING_MATPLOTLIB
    try:
        document = json.loads(source.read_text())
        results = document["results"]
        suite = document["suite"]
    except (OSError, ValueError, KeyError) as error:
        print(f"plot.py: cannot read {source}: {error}", file=sys.stderr)
        return 1
    if not results:
        print(f"plot.py: no results in {source}", file=sys.stderr)
        return 1
    columns = min(COLUMNS, len(results))
    lines = math.ceil(len(results) / columns)
    figure, axes = pyplot.subplots(lines, columns, figsize=(3.6 * columns, 3.3 * lines),
                                   squeeze=False)
    for index, result in enumerate(results):
        axis = axes[index // columns][index % columns]
        pairs = [(name, value) for name, value in row_values(result)]
        names = [name for name, _ in pairs]
        heights = [value if isinstance(value, (int, float)) else None for _, value in pairs]
        weft_names = [name for name in names if name.startswith("weft")]
        colours = [WEFT_COLOURS[weft_names.index(name) % len(WEFT_COLOURS)]
                   if name in weft_names else PEER_COLOUR for name in names]
        present = [height for height in heights if height is not None]
        top = max(present or [1.0])
        # One program 30 times slower than another would flatten every other bar to nothing:
        # such charts get a log scale (said on the axis), so that each bar stays readable.
        logarithmic = bool(present) and min(present) > 0 and top / min(present) > 30
        bars = axis.bar(range(len(names)), [height or 0.0 for height in heights], color=colours)
        for position, (bar, height) in enumerate(zip(bars, heights)):
            text = "—" if height is None else label(height)
            where = ((height or min(present or [1.0])) * 1.1 if logarithmic else
                     (height or 0.0) + top * 0.01)
            axis.text(position, where, text, ha="center", va="bottom",
                      fontsize=7 if len(names) <= 6 else 6, rotation=0 if len(names) <= 6 else 90)
        if logarithmic:
            axis.set_yscale("log")
            axis.set_ylim(min(present) / 2, top * (4 if len(names) <= 6 else 10))
        else:
            axis.set_ylim(0, top * (1.15 if len(names) <= 6 else 1.3))
        pad = max(0.0, (3 - len(names)) / 2)  # one or two bars do not fill a whole chart
        axis.set_xlim(-0.6 - pad, len(names) - 0.4 + pad)
        axis.set_xticks(range(len(names)))
        axis.set_xticklabels(names, rotation=40, ha="right", fontsize=8)
        better = "higher" if result["unit"].endswith("/s") else "lower"
        axis.set_title(result["name"], fontsize=9)
        scale = ", log scale" if logarithmic else ""
        axis.set_ylabel(f"{result['unit']} ({better} is better{scale})", fontsize=8)
        axis.tick_params(axis="y", labelsize=7)
        axis.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: label(value)
                                                            if value else "0"))
        axis.yaxis.set_minor_formatter(ticker.NullFormatter())
    for index in range(len(results), lines * columns):
        axes[index // columns][index % columns].set_visible(False)
    figure.suptitle(f"Suite {suite}: weft (red) beside its peers (blue), medians of the rounds "
                    "(bench/results/" + f"{suite}.md has the table)", fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    temporary = target.with_name(target.name + ".tmp")
    figure.savefig(temporary, dpi=80, format="png")
    pyplot.close(figure)
    temporary.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
