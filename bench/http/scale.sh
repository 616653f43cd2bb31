#!/bin/bash
# Worker scaling on a many-core machine: weft-httpd (--workers W) against nginx
# (worker_processes W, reuseport, as weft's one SO_REUSEPORT listener per worker), both pinned
# to cores 0..W-1, driven by wrk pinned to CLIENT_CORES: GET /hello on keep-alive connections,
# 5 s measured after a 1 s warm-up. Prints, per server and W, requests/s, wrk's p99, the
# server's CPU time per request (utime + stime of all its threads and processes, from /proc)
# and how many cores it kept busy. Not part of `make bench`: it needs 16 cores (the 2-core
# machines run suite http with one worker), and its results are in bench/http/README.md.
#
#   bench/http/scale.sh                      # binaries from the build and the system
#   BUNDLE=DIR bench/http/scale.sh           # DIR/bin/{weft-httpd,wrk,nginx}, run through
#                                            # DIR/lib's loader (a machine without the packages)
# Environment: WORKERS ("1 2 4 8"), CLIENT_CORES ("8-15"), CLIENT_THREADS (8),
# CONNECTIONS (512), MEASURE_SECONDS (5), OUT (a folder for scale.txt; default: stdout only).
set -u
cd "$(dirname "$0")/../.." || exit 1
WORKERS=${WORKERS:-1 2 4 8}
CLIENT_CORES=${CLIENT_CORES:-8-15}
CLIENT_THREADS=${CLIENT_THREADS:-8}
CONNECTIONS=${CONNECTIONS:-512}
SECONDS_MEASURED=${MEASURE_SECONDS:-5}
if [ -n "${BUNDLE:-}" ]; then
  RUN=("$BUNDLE/lib/ld-linux-x86-64.so.2" --library-path "$BUNDLE/lib")
  HTTPD=$BUNDLE/bin/weft-httpd WRK=$BUNDLE/bin/wrk NGINX=$BUNDLE/bin/nginx
else
  RUN=()
  HTTPD=${HTTPD:-build/release/apps/weft-httpd/weft-httpd}
  WRK=$(command -v wrk) NGINX=$(command -v nginx || echo /usr/sbin/nginx)
fi
for program in "$HTTPD" "$WRK" "$NGINX"; do
  [ -x "$program" ] || { echo "scale.sh: $program is missing" >&2; exit 1; }
done
highest=0
for w in $WORKERS; do [ "$w" -gt "$highest" ] && highest=$w; done
client_last=${CLIENT_CORES##*-}
if [ "$(nproc)" -le "$client_last" ] || [ "$highest" -gt "${CLIENT_CORES%%-*}" ]; then
  echo "scale.sh: $(nproc) cores; servers on 0..$((highest - 1)) and the client on $CLIENT_CORES" \
    "need more (set WORKERS and CLIENT_CORES)" >&2
  exit 1
fi
[ -n "${OUT:-}" ] && exec > >(tee "$OUT/scale.txt") 2>&1
echo "cores $(nproc), kernel $(uname -r), $(lscpu | sed -n 's/^Model name: *//p')"
echo "wrk -t$CLIENT_THREADS -c$CONNECTIONS -d${SECONDS_MEASURED}s on cores $CLIENT_CORES"
ulimit -n 65536 2> /dev/null
TCK=$(getconf CLK_TCK)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ticks() {
  local total=0 user system p
  for p in "$@"; do
    read -r user system < <(awk '{print $14, $15}' "/proc/$p/stat")
    total=$((total + user + system))
  done
  echo "$total"
}

wait_port() {
  for _ in $(seq 100); do
    (echo > "/dev/tcp/127.0.0.1/$1") 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

# measure NAME WORKERS PORT PID...: one warm-up, one measured wrk run, one line of figures.
measure() {
  local name=$1 w=$2 port=$3
  shift 3
  local url="http://127.0.0.1:$port/hello"
  taskset -c "$CLIENT_CORES" "${RUN[@]}" "$WRK" "-t$CLIENT_THREADS" "-c$CONNECTIONS" -d1s "$url" \
    > /dev/null
  local before after out
  before=$(ticks "$@")
  out=$(taskset -c "$CLIENT_CORES" "${RUN[@]}" "$WRK" "-t$CLIENT_THREADS" "-c$CONNECTIONS" \
    "-d${SECONDS_MEASURED}s" --latency "$url")
  after=$(ticks "$@")
  local requests rate p99 errors
  requests=$(awk '/requests in/{print $1}' <<< "$out")
  rate=$(awk '/Requests\/sec/{print $2}' <<< "$out")
  p99=$(awk '/ 99%/{print $2}' <<< "$out")
  errors=$(grep -E "Socket errors|Non-2xx" <<< "$out" | tr '\n' ' ')
  awk -v n="$name" -v w="$w" -v r="$requests" -v rate="$rate" -v p="$p99" -v t=$((after - before)) \
    -v hz="$TCK" -v s="$SECONDS_MEASURED" -v e="$errors" 'BEGIN {
      printf "%-6s workers=%-2d requests/s=%9.0f p99=%-9s cpu_us_per_request=%.2f cores_busy=%.2f %s\n",
             n, w, rate, p, t / hz * 1e6 / r, t / hz / s, e }'
}

for w in $WORKERS; do
  port=$((20000 + w))
  taskset -c "0-$((w - 1))" "${RUN[@]}" "$HTTPD" --listen "127.0.0.1:$port" --workers "$w" \
    --root apps/weft-httpd/root > "$work/weft-$w.log" 2>&1 &
  pid=$!
  if wait_port "$port"; then
    measure weft "$w" "$port" "$pid"
  else
    echo "weft-httpd with $w workers did not start:"
    cat "$work/weft-$w.log"
  fi
  kill -INT "$pid"
  wait "$pid"

  port=$((21000 + w))
  mkdir -p "$work/nginx-$w"
  prefix=$work/nginx-$w
  cat > "$prefix/nginx.conf" << EOF
daemon off;
master_process on;
$([ "$(id -u)" = 0 ] && echo "user root;")
worker_processes $w;
worker_cpu_affinity auto;
pid $prefix/nginx.pid;
error_log $prefix/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  default_type text/plain;
  tcp_nodelay on;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path $prefix/cb;
  proxy_temp_path $prefix/px;
  fastcgi_temp_path $prefix/fc;
  uwsgi_temp_path $prefix/uw;
  scgi_temp_path $prefix/sc;
  server {
    listen 127.0.0.1:$port backlog=4096 reuseport;
    location / { return 200 "hello\n"; }
  }
}
EOF
  taskset -c "0-$((w - 1))" "${RUN[@]}" "$NGINX" -p "$prefix/" -c "$prefix/nginx.conf" \
    -e "$prefix/error.log" &
  master=$!
  if wait_port "$port"; then
    sleep 0.3  # every worker forked
    # shellcheck disable=SC2046
    measure nginx "$w" "$port" $(pgrep -P "$master")
  else
    echo "nginx with $w workers did not start:"
    cat "$prefix/error.log"
  fi
  kill -TERM "$master"
  wait "$master"
done
