// Peer of suite loop: raw libuv (C, callbacks, one uv_loop_t per benchmark), the library weft's
// uv driver wraps. The work of each benchmark is defined in bench/loop/README.md (sizes,
// timer deadlines and the measuring window live in loop_peer.h, shared by the four peers);
// here is how libuv does it.
//
//   bench_loop_uv [--smoke] [--only timers_10m|timer_churn|loop_tick|fd_pingpong|many_fds]
//
// timers_10m: N uv_timer_t in one array allocated up front; timer i is uv_timer_init'ed and
//   uv_timer_start'ed with peer_timer_delay_ms(i) (1 to 10 ms), all against the loop time
//   cached before the first one, then uv_run fires them all (each callback only counts).
//   Result: ms from before the first uv_timer_init to uv_run's return.
// timer_churn: the same with peer_churn_delay_ms (60 s on), then uv_timer_stop on each in the
//   order they were started, then uv_run (returns at once: nothing is active). Result: ms from
//   before the first uv_timer_init to uv_run's return.
// loop_tick: one uv_idle_t left started: libuv calls an active idle handle once per loop
//   iteration and polls with a zero timeout while one is active, which is libuv's way of saying
//   "run this on the next tick, again and again" (re-arming it is implicit: stopping and
//   restarting it in the callback would only add work). No fd is registered, and libuv then
//   skips epoll_wait altogether: a tick is the loop's own bookkeeping plus the callback.
//   Result: iterations per second (ticks/s).
// fd_pingpong, many_fds: one uv_poll_t per socket (libuv allows one poll handle per fd, so
//   readable and writable are the events of that handle). A message is sent through the
//   writable watcher: the sender adds UV_WRITABLE (uv_poll_start with READABLE|WRITABLE), and
//   its callback writes the byte and drops it again (uv_poll_start with READABLE); the
//   receiver's readable callback reads the byte and sends the answer the same way. uv_poll_start
//   is libuv's only way to change a poll handle's events, and it costs two epoll_ctl: it takes
//   the fd out of epoll at once (EPOLL_CTL_DEL) and adds it back before the next epoll_wait.
//   many_fds adds 5000 idle socketpairs first, both ends started for UV_READABLE (10k
//   uv_poll_t). Result: round trips per second.

#include <uv.h>

#include "loop_peer.h"

static void check(int status, const char* what) {
  if (status < 0) {
    peer_die("%s: %s", what, uv_strerror(status));
  }
}

// ---- timers_10m, timer_churn -----------------------------------------------------------------

static uint64_t timers_fired;

static void on_timer(uv_timer_t* timer) {
  (void)timer;
  ++timers_fired;
}

static void close_timers(uv_loop_t* loop, uv_timer_t* timers, uint64_t count) {
  for (uint64_t index = 0; index < count; ++index) {
    uv_close((uv_handle_t*)&timers[index], NULL);
  }
  check(uv_run(loop, UV_RUN_DEFAULT), "uv_run (closing)");
  check(uv_loop_close(loop), "uv_loop_close");
}

static void timers_10m(void) {
  const uint64_t count = peer_timer_count();
  uv_loop_t loop;
  check(uv_loop_init(&loop), "uv_loop_init");
  uv_timer_t* timers = peer_alloc(count * sizeof *timers);
  timers_fired = 0;
  uint64_t start = uv_hrtime();
  for (uint64_t index = 0; index < count; ++index) {
    uv_timer_init(&loop, &timers[index]);
    uv_timer_start(&timers[index], on_timer, peer_timer_delay_ms(index, count), 0);
  }
  check(uv_run(&loop, UV_RUN_DEFAULT), "uv_run");
  uint64_t end = uv_hrtime();
  if (timers_fired != count) {
    peer_die("%llu of %llu timers fired", (unsigned long long)timers_fired,
             (unsigned long long)count);
  }
  peer_report("timers_10m", "ms", (double)(end - start) / 1e6);
  close_timers(&loop, timers, count);
  free(timers);
}

static void timer_churn(void) {
  const uint64_t count = peer_churn_count();
  uv_loop_t loop;
  check(uv_loop_init(&loop), "uv_loop_init");
  uv_timer_t* timers = peer_alloc(count * sizeof *timers);
  timers_fired = 0;
  uint64_t start = uv_hrtime();
  for (uint64_t index = 0; index < count; ++index) {
    uv_timer_init(&loop, &timers[index]);
    uv_timer_start(&timers[index], on_timer, peer_churn_delay_ms(index, count), 0);
  }
  for (uint64_t index = 0; index < count; ++index) {
    uv_timer_stop(&timers[index]);
  }
  check(uv_run(&loop, UV_RUN_DEFAULT), "uv_run");
  uint64_t end = uv_hrtime();
  if (timers_fired != 0) {
    peer_die("%llu cancelled timers fired", (unsigned long long)timers_fired);
  }
  peer_report("timer_churn", "ms", (double)(end - start) / 1e6);
  close_timers(&loop, timers, count);
  free(timers);
}

