#!/usr/bin/env python3
"""Alternating rounds of suite http's servers under wrk: the server's CPU per request split
into user and system time, for comparing two builds or a server with its peers on a noisy
machine (suite net's bench/net/alternate.py, for HTTP).

  python3 bench/http/alternate.py [--connections 64] [--pipeline 1] [--rounds 5] [--seconds 5]
      [--path /hello] [--syscalls] SERVER [SERVER ...]

A SERVER is NAME=COMMAND, the command line of a program that serves suite http's contract
(`--port N --mode hello --root bench/http/root` are appended; it prints a line once it listens
and stops at the end of its standard input: every program of suite http, nginx and h2o through
their launchers in bench/peers/http/). Example:

  python3 bench/http/alternate.py --connections 1000 \\
      weft=build/release/bench/bench_http_weft bare=build/release/bench/bench_http_bare \\
      nginx='python3 bench/peers/http/nginx.py --work-dir /tmp/alternate-nginx'

(nginx and h2o's launchers need --work-dir, a directory for their configuration and logs.)

Each round runs every server once, in the given order in even rounds and reversed in odd ones,
each in a session of its own pinned to CPU 0, with wrk -t1 (bench/http/wrk.lua) pinned to CPU 1:
a 1 s warm-up run, then a measured run of SECONDS, with the user and system clock ticks of every
process of the server's session read from /proc just before and just after it (as
bench/http/http_load.py reads them for run.py, there as one total), divided by the requests wrk
completed. Prints one line per run and, per server, the medians of requests/s, p99, user,
system and total with every round's total; then, for every server after the first, the median
of its total divided by the first server's in the same round (on a machine whose speed drifts,
the steadier comparison).

--syscalls counts instead of timing: each server runs once, and over SECONDS in the middle of a
wrk run of SECONDS + 2 perf counts the system calls and context switches of every process of
its session (bench/syscall_counts.py); prints each call per request, the requests per
epoll_wait and the context switches per thousand requests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import round_ratios  # noqa: E402  bench/round_ratios.py
import run  # noqa: E402  bench/run.py: free_port, wait_ready (the READY line), Failure
import syscall_counts  # noqa: E402  bench/syscall_counts.py
from http_load import (LoadError, session_pids,  # noqa: E402  (bench/http/http_load.py)
                       session_ticks)

TICKS = os.sysconf("SC_CLK_TCK")


def pinned(command: list[str], cpu: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)] + command
    return command


def start_wrk(port: int, arguments: argparse.Namespace, seconds: int) -> subprocess.Popen:
    env = dict(os.environ, WEFT_WRK_CONNECTIONS=str(arguments.connections),
               WEFT_WRK_DEPTH=str(arguments.pipeline))
    command = pinned(["wrk", "-t1", f"-c{arguments.connections}", f"-d{seconds}s", "--timeout",
                      "10s", "--latency", "-s", str(HERE / "wrk.lua"),
                      f"http://127.0.0.1:{port}{arguments.path}", "--",
                      str(arguments.pipeline)], 1)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


def finish_wrk(load: subprocess.Popen, seconds: int) -> str:
    output, _ = load.communicate(timeout=seconds + 60)
    if load.returncode != 0:
        raise RuntimeError(f"wrk failed:\n{output}")
    errors = re.search(r"Socket errors: .*", output)
    if errors or "Non-2xx" in output:
        raise RuntimeError(f"wrk saw errors:\n{output}")
    return output


def wrk(port: int, arguments: argparse.Namespace, seconds: int) -> str:
    return finish_wrk(start_wrk(port, arguments, seconds), seconds)


def rate_of(output: str) -> float:
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if rate is None:
        raise RuntimeError(f"unreadable wrk output:\n{output}")
    return float(rate.group(1))


@contextlib.contextmanager
def serving(command: list[str]):
    """Starts the server pinned to CPU 0 in a session of its own and yields (its process, its
    port) once it printed READY; closes its standard input (it stops) when the block ends."""
    port = run.free_port()
    errors = tempfile.TemporaryFile()
    server = subprocess.Popen(
        pinned(command + ["--port", str(port), "--mode", "hello", "--root",
                          str(HERE / "root")], 0),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
    try:
        try:
            run.wait_ready(server, port, 10, errors)
        except run.Failure as failure:
            raise RuntimeError(f"{shlex.join(command)}: {failure}") from None
        yield server, port
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()
        errors.close()


def run_once(command: list[str], arguments: argparse.Namespace) -> tuple[float, ...]:
    """requests/s, p99 (us), user and system us per request of one run of the server."""
    with serving(command) as (server, port):
        wrk(port, arguments, 1)
        before = session_ticks(server.pid)
        output = wrk(port, arguments, arguments.seconds)
        after = session_ticks(server.pid)
    total = re.search(r"(\d+) requests in", output)
    rate = rate_of(output)
    p99 = re.search(r"^weft-p99-us (\d+)$", output, re.MULTILINE)
    if not (total and p99) or int(total.group(1)) == 0:
        raise RuntimeError(f"unreadable wrk output:\n{output}")
    per_tick = 1e6 / TICKS / int(total.group(1))
    return (rate, float(p99.group(1)), (after[0] - before[0]) * per_tick,
            (after[1] - before[1]) * per_tick)


def count_syscalls(command: list[str], arguments: argparse.Namespace) -> str:
    """The server's system calls per request over SECONDS in the middle of a wrk run."""
    with serving(command) as (server, port):
        wrk(port, arguments, 1)
        load = start_wrk(port, arguments, arguments.seconds + 2)
        try:
            time.sleep(1)
            counts = syscall_counts.count(session_pids(server.pid),
                                          arguments.seconds)
        except BaseException:
            # wrk is waited for either way, but perf's error is the one reported.
            with contextlib.suppress(Exception):
                finish_wrk(load, arguments.seconds + 2)
            raise
        output = finish_wrk(load, arguments.seconds + 2)
    rate = rate_of(output)
    return f"{rate:,.0f} requests/s: " + syscall_counts.describe(counts,
                                                                 rate * arguments.seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--pipeline", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--path", default="/hello")
    parser.add_argument("--syscalls", action="store_true",
                        help="instead: each server once, its system calls per request "
                             "counted by perf over SECONDS")
    parser.add_argument("servers", nargs="+", metavar="NAME=COMMAND")
    arguments = parser.parse_args()
    if shutil.which("wrk") is None:
        parser.error("wrk not found (Debian's wrk package)")
    if arguments.rounds < 1 or arguments.connections < 1 or arguments.seconds < 1:
        parser.error("--rounds, --connections and --seconds must be positive")
    servers = []
    for spec in arguments.servers:
        name, equals, command = spec.partition("=")
        if not equals or not name or not command.strip():
            parser.error(f"a server is NAME=COMMAND, not {spec!r}")
        servers.append((name, shlex.split(command)))
    if arguments.syscalls:
        for name, command in servers:
            try:
                print(f"{name}: {count_syscalls(command, arguments)}", flush=True)
            except (RuntimeError, LoadError, OSError, subprocess.SubprocessError) as failure:
                print(f"alternate.py: error: {name}: {failure}", file=sys.stderr)
                return 1
        return 0
    results: dict[str, list[tuple[float, ...]]] = {name: [] for name, _ in servers}
    for index in range(arguments.rounds):
        for name, command in servers if index % 2 == 0 else servers[::-1]:
            try:
                measured = run_once(command, arguments)
            except (RuntimeError, LoadError, OSError, subprocess.SubprocessError) as failure:
                print(f"alternate.py: error: {name}: {failure}", file=sys.stderr)
                return 1
            results[name].append(measured)
            rate, p99, user, system = measured
            print(f"round {index + 1} {name}: {rate:,.0f} requests/s, p99 {p99:,.0f} us, "
                  f"user {user:.3f} + system {system:.3f} = {user + system:.3f} us/request",
                  flush=True)
    print("\nmedians (us per request; every round's total in brackets)")
    for name, rows in results.items():
        totals = " ".join(f"{user + system:.2f}" for _, _, user, system in rows)
        print(f"{name}: {statistics.median(r[0] for r in rows):,.0f} requests/s, "
              f"p99 {statistics.median(r[1] for r in rows):,.0f} us, "
              f"user {statistics.median(r[2] for r in rows):.3f}, "
              f"system {statistics.median(r[3] for r in rows):.3f}, "
              f"total {statistics.median(r[2] + r[3] for r in rows):.2f} [{totals}]")
    round_ratios.print_ratios({name: [r[2] + r[3] for r in rows] for name, rows in results.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
