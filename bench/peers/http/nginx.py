#!/usr/bin/env python3
"""Peer: nginx (Debian's nginx-light) for suite http: one worker process (plus its idle master),
started by launcher.py (the contract of bench/http/README.md).

    python3 nginx.py --work-dir DIR --port N --mode hello|static --root ROOT
                     [--tls-cert FILE --tls-key FILE]

With --upstream HOST:PORT (run.py's proxy_keepalive row): a reverse proxy to it instead,
proxy_pass to an upstream block with keepalive 64, proxy_http_version 1.1 and Connection
cleared (so that upstream connections are reused), X-Forwarded-For and X-Forwarded-Proto set.

hello: `location / { return 200 "hello\\n"; }` with default_type text/plain. static: `root
ROOT` with nginx's defaults for files (sendfile on, no open_file_cache: each request opens
and fstat()s the file). Changed from nginx's defaults for a benchmark, the usual tuning:
access_log off, keepalive_requests raised from 1000 to 1000000000 (otherwise every
connection is closed after its 1000th request), worker_connections 4096 (1000 connections
and more), tcp_nodelay on (the default, stated). Everything it writes (pid, logs, temporary
folders) is under DIR; it runs as the current user (as root, nginx's worker runs as nobody).

With --tls-cert and --tls-key (suite http's https_keepalive row): `listen ... ssl` with
ssl_certificate and ssl_certificate_key, and `ssl_protocols TLSv1.2 TLSv1.3` (nginx 1.22's
default is TLSv1 TLSv1.1 TLSv1.2, so TLS 1.3 is named to let it speak what every other server
of the row speaks); nginx's other TLS defaults are kept: ssl_ciphers HIGH:!aNULL:!MD5 (TLS 1.2
only: TLS 1.3's suites are OpenSSL's), ssl_prefer_server_ciphers off (the client's order),
session tickets on, no session cache.
"""

import shutil
import sys

import launcher


def configure(arguments) -> list[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    work = arguments.work_dir
    for folder in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / folder).mkdir(exist_ok=True)
    upstream = ""
    if arguments.upstream is not None:
        # nginx's idiom for a keep-alive upstream: an upstream block with keepalive, HTTP/1.1 and
        # the Connection field cleared; X-Forwarded-For as weft's proxy sends it.
        upstream = (f"upstream backend {{\n    server {arguments.upstream};\n    keepalive 64;\n  }}\n"
                    "  ")
        location = ("location / {\n      proxy_pass http://backend;\n      proxy_http_version 1.1;"
                    '\n      proxy_set_header Connection "";'
                    "\n      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;"
                    "\n      proxy_set_header X-Forwarded-Proto $scheme;\n    }")
    elif arguments.mode == "hello":
        location = 'location / {\n      return 200 "hello\\n";\n    }'
    else:
        location = f"root {arguments.root};\n    location / {{\n    }}"
    listen = f"127.0.0.1:{arguments.port}"
    tls = ""
    if arguments.tls_cert is not None:
        listen += " ssl"
        tls = (f"\n    ssl_certificate {arguments.tls_cert};"
               f"\n    ssl_certificate_key {arguments.tls_key};"
               "\n    ssl_protocols TLSv1.2 TLSv1.3;")
    (work / "nginx.conf").write_text(f"""daemon off;
master_process on;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{
  worker_connections 4096;
}}
http {{
  access_log off;
  default_type text/plain;
  types {{
    text/plain txt;
  }}
  sendfile on;
  tcp_nodelay on;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path {work}/client_body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  {upstream}server {{
    listen {listen} backlog=4096;
    server_name localhost;{tls}
    {location}
  }}
}}
""")
    return [nginx, "-p", f"{work}/", "-c", f"{work}/nginx.conf", "-e", f"{work}/error.log"]


if __name__ == "__main__":
    sys.exit(launcher.run("nginx.py", configure, "error.log"))
