"""System calls and context switches of a running server, counted by perf over a window: the
`--syscalls` mode of bench/http/alternate.py and bench/net/alternate.py.

CPU time per request says how much a server costs; these counts say where a kernel-bound
server's system time goes: how many calls of each kind it makes per request, how many requests
one epoll_wait brings back (the batch), and how often it sleeps (a context switch per blocking
wait that found nothing ready). Two servers with equal counts spend their system time on the
same work; a difference in user time then is the runtimes' own.

perf counts the tracepoints syscalls:sys_enter_* (every system call as it is entered) and the
software event context-switches of the given processes, all their threads, for the window's
length. It needs perf and tracepoint access (kernel.perf_event_paranoid <= 1 for another user's
process, or root); PerfUnavailable says why when it has neither.
"""

from __future__ import annotations

import shutil
import subprocess


class PerfUnavailable(RuntimeError):
    pass


def count(pids: list[int], seconds: float) -> dict[str, int]:
    """Counts over `seconds` of every system call the processes made (name -> calls, only those
    made at least once) and of their context switches ("context-switches")."""
    if shutil.which("perf") is None:
        raise PerfUnavailable("perf is not installed (Debian's linux-perf package)")
    if not pids:
        raise PerfUnavailable("no process to count")
    command = ["perf", "stat", "-x,", "-e", "syscalls:sys_enter_*", "-e", "context-switches",
               "-p", ",".join(str(pid) for pid in pids), "--", "sleep", str(seconds)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    counts: dict[str, int] = {}
    for line in done.stderr.splitlines():
        # CSV: value, unit, event, run time, percentage, ...; "<not counted>" or
        # "<not supported>" in place of the value when perf could not count the event.
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        event = fields[2]
        name = event.removeprefix("syscalls:sys_enter_")
        if int(fields[0]) > 0 and (name != event or event == "context-switches"):
            counts[name] = int(fields[0])
    if done.returncode != 0 or not counts:
        raise PerfUnavailable("perf stat counted nothing (tracepoints need "
                              "kernel.perf_event_paranoid <= 1 or root):\n"
                              + done.stderr.strip()[-2000:])
    return counts


def describe(counts: dict[str, int], requests: float, unit: str = "request") -> str:
    """One line: each counted call per request (or per `unit`), the most frequent first, then
    requests per epoll_wait (the batch) and context switches per thousand requests."""
    if requests <= 0:
        return f"no {unit}s served in the window"
    parts = []
    for name, value in sorted(counts.items(), key=lambda item: -item[1]):
        if name != "context-switches" and value / requests >= 0.001:
            parts.append(f"{name} {value / requests:.3f}")
    waits = counts.get("epoll_wait", 0) + counts.get("epoll_pwait", 0) + counts.get(
        "epoll_pwait2", 0) + counts.get("io_uring_enter", 0)
    if waits > 0:
        parts.append(f"{unit}s per wait {requests / waits:.1f}")
    parts.append(f"context switches per 1000 {unit}s "
                 f"{counts.get('context-switches', 0) * 1000 / requests:.2f}")
    return ", ".join(parts)
