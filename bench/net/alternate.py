#!/usr/bin/env python3
"""Alternating rounds of suite net's servers: the server CPU per message, split into system and
user time, for comparing two builds or a server with its floors on a noisy machine.

  python3 bench/net/alternate.py [--build-dir build/release] [--connections 64] [--rounds 5]
      [--window 4] [--mode echo|ws] [--instructions | --syscalls] SERVER [SERVER ...]

A SERVER is NAME=COMMAND, the command line of a program that serves suite net's protocol
(`--port N --mode MODE` are appended, it prints a line once it listens and stops at the end of
its standard input), with an optional `@ws` or `@echo` after NAME to run that server in another
mode than --mode. Examples:

  python3 bench/net/alternate.py --connections 1000 \\
      bare=build/release/bench/bench_io_bare_echo \\
      uring=build/release/bench/bench_net_uring_echo \\
      weft='build/release/bench/bench_net_weft --style coroutine'

Each round runs every server once, in the given order in even rounds and reversed in odd ones
(so that neither side always runs after the other), each with the server pinned to CPU 0 and
suite net's load client (bench_net_load_client) to CPU 1 when the machine has two CPUs. A run
warms up for a second, then the client measures for WINDOW + 2 seconds, while this script reads
the server's user and system clock ticks from /proc/PID/stat over WINDOW seconds in the middle
of it; the result is ticks per message served, in microseconds. Prints one line per run and, at
the end, per server the medians of requests/s, user, system and total time with every round's
total, then the median ratio of each server's total to the first's within a round
(bench/round_ratios.py: the steadier comparison on a machine whose speed drifts). bench/run.py measures the same servers the same way (its CPU figure is the load client's
own /proc reading over the whole window); this script exists for the A/B comparisons quoted in
bench/net/README.md, where run.py's two rounds cannot separate effects of a few percent.

--instructions counts instead of timing: each server runs once under valgrind's callgrind, a
first client run warms it up, the counters are zeroed, and the instructions of a second run of
WINDOW seconds are divided by the messages it served. The figure repeats within a few percent
from run to run where wall time moves by 10-20% on a shared machine, so it is the one to decide
a change of the server's own code by; it says nothing of the kernel's share or of cache misses.
--keep-profiles DIR keeps each server's profile as DIR/NAME.callgrind for callgrind_annotate.

--syscalls counts system calls instead: each server runs once, and perf counts the calls and
context switches of the server over WINDOW seconds in the middle of the client's run
(bench/syscall_counts.py); prints each call per message, the messages per epoll_wait and the
context switches per thousand messages.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import round_ratios  # noqa: E402  bench/round_ratios.py
import run  # noqa: E402  bench/run.py: free_port, wait_ready (the READY line), Failure
import syscall_counts  # noqa: E402  bench/syscall_counts.py

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> tuple[int, int]:
    # Fields 14 and 15 of /proc/PID/stat (utime, stime, every thread), after the command name,
    # which may hold spaces but ends at the last ')'.
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]), int(fields[12])


def pinned(command: list[str], cpu: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)] + command
    return command


@contextlib.contextmanager
def serving(command: list[str], mode: str, ready_s: float):
    """Starts the server pinned to CPU 0 and yields (its process, its port) once it printed
    READY; closes its standard input (it stops) when the block ends."""
    port = run.free_port()
    errors = tempfile.TemporaryFile()
    server = subprocess.Popen(pinned(command + ["--port", str(port), "--mode", mode], 0),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
    try:
        try:
            run.wait_ready(server, port, ready_s, errors)
        except run.Failure as failure:
            raise RuntimeError(f"{shlex.join(command)}: {failure}") from None
        yield server, port
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        errors.close()


def load(client: Path, port: int, mode: str, connections: int, warmup: float,
         seconds: float) -> subprocess.Popen:
    """Starts the load client pinned to CPU 1."""
    return subprocess.Popen(
        pinned([str(client), "--port", str(port), "--mode", mode, "--connections",
                str(connections), "--size", "64", "--warmup", str(warmup), "--seconds",
                str(seconds), "--name", "run"], 1),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def rate_of(measure: subprocess.Popen, command: list[str], timeout_s: float) -> float:
    """The requests/s the load client reported."""
    output, _ = measure.communicate(timeout=timeout_s)
    found = re.search(r"RESULT run requests/s ([\d.]+)", output)
    if measure.returncode != 0 or not found:
        raise RuntimeError(f"the load client failed against {shlex.join(command)}:\n{output}")
    return float(found.group(1))


def run_once(client: Path, command: list[str], mode: str, connections: int,
             window: float) -> tuple[float, float, float]:
    """requests/s, user and system us per message of one run of the server."""
    with serving(command, mode, 10) as (server, port):
        measure = load(client, port, mode, connections, 1, window + 2)
        time.sleep(2)  # the client's warm-up, and a second of the measured window
        before = cpu_ticks(server.pid)
        time.sleep(window)
        after = cpu_ticks(server.pid)
        rate = rate_of(measure, command, window + 60)
    per_tick = 1e6 / TICKS / (rate * window)
    return rate, (after[0] - before[0]) * per_tick, (after[1] - before[1]) * per_tick


def count_syscalls(client: Path, command: list[str], mode: str, connections: int,
                   window: float) -> str:
    """The server's system calls per message over WINDOW seconds of a client run."""
    with serving(command, mode, 10) as (server, port):
        measure = load(client, port, mode, connections, 1, window + 2)
        time.sleep(2)  # the client's warm-up, and a second of the measured window
        try:
            counts = syscall_counts.count([server.pid], window)
        except BaseException:
            # The client is waited for either way, but perf's error is the one reported.
            with contextlib.suppress(Exception):
                rate_of(measure, command, window + 60)
            raise
        rate = rate_of(measure, command, window + 60)
    return f"{rate:,.0f} messages/s: " + syscall_counts.describe(counts, rate * window, "message")


