"""Per-round ratios for the alternate.py scripts (bench/http/alternate.py, bench/net/alternate.py).

A shared machine's speed drifts between rounds (a VM's phases: the same server measures 30%
apart a minute later), and the medians of each server's own rounds mix that drift in. The ratio
of two servers' figures within one round compares two runs seconds apart; its median over the
rounds is the steadier comparison.
"""

from __future__ import annotations

import statistics


def print_ratios(totals: dict[str, list[float]]) -> None:
    """totals: per server (in the order given), its total per round, in round order. Prints the
    median of every other server's total divided by the first's in the same round."""
    names = list(totals)
    if len(names) < 2:
        return
    first = names[0]
    print(f"\nper round, each total / {first}'s (the median; every round's)")
    for name in names[1:]:
        ratios = [b / a for a, b in zip(totals[first], totals[name]) if a > 0]
        if ratios:
            every = " ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"{name} / {first}: {statistics.median(ratios):.2f}x [{every}]")
