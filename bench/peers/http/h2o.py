#!/usr/bin/env python3
"""Peer: h2o (Debian's h2o 2.2) for suite http: one worker thread (num-threads: 1), started by
launcher.py (the contract of bench/http/README.md).

    python3 h2o.py --work-dir DIR --port N --mode hello|static --root ROOT
                   [--tls-cert FILE --tls-key FILE]

hello: h2o 2.2 has no directive that returns a fixed body, so /hello is mapped with
`file.file` to a file in DIR holding "hello\\n" (h2o's static file handler, its fastest path:
an mruby handler returning the string measured slower here). static: `file.dir: ROOT` with
h2o's defaults (its open-file cache on, sendfile). Changed from h2o's defaults for a
benchmark: no access log, max-connections 4096 (the default 1024 is too close to the
1000-connection row). Its error log is in DIR (no pid file: as root h2o switches to nobody
before it writes one, and nobody may not write in DIR).

With --upstream HOST:PORT (run.py's proxy_keepalive row): a reverse proxy to it instead
(proxy.reverse.url, upstream connections kept alive, h2o's default).

With --tls-cert and --tls-key (suite http's https_keepalive row): the listener's `ssl` map
with certificate-file and key-file, and h2o's TLS defaults otherwise (its cipher-suite list
applies to TLS 1.2 only, TLS 1.3's suites are OpenSSL's; the client's order of preference;
the private key held by its neverbleed process, a fork of h2o in the same session, whose CPU
time counts), except `ocsp-update-interval: 0`: OCSP stapling off. By default h2o runs a Perl
helper (fetch-ocsp-response) at start and again later to fetch a staple, which a self-signed
certificate has no responder for; a helper that ends inside the measured window would take its
CPU time out of the session's total (a negative figure was seen in smoke mode).
"""

import os
import shutil
import sys

import launcher


def configure(arguments) -> list[str]:
    h2o = shutil.which("h2o") or "/usr/bin/h2o"
    work = arguments.work_dir
    (work / "hello.txt").write_text("hello\n")
    if arguments.upstream is not None:
        # h2o's proxy handler (it keeps upstream connections alive by default) and its
        # X-Forwarded-For.
        paths = (f'      "/":\n        proxy.reverse.url: http://{arguments.upstream}/\n'
                 '        proxy.preserve-host: OFF\n')
    elif arguments.mode == "hello":
        paths = f'      "/hello":\n        file.file: {work}/hello.txt\n'
    else:
        paths = f'      "/":\n        file.dir: {arguments.root}\n'
    user = "user: nobody\n" if os.geteuid() == 0 else ""
    tls = ""
    if arguments.tls_cert is not None:
        tls = (f"  ssl:\n    certificate-file: {arguments.tls_cert}\n"
               f"    key-file: {arguments.tls_key}\n    ocsp-update-interval: 0\n")
    (work / "h2o.conf").write_text(f"""{user}num-threads: 1
max-connections: 4096
error-log: {work}/error.log
listen:
  host: 127.0.0.1
  port: {arguments.port}
{tls}file.mime.addtypes:
  text/plain: .txt
hosts:
  default:
    paths:
{paths}""")
    return [h2o, "-c", f"{work}/h2o.conf"]


if __name__ == "__main__":
    sys.exit(launcher.run("h2o.py", configure, "error.log"))