def count_instructions(client: Path, command: list[str], mode: str, connections: int,
                       window: float, keep: Path | None = None) -> tuple[int, float]:
    """Messages served and instructions per message of the server under callgrind: a first
    client run warms it up (connections, buffers, caches of the runtime), the counters are
    zeroed, and a second run of WINDOW seconds is counted, its connection setup included. With
    keep, the profile is copied there (for callgrind_annotate)."""
    with tempfile.TemporaryDirectory() as directory:
        profile = Path(directory) / "callgrind.out"
        traced = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}"] + command
        with serving(traced, mode, 120) as (server, port):
            rate_of(load(client, port, mode, connections, 0.5, 2), command, 300)
            subprocess.run(["callgrind_control", "--zero", str(server.pid)], check=True,
                           capture_output=True)
            rate = rate_of(load(client, port, mode, connections, 0, window), command,
                           window + 300)
            subprocess.run(["callgrind_control", "--dump", str(server.pid)], check=True,
                           capture_output=True)
            dumps = sorted(Path(directory).glob("callgrind.out.*"))
            if not dumps:
                raise RuntimeError(f"callgrind wrote no dump for {shlex.join(command)}")
            if keep is not None:
                shutil.copyfile(dumps[-1], keep)
            totals = re.search(r"^(?:totals|summary): (\d+)", dumps[-1].read_text(), re.M)
            if totals is None:
                raise RuntimeError(f"{dumps[-1]} has no totals line")
    messages = round(rate * window)
    return messages, int(totals.group(1)) / max(messages, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build/release"))
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=float, default=4.0,
                        help="seconds of server CPU time read per run (default 4)")
    parser.add_argument("--mode", choices=("echo", "ws"), default="echo")
    parser.add_argument("--instructions", action="store_true",
                        help="instead: each server once under valgrind's callgrind, "
                             "instructions per message over WINDOW seconds (deterministic "
                             "within a few percent; the measured run's connection setup is "
                             "counted, so use a window of a few seconds)")
    parser.add_argument("--keep-profiles", type=Path, metavar="DIR",
                        help="with --instructions: keep each server's profile as "
                             "DIR/NAME.callgrind")
    parser.add_argument("--syscalls", action="store_true",
                        help="instead: each server once, its system calls per message "
                             "counted by perf over WINDOW seconds")
    parser.add_argument("servers", nargs="+", metavar="NAME[@MODE]=COMMAND")
    arguments = parser.parse_args()
    client = arguments.build_dir / "bench" / "bench_net_load_client"
    if not client.exists():
        parser.error(f"{client} is missing: build the release preset first")
    if arguments.rounds < 1 or arguments.connections < 1 or arguments.window <= 0:
        parser.error("--rounds, --connections and --window must be positive")
    servers = []
    for spec in arguments.servers:
        name, equals, command = spec.partition("=")
        if not equals or not name or not command.strip():
            parser.error(f"a server is NAME=COMMAND, not {spec!r}")
        name, _, mode = name.partition("@")
        if mode not in ("", "echo", "ws"):
            parser.error(f"{spec!r}: the mode after @ must be echo or ws")
        servers.append((name, mode or arguments.mode, shlex.split(command)))
    if arguments.instructions and arguments.syscalls:
        parser.error("--instructions and --syscalls are two different runs: pick one")
    if arguments.syscalls:
        for name, mode, command in servers:
            try:
                line = count_syscalls(client, command, mode, arguments.connections,
                                      arguments.window)
            except (RuntimeError, OSError, subprocess.SubprocessError) as failure:
                print(f"alternate.py: error: {name}: {failure}", file=sys.stderr)
                return 1
            print(f"{name}: {line}", flush=True)
        return 0
    if arguments.instructions:
        if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
            parser.error("--instructions needs valgrind (Debian's valgrind package)")
        for name, mode, command in servers:
            try:
                keep = (arguments.keep_profiles / f"{name}.callgrind"
                        if arguments.keep_profiles is not None else None)
                messages, per_message = count_instructions(
                    client, command, mode, arguments.connections, arguments.window, keep)
            except (RuntimeError, OSError, subprocess.SubprocessError) as failure:
                print(f"alternate.py: error: {name}: {failure}", file=sys.stderr)
                return 1
            print(f"{name}: {per_message:,.0f} instructions per message "
                  f"({messages:,} messages under callgrind)", flush=True)
        return 0
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in servers}
    for index in range(arguments.rounds):
        for name, mode, command in servers if index % 2 == 0 else servers[::-1]:
            try:
                rate, user, system = run_once(client, command, mode, arguments.connections,
                                              arguments.window)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as failure:
                print(f"alternate.py: error: {name}: {failure}", file=sys.stderr)
                return 1
            results[name].append((rate, user, system))
            print(f"round {index + 1} {name}: {rate:,.0f} requests/s, user {user:.3f}, "
                  f"system {system:.3f}, total {user + system:.2f} us/message", flush=True)
    print()
    for name, _, _ in servers:
        runs = results[name]
        totals = " ".join(f"{user + system:.2f}" for _, user, system in runs)
        print(f"{name}: {statistics.median(r for r, _, _ in runs):,.0f} requests/s, "
              f"user {statistics.median(u for _, u, _ in runs):.3f}, "
              f"system {statistics.median(s for _, _, s in runs):.3f}, "
              f"total {statistics.median(u + s for _, u, s in runs):.2f} us/message "
              f"[{totals}]")
    round_ratios.print_ratios({name: [u + s for _, u, s in results[name]]
                               for name, _, _ in servers})
    return 0


if __name__ == "__main__":
    sys.exit(main())
