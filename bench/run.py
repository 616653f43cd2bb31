#!/usr/bin/env python3
"""Runs weft's comparison suites and writes bench/results/SUITE.json and SUITE.md.

Every suite is a set of benchmarks and a set of programs: one weft program and its peers
(other runtimes doing the same work). Each program prints one line per result,

    RESULT <benchmark> <unit> <value>

and accepts --smoke (tiny sizes) and --only <benchmark> (run just that one). This script

  * builds the peers that are not built by CMake (Go, with `go build` into the build dir),
  * runs, for each round, every benchmark in every program, each in its own process (so one
    benchmark's memory or timers cannot colour the next), pinned to one core, with a timeout,
    the programs alternating and their order rotated from round to round,
  * keeps the median of the rounds per (benchmark, program),
  * writes bench/results/SUITE.json ({"suite", "results": [{"name", "unit", "weft",
    "peers": {...}}]}; "weft" is an object when the weft program has variants, below) and
    SUITE.md, and prints the table.

Lower is better unless the unit ends in /s. --smoke writes to bench/results/smoke/ instead, so
that the committed full results are never overwritten by a CI run. A failing or missing weft
program makes the run fail in smoke mode; a failing peer only warns. Outside smoke mode every
failure is reported and the run goes on with the other programs.

Network benchmarks (suite io) are measured from outside: a benchmark with `serve` set starts the
program as a server (`--port N --mode echo|sink`, port picked free on 127.0.0.1), waits for its
"READY N" line, runs the suite's load client against it (server and client pinned to two
different cores) and reads the RESULT line from the client; the server is then stopped (stdin
closed, then SIGTERM, then SIGKILL, its whole process group). bench/io/README.md has the
contract. A program's own command (its self-measuring benchmarks) and its server are prepared
separately: when one is missing, the benchmarks of the other still run. A suite marked
weft_pending (its weft program is not written yet) is skipped in smoke mode when that program
is missing, unless --allow-missing-weft is given.

Suite net's rows report more than one result each: its load client is told the row's name and
the server's PID (`server_cpu`), reads the server's CPU time from /proc at the edges of its
measured window and prints NAME (requests/s or Gbit/s), NAME.p99 and NAME.cpu (`extra_results`),
each a row of the table and of SUITE.json. Its pipe row gives the proxy under test `--target Q`
and the client `--sink-port Q` (`sink`). A program may serve different modes with different
programs (`mode_servers`: Go's net for echo, gorilla/websocket for ws); a Go program without a
go.mod is built in GOPATH mode against Debian's /usr/share/gocode (golang-*-dev packages).
bench/net/README.md has that suite's contract.

Variants: a program with `variants` runs once per variant, each run its own column named
PROGRAM-VARIANT with the variant's environment variables added to the program's. Suite loop
runs its weft program once per event-loop driver (columns weft-uv, weft-ev, weft-event,
weft-poll: WEFT_DRIVER=uv|ev|event|poll) beside the raw libraries uv, ev, event and poll. When
the weft program has variants, each result's "weft" in SUITE.json is an object
{"weft-uv": value or null, ...} instead of one value, and the table has one ratio column per
variant, "weft-X vs Y", Y being the variant's `versus` peer (the best peer when it names none).
A variant may add server arguments instead (`server_args`: suite net's weft-coroutine and
weft-callback run one program with --style coroutine|callback).
WEFT_SCHED, WEFT_SEED and WEFT_DRIVER are removed from every program's environment (a program
or variant sets its own), so that the caller's shell cannot change what a column measures.

Multi-threaded runtimes (suite procs) run every benchmark once per worker count W of
--procs-workers (default 1,2): the program gets --workers W, is pinned to W cores (the lowest
W this process may use) and its results are named BENCHMARK@wW. Rust peers (kind CARGO) are
copied into the build dir and built there with `cargo build --release --offline` against the
crate sources Debian ships in /usr/share/cargo/registry (librust-*-dev packages); smoke mode
does not build one from scratch (a cold Tokio build takes about a minute on two cores): it
uses (and brings up to date) the one a full run built, or skips that peer with a warning.

Suite http (bench/http/README.md) reports NAME, NAME.p99 and NAME.cpu per row as suite net
does, from bench/http/http_load.py (a load client that is a Python script relative to bench/:
`client` ends in .py) wrapping wrk (h2load in smoke mode); its CPU figure covers every process
of the server's session. Its nginx and h2o peers are started by Python launchers (kind PYTHON,
given --work-dir BUILD/bench/work/SUITE_PROGRAM for their configuration and logs). Its servers
all get --root bench/http/root (Program.server_args). Its https_keepalive row (`tls`) is
hello_keepalive over TLS 1.3: for it run.py makes one self-signed certificate per suite run
(make_certificate: Debian's openssl program, a P-256 key, for localhost and 127.0.0.1) in a
temporary folder removed at the end, and gives every server --tls-cert FILE --tls-key FILE and
the load client --https --tls-ca FILE; its other rows run without them. Every suite's results
are also drawn, weft beside its peers, as bench/results/SUITE.png (`plot`: bench/plot.py, when
python3-matplotlib is installed), which docs/benchmarks.md shows beside the table of each
suite, which a full run rewrites there from SUITE.md (`--check-docs`, part of `make docs`, fails
when the page and bench/results/ differ; `--update-docs` rewrites the page alone).

To add a suite, add an entry to SUITES below (and its programs under bench/ and
bench/peers/SUITE/); run.py needs no other change.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

# Program kinds: how a program is located (or built) and started.
NATIVE = "native"  # a CMake target; path is relative to the build dir
GO = "go"  # a Go main package; path is the package directory relative to bench/
PHP = "php"  # a PHP script; path is relative to bench/
NODE = "node"  # a Node.js script; path is relative to bench/
CARGO = "cargo"  # a Cargo project; path is its directory relative to bench/
# A Python script relative to bench/, run with this interpreter and given a folder of its own
# under the build dir as its first arguments (--work-dir BUILD/bench/work/SUITE_PROGRAM): suite
# http's launchers of nginx and h2o keep their configuration, logs and temporary files there.
PYTHON = "python"


@dataclasses.dataclass(frozen=True)
class Variant:
    """One of several runs of the same program with different environment variables: its
    column is named PROGRAM-NAME (for example weft-uv)."""
    name: str
    env: tuple[tuple[str, str], ...]
    # The peer this column is compared with in the table ("" for none), e.g. weft-uv with uv.
    versus: str = ""
    # Arguments added to the program's server command line (suite net: --style callback).
    server_args: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Program:
    name: str  # "weft" for the weft program, otherwise the peer's key in the JSON
    kind: str
    path: str
    benchmarks: tuple[str, ...]  # the benchmarks it implements (others are not asked for)
    env: tuple[tuple[str, str], ...] = ()
    # Network benchmarks: the program that runs as the server, when it is not `path` itself
    # (same kind). "" means `path` serves too.
    server: str = ""
    # Network benchmarks whose serve modes need different programs (same kind): (mode, path)
    # pairs; a mode not listed falls back to `server` (or `path`).
    mode_servers: tuple[tuple[str, str], ...] = ()
    # Arguments added to every server command line (set by a variant's server_args).
    server_args: tuple[str, ...] = ()
    # Run the program once per variant, each its own column (see the docstring); () runs it
    # once, as `name`.
    variants: tuple[Variant, ...] = ()
    versus: str = ""  # set on an expanded variant: the peer its column is compared with

    @property
    def is_weft(self) -> bool:
        """The weft program, or one of its variants (weft-uv, ...)."""
        return self.name == "weft" or self.name.startswith("weft-")


def expand_variants(programs: tuple[Program, ...]) -> list[Program]:
    """The programs as run.py runs them: a program with variants becomes one program per
    variant, named PROGRAM-VARIANT, its environment the program's plus the variant's."""
    expanded = []
    for program in programs:
        if not program.variants:
            expanded.append(program)
            continue
        for variant in program.variants:
            expanded.append(dataclasses.replace(
                program, name=f"{program.name}-{variant.name}", env=program.env + variant.env,
                variants=(), versus=variant.versus,
                server_args=program.server_args + variant.server_args))
    return expanded


@dataclasses.dataclass(frozen=True)
class Benchmark:
    name: str
    unit: str
    # Network benchmarks (suites io, loop, net): the program runs as a server in this mode
    # ("echo", "sink", "ws", "pipe") and the suite's load client measures it with client_args
    # (smoke_client_args in smoke mode) plus --port. None: the program measures itself
    # (--only NAME [--smoke]).
    serve: str | None = None
    client_args: tuple[str, ...] = ()
    smoke_client_args: tuple[str, ...] = ()
    # Cores a self-measuring program is pinned to: 1, or 2 (a thread pool's workers get a core
    # of their own: the load client's).
    cores: int = 1
    # The benchmark's name as the program knows it, when it differs from `name`: per-worker
    # suites (name is then "workload@wW"), or a network benchmark whose load client reports
    # under another name (suite loop's coroutine_echo is the client's tcp_echo_pingpong).
    # A program implements the benchmark when it lists this name. workers: the worker count W
    # it runs with (--workers W, pinned to W cores).
    workload: str = ""
    workers: int = 0
    # Suite net: the load client is told the benchmark's name (--name) and the server's PID
    # (--server-pid, to read its CPU time over the measured window), and reports these further
    # results beside the main one, each (suffix, unit): NAME.p99 in us, NAME.cpu per request.
    server_cpu: bool = False
    extra_results: tuple[tuple[str, str], ...] = ()
    # Suite net's pipe mode: run.py picks a second free port for the sink, which the load client
    # holds (--sink-port Q) and the server, a proxy, forwards to (--target Q).
    sink: bool = False
    # Suite http's https row: the server gets --tls-cert FILE --tls-key FILE (the certificate
    # run.py makes once per suite run: make_certificate) and serves its mode over TLS; the load
    # client gets --https --tls-ca FILE.
    tls: bool = False
    # Suite http's proxy row: a server that every program proxies to, its path relative to the
    # build dir. run.py starts it (--port U --mode hello --root HTTP_ROOT) pinned to the load
    # client's core, so that the program under test keeps its core to itself, and gives the
    # program --upstream 127.0.0.1:U; the CPU figure stays the program's own.
    upstream: str = ""

    @property
    def results(self) -> list[tuple[str, str]]:
        """(name, unit) of every result the benchmark produces: its own, then the extras."""
        return [(self.name, self.unit)] + [(self.name + suffix, unit)
                                           for suffix, unit in self.extra_results]

    @property
    def program_name(self) -> str:
        return self.workload or self.name


@dataclasses.dataclass(frozen=True)
class Suite:
    benchmarks: tuple[Benchmark, ...]
    programs: tuple[Program, ...]  # weft first, then the peers in table order
    timeout_s: float  # per process, full mode
    smoke_timeout_s: float  # per process, smoke mode
    note: str = ""  # a paragraph under the table
    # The load client of network benchmarks, relative to the build dir; a name ending in .py is
    # a Python script relative to bench/ instead (suite http's wrapper of wrk and h2load).
    client: str = ""
    # The weft program is not written yet: in smoke mode a missing one skips the suite.
    weft_pending: bool = False
    # Every benchmark runs once per worker count of --procs-workers (see the docstring).
    per_workers: bool = False
    # Suites with network benchmarks: how the self-measuring ones are pinned, as the results'
    # header says it ("" for suite io's wording).
    pinning_note: str = ""
    # Draw SUITE.png beside SUITE.md (every suite; docs/benchmarks.md shows them): see
    # write_plot and bench/plot.py.
    plot: bool = True


CORE_ALL = ("suspended_memory", "yield_switch", "spawn_run_complete", "sleep_timers")
CORE_NO_TIMERS = ("suspended_memory", "yield_switch", "spawn_run_complete")
CORE_RAW = ("yield_switch", "spawn_run_complete")
IO_ALL = ("tcp_echo_pingpong", "tcp_pump", "timers", "threadpool_roundtrip")
IO_NET = ("tcp_echo_pingpong", "tcp_pump")
POOL_ALL = ("acquire_release_uncontended", "acquire_release_uncontended_c",
            "acquire_release_contended", "contended_service_spread", "pg_select1",
            "pg_select1_params", "pg_select1_leased")
POOL_PG = ("pg_select1", "pg_select1_params", "pg_select1_leased")
SYNC_ALL = ("channel_pingpong", "channel_buffered_throughput", "mutex_handoff_2",
            "mutex_handoff_100")
PROCS_ALL = ("spawn_many_10k", "spawn_many_100k", "yield_many", "ping_pong", "chained_spawn",
             "fan_out_in", "skewed_cpu", "wake_latency_p50", "wake_latency_p99", "idle_cpu",
             "wake_latency_external_p50", "wake_latency_external_p99")
# Go has no thread outside its scheduler to send from.
PROCS_GO = tuple(name for name in PROCS_ALL if not name.startswith("wake_latency_external"))
PROCS_TASKS = ("spawn_many_10k", "spawn_many_100k", "chained_spawn", "fan_out_in", "skewed_cpu")

# --- suite http (bench/http/README.md) -------------------------------------------------------
# Every server gets --port N --mode hello|static --root HTTP_ROOT (and, in the https row,
# --tls-cert FILE --tls-key FILE); the load client is bench/http/http_load.py (wrk, or h2load in
# smoke mode), which checks the responses first and reports NAME, NAME.p99 and NAME.cpu (the
# results suite net's load client reports too).
HTTP_ROOT = BENCH_DIR / "http" / "root"  # holds 4k.txt, the one static file of every server
HTTP_PLAIN = ("hello_keepalive", "hello_c1000", "static_4k", "hello_pipelined")
# bare and beast serve plain HTTP only.
HTTP_ALL = HTTP_PLAIN + ("https_keepalive",)
HTTP_RESULTS = ((".p99", "us"), (".cpu", "us/request"))
# The reverse proxies (weft's http::reverse_proxy, nginx's proxy_pass, h2o's proxy.reverse.url,
# Go's httputil.ReverseProxy, Node's http.request through a keep-alive Agent) in front of the
# bare floor.
HTTP_PROXY = ("proxy_keepalive",)


def make_certificate(folder: Path) -> tuple[str, str]:
    """Suite http's https row: a self-signed certificate (its own authority) for localhost and
    127.0.0.1 with a P-256 key, made with Debian's openssl program in `folder`; returns the
    PEM files (certificate, key). Failure when it cannot be made."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise Failure("`openssl` not found (install openssl): no certificate for the https row")
    certificate, key = folder / "cert.pem", folder / "key.pem"
    try:
        result = subprocess.run(
            [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", str(key), "-out", str(certificate), "-days", "2",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Failure(f"openssl req: {error}") from None
    if result.returncode != 0:
        raise Failure(f"openssl req failed ({describe_exit(result.returncode)})"
                      f"{tail(result.stderr)}")
    return str(certificate), str(key)


def http_row(name: str, mode: str, connections: int, pipeline: int = 1,
             tls: bool = False, upstream: str = "") -> Benchmark:
    """A row of suite http: wrk for 1 s of warm-up and 5 s measured (smoke: h2load, a few
    thousand requests), GET /hello (mode hello) or /4k.txt (mode static); over TLS with
    `tls`; through each program as a reverse proxy to `upstream` with one."""
    if mode == "hello":
        shape = ("--path", "/hello", "--check", "hello")
    else:
        shape = ("--path", "/4k.txt", "--check", str(HTTP_ROOT / "4k.txt"))
    shape += ("--connections", str(connections), "--pipeline", str(pipeline))
    return Benchmark(name, "requests/s", serve=mode, server_cpu=True, tls=tls, upstream=upstream,
                     extra_results=HTTP_RESULTS,
                     client_args=shape + ("--tool", "wrk", "--warmup", "1", "--seconds", "5"),
                     smoke_client_args=shape + ("--tool", "h2load", "--requests",
                                                str(max(1000, 2 * connections * pipeline))))
# --- end of suite http's definitions ----------------------------------------------------------
LOOP_ALL = ("timers_10m", "timer_churn", "loop_tick", "fd_pingpong", "many_fds")
# The weft program of suite loop runs once per driver, each column beside the raw library the
# driver wraps.
WEFT_DRIVERS = tuple(Variant(driver, (("WEFT_DRIVER", driver),), versus=driver)
                     for driver in ("uv", "ev", "event", "poll"))
# The load client's pingpong run (suite io's tcp_echo_pingpong, suite loop's coroutine_echo).
ECHO_CLIENT_ARGS = ("--mode", "pingpong", "--connections", "100", "--size", "512",
                    "--warmup", "1", "--seconds", "5")
ECHO_SMOKE_CLIENT_ARGS = ("--mode", "pingpong", "--connections", "100", "--size", "512",
                          "--warmup", "0.1", "--seconds", "0.3")

# Suite net (bench/net/README.md): the load client's echo and ws rows report requests/s, the p99
# round-trip time and the server's CPU time per request; pipe_throughput Gbit/s and the proxy's
# CPU time per MB.
NET_PINGPONG = ("echo_pingpong_64c", "echo_pingpong_1000c")
NET_ALL = NET_PINGPONG + ("websocket_echo_64c", "pipe_throughput")
NET_PINGPONG_RESULTS = ((".p99", "us"), (".cpu", "us/request"))
# The one weft program serves both of weft's styles, each its own column.
NET_STYLES = tuple(Variant(style, (), server_args=("--style", style))
                   for style in ("coroutine", "callback"))


def net_pingpong(name: str, mode: str, connections: int) -> Benchmark:
    shape = ("--mode", mode, "--connections", str(connections), "--size", "64")
    return Benchmark(name, "requests/s", serve="echo" if mode == "echo" else "ws",
                     client_args=shape + ("--warmup", "1", "--seconds", "5"),
                     smoke_client_args=shape + ("--warmup", "0.1", "--seconds", "0.3"),
                     server_cpu=True, extra_results=NET_PINGPONG_RESULTS)


SUITES: dict[str, Suite] = {
    "core": Suite(
        benchmarks=(
            Benchmark("yield_switch", "ns"),
            Benchmark("spawn_run_complete", "ns"),
            Benchmark("suspended_memory", "B"),
            Benchmark("sleep_timers", "ms"),
        ),
        programs=(
            Program("weft", NATIVE, "bench/bench_core_weft", CORE_ALL),
            Program("fcontext", NATIVE, "bench/bench_core_fcontext", CORE_RAW),
            Program("boost_fiber", NATIVE, "bench/bench_core_boost_fiber", CORE_ALL),
            Program("ucontext", NATIVE, "bench/bench_core_ucontext", CORE_RAW),
            Program("go", GO, "peers/core/go", CORE_ALL, env=(("GOMAXPROCS", "1"),)),
            Program("php", PHP, "peers/core/php/fiber.php", CORE_NO_TIMERS),
        ),
        timeout_s=300,
        smoke_timeout_s=30,
        note=(
            "fcontext and ucontext are bare context switches with no scheduler (lower bounds, "
            "not runtimes). php caps suspended_memory at 20000 fibers (each fiber stack costs "
            "two of the 65530 mappings Linux allows by default); every value is per coroutine."
        ),
    ),
    "io": Suite(
        benchmarks=(
            Benchmark("tcp_echo_pingpong", "requests/s", serve="echo",
                      client_args=ECHO_CLIENT_ARGS, smoke_client_args=ECHO_SMOKE_CLIENT_ARGS),
            Benchmark("tcp_pump", "Gbit/s", serve="sink",
                      client_args=("--mode", "pump", "--size", "65536", "--warmup", "1",
                                   "--seconds", "5"),
                      smoke_client_args=("--mode", "pump", "--size", "65536", "--warmup", "0.1",
                                         "--seconds", "0.3")),
            Benchmark("timers", "ms"),
            Benchmark("threadpool_roundtrip", "us", cores=2),
        ),
        programs=(
            Program("weft", NATIVE, "bench/bench_io_weft", IO_ALL),
            Program("libuv", NATIVE, "bench/bench_io_uv_loop", IO_ALL,
                    server="bench/bench_io_uv_echo"),
            Program("asio", NATIVE, "bench/bench_io_asio", IO_NET),
            Program("bare", NATIVE, "bench/bench_io_bare_echo", IO_NET),
            Program("go", GO, "peers/io/go", IO_NET + ("timers",), env=(("GOMAXPROCS", "1"),)),
            Program("node", NODE, "peers/io/node/timers.js", IO_ALL,
                    server="peers/io/node/echo.js"),
        ),
        timeout_s=120,
        smoke_timeout_s=30,
        client="bench/bench_io_load_client",
        weft_pending=False,
        note=(
            "tcp_echo_pingpong and tcp_pump are measured by one load client "
            "(bench/io/load_client.c), pinned to its own core, against each program running as "
            "a server on 127.0.0.1. libuv is raw libuv with callbacks; asio is Boost.Asio with "
            "boost::asio::spawn (stackful coroutines); go runs with GOMAXPROCS=1; go has no "
            "threadpool_roundtrip (no thread pool for user jobs: see bench/peers/io/go/main.go); "
            "bare is not a runtime but the floor: one epoll loop in C doing one read() and one "
            "write() per request and nothing else (bench/peers/io/bare_echo.c), the system calls "
            "weft makes; "
            "node's threadpool job is crypto.randomFill of one byte (the closest to an empty "
            "job JavaScript can queue). Details: bench/io/README.md."
        ),
    ),
    "loop": Suite(
        benchmarks=(
            Benchmark("timers_10m", "ms"),
            Benchmark("timer_churn", "ms"),
            Benchmark("loop_tick", "ticks/s"),
            Benchmark("fd_pingpong", "roundtrips/s"),
            Benchmark("many_fds", "roundtrips/s"),
            Benchmark("coroutine_echo", "requests/s", serve="echo", workload="tcp_echo_pingpong",
                      client_args=ECHO_CLIENT_ARGS, smoke_client_args=ECHO_SMOKE_CLIENT_ARGS),
        ),
        programs=(
            # coroutine_echo is suite io's echo server (bench_io_weft), once per driver too.
            Program("weft", NATIVE, "bench/bench_loop_weft", LOOP_ALL + ("tcp_echo_pingpong",),
                    server="bench/bench_io_weft", variants=WEFT_DRIVERS),
            Program("uv", NATIVE, "bench/bench_loop_uv", LOOP_ALL + ("tcp_echo_pingpong",),
                    server="bench/bench_io_uv_echo"),
            Program("ev", NATIVE, "bench/bench_loop_ev", LOOP_ALL),
            Program("event", NATIVE, "bench/bench_loop_event", LOOP_ALL),
            Program("poll", NATIVE, "bench/bench_loop_poll", LOOP_ALL),
        ),
        timeout_s=120,
        smoke_timeout_s=30,
        client="bench/bench_io_load_client",
        weft_pending=False,
        pinning_note="every other benchmark to the servers' core",
        note=(
            "weft-X is weft's program (the event-loop facade, bench/loop/) run with "
            "WEFT_DRIVER=X; uv, ev, event and poll are C programs written directly on libuv, "
            "libev and libevent (epoll underneath all three) and a poll(2) loop of our own "
            "(bench/peers/loop/), each compared with the weft driver that wraps it. Every "
            "weft-X runs the same binary. timers_10m: 10M one-shot timers of 1 to 10 ms armed, "
            "then fired; timer_churn: 1M timers armed, then cancelled; loop_tick: loop "
            "iterations per second with one callback deferred to the next iteration each time; "
            "fd_pingpong: 1-byte messages bounced over a socketpair, each sent through a "
            "writable watcher and received through a readable one; many_fds: the same with "
            "10,000 idle fds registered for readable besides, where poll(2), which scans every "
            "registered fd on each wait, pays what epoll does not. coroutine_echo is suite io's "
            "tcp_echo_pingpong against weft's coroutine echo server on each driver (uv: the raw "
            "libuv callback server of suite io; WEFT_DRIVER is ignored by a weft without "
            "drivers, and every weft-X column is then the default libuv driver). Details: "
            "bench/loop/README.md."
        ),
    ),
    "net": Suite(
        benchmarks=(
            net_pingpong("echo_pingpong_64c", "echo", 64),
            net_pingpong("echo_pingpong_1000c", "echo", 1000),
            net_pingpong("websocket_echo_64c", "ws", 64),
            Benchmark("pipe_throughput", "Gbit/s", serve="pipe", sink=True, server_cpu=True,
                      extra_results=((".cpu", "us/MB"),),
                      client_args=("--mode", "pipe", "--size", "65536", "--warmup", "1",
                                   "--seconds", "5"),
                      smoke_client_args=("--mode", "pipe", "--size", "65536", "--warmup", "0.1",
                                         "--seconds", "0.3")),
        ),
        programs=(
            Program("weft", NATIVE, "bench/bench_net_weft", NET_ALL, variants=NET_STYLES),
            # The echo servers are suite io's (bench/peers/io/); the WebSocket ones and the
            # libuv proxy are bench/peers/net/.
            Program("bare", NATIVE, "bench/bench_io_bare_echo", NET_PINGPONG),
            Program("uring", NATIVE, "bench/bench_net_uring_echo", NET_PINGPONG),
            Program("asio", NATIVE, "bench/bench_io_asio", NET_PINGPONG),
            Program("go", GO, "peers/io/go", NET_PINGPONG + ("websocket_echo_64c",),
                    env=(("GOMAXPROCS", "1"),), mode_servers=(("ws", "peers/net/go_ws"),)),
            Program("node", NODE, "peers/io/node/echo.js", NET_PINGPONG + ("websocket_echo_64c",),
                    env=(("NODE_PATH", "/usr/share/nodejs"),),
                    mode_servers=(("ws", "peers/net/node/ws_echo.js"),)),
            Program("libuv", NATIVE, "bench/bench_net_uv_proxy", ("pipe_throughput",)),
        ),
        timeout_s=120,
        smoke_timeout_s=30,
        client="bench/bench_net_load_client",
        weft_pending=False,
        note=(
            "Every row is measured by one load client (bench/net/load_client.c) pinned to its "
            "own core against each program running as a server on 127.0.0.1 pinned to the "
            "other. echo_pingpong_Nc: N connections, one 64-byte message in flight on each; "
            "websocket_echo_64c: the same as masked binary WebSocket frames after the opening "
            "handshake; pipe_throughput: one stream of 64 KiB writes from the client through "
            "the server, a proxy, to a sink the client holds (every byte checked). X.p99 is the "
            "99th percentile round trip in us; X.cpu the server's user + system CPU time (all "
            "its threads, /proc) over the measured window per request (per MB for the pipe), "
            "the figure that decides how much one core serves once the server is the "
            "bottleneck (on two cores the client saturates its own first). weft-coroutine and "
            "weft-callback are weft's program in its two styles; bare is the floor, not a "
            "runtime (one epoll loop in C, one read() and one write() per message); uring is the "
            "same floor on io_uring (bench/peers/net/uring_echo.c: a recv or a send always "
            "queued per connection, one io_uring_enter per turn of the loop, no per-message "
            "system call); asio is "
            "Boost.Asio with spawn; go is Go's net with GOMAXPROCS=1 and, for WebSocket, "
            "gorilla/websocket; node is Node's net and, for WebSocket, the ws package; libuv "
            "is a raw libuv proxy. Details: bench/net/README.md."
        ),
    ),
    "sync": Suite(
        benchmarks=(
            Benchmark("channel_pingpong", "ns"),
            Benchmark("channel_buffered_throughput", "ns"),
            Benchmark("mutex_handoff_2", "ns"),
            Benchmark("mutex_handoff_100", "ns"),
        ),
        programs=(
            Program("weft", NATIVE, "bench/bench_sync_weft", SYNC_ALL),
            Program("boost_fiber", NATIVE, "bench/bench_sync_boost_fiber", SYNC_ALL),
            Program("go", GO, "peers/sync/go", SYNC_ALL, env=(("GOMAXPROCS", "1"),)),
        ),
        timeout_s=120,
        smoke_timeout_s=30,
        weft_pending=False,
        note=(
            "Everything on one thread (go: GOMAXPROCS=1; boost_fiber: its default round_robin "
            "scheduler). channel_pingpong: ns per one-way hand-off over unbuffered (rendezvous) "
            "channels, two per round trip. channel_buffered_throughput: one producer, one "
            "consumer, capacity 1024 (Boost.Fiber's buffered_channel keeps one slot free: 1023); "
            "ns per value. mutex_handoff_K: K coroutines each lock, increment a counter, yield "
            "while holding the lock, unlock and yield again, so every acquisition is contended "
            "and passes the lock to a waiter; ns per acquisition, scheduling included."
        ),
    ),
    "pool": Suite(
        benchmarks=(
            Benchmark("acquire_release_uncontended", "ns"),
            Benchmark("acquire_release_uncontended_c", "ns"),
            Benchmark("acquire_release_contended", "ns"),
            Benchmark("contended_service_spread", "ratio"),
            Benchmark("pg_select1", "queries/s"),
            Benchmark("pg_select1_params", "queries/s"),
            Benchmark("pg_select1_leased", "queries/s"),
        ),
        programs=(
            # Runs bench_pool_weft (no server) and bench_pool_weft_pg (the pg_ benchmarks).
            Program("weft", NATIVE, "bench/bench_pool_weft_suite", POOL_ALL),
            Program("libpq_threads", NATIVE, "bench/bench_pool_libpq_threads", POOL_PG),
        ),
        timeout_s=120,
        smoke_timeout_s=30,
        weft_pending=False,
        note=(
            "Only the pg_ benchmarks have a peer (no other runtime has a comparable single-thread pool). "
            "acquire_release_uncontended: ns per acquire+release pair by one coroutine on a pool "
            "of max 1, with before_acquire / before_release hooks (target: at most 40 ns); "
            "_c: the same pool built from plain function pointers and a void* context. "
            "acquire_release_contended: 1000 coroutines on max 10, each holding its resource "
            "across a yield, ns per pair scheduling included; contended_service_spread: the most "
            "services any coroutine got divided by the fewest (1.00 is perfectly fair). "
            "pg_select1: SELECT 1 per second against a private PostgreSQL 15 server (unix "
            "socket, run on the cores the client is not pinned to): weft, 50 coroutines on one "
            "thread calling db.query on a weft::pg::pool of 8 (pool::query pipelines their "
            "queries over the shared connections once all are in use; extended protocol; no "
            "session reset on release); libpq_threads, 8 threads each looping PQexec (the "
            "cheaper simple protocol) on its own blocking PGconn. pg_select1_params: "
            "SELECT $1::int with the parameter 1 (weft db.query, libpq PQexecParams). "
            "pg_select1_leased: weft without pipelining, each query on an exclusive lease "
            "(acquire, query, release), against the same PQexec loop. Target: weft at least "
            "1.5x on pg_select1."
        ),
    ),
    "procs": Suite(
        benchmarks=(
            Benchmark("spawn_many_10k", "ns/task"),
            Benchmark("spawn_many_100k", "ns/task"),
            Benchmark("yield_many", "ns/yield"),
            Benchmark("ping_pong", "ns/roundtrip"),
            Benchmark("chained_spawn", "ns/spawn"),
            Benchmark("fan_out_in", "ns/child"),
            Benchmark("skewed_cpu", "ms"),
            Benchmark("wake_latency_p50", "ns"),
            Benchmark("wake_latency_p99", "ns"),
            Benchmark("idle_cpu", "ms"),
            Benchmark("wake_latency_external_p50", "ns"),
            Benchmark("wake_latency_external_p99", "ns"),
        ),
        programs=(
            Program("weft", NATIVE, "bench/bench_procs_weft", PROCS_ALL),
            Program("go", GO, "peers/procs/go", PROCS_GO),
            Program("tokio", CARGO, "peers/procs/tokio", PROCS_ALL),
            Program("tbb", NATIVE, "bench/bench_procs_tbb", PROCS_TASKS),
        ),
        timeout_s=120,
        smoke_timeout_s=30,
        weft_pending=False,
        per_workers=True,
        note=(
            "Multi-threaded: each benchmark runs with W workers (the @wW suffix) pinned to W "
            "cores. weft: weft::procs processes on a weft::procs::runtime of W workers, "
            "children reporting to their parent with send() (spawn_many: a procs::wait_group); go: "
            "goroutines, channels and "
            "sync.WaitGroup, GOMAXPROCS=W; tokio: the multi-thread runtime with W worker "
            "threads (tokio::spawn, tokio::sync::mpsc); tbb: oneTBB task_group in a task_arena "
            "of W (task workloads only). Units are per task / yield / round trip / spawn / "
            "child; skewed_cpu is the wall time of 10k tasks of ~10 us of CPU each, all spawned "
            "by one task (ideal: 100 ms / W); wake_latency is from a send by a task of the "
            "runtime (woken by a tick from outside; go: a goroutine woken by its own timer) to "
            "the idle receiver running; wake_latency_external is from a send by a thread "
            "outside the runtime (go has none); idle_cpu is the CPU time the whole program used "
            "over 1 s with one idle task. Details: bench/procs/README.md."
        ),
    ),
    # Suite http (bench/http/README.md): definitions above, at "suite http".
    "http": Suite(
        benchmarks=(
            http_row("hello_keepalive", "hello", 64),
            http_row("hello_c1000", "hello", 1000),
            http_row("static_4k", "static", 64),
            http_row("hello_pipelined", "hello", 64, pipeline=16),
            http_row("https_keepalive", "hello", 64, tls=True),
            http_row("proxy_keepalive", "hello", 64, upstream="bench/bench_http_bare"),
        ),
        programs=(
            Program("weft", NATIVE, "bench/bench_http_weft", HTTP_ALL + HTTP_PROXY,
                    server_args=("--root", str(HTTP_ROOT))),
            Program("bare", NATIVE, "bench/bench_http_bare", HTTP_PLAIN,
                    server_args=("--root", str(HTTP_ROOT))),
            Program("nginx", PYTHON, "peers/http/nginx.py", HTTP_ALL + HTTP_PROXY,
                    server_args=("--root", str(HTTP_ROOT))),
            Program("h2o", PYTHON, "peers/http/h2o.py", HTTP_ALL + HTTP_PROXY,
                    server_args=("--root", str(HTTP_ROOT))),
            Program("go", GO, "peers/http/go", HTTP_ALL + HTTP_PROXY, env=(("GOMAXPROCS", "1"),),
                    server_args=("--root", str(HTTP_ROOT))),
            Program("node", NODE, "peers/http/node/server.js", HTTP_ALL + HTTP_PROXY,
                    server_args=("--root", str(HTTP_ROOT))),
            Program("beast", NATIVE, "bench/bench_http_beast", HTTP_PLAIN,
                    server_args=("--root", str(HTTP_ROOT))),
        ),
        timeout_s=60,
        smoke_timeout_s=30,
        client="http/http_load.py",
        weft_pending=False,
        plot=True,
        note=(
            "Every row: the load client (bench/http/http_load.py) pinned to its own core drives "
            "each server, pinned to the other, over 127.0.0.1 with wrk -t1 (1 s of warm-up, "
            "then 5 s measured; it first checks the responses, pipelined, byte for byte). "
            "hello_keepalive: 64 keep-alive connections, GET /hello, body \"hello\\n\"; "
            "hello_c1000: the same over 1000 connections; static_4k: 64 connections, GET "
            "/4k.txt, the same 4 KiB file (bench/http/root/4k.txt) from every server's static "
            "file handler, except bare, which sends the same 4 KiB as a fixed body read once at "
            "start; hello_pipelined: 64 connections, 16 requests per write (wrk's Lua script "
            "bench/http/wrk.lua); https_keepalive: hello_keepalive over TLS 1.3 (wrk to "
            "https://; bare and beast serve plain HTTP only), every server with the same "
            "self-signed P-256 certificate run.py makes per suite run and its own TLS defaults "
            "(nginx told ssl_protocols TLSv1.2 TLSv1.3, h2o without OCSP stapling): X25519, "
            "and TLS_AES_256_GCM_SHA384 with weft and node (their own order), nginx and h2o "
            "(wrk's order), TLS_AES_128_GCM_SHA256 with go (crypto/tls's choice); each "
            "connection's full handshake is made as wrk opens it, 64 in the measured run (a "
            "new wrk process resumes no session), well under 1% of the server's CPU there, so "
            "X.cpu is the price of encrypted keep-alive requests. proxy_keepalive: "
            "hello_keepalive through each server as a reverse proxy to the bare floor, which "
            "run.py starts per cell on the load client's core (weft: http::reverse_proxy; "
            "nginx: proxy_pass to an upstream with keepalive 64; h2o: proxy.reverse.url; go: "
            "httputil.ReverseProxy, 64 idle connections; node: http.request through a "
            "keep-alive Agent), X.cpu the proxy's alone. X.p99: the 99th percentile "
            "of wrk's latency distribution (coordinated omission corrected as wrk does it; in "
            "hello_pipelined per batch of 16, the correction redone per batch: bench/http/wrk.lua "
            "says why), in us. X.cpu: the server's user + system CPU time (all threads of all its "
            "processes, /proc) over the measured run divided by the requests served, in us per "
            "request: on two cores the load client saturates its core first, so this, not "
            "requests/s, says how much one core serves. bare is the floor, not a server: one "
            "epoll loop in C answering every request with a fixed response once it finds the "
            "end of its headers (no parsing, no routing; bench/peers/http/bare_http.c). nginx: "
            "nginx-light, 1 worker, return 200 for hello; h2o: 1 thread, /hello a static file "
            "(h2o 2.2 has no fixed-response directive); go: net/http, GOMAXPROCS=1; node: http; "
            "beast: Boost.Beast with boost::asio::spawn. Details: bench/http/README.md."
        ),
    ),
}


# Variables that change what weft does, removed from every program's environment (programs
# and variants set their own through `env`).
WEFT_ENVIRONMENT = ("WEFT_SCHED", "WEFT_SEED", "WEFT_DRIVER")


class Failure(Exception):
    pass


def log(message: str) -> None:
    print(message, flush=True)


def warn(message: str) -> None:
    print(f"run.py: warning: {message}", file=sys.stderr, flush=True)


def pick_cpu() -> int | None:
    """The core every program is pinned to: the highest one this process may use (core 0 tends
    to take more interrupts). None when pinning is impossible."""
    if shutil.which("taskset") is None:
        warn("taskset not found; programs run unpinned")
        return None
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def pick_cpu_pair() -> tuple[int, int] | None:
    """Network benchmarks: (the server's core, the load client's core), the two lowest this
    process may use (0 and 1 on a two-core machine). None when pinning is impossible."""
    if shutil.which("taskset") is None:
        warn("taskset not found; programs run unpinned")
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(cpus) < 2:
        warn("fewer than two cores: server and load client share one")
        return (cpus[0], cpus[0]) if cpus else None
    return (cpus[0], cpus[1])


def pick_cpus(count: int) -> str | None:
    """Per-worker suites: the taskset list of the `count` lowest cores this process may use
    (all of them, with a warning, when there are fewer). None when pinning is impossible."""
    if shutil.which("taskset") is None:
        warn("taskset not found; programs run unpinned")
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(cpus) < count:
        warn(f"{count} workers but only {len(cpus)} core(s): the workers share them")
    return ",".join(str(cpu) for cpu in cpus[:count])


# Go sources Debian ships for GOPATH builds (golang-*-dev packages, e.g. gorilla/websocket).
DEBIAN_GOCODE = Path("/usr/share/gocode")


def build_go(program: Program, suite_name: str, build_dir: Path, path: str = "",
             tag: str = "") -> list[str]:
    """Builds a Go main package: a module (its directory has a go.mod) with the standard library
    only, or, without a go.mod, in GOPATH mode against the sources Debian ships in
    /usr/share/gocode (offline either way). `tag` tells apart the binaries of one program."""
    go = shutil.which("go")
    if go is None:
        raise Failure("`go` not found (install golang-go)")
    source = BENCH_DIR / (path or program.path)
    output_dir = build_dir / "bench" / "go"
    binary = output_dir / f"bench_{suite_name}_{program.name}{'_' + tag if tag else ''}"
    output_dir.mkdir(parents=True, exist_ok=True)
    # Caches under the build dir: works as any user, with no network and no home directory.
    env = dict(os.environ)
    env.update(
        GOCACHE=str(output_dir / "cache"),
        GOPATH=str(output_dir / "path"),
        GOPROXY="off",
        GOFLAGS="",
        GO111MODULE="on",
        GOTOOLCHAIN="local",
        CGO_ENABLED="0",
    )
    if not (source / "go.mod").is_file():
        if not DEBIAN_GOCODE.is_dir():
            raise Failure(f"{DEBIAN_GOCODE} not found (install the golang-*-dev package the "
                          f"program imports; see the top of {source / 'main.go'})")
        env.update(GOPATH=f"{output_dir / 'path'}:{DEBIAN_GOCODE}", GO111MODULE="off")
    result = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        raise Failure(f"go build failed:\n{result.stderr.strip()}")
    return [str(binary)]


DEBIAN_CRATES = Path("/usr/share/cargo/registry")


def find_cargo() -> tuple[str, dict[str, str]]:
    """Cargo and the environment it runs with: Debian's cargo with Debian's rustc when both are
    installed (the toolchain the Debian crate sources are packaged for, whatever else PATH
    holds, such as a rustup install), otherwise the cargo on PATH."""
    if Path("/usr/bin/cargo").is_file() and Path("/usr/bin/rustc").is_file():
        return "/usr/bin/cargo", {"RUSTC": "/usr/bin/rustc"}
    cargo = shutil.which("cargo")
    if cargo is None:
        raise Failure("`cargo` not found (install cargo, rustc and the crates: librust-tokio-dev)")
    return cargo, {}


def build_cargo(program: Program, suite_name: str, build_dir: Path, smoke: bool) -> list[str]:
    source = BENCH_DIR / program.path
    output_dir = build_dir / "bench" / "cargo"
    project = output_dir / f"{suite_name}_{program.name}"
    target_dir = output_dir / "target"
    package = None
    for line in (source / "Cargo.toml").read_text().splitlines():
        if line.replace(" ", "").startswith("name="):
            package = line.split("=", 1)[1].strip().strip('"')
            break
    if package is None:
        raise Failure(f"no package name in {source / 'Cargo.toml'}")
    binary = target_dir / "release" / package
    if smoke and not binary.is_file():
        raise Failure("not built yet, and smoke mode does not build a Rust peer from scratch "
                      f"(about a minute): a full run (make bench) builds it into {output_dir}")
    if not DEBIAN_CRATES.is_dir():
        raise Failure(f"{DEBIAN_CRATES} not found (install librust-tokio-dev)")
    cargo, toolchain = find_cargo()
    # The project is built from a copy in the build dir, so that Cargo.lock and target/ stay
    # out of the source tree; copy2 keeps the mtimes, so an unchanged copy rebuilds nothing.
    shutil.copytree(source, project, dirs_exist_ok=True)
    # A CARGO_HOME of our own: the crates come from Debian's directory, offline, whatever the
    # user's ~/.cargo says.
    cargo_home = output_dir / "home"
    cargo_home.mkdir(parents=True, exist_ok=True)
    config = ('[source.crates-io]\nreplace-with = "debian"\n\n'
              f'[source.debian]\ndirectory = "{DEBIAN_CRATES}"\n\n[net]\noffline = true\n')
    config_file = cargo_home / "config.toml"
    if not config_file.is_file() or config_file.read_text() != config:
        config_file.write_text(config)
    env = dict(os.environ)
    env.update(toolchain, CARGO_HOME=str(cargo_home), CARGO_TARGET_DIR=str(target_dir))
    env.pop("RUSTFLAGS", None)
    env.pop("CARGO_BUILD_TARGET", None)
    result = subprocess.run(
        [cargo, "build", "--release", "--offline", "--quiet"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise Failure(f"cargo build failed:\n{result.stderr.strip()}")
    if not binary.is_file():
        raise Failure(f"cargo build made no {binary}")
    return [str(binary)]


def prepare(program: Program, suite_name: str, build_dir: Path, path: str = "",
            smoke: bool = False, tag: str = "server") -> list[str]:
    """The command line that starts the program (without benchmark arguments); with `path`,
    the one that starts that other program of the same kind (a server; `tag` names its Go
    binary)."""
    if program.kind == NATIVE:
        binary = build_dir / (path or program.path)
        if not binary.is_file():
            raise Failure(f"{binary} not found (build it: cmake --build {build_dir})")
        return [str(binary)]
    if program.kind == GO:
        return build_go(program, suite_name, build_dir, path, tag if path else "")
    if program.kind == PHP:
        php = shutil.which("php")
        if php is None:
            raise Failure("`php` not found (install php-cli)")
        return [php, "-d", "memory_limit=-1", str(BENCH_DIR / (path or program.path))]
    if program.kind == NODE:
        node = shutil.which("node")
        if node is None:
            raise Failure("`node` not found (install nodejs)")
        return [node, str(BENCH_DIR / (path or program.path))]
    if program.kind == CARGO:
        return build_cargo(program, suite_name, build_dir, smoke)
    if program.kind == PYTHON:
        script = BENCH_DIR / (path or program.path)
        if not script.is_file():
            raise Failure(f"{script} not found")
        work_dir = build_dir / "bench" / "work" / f"{suite_name}_{program.name}"
        return [sys.executable, str(script), "--work-dir", str(work_dir)]
    raise ValueError(f"unknown program kind {program.kind}")


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def tail(text: str, lines: int = 15) -> str:
    """The last lines of a program's output, indented under the failure line ("" if none)."""
    kept = text.strip().splitlines()[-lines:]
    return "".join("\n    | " + line for line in kept)


def run_one(
    command: list[str],
    program: Program,
    benchmark: Benchmark,
    smoke: bool,
    cpu: int | str | None,
    timeout_s: float,
) -> float:
    """Runs one benchmark of one program in a fresh process; returns its value."""
    full = list(command) + ["--only", benchmark.program_name] + (["--smoke"] if smoke else [])
    if benchmark.workers:
        full += ["--workers", str(benchmark.workers)]
    if cpu is not None:
        full = ["taskset", "-c", str(cpu)] + full
    env = dict(os.environ)
    # The benchmarks measure weft's default FIFO order and default driver, whatever the
    # caller's shell says (a variant sets WEFT_DRIVER again through program.env).
    for name in WEFT_ENVIRONMENT:
        env.pop(name, None)
    env.update(dict(program.env))
    # A new session, so that a timeout kills the program and everything it started.
    process = subprocess.Popen(
        full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_DIR,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise Failure(f"timed out after {timeout_s:.0f} s{tail(stderr)}")
    if process.returncode != 0:
        raise Failure(f"{describe_exit(process.returncode)}{tail(stderr or stdout)}")
    return parse_result(stdout, stderr, benchmark)


def parse_result(stdout: str, stderr: str, benchmark: Benchmark) -> float:
    """The value of the one RESULT line for the benchmark in a program's output."""
    name = benchmark.program_name
    return parse_results(stdout, stderr, [(name, benchmark.unit)])[name]


def parse_results(stdout: str, stderr: str, wanted: list[tuple[str, str]]) -> dict[str, float]:
    """The values of the RESULT lines named in `wanted` ((name, unit) pairs), exactly one each."""
    units = dict(wanted)
    values: dict[str, list[float]] = {name: [] for name in units}
    for line in stdout.splitlines():
        fields = line.split()
        if len(fields) != 4 or fields[0] != "RESULT" or fields[1] not in units:
            continue
        if fields[2] != units[fields[1]]:
            raise Failure(f"{fields[1]}: reported unit {fields[2]!r}, expected "
                          f"{units[fields[1]]!r}")
        try:
            values[fields[1]].append(float(fields[3]))
        except ValueError:
            raise Failure(f"unreadable value in {line!r}") from None
    for name, found in values.items():
        if len(found) != 1:
            raise Failure(f"printed {len(found)} RESULT lines for {name}, expected 1"
                          f"{tail(stderr)}")
    return {name: found[0] for name, found in values.items()}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_file_tail(file) -> str:
    file.seek(0)
    return tail(file.read().decode(errors="replace"))


def wait_ready(server: subprocess.Popen, port: int, timeout_s: float, errors) -> None:
    """Waits for the server's "READY <port>" line on its stdout."""
    deadline = time.monotonic() + timeout_s
    fd = server.stdout.fileno()
    received = b""
    while b"\n" not in received:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure(f"server printed no READY line within {timeout_s:.0f} s"
                          f"{read_file_tail(errors)}")
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            code = server.wait()
            raise Failure(f"server ended before READY ({describe_exit(code)})"
                          f"{read_file_tail(errors)}")
        received += chunk
    line = received.split(b"\n", 1)[0].decode(errors="replace").strip()
    if line != f"READY {port}":
        raise Failure(f"server printed {line!r} first, expected 'READY {port}'")


def stop_server(server: subprocess.Popen) -> None:
    """Closes the server's stdin (its signal to exit), then SIGTERM, then SIGKILL: always to
    its whole process group, which ends with nothing of it left running."""
    try:
        server.stdin.close()
    except OSError:
        pass
    for signal_number, grace_s in ((None, 1.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, 10.0)):
        if signal_number is not None:
            try:
                os.killpg(server.pid, signal_number)
            except ProcessLookupError:
                break
        try:
            server.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # anything the server started that outlived it
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.stdout.close()


def start_upstream(command: list[str], port: int, cpu: int | None, timeout_s: float,
                   errors) -> subprocess.Popen:
    """Suite http's proxy row: the server the proxies forward to, serving mode hello on
    `port` (pinned to `cpu`), started and READY; the caller stops it (stop_server)."""
    full = list(command) + ["--port", str(port), "--mode", "hello", "--root", str(HTTP_ROOT)]
    if cpu is not None:
        full = ["taskset", "-c", str(cpu)] + full
    upstream = subprocess.Popen(full, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errors, cwd=REPO_DIR, start_new_session=True)
    try:
        wait_ready(upstream, port, min(timeout_s, 20.0), errors)
    except Failure as error:
        stop_server(upstream)
        raise Failure(f"upstream {command[0]}: {error}") from None
    return upstream


def run_served(
    server_command: list[str],
    client_command: list[str],
    program: Program,
    benchmark: Benchmark,
    smoke: bool,
    cpus: tuple[int, int] | None,
    timeout_s: float,
    certificate: tuple[str, str] | None = None,
    build_dir: Path | None = None,
) -> dict[str, float]:
    """Network benchmark: starts the program as a server on a free loopback port (pinned to
    cpus[0]), waits for READY, runs the load client (pinned to cpus[1]) and returns the values
    the client reports ({result name: value}, benchmark.results). The server is stopped
    whatever happens. `certificate`: the (certificate, key) files of a benchmark with tls.
    A benchmark with an upstream gets it started first, from `build_dir`, and stopped last."""
    if benchmark.upstream:
        binary = (build_dir or Path(".")) / benchmark.upstream
        if not binary.is_file():
            raise Failure(f"upstream {binary} not found (build it: cmake --build {build_dir})")
        upstream_port = free_port()
        with tempfile.TemporaryFile() as upstream_errors:
            upstream = start_upstream([str(binary)], upstream_port,
                                      cpus[1] if cpus is not None else None, timeout_s,
                                      upstream_errors)
            try:
                return run_served(server_command + ["--upstream", f"127.0.0.1:{upstream_port}"],
                                  client_command, program,
                                  dataclasses.replace(benchmark, upstream=""), smoke, cpus,
                                  timeout_s, certificate)
            finally:
                ended = upstream.poll()
                stop_server(upstream)
                if ended is not None:
                    raise Failure(f"the upstream ended during the run ({describe_exit(ended)})"
                                  f"{read_file_tail(upstream_errors)}")
    port = free_port()
    server_full = list(server_command) + ["--port", str(port), "--mode", benchmark.serve]
    client_full = (list(client_command) + ["--port", str(port)]
                   + list(benchmark.smoke_client_args if smoke else benchmark.client_args))
    if benchmark.sink:
        sink_port = free_port()
        while sink_port == port:
            sink_port = free_port()
        server_full += ["--target", str(sink_port)]
        client_full += ["--sink-port", str(sink_port)]
    if benchmark.tls:
        if certificate is None:
            raise Failure("no certificate for a TLS benchmark (see the warning above)")
        server_full += ["--tls-cert", certificate[0], "--tls-key", certificate[1]]
        client_full += ["--https", "--tls-ca", certificate[0]]
    server_full += list(program.server_args)
    if benchmark.server_cpu:
        client_full += ["--name", benchmark.name]
    if cpus is not None:
        server_full = ["taskset", "-c", str(cpus[0])] + server_full
        client_full = ["taskset", "-c", str(cpus[1])] + client_full
    env = dict(os.environ)
    for name in WEFT_ENVIRONMENT:
        env.pop(name, None)
    env.update(dict(program.env))
    with tempfile.TemporaryFile() as server_errors:
        server = subprocess.Popen(server_full, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=server_errors, env=env, cwd=REPO_DIR,
                                  start_new_session=True)
        try:
            wait_ready(server, port, min(timeout_s, 20.0), server_errors)
            if benchmark.server_cpu:
                # taskset execs the program: the PID is the server's own.
                client_full += ["--server-pid", str(server.pid)]
            client = subprocess.Popen(client_full, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=REPO_DIR,
                                      start_new_session=True)
            try:
                stdout, stderr = client.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(client.pid, signal.SIGKILL)
                stdout, stderr = client.communicate()
                raise Failure(f"load client timed out after {timeout_s:.0f} s{tail(stderr)}")
            finally:
                if client.poll() is None:
                    os.killpg(client.pid, signal.SIGKILL)
                    client.wait()
            if server.poll() is not None:
                raise Failure(f"server ended during the run ({describe_exit(server.returncode)})"
                              f"{read_file_tail(server_errors)}")
            if client.returncode != 0:
                raise Failure(f"load client: {describe_exit(client.returncode)}{tail(stderr)}"
                              f"{read_file_tail(server_errors)}")
            if benchmark.server_cpu:
                return parse_results(stdout, stderr, benchmark.results)
            return {benchmark.name: parse_result(stdout, stderr, benchmark)}
        finally:
            stop_server(server)


def format_value(value: float | None) -> str:
    if value is None:
        return "—"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def lower_is_better(unit: str) -> bool:
    return not unit.endswith("/s")


def ratio_to_best_peer(unit: str, weft: float | None, peers: dict[str, float]) -> str:
    if weft is None or not peers:
        return "—"
    best = min(peers.values()) if lower_is_better(unit) else max(peers.values())
    if best <= 0:
        return "—"
    best_names = [name for name, value in peers.items() if value == best]
    return f"{weft / best:.2f}× ({best_names[0]})"


def ratio_to_peer(weft: float | None, peer: float | None) -> str:
    if weft is None or peer is None or peer <= 0:
        return "—"
    return f"{weft / peer:.2f}×"


def render_table(suite: Suite, programs: list[Program], results: list[dict],
                 header: list[str]) -> str:
    weft_programs = [program for program in programs if program.is_weft]
    peer_names = [program.name for program in programs if not program.is_weft]
    if not has_weft_variants(programs):
        columns = ["benchmark", "unit", "weft"] + peer_names + ["weft vs best peer"]
    else:
        columns = (["benchmark", "unit"] + [program.name for program in weft_programs]
                   + peer_names
                   + [f"{program.name} vs {program.versus or 'best peer'}"
                      for program in weft_programs])
    lines = header + [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join(["---", "---"] + ["---:"] * (len(columns) - 2)) + "|",
    ]
    for result in results:
        cells = [result["name"], result["unit"]]
        if not has_weft_variants(programs):
            cells.append(format_value(result["weft"]))
            cells += [format_value(result["peers"].get(name)) for name in peer_names]
            cells.append(ratio_to_best_peer(result["unit"], result["weft"], result["peers"]))
        else:
            cells += [format_value(result["weft"].get(program.name)) for program in weft_programs]
            cells += [format_value(result["peers"].get(name)) for name in peer_names]
            for program in weft_programs:
                weft = result["weft"].get(program.name)
                if program.versus:
                    cells.append(ratio_to_peer(weft, result["peers"].get(program.versus)))
                else:
                    cells.append(ratio_to_best_peer(result["unit"], weft, result["peers"]))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Lower is better unless the unit ends in /s. Each cell is the median over the rounds;"
        " — means the program does not implement the benchmark (or failed). "
        + ('"weft vs best peer" is weft\'s value divided by the best peer\'s (below 1.00 means '
           "weft is ahead for lower-is-better units)."
           if not has_weft_variants(programs) else
           '"weft-X vs Y" is weft-X\'s value divided by Y\'s: below 1.00 means weft is ahead '
           "for lower-is-better units, above 1.00 for units ending in /s."),
    ]
    if suite.note:
        lines += ["", suite.note]
    return "\n".join(lines) + "\n"


def has_weft_variants(programs: list[Program]) -> bool:
    """Whether the weft program runs as several variants (columns weft-X) rather than once."""
    return [program.name for program in programs if program.is_weft] != ["weft"]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def weft_revision() -> str:
    """The commit the library was built from, as far as git can tell (marked when src/ or
    include/ had uncommitted changes)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_DIR,
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "include"],
                               cwd=REPO_DIR, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if not commit:
        return "unknown"
    return commit + (" with uncommitted changes" if dirty else "")


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    temporary.replace(path)


# --- the results in docs/benchmarks.md ---------------------------------------------------------
# Each suite's section of docs/benchmarks.md shows its latest table between the markers
# <!-- results: SUITE --> and <!-- /results -->. The block is made from bench/results/SUITE.md
# alone (its commit line and its table), rewritten by every full run and compared by
# `--check-docs` (make docs, so make test), so the page cannot drift from the record.
DOCS_PAGE = REPO_DIR / "docs" / "benchmarks.md"
DOCS_END = "<!-- /results -->"


def docs_block(suite_name: str) -> str:
    """The block of the suite from bench/results/SUITE.md. ValueError when that record is
    missing or has no table."""
    record = RESULTS_DIR / f"{suite_name}.md"
    if not record.is_file():
        raise ValueError(f"{record.relative_to(REPO_DIR)} does not exist (a full run writes it)")
    lines = record.read_text().splitlines()
    # REV is a commit, "unknown", or a commit "with uncommitted changes" (weft_revision).
    match = next((re.match(r"weft (\S+(?: with uncommitted changes)?)\. Median of (\d+) round",
                           line) for line in lines if line.startswith("weft ")), None)
    table = [line for line in lines if line.startswith("|")]
    if match is None or not table:
        raise ValueError(f"{record.relative_to(REPO_DIR)} has no 'weft REV. Median of N "
                         "round(s)' line or no table")
    rounds = int(match.group(2))
    return (f"Latest results (weft {match.group(1)}, {rounds} round{'s' if rounds != 1 else ''}; "
            f"[`bench/results/{suite_name}.md`](../bench/results/{suite_name}.md) has the "
            "notes):\n\n" + "\n".join(table) + "\n\n")


def docs_blocks(page: str) -> dict[str, tuple[int, int]]:
    """The suites' blocks in page: name -> (start, end) of the text between the markers."""
    blocks = {}
    for match in re.finditer(r"<!-- results: (\w+) -->\n", page):
        end = page.find(DOCS_END, match.end())
        if end < 0:
            raise ValueError(f"{DOCS_PAGE}: the block of {match.group(1)} has no {DOCS_END}")
        blocks[match.group(1)] = (match.end(), end)
    return blocks


def update_docs(suite_name: str) -> None:
    page = DOCS_PAGE.read_text()
    span = docs_blocks(page).get(suite_name)
    if span is None:
        warn(f"{DOCS_PAGE} has no <!-- results: {suite_name} --> block: not updated")
        return
    try:
        block = docs_block(suite_name)
    except ValueError as error:
        warn(f"{DOCS_PAGE} not updated for {suite_name}: {error}")
        return
    write_atomically(DOCS_PAGE, page[:span[0]] + block + page[span[1]:])


def check_docs() -> int:
    """0 when every suite's block in the page is what its bench/results/SUITE.md says."""
    page = DOCS_PAGE.read_text()
    stale = []
    try:
        blocks = docs_blocks(page)
    except ValueError as error:
        blocks = {}
        stale.append(str(error))
    for suite_name in sorted(SUITES):
        try:
            expected = docs_block(suite_name)
        except ValueError as error:
            stale.append(f"{suite_name}: {error}")
            continue
        if suite_name not in blocks:
            stale.append(f"{suite_name}: no <!-- results: {suite_name} --> block")
        elif page[slice(*blocks[suite_name])] != expected:
            stale.append(f"{suite_name}: the block differs from bench/results/{suite_name}.md")
    for line in stale:
        print(f"run.py --check-docs: {DOCS_PAGE.relative_to(REPO_DIR)}: {line}", file=sys.stderr)
    if stale:
        print("run.py --check-docs: `python3 bench/run.py --update-docs` rewrites the blocks",
              file=sys.stderr)
    return 1 if stale else 0


# --- the suites' plots -------------------------------------------------------------------------
def write_plot(json_path: Path, png_path: Path) -> None:
    """Draws SUITE.png from SUITE.json with bench/plot.py, run by Debian's /usr/bin/python3
    where there is one (python3-matplotlib is installed for it, whatever python3 comes first
    on PATH). Without matplotlib, a line says so and nothing is written."""
    python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
    try:
        result = subprocess.run([python, str(BENCH_DIR / "plot.py"), str(json_path),
                                 str(png_path)], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        warn(f"no plot: {error}")
        return
    if result.returncode == 3:
        log(f"no plot: matplotlib is missing for {python} (python3-matplotlib); "
            f"{png_path.name} not written")
    elif result.returncode != 0:
        warn(f"no plot: bench/plot.py failed{tail(result.stderr)}")
    else:
        log(f"wrote {png_path}")
# --- end of the suites' plots -------------------------------------------------------------------


def run_suite(suite_name: str, suite: Suite, arguments: argparse.Namespace) -> bool:
    """Runs one suite; returns False when the weft program failed (or is missing in smoke)."""
    build_dir: Path = arguments.build_dir
    smoke: bool = arguments.smoke
    timeout_s = arguments.timeout or (suite.smoke_timeout_s if smoke else suite.timeout_s)
    programs = expand_variants(suite.programs)
    benchmarks = suite.benchmarks
    if suite.per_workers:
        benchmarks = tuple(
            dataclasses.replace(benchmark, name=f"{benchmark.name}@w{workers}",
                                workload=benchmark.name, workers=workers)
            for benchmark in suite.benchmarks for workers in arguments.procs_workers)
    networked = any(benchmark.serve for benchmark in benchmarks)
    cpu_pair = None if arguments.no_pin or not networked else pick_cpu_pair()
    if networked:
        # Self-measuring benchmarks run on the servers' core (and the client's, for two).
        cpu = None if cpu_pair is None else cpu_pair[0]
        pinning = ("unpinned" if cpu_pair is None else
                   f"servers pinned to cpu {cpu_pair[0]}, the load client to cpu {cpu_pair[1]}")
    elif suite.per_workers:
        cpu = None
        worker_cpus = {workers: None if arguments.no_pin else pick_cpus(workers)
                       for workers in arguments.procs_workers}
        pinning = ("unpinned" if None in worker_cpus.values() else
                   "W workers pinned to cpus " + "; ".join(
                       f"{cpus} (W={workers})" for workers, cpus in worker_cpus.items()))
    else:
        cpu = None if arguments.no_pin else pick_cpu()
        pinning = "pinned to cpu " + str(cpu) if cpu is not None else "unpinned"
    weft_ok = True

    revision = weft_revision()  # before the runs: the binaries were built from this tree
    if smoke and suite.weft_pending and not arguments.allow_missing_weft:
        weft = next(program for program in programs if program.is_weft)
        try:
            prepare(weft, suite_name, build_dir, smoke=smoke)
        except (Failure, subprocess.TimeoutExpired, OSError) as error:
            log(f"== suite {suite_name}: SKIPPED in smoke mode: its weft program is not written "
                f"yet ({error}). See bench/{suite_name}/README.md; "
                "--allow-missing-weft runs the peers alone.")
            return True
    log(f"== suite {suite_name}: {arguments.runs} round(s){' (smoke)' if smoke else ''}, "
        f"{pinning}")
    commands: dict[str, list[str]] = {}
    # Per program, the server command of each serve mode it is asked for.
    servers: dict[str, dict[str, list[str]]] = {}

    def runner(program: Program, benchmark: Benchmark) -> list[str] | None:
        """The command that runs the benchmark of the program (None: it is missing)."""
        if benchmark.serve:
            return servers.get(program.name, {}).get(benchmark.serve)
        return commands.get(program.name)

    for program in programs:
        # The program's own command runs its self-measuring benchmarks, its server (the same
        # command unless `server` or `mode_servers` names another) its network ones; any of
        # them may be missing.
        errors = []
        try:
            commands[program.name] = prepare(program, suite_name, build_dir, smoke=smoke)
        except (Failure, subprocess.TimeoutExpired, OSError) as error:
            errors.append(error)
        implemented = [benchmark for benchmark in benchmarks
                       if benchmark.program_name in program.benchmarks]
        by_path: dict[str, list[str]] = {}
        for mode in dict.fromkeys(benchmark.serve for benchmark in implemented
                                  if benchmark.serve):
            path = dict(program.mode_servers).get(mode) or program.server
            if not path:
                if program.name in commands:
                    servers.setdefault(program.name, {})[mode] = commands[program.name]
                continue
            try:
                if path not in by_path:
                    tag = "server" if path == program.server else f"server_{mode}"
                    by_path[path] = prepare(program, suite_name, build_dir, path, tag=tag)
                servers.setdefault(program.name, {})[mode] = by_path[path]
            except (Failure, subprocess.TimeoutExpired, OSError) as error:
                errors.append(error)
        if not errors:
            continue
        lost = [benchmark.name for benchmark in implemented
                if runner(program, benchmark) is None]
        if len(lost) == len(implemented):
            missing = f"{program.name}: {errors[0]}"
            commands.pop(program.name, None)
            servers.pop(program.name, None)
        else:
            missing = f"{program.name}: {errors[0]}; {', '.join(lost)} skipped"
        if program.is_weft:
            if smoke and not arguments.allow_missing_weft:
                print(f"run.py: error: {missing}", file=sys.stderr, flush=True)
                weft_ok = False
            elif len(lost) == len(implemented):
                warn(f"{missing}; {program.name}'s column stays empty")
            else:
                warn(missing)
        else:
            warn(f"peer {missing}{'; skipped' if len(lost) == len(implemented) else ''}")
    client_command: list[str] | None = None
    client_missing = ""
    if suite.client.endswith(".py"):
        client_command = [sys.executable, str(BENCH_DIR / suite.client)]
    elif suite.client:
        client_binary = build_dir / suite.client
        if client_binary.is_file():
            client_command = [str(client_binary)]
        else:
            client_missing = f"load client {client_binary} not found (cmake --build {build_dir})"
            warn(client_missing)

    # The TLS rows' certificate: one per suite run, in a folder removed after the rounds (or,
    # should a round raise, by the folder's finalizer when this process exits).
    certificate: tuple[str, str] | None = None
    certificate_folder = None
    if any(benchmark.tls for benchmark in benchmarks):
        certificate_folder = tempfile.TemporaryDirectory(prefix="weft-bench-tls-")
        try:
            certificate = make_certificate(Path(certificate_folder.name))
        except Failure as error:
            warn(f"{error}; the TLS rows fail")

    samples: dict[tuple[str, str], list[float]] = {}
    failures: list[str] = []
    runnable = [program for program in programs
                if program.name in commands or program.name in servers]
    for round_index in range(arguments.runs):
        # Rotate the program order every round: nobody always runs first (cold caches) or last.
        shift = round_index % max(1, len(runnable))
        order = runnable[shift:] + runnable[:shift]
        for benchmark in benchmarks:
            for program in order:
                if benchmark.program_name not in program.benchmarks:
                    continue
                if runner(program, benchmark) is None:
                    continue  # its command or server is missing (warned above)
                label = f"[{round_index + 1}/{arguments.runs}] {benchmark.name} {program.name}"
                started = time.monotonic()
                try:
                    if benchmark.serve is None:
                        cores = cpu
                        if benchmark.cores == 2 and cpu_pair is not None:
                            cores = f"{cpu_pair[0]},{cpu_pair[1]}"
                        if benchmark.workers:
                            cores = worker_cpus[benchmark.workers]
                        values = {benchmark.name: run_one(commands[program.name], program,
                                                          benchmark, smoke, cores, timeout_s)}
                    elif client_command is None:
                        raise Failure(client_missing)
                    else:
                        values = run_served(runner(program, benchmark), client_command, program,
                                            benchmark, smoke, cpu_pair, timeout_s, certificate,
                                            build_dir)
                except Failure as error:
                    message = f"{label}: FAILED: {error}"
                    failures.append(message)
                    print(message, file=sys.stderr, flush=True)
                    if program.is_weft:
                        weft_ok = False
                    continue
                for name, value in values.items():
                    samples.setdefault((name, program.name), []).append(value)
                shown = "; ".join(f"{format_value(values[name])} {unit}"
                                  for name, unit in benchmark.results if name in values)
                log(f"{label}: {shown} ({time.monotonic() - started:.1f} s)")
    if certificate_folder is not None:
        certificate_folder.cleanup()

    results = []
    for result_name, unit in [result for benchmark in benchmarks
                              for result in benchmark.results]:
        def median(program_name: str) -> float | None:
            values = samples.get((result_name, program_name))
            return round(statistics.median(values), 3) if values else None

        peers = {}
        for program in programs:
            if not program.is_weft and median(program.name) is not None:
                peers[program.name] = median(program.name)
        if has_weft_variants(programs):
            weft = {program.name: median(program.name) for program in programs
                    if program.is_weft}
        else:
            weft = median("weft")
        results.append({"name": result_name, "unit": unit, "weft": weft, "peers": peers})

    output_dir = RESULTS_DIR / "smoke" if smoke else RESULTS_DIR
    output_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(output_dir / f"{suite_name}.json",
                     json.dumps({"suite": suite_name, "results": results}, indent=2) + "\n")
    header = [
        f"# Suite `{suite_name}`{' (smoke sizes)' if smoke else ''}",
        "",
        f"weft {revision}. Median of {arguments.runs} round(s); {cpu_model()}, "
        f"Linux {platform.release()}, "
        + (f"every program pinned to one core"
           f"{'' if cpu is not None else ' (not pinned: taskset missing)'}. "
           if not networked and not suite.per_workers else
           "each benchmark@wW run with W workers, the program pinned to the lowest W cores"
           f"{'' if pinning != 'unpinned' else ' (not pinned)'}. "
           if suite.per_workers else
           "servers pinned to one core and the load client to another"
           + ("" if all(benchmark.serve for benchmark in benchmarks) else
              ", " + (suite.pinning_note or
                      "timers to the servers' core, threadpool_roundtrip to both"))
           + f"{'' if cpu_pair is not None else ' (not pinned: taskset missing)'}. ")
        + "How each number is computed: the comment at the top of each program "
        f"(bench/{suite_name}/, bench/peers/{suite_name}/).",
        "",
    ]
    table = render_table(suite, programs, results, header)
    write_atomically(output_dir / f"{suite_name}.md", table)
    if suite.plot:
        write_plot(output_dir / f"{suite_name}.json", output_dir / f"{suite_name}.png")
    if not smoke:
        update_docs(suite_name)
    log("")
    log(table)
    log(f"wrote {output_dir / (suite_name + '.json')} and {suite_name}.md")
    if failures:
        print(f"run.py: {len(failures)} failure(s) in suite {suite_name}:", file=sys.stderr)
        for failure in failures:
            print("  " + failure.splitlines()[0], file=sys.stderr)
        sys.stderr.flush()
    return weft_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=REPO_DIR / "build" / "release",
                        help="CMake build directory holding bench/ (default: build/release)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, one round, results to bench/results/smoke/")
    parser.add_argument("--suite", action="append", choices=sorted(SUITES),
                        help="suite to run (repeatable; default: all)")
    parser.add_argument("--runs", type=int, help="rounds per suite (default 5, smoke 1)")
    parser.add_argument("--timeout", type=float,
                        help="seconds per program run (default: the suite's, smaller in smoke)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin programs to one core")
    parser.add_argument("--procs-workers", default="1,2",
                        help="worker counts the per-worker suites (procs) run with, "
                             "comma-separated (default 1,2; a bigger machine: 1,2,4,8,16)")
    parser.add_argument("--allow-missing-weft", action="store_true",
                        help="in smoke mode, run a suite whose weft program is missing with its "
                             "peers alone (instead of failing, or skipping a suite whose weft "
                             "program is not written yet)")
    parser.add_argument("--check-docs", action="store_true",
                        help="only check that docs/benchmarks.md shows each suite's table as "
                             "bench/results/SUITE.md has it (exit 1 if not); runs nothing")
    parser.add_argument("--update-docs", action="store_true",
                        help="only rewrite docs/benchmarks.md's tables from bench/results/; "
                             "runs nothing (a full run does it for the suites it ran)")
    arguments = parser.parse_args()
    if arguments.check_docs:
        return check_docs()
    if arguments.update_docs:
        for suite_name in sorted(SUITES):
            update_docs(suite_name)
        return check_docs()
    if arguments.runs is None:
        arguments.runs = 1 if arguments.smoke else 5
    if arguments.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        arguments.procs_workers = sorted({int(count) for count in
                                          arguments.procs_workers.split(",") if count.strip()})
    except ValueError:
        parser.error(f"--procs-workers wants counts like 1,2,4, not {arguments.procs_workers!r}")
    if not arguments.procs_workers or arguments.procs_workers[0] < 1:
        parser.error("--procs-workers wants at least one count, each at least 1")
    arguments.build_dir = arguments.build_dir.resolve()
    if not arguments.build_dir.is_dir():
        print(f"run.py: error: build dir {arguments.build_dir} does not exist "
              "(cmake --preset release && cmake --build --preset release)", file=sys.stderr)
        return 1

    # Suite net's 1000-connection rows need more descriptors than a default soft limit of 1024
    # leaves the server and the client: raise it to the hard limit for every program started.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    ok = True
    for suite_name in arguments.suite or sorted(SUITES):
        ok = run_suite(suite_name, SUITES[suite_name], arguments) and ok
    if not ok:
        print("run.py: the weft program failed (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