// ---- loop_tick -------------------------------------------------------------------------------

static struct peer_meter meter;

static void on_idle(uv_idle_t* idle) {
  if (peer_meter_count(&meter)) {
    uv_idle_stop(idle);
  }
}

static void loop_tick(void) {
  uv_loop_t loop;
  check(uv_loop_init(&loop), "uv_loop_init");
  uv_idle_t idle;
  uv_idle_init(&loop, &idle);
  peer_meter_start(&meter, 1024);
  uv_idle_start(&idle, on_idle);
  check(uv_run(&loop, UV_RUN_DEFAULT), "uv_run");
  peer_report("loop_tick", "ticks/s", peer_meter_rate(&meter));
  uv_close((uv_handle_t*)&idle, NULL);
  check(uv_run(&loop, UV_RUN_DEFAULT), "uv_run (closing)");
  check(uv_loop_close(&loop), "uv_loop_close");
}

// ---- fd_pingpong, many_fds -------------------------------------------------------------------

struct end {
  uv_poll_t poll;
  int fd;
  int pinger;  // the end that counts round trips
};

static struct end ends[2];
static uv_loop_t* pingpong_loop;

static void on_end(uv_poll_t* poll, int status, int events) {
  struct end* end = (struct end*)poll;
  check(status, "poll callback");
  if (events & UV_WRITABLE) {
    peer_write_byte(end->fd);
    uv_poll_start(poll, UV_READABLE, on_end);
  }
  if (events & UV_READABLE) {
    peer_read_byte(end->fd);
    if (end->pinger && peer_meter_count(&meter)) {
      uv_stop(pingpong_loop);  // the idle handles of many_fds keep the loop alive
      return;
    }
    uv_poll_start(poll, UV_READABLE | UV_WRITABLE, on_end);
  }
}

static void on_idle_fd(uv_poll_t* poll, int status, int events) {
  (void)status;
  (void)events;
  uv_os_fd_t fd = -1;
  uv_fileno((uv_handle_t*)poll, &fd);
  peer_die("idle fd %d reported ready", fd);
}

static void pingpong(const char* name, int idle_pairs) {
  peer_reserve_fds(2 * idle_pairs + 2);
  uv_loop_t loop;
  check(uv_loop_init(&loop), "uv_loop_init");
  pingpong_loop = &loop;
  // The idle fds are registered first, then the active pair (README: same order everywhere).
  int* idle_fds = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle_fds);
  uv_poll_t* idle = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle);
  for (int pair = 0; pair < idle_pairs; ++pair) {
    peer_socketpair(&idle_fds[2 * pair]);
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    check(uv_poll_init(&loop, &idle[index], idle_fds[index]), "uv_poll_init");
    check(uv_poll_start(&idle[index], UV_READABLE, on_idle_fd), "uv_poll_start");
  }
  int fds[2];
  peer_socketpair(fds);
  for (int side = 0; side < 2; ++side) {
    ends[side].fd = fds[side];
    ends[side].pinger = side == 0;
    check(uv_poll_init(&loop, &ends[side].poll, fds[side]), "uv_poll_init");
  }
  peer_meter_start(&meter, 1);
  check(uv_poll_start(&ends[0].poll, UV_READABLE | UV_WRITABLE, on_end), "uv_poll_start");
  check(uv_poll_start(&ends[1].poll, UV_READABLE, on_end), "uv_poll_start");
  uv_run(&loop, UV_RUN_DEFAULT);
  peer_report(name, "roundtrips/s", peer_meter_rate(&meter));
  for (int side = 0; side < 2; ++side) {
    uv_close((uv_handle_t*)&ends[side].poll, NULL);
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    uv_close((uv_handle_t*)&idle[index], NULL);
  }
  check(uv_run(&loop, UV_RUN_DEFAULT), "uv_run (closing)");
  check(uv_loop_close(&loop), "uv_loop_close");
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    close(idle_fds[index]);
  }
  close(fds[0]);
  close(fds[1]);
  free(idle);
  free(idle_fds);
}

int main(int argc, char** argv) {
  peer_parse(argc, argv, "bench_loop_uv");
  if (peer_wants("timers_10m")) timers_10m();
  if (peer_wants("timer_churn")) timer_churn();
  if (peer_wants("loop_tick")) loop_tick();
  if (peer_wants("fd_pingpong")) pingpong("fd_pingpong", 0);
  if (peer_wants("many_fds")) pingpong("many_fds", peer_idle_pairs());
  return 0;
}
