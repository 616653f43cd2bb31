#!/usr/bin/env python3
"""Suite http's load client: drives one HTTP server with wrk (or h2load --h1) and reports the
suite's three figures per row, the same RESULT lines as suite net's load client:

    RESULT NAME requests/s X        responses completed in the measured window / its length
    RESULT NAME.p99 us Y            99th percentile latency of those requests (wrk: its
                                    distribution, with its coordinated-omission correction
                                    redone per batch when pipelining, by wrk.lua, which says
                                    why; h2load: from its per-request log)
    RESULT NAME.cpu us/request Z    with --server-pid P: user + system CPU time of every thread
                                    of every process in session P (run.py starts each server
                                    in a session of its own, so this is the whole server, e.g.
                                    nginx's master and worker), read from /proc just before
                                    the measured run starts and just after it ends, divided by
                                    the responses completed, in microseconds

    http_load.py --port N --path /hello --check hello|FILE [--connections C] [--pipeline K]
                 [--seconds S] [--warmup W] [--requests R] [--tool wrk|h2load]
                 [--name NAME] [--server-pid P] [--https [--tls-ca FILE]]

Before any load, a correctness check on one connection: K requests (at least 2) sent in one
write, and K complete responses read back, each 200 with the expected body ("hello\\n", or the
bytes of FILE) and the connection still open; a server that fails it fails the row.
Then, with wrk: a warm-up run of W seconds (its figures dropped; connections, caches, JITs),
then the measured run of S seconds: `wrk -t1 -cC -dS --latency -s bench/http/wrk.lua` (the
script puts K requests in every write when K > 1, and prints the p99). wrk takes whole seconds
only.
With h2load: `h2load --h1 -t1 -cC -mK` with --warm-up-time W and -D S, or with -n R (a fixed
number of requests, what smoke mode uses to stay short). The load tool inherits this process's
CPU affinity (run.py pins it). Any socket error, non-2xx response or failed request fails the
run (exit 1, "http_load: error: ..." on stderr). The tool's own output goes to stderr.

--https (suite http's https_keepalive row): the server speaks TLS, and everything above goes
over it: the check's connection is wrapped by Python's ssl module (offering ALPN http/1.1, as
h2load --h1 does; verifying the certificate against --tls-ca FILE and its IP address
127.0.0.1, or not verifying without --tls-ca), and fails unless TLS 1.3 was negotiated (the
row compares servers speaking the same version); it prints the version and cipher suite on
stderr. wrk and h2load get https:// URLs: each of their connections makes a full handshake
when it opens (a new process has no session to resume) and then keeps it, so over a
keep-alive row the handshakes are a few dozen against hundreds of thousands of requests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


class LoadError(Exception):
    pass


def session_stats(session: int) -> list[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process in the
    session."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name (field 2) is in parentheses and may hold anything: count fields
        # from the last ')'. After it: state, ppid, pgrp, session, ...; utime and stime are
        # fields 14 and 15 (the thread group's totals).
        fields = text[text.rfind(")") + 2:].split()
        if int(fields[3]) == session:
            found.append((int(entry), fields))
    return found


def session_pids(session: int) -> list[int]:
    """Every process in the session (a launcher and the server it started, nginx's master and
    worker)."""
    return [pid for pid, _ in session_stats(session)]


def session_ticks(session: int) -> tuple[int, int]:
    """(user, system) clock ticks so far of every process (all threads) in the session;
    LoadError when none is left."""
    processes = session_stats(session)
    if not processes:
        raise LoadError(f"the server (session {session}) is gone")
    return (sum(int(fields[11]) for _, fields in processes),
            sum(int(fields[12]) for _, fields in processes))


def session_cpu_seconds(session: int) -> float:
    """User + system CPU time so far of every process (all threads) in the session."""
    return sum(session_ticks(session)) / os.sysconf("SC_CLK_TCK")


def read_response(connection: socket.socket, pending: bytearray) -> tuple[int, bytes]:
    """Reads one response (status line, headers, Content-Length body) from the connection."""
    while b"\r\n\r\n" not in pending:
        chunk = connection.recv(65536)
        if not chunk:
            raise LoadError("the server closed the connection before a whole response")
        pending += chunk
    head, _, _ = bytes(pending).partition(b"\r\n\r\n")
    del pending[:len(head) + 4]
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not match:
        raise LoadError(f"not an HTTP/1.x status line: {lines[0]!r}")
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        if name.strip().lower() == "transfer-encoding":
            raise LoadError("a chunked response; the suite's servers send Content-Length")
    if length is None:
        raise LoadError("a response without Content-Length")
    while len(pending) < length:
        chunk = connection.recv(65536)
        if not chunk:
            raise LoadError("the server closed the connection in the middle of a body")
        pending += chunk
    body = bytes(pending[:length])
    del pending[:length]
    return int(match.group(1)), body


def tls_client(ca_file: str | None) -> ssl.SSLContext:
    """The check's TLS settings: Python's client defaults (TLS 1.2 and 1.3; TLS 1.3's cipher
    suites and groups are OpenSSL's defaults, what wrk and h2load offer too), ALPN http/1.1,
    the certificate verified against ca_file (and its name: 127.0.0.1) or not at all without
    one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


def connect(port: int, tls: ssl.SSLContext | None) -> socket.socket:
    """A connection to the server; with `tls`, its TLS handshake done, which must have
    negotiated TLS 1.3 (LoadError naming the version otherwise)."""
    plain = socket.create_connection(("127.0.0.1", port), timeout=10)
    if tls is None:
        return plain
    try:
        connection = tls.wrap_socket(plain, server_hostname="127.0.0.1")
    except OSError as error:  # ssl.SSLError included
        plain.close()
        raise LoadError(f"TLS handshake with 127.0.0.1:{port} failed: {error}") from None
    version = connection.version()
    if version != "TLSv1.3":
        connection.close()
        raise LoadError(f"the server negotiated {version}, not TLSv1.3")
    print(f"http_load: {version}, {connection.cipher()[0]}, ALPN "
          f"{connection.selected_alpn_protocol() or 'none'}", file=sys.stderr)
    return connection


def check(port: int, path: str, expected: bytes, count: int,
          tls: ssl.SSLContext | None = None) -> None:
    """`count` pipelined requests in one write; every response must be 200 with the body. With
    `tls`, over TLS 1.3."""
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").encode() * count
    with connect(port, tls) as connection:
        connection.sendall(request)
        pending = bytearray()
        for index in range(count):
            status, body = read_response(connection, pending)
            if status != 200 or body != expected:
                raise LoadError(f"response {index + 1} of {count} to GET {path}: status {status}, "
                                f"body {body[:40]!r}{'...' if len(body) > 40 else ''} "
                                f"({len(body)} bytes, expected {len(expected)})")
        if pending:
            raise LoadError(f"{len(pending)} bytes after the {count} responses")


def run_tool(command: list[str], timeout_s: float, env: dict[str, str] | None = None) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                                env=env)
    except subprocess.TimeoutExpired:
        raise LoadError(f"{command[0]} ran past {timeout_s:.0f} s") from None
    sys.stderr.write(result.stdout + result.stderr)
    if result.returncode != 0:
        raise LoadError(f"{' '.join(command)} failed (exit code {result.returncode}): "
                        f"{(result.stderr or result.stdout).strip()[-400:]}")
    return result.stdout


