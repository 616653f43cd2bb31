// Peer of suite loop: raw libev (C, watchers, one ev_loop_new(EVFLAG_AUTO) per benchmark: the
// epoll backend on Linux, which the program checks), the library weft's ev driver wraps. The
// work of each benchmark is defined in bench/loop/README.md (sizes, timer deadlines and
// the measuring window live in loop_peer.h, shared by the four peers); here is how libev does
// it.
//
//   bench_loop_ev [--smoke] [--only timers_10m|timer_churn|loop_tick|fd_pingpong|many_fds]
//
// timers_10m: N ev_timer in one array allocated up front; timer i is ev_timer_init'ed with
//   peer_timer_delay_ms(i) / 1000 seconds (1 to 10 ms) and no repeat and ev_timer_start'ed, all
//   against ev_now (the loop time libev cached before the first one), then ev_run fires them
//   all (each callback only counts) and returns when no watcher is left active. Result: ms from
//   before the first ev_timer_init to ev_run's return.
// timer_churn: the same with peer_churn_delay_ms (60 s on), then ev_timer_stop on each in the
//   order they were started, then ev_run (returns at once: nothing is active). Result: ms from
//   before the first ev_timer_init to ev_run's return.
// loop_tick: one ev_idle left started: libev invokes active idle watchers once per loop
//   iteration (when nothing else is pending) and polls with a zero timeout while one is active,
//   which is libev's "run this on the next tick, again and again" (re-arming it is implicit:
//   stopping and restarting it in the callback would only add work). Each iteration calls
//   epoll_wait with a zero timeout. Result: iterations per second (ticks/s).
// fd_pingpong, many_fds: two ev_io per socket, one for EV_READ (started once) and one for
//   EV_WRITE (libev merges them into one epoll registration). A message is sent through the
//   writable watcher: the sender starts its EV_WRITE watcher, whose callback writes the byte and
//   stops it; the receiver's EV_READ callback reads the byte and sends the answer the same way.
//   libev applies each change with one epoll_ctl before its next epoll_wait. many_fds adds 5000
//   idle socketpairs first, both ends started for EV_READ (10k ev_io). Result: round trips per
//   second.

#include <ev.h>

#include "loop_peer.h"

static struct ev_loop* new_loop(void) {
  struct ev_loop* loop = ev_loop_new(EVFLAG_AUTO);
  if (loop == NULL) {
    peer_die("ev_loop_new failed");
  }
  if (ev_backend(loop) != EVBACKEND_EPOLL) {
    peer_die("libev chose backend %#x, not epoll (EVBACKEND_EPOLL)", ev_backend(loop));
  }
  return loop;
}

// ---- timers_10m, timer_churn -----------------------------------------------------------------

static uint64_t timers_fired;

static void on_timer(struct ev_loop* loop, ev_timer* timer, int revents) {
  (void)loop;
  (void)timer;
  (void)revents;
  ++timers_fired;
}

static void timers_10m(void) {
  const uint64_t count = peer_timer_count();
  struct ev_loop* loop = new_loop();
  ev_timer* timers = peer_alloc(count * sizeof *timers);
  timers_fired = 0;
  uint64_t start = peer_now_ns();
  for (uint64_t index = 0; index < count; ++index) {
    ev_timer_init(&timers[index], on_timer, (double)peer_timer_delay_ms(index, count) / 1e3, 0.);
    ev_timer_start(loop, &timers[index]);
  }
  ev_run(loop, 0);
  uint64_t end = peer_now_ns();
  if (timers_fired != count) {
    peer_die("%llu of %llu timers fired", (unsigned long long)timers_fired,
             (unsigned long long)count);
  }
  peer_report("timers_10m", "ms", (double)(end - start) / 1e6);
  ev_loop_destroy(loop);
  free(timers);
}

static void timer_churn(void) {
  const uint64_t count = peer_churn_count();
  struct ev_loop* loop = new_loop();
  ev_timer* timers = peer_alloc(count * sizeof *timers);
  timers_fired = 0;
  uint64_t start = peer_now_ns();
  for (uint64_t index = 0; index < count; ++index) {
    ev_timer_init(&timers[index], on_timer, (double)peer_churn_delay_ms(index, count) / 1e3, 0.);
    ev_timer_start(loop, &timers[index]);
  }
  for (uint64_t index = 0; index < count; ++index) {
    ev_timer_stop(loop, &timers[index]);
  }
  ev_run(loop, 0);
  uint64_t end = peer_now_ns();
  if (timers_fired != 0) {
    peer_die("%llu cancelled timers fired", (unsigned long long)timers_fired);
  }
  peer_report("timer_churn", "ms", (double)(end - start) / 1e6);
  ev_loop_destroy(loop);
  free(timers);
}

