// Peer of suite loop: raw libevent 2.1 (C, libevent_core, one event_base_new() per benchmark:
// the epoll backend on Linux, which the program checks), the library weft's event driver wraps.
// The work of each benchmark is defined in bench/loop/README.md (sizes, timer deadlines
// and the measuring window live in loop_peer.h, shared by the four peers); here is how
// libevent does it. Events live in arrays allocated up front (event_assign on
// event_get_struct_event_size() slots: no event_new per event).
//
//   bench_loop_event [--smoke] [--only timers_10m|timer_churn|loop_tick|fd_pingpong|many_fds]
//
// timers_10m: N timer events (evtimer_assign, no EV_PERSIST); timer i is evtimer_add'ed with a
//   relative timeval of peer_timer_delay_ms(i) (1 to 10 ms), then event_base_dispatch fires
//   them all (each callback only counts) and returns when no event is left. libevent reads the
//   clock on each evtimer_add outside the loop (it caches the time only inside it). The timers
//   go into libevent's general min-heap: libevent's "common timeouts"
//   (event_base_init_common_timeout), a queue per duration, are for a few durations known in
//   advance, and the benchmark stands for timers of any delay (the facade's delay() takes any).
//   Result: ms from before the first evtimer_assign to event_base_dispatch's return.
// timer_churn: the same with peer_churn_delay_ms (60 s on), then evtimer_del on each in the
//   order they were added, then event_base_dispatch (returns at once: no event is left).
//   Result: ms from before the first evtimer_assign to event_base_dispatch's return.
// loop_tick: one timer event re-added from its own callback with a zero timeout. A zero-timeout
//   timer is libevent's "run this on the next iteration": it expires when the next iteration
//   has polled (event_active would run it again in the same pass over the active queue, never
//   letting the loop poll). Each iteration calls epoll_wait with a zero timeout. Result:
//   iterations per second (ticks/s).
// fd_pingpong, many_fds: two events per socket, EV_READ|EV_PERSIST (added once) and EV_WRITE
//   without EV_PERSIST. A message is sent through the writable event: the sender adds it (one
//   epoll_ctl), libevent deletes it before running its callback (one epoll_ctl), which writes
//   the byte; the receiver's readable callback reads the byte and sends the answer the same way.
//   many_fds adds 5000 idle socketpairs first, both ends added for EV_READ|EV_PERSIST (10k
//   events). Result: round trips per second.

#include <event2/event.h>

#include "loop_peer.h"

static struct event_base* new_base(void) {
  struct event_base* base = event_base_new();
  if (base == NULL) {
    peer_die("event_base_new failed");
  }
  if (strcmp(event_base_get_method(base), "epoll") != 0) {
    peer_die("libevent chose backend %s, not epoll", event_base_get_method(base));
  }
  return base;
}

// Event i of an array of `struct event` of the size this libevent was built with.
static struct event* event_at(void* events, uint64_t index) {
  return (struct event*)((char*)events + index * event_get_struct_event_size());
}

static struct timeval timeval_of_ms(uint64_t milliseconds) {
  struct timeval value = {(time_t)(milliseconds / 1000), (suseconds_t)(milliseconds % 1000 * 1000)};
  return value;
}

static void check(int status, const char* what) {
  if (status != 0) {
    peer_die("%s failed", what);
  }
}

// ---- timers_10m, timer_churn -----------------------------------------------------------------

static uint64_t timers_fired;

static void on_timer(evutil_socket_t fd, short what, void* argument) {
  (void)fd;
  (void)what;
  (void)argument;
  ++timers_fired;
}

static void timers(const char* name, uint64_t count, uint64_t (*delay_ms)(uint64_t, uint64_t),
                   int cancel) {
  struct event_base* base = new_base();
  void* events = peer_alloc(count * event_get_struct_event_size());
  timers_fired = 0;
  uint64_t start = peer_now_ns();
  for (uint64_t index = 0; index < count; ++index) {
    struct timeval delay = timeval_of_ms(delay_ms(index, count));
    evtimer_assign(event_at(events, index), base, on_timer, NULL);
    evtimer_add(event_at(events, index), &delay);
  }
  if (cancel) {
    for (uint64_t index = 0; index < count; ++index) {
      evtimer_del(event_at(events, index));
    }
  }
  if (event_base_dispatch(base) < 0) {
    peer_die("event_base_dispatch failed");
  }
  uint64_t end = peer_now_ns();
  uint64_t expected = cancel ? 0 : count;
  if (timers_fired != expected) {
    peer_die("%llu timers fired, expected %llu", (unsigned long long)timers_fired,
             (unsigned long long)expected);
  }
  peer_report(name, "ms", (double)(end - start) / 1e6);
  event_base_free(base);
  free(events);
}