def url(arguments: argparse.Namespace) -> str:
    scheme = "https" if arguments.https else "http"
    return f"{scheme}://127.0.0.1:{arguments.port}{arguments.path}"


def wrk_command(arguments: argparse.Namespace, seconds: int, latency: bool) -> list[str]:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise LoadError("`wrk` not found (install wrk)")
    command = [wrk, "-t1", f"-c{arguments.connections}", f"-d{seconds}s", "--timeout", "10s"]
    if latency:
        command.append("--latency")
    command += ["-s", str(HERE / "wrk.lua"), url(arguments), "--", str(arguments.pipeline)]
    return command


def measure_wrk(arguments: argparse.Namespace) -> tuple[float, float, int, float]:
    """(requests/s, p99 in us, requests, CPU seconds of the server over the run)."""
    if arguments.seconds != int(arguments.seconds) or arguments.warmup != int(arguments.warmup):
        raise LoadError("wrk takes whole seconds: --seconds and --warmup must be integers")
    if arguments.warmup > 0:
        run_tool(wrk_command(arguments, int(arguments.warmup), False), arguments.warmup + 30)
    cpu_before = session_cpu_seconds(arguments.server_pid) if arguments.server_pid else 0.0
    # wrk.lua's done() reads the connection count from the environment (see its top comment).
    env = dict(os.environ, WEFT_WRK_CONNECTIONS=str(arguments.connections),
               WEFT_WRK_DEPTH=str(arguments.pipeline))
    output = run_tool(wrk_command(arguments, int(arguments.seconds), True),
                      arguments.seconds + 30, env)
    cpu = (session_cpu_seconds(arguments.server_pid) - cpu_before) if arguments.server_pid else 0
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                       output)
    if errors and any(int(value) for value in errors.groups()):
        raise LoadError(f"wrk saw socket errors: {errors.group(0)}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if bad:
        raise LoadError(f"wrk saw {bad.group(1)} non-2xx or 3xx responses")
    total = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", output)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    p99 = re.search(r"^weft-p99-us (\d+)$", output, re.MULTILINE)
    if not (total and rate and p99):
        raise LoadError("unreadable wrk output (no request count, rate or weft-p99-us line)")
    requests = int(total.group(1))
    if requests == 0:
        raise LoadError("no request completed")
    return float(rate.group(1)), float(p99.group(1)), requests, cpu


def measure_h2load(arguments: argparse.Namespace) -> tuple[float, float, int, float]:
    h2load = shutil.which("h2load")
    if h2load is None:
        raise LoadError("`h2load` not found (install nghttp2-client)")
    with tempfile.TemporaryDirectory() as folder:
        log_file = Path(folder) / "requests.log"
        command = [h2load, "--h1", "-t1", f"-c{arguments.connections}",
                   f"-m{arguments.pipeline}", f"--log-file={log_file}"]
        if arguments.requests:
            command += [f"-n{arguments.requests}"]
            limit = 60.0
        else:
            command += [f"-D{round(arguments.seconds * 1000)}ms",
                        f"--warm-up-time={round(arguments.warmup * 1000)}ms"]
            limit = arguments.seconds + arguments.warmup + 30
        command.append(url(arguments))
        cpu_before = session_cpu_seconds(arguments.server_pid) if arguments.server_pid else 0.0
        output = run_tool(command, limit)
        cpu = ((session_cpu_seconds(arguments.server_pid) - cpu_before)
               if arguments.server_pid else 0.0)
        # The log holds the measured requests only: start (us since the epoch), status, and
        # the time to the end of the response (us).
        latencies = []
        for line in log_file.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) >= 3:
                latencies.append(float(fields[2]))
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, "
                     r"(\d+) failed, (\d+) errored, (\d+) timeout", output)
    rate = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", output)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
    if not (done and rate and codes):
        raise LoadError("unreadable h2load output")
    if any(int(value) for value in done.groups()[2:]) or any(
            int(value) for value in codes.groups()[1:]):
        raise LoadError(f"h2load saw failures: {done.group(0)}; {codes.group(0)}")
    requests = int(done.group(2))
    if requests == 0 or not latencies:
        raise LoadError("no request completed")
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return float(rate.group(1)), p99, requests, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True, help="the request target, e.g. /hello")
    parser.add_argument("--check", required=True,
                        help='the body every response must carry: "hello" (hello\\n) or a file')
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--pipeline", type=int, default=1, help="requests per write")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--warmup", type=float, default=1)
    parser.add_argument("--requests", type=int, default=0,
                        help="h2load only: a fixed number of requests instead of --seconds")
    parser.add_argument("--tool", choices=("wrk", "h2load"), default="wrk")
    parser.add_argument("--name", default="http")
    parser.add_argument("--server-pid", type=int, default=0,
                        help="report NAME.cpu: the CPU time of this process's session")
    parser.add_argument("--https", action="store_true",
                        help="the server speaks TLS (1.3 required): https:// URLs")
    parser.add_argument("--tls-ca", metavar="FILE",
                        help="with --https: verify the server's certificate against this PEM "
                             "file in the check (default: no verification)")
    arguments = parser.parse_args()
    if arguments.connections < 1 or arguments.pipeline < 1 or arguments.seconds <= 0:
        parser.error("--connections, --pipeline and --seconds must be positive")
    if arguments.requests and arguments.tool != "h2load":
        parser.error("--requests is for --tool h2load (wrk runs for a duration)")
    if arguments.tls_ca and not arguments.https:
        parser.error("--tls-ca is for --https")
    expected = b"hello\n" if arguments.check == "hello" else Path(arguments.check).read_bytes()
    try:
        check(arguments.port, arguments.path, expected, max(2, arguments.pipeline),
              tls_client(arguments.tls_ca) if arguments.https else None)
        measure = measure_wrk if arguments.tool == "wrk" else measure_h2load
        rate, p99, requests, cpu = measure(arguments)
    except (LoadError, OSError) as error:
        print(f"http_load: error: {error}", file=sys.stderr)
        return 1
    print(f"RESULT {arguments.name} requests/s {rate:.1f}")
    print(f"RESULT {arguments.name}.p99 us {p99:.1f}")
    if arguments.server_pid:
        print(f"RESULT {arguments.name}.cpu us/request {cpu * 1e6 / requests:.4f}")
        print(f"http_load: {requests} requests, server CPU {cpu:.3f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