// ---- loop_tick -------------------------------------------------------------------------------

static struct peer_meter meter;

static void on_idle(struct ev_loop* loop, ev_idle* idle, int revents) {
  (void)revents;
  if (peer_meter_count(&meter)) {
    ev_idle_stop(loop, idle);
  }
}

static void loop_tick(void) {
  struct ev_loop* loop = new_loop();
  ev_idle idle;
  ev_idle_init(&idle, on_idle);
  peer_meter_start(&meter, 1024);
  ev_idle_start(loop, &idle);
  ev_run(loop, 0);
  peer_report("loop_tick", "ticks/s", peer_meter_rate(&meter));
  ev_loop_destroy(loop);
}

// ---- fd_pingpong, many_fds -------------------------------------------------------------------

struct end {
  ev_io readable;  // first member: the callback gets &readable
  ev_io writable;
  int fd;
  int pinger;  // the end that counts round trips
};

static struct end ends[2];

static void on_writable(struct ev_loop* loop, ev_io* watcher, int revents) {
  (void)revents;
  peer_write_byte(watcher->fd);
  ev_io_stop(loop, watcher);
}

static void on_readable(struct ev_loop* loop, ev_io* watcher, int revents) {
  (void)revents;
  struct end* end = (struct end*)watcher;
  peer_read_byte(end->fd);
  if (end->pinger && peer_meter_count(&meter)) {
    ev_break(loop, EVBREAK_ALL);  // the idle watchers of many_fds keep the loop alive
    return;
  }
  ev_io_start(loop, &end->writable);
}

static void on_idle_fd(struct ev_loop* loop, ev_io* watcher, int revents) {
  (void)loop;
  (void)revents;
  peer_die("idle fd %d reported ready", watcher->fd);
}

static void pingpong(const char* name, int idle_pairs) {
  peer_reserve_fds(2 * idle_pairs + 2);
  struct ev_loop* loop = new_loop();
  // The idle fds are registered first, then the active pair (README: same order everywhere).
  int* idle_fds = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle_fds);
  ev_io* idle = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle);
  for (int pair = 0; pair < idle_pairs; ++pair) {
    peer_socketpair(&idle_fds[2 * pair]);
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    ev_io_init(&idle[index], on_idle_fd, idle_fds[index], EV_READ);
    ev_io_start(loop, &idle[index]);
  }
  int fds[2];
  peer_socketpair(fds);
  for (int side = 0; side < 2; ++side) {
    ends[side].fd = fds[side];
    ends[side].pinger = side == 0;
    ev_io_init(&ends[side].readable, on_readable, fds[side], EV_READ);
    ev_io_init(&ends[side].writable, on_writable, fds[side], EV_WRITE);
  }
  peer_meter_start(&meter, 1);
  ev_io_start(loop, &ends[0].readable);
  ev_io_start(loop, &ends[0].writable);  // the pinger sends first
  ev_io_start(loop, &ends[1].readable);
  ev_run(loop, 0);
  peer_report(name, "roundtrips/s", peer_meter_rate(&meter));
  for (int side = 0; side < 2; ++side) {
    ev_io_stop(loop, &ends[side].readable);
    ev_io_stop(loop, &ends[side].writable);
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    ev_io_stop(loop, &idle[index]);
  }
  ev_loop_destroy(loop);
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    close(idle_fds[index]);
  }
  close(fds[0]);
  close(fds[1]);
  free(idle);
  free(idle_fds);
}

int main(int argc, char** argv) {
  peer_parse(argc, argv, "bench_loop_ev");
  if (peer_wants("timers_10m")) timers_10m();
  if (peer_wants("timer_churn")) timer_churn();
  if (peer_wants("loop_tick")) loop_tick();
  if (peer_wants("fd_pingpong")) pingpong("fd_pingpong", 0);
  if (peer_wants("many_fds")) pingpong("many_fds", peer_idle_pairs());
  return 0;
}