// ---- loop_tick -------------------------------------------------------------------------------

static struct peer_meter meter;
static const struct timeval zero_delay = {0, 0};

static void on_tick(evutil_socket_t fd, short what, void* tick) {
  (void)fd;
  (void)what;
  if (!peer_meter_count(&meter)) {
    evtimer_add((struct event*)tick, &zero_delay);
  }
}

static void loop_tick(void) {
  struct event_base* base = new_base();
  struct event* tick = evtimer_new(base, on_tick, event_self_cbarg());
  peer_meter_start(&meter, 1024);
  evtimer_add(tick, &zero_delay);
  if (event_base_dispatch(base) < 0) {
    peer_die("event_base_dispatch failed");
  }
  peer_report("loop_tick", "ticks/s", peer_meter_rate(&meter));
  event_free(tick);
  event_base_free(base);
}

// ---- fd_pingpong, many_fds -------------------------------------------------------------------

struct end {
  struct event* readable;
  struct event* writable;
  int pinger;  // the end that counts round trips
};

static struct end ends[2];

static void on_writable(evutil_socket_t fd, short what, void* end) {
  (void)what;
  (void)end;
  peer_write_byte(fd);
}

static void on_readable(evutil_socket_t fd, short what, void* argument) {
  (void)what;
  struct end* end = argument;
  peer_read_byte(fd);
  if (end->pinger && peer_meter_count(&meter)) {
    // The idle events of many_fds keep the loop alive.
    event_base_loopbreak(event_get_base(end->readable));
    return;
  }
  check(event_add(end->writable, NULL), "event_add");
}

static void on_idle_fd(evutil_socket_t fd, short what, void* argument) {
  (void)what;
  (void)argument;
  peer_die("idle fd %d reported ready", (int)fd);
}

static void pingpong(const char* name, int idle_pairs) {
  peer_reserve_fds(2 * idle_pairs + 2);
  struct event_base* base = new_base();
  // The idle fds are registered first, then the active pair (README: same order everywhere).
  int* idle_fds = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle_fds);
  void* idle = peer_alloc((size_t)(2 * idle_pairs + 1) * event_get_struct_event_size());
  for (int pair = 0; pair < idle_pairs; ++pair) {
    peer_socketpair(&idle_fds[2 * pair]);
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    struct event* event = event_at(idle, (uint64_t)index);
    check(event_assign(event, base, idle_fds[index], EV_READ | EV_PERSIST, on_idle_fd, NULL),
          "event_assign");
    check(event_add(event, NULL), "event_add");
  }
  int fds[2];
  peer_socketpair(fds);
  void* pair_events = peer_alloc(4 * event_get_struct_event_size());
  for (int side = 0; side < 2; ++side) {
    ends[side].pinger = side == 0;
    ends[side].readable = event_at(pair_events, (uint64_t)(2 * side));
    ends[side].writable = event_at(pair_events, (uint64_t)(2 * side + 1));
    check(event_assign(ends[side].readable, base, fds[side], EV_READ | EV_PERSIST, on_readable,
                       &ends[side]),
          "event_assign");
    check(event_assign(ends[side].writable, base, fds[side], EV_WRITE, on_writable, &ends[side]),
          "event_assign");
  }
  peer_meter_start(&meter, 1);
  check(event_add(ends[0].readable, NULL), "event_add");
  check(event_add(ends[0].writable, NULL), "event_add");  // the pinger sends first
  check(event_add(ends[1].readable, NULL), "event_add");
  if (event_base_dispatch(base) < 0) {
    peer_die("event_base_dispatch failed");
  }
  peer_report(name, "roundtrips/s", peer_meter_rate(&meter));
  for (int index = 0; index < 4; ++index) {
    event_del(event_at(pair_events, (uint64_t)index));
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    event_del(event_at(idle, (uint64_t)index));
  }
  event_base_free(base);
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    close(idle_fds[index]);
  }
  close(fds[0]);
  close(fds[1]);
  free(pair_events);
  free(idle);
  free(idle_fds);
}

int main(int argc, char** argv) {
  peer_parse(argc, argv, "bench_loop_event");
  if (peer_wants("timers_10m")) timers("timers_10m", peer_timer_count(), peer_timer_delay_ms, 0);
  if (peer_wants("timer_churn")) timers("timer_churn", peer_churn_count(), peer_churn_delay_ms, 1);
  if (peer_wants("loop_tick")) loop_tick();
  if (peer_wants("fd_pingpong")) pingpong("fd_pingpong", 0);
  if (peer_wants("many_fds")) pingpong("many_fds", peer_idle_pairs());
  return 0;
}
