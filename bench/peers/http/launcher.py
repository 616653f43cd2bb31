"""Starts a web server from Debian (nginx, h2o) as a peer of suite http, under the contract of
bench/http/README.md, for servers that cannot follow it themselves (they print no READY line
and do not watch standard input):

    python3 nginx.py --work-dir DIR --port N --mode hello|static --root ROOT
                     [--tls-cert FILE --tls-key FILE]

writes the server's configuration into DIR (its prefix: configuration, pid file, logs and
temporary folders all live there, so it runs as any user, needs no root and touches nothing of
the system's installation), starts the server in the foreground as a child of this process (so
it shares the session run.py gave this process: run.py's CPU sampling covers it), waits until
127.0.0.1:N accepts a connection, prints "READY N", and then waits for standard input's end,
on which it stops the server (SIGTERM, then SIGKILL after 5 s) and exits 0. If the server exits
first, this exits 1 with the server's log on stderr. This process is idle (blocked in read)
while the server works: it adds no measurable CPU time.

With --tls-cert and --tls-key (PEM files, both or neither: suite http's https_keepalive row) the
configuration serves HTTPS with that certificate and key instead of plain HTTP; the readiness
probe only opens a TCP connection either way.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


def parse(name: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=name, description=__doc__.split("\n\n")[0])
    parser.add_argument("--work-dir", type=Path, required=True,
                        help="a folder of the server's own (created; its contents replaced)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("hello", "static"), required=True)
    parser.add_argument("--root", type=Path, required=True,
                        help="the folder holding 4k.txt (static mode)")
    parser.add_argument("--tls-cert", type=Path,
                        help="serve HTTPS with this PEM certificate (with --tls-key)")
    parser.add_argument("--tls-key", type=Path, help="the PEM private key of --tls-cert")
    parser.add_argument("--upstream", metavar="HOST:PORT",
                        help="a reverse proxy to this HTTP server instead of --mode (run.py's "
                        "proxy_keepalive row: bench/http/README.md, \"A reverse proxy\")")
    arguments = parser.parse_args()
    if not 0 < arguments.port < 65536:
        parser.error(f"--port wants 1 to 65535, not {arguments.port}")
    if arguments.mode == "static" and not (arguments.root / "4k.txt").is_file():
        parser.error(f"{arguments.root / '4k.txt'} not found")
    if (arguments.tls_cert is None) != (arguments.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    for tls_file in (arguments.tls_cert, arguments.tls_key):
        if tls_file is not None and not tls_file.is_file():
            parser.error(f"{tls_file} not found")
    arguments.work_dir = arguments.work_dir.resolve()
    arguments.root = arguments.root.resolve()
    if arguments.tls_cert is not None:
        arguments.tls_cert = arguments.tls_cert.resolve()
        arguments.tls_key = arguments.tls_key.resolve()
    return arguments


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def run(name: str, configure: Callable[[argparse.Namespace], list[str]],
        log_file: str) -> int:
    """Parses the arguments, lets `configure` write the configuration into the work dir and
    return the server's command line, then runs the server under the contract above."""
    arguments = parse(name)
    arguments.work_dir.mkdir(parents=True, exist_ok=True)
    command = configure(arguments)
    log_path = arguments.work_dir / log_file

    def server_log() -> str:
        try:
            return log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, cwd=arguments.work_dir)
    deadline = time.monotonic() + 15
    while not accepts(arguments.port):
        if server.poll() is not None:
            print(f"{name}: {command[0]} exited ({server.returncode}) before listening:\n"
                  f"{server_log()}", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            server.kill()
            print(f"{name}: {command[0]} did not listen on 127.0.0.1:{arguments.port} "
                  f"within 15 s:\n{server_log()}", file=sys.stderr)
            return 1
        time.sleep(0.05)  # polling the port: the server gives no other sign of readiness
    print(f"READY {arguments.port}", flush=True)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    if server.poll() is not None:
        print(f"{name}: {command[0]} exited ({server.returncode}) while serving:\n"
              f"{server_log()}", file=sys.stderr)
        return 1
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    return 0
