// Peer of suite loop: a raw poll(2) event loop in C with no library, the baseline of weft's
// poll driver (which, like this loop, makes the kernel scan every registered fd on each wait:
// many_fds shows what that costs against the epoll of the other peers). The work of each
// benchmark is defined in bench/loop/README.md (sizes, timer deadlines and the measuring
// window live in loop_peer.h, shared by the four peers).
//
//   bench_loop_poll [--smoke] [--only timers_10m|timer_churn|loop_tick|fd_pingpong|many_fds]
//
// The loop is what a competent user writes for speed, not a toy: a persistent pollfd array
// (registering appends, changing a watcher's events rewrites its entry in place: no system
// call), a binary min-heap of timers keyed inline by (deadline, sequence number) so that equal
// deadlines fire in the order they were set, each timer knowing its heap slot so that a cancel
// removes it at once, and a queue of deferred callbacks. One iteration (a tick): poll() with a
// zero timeout when a deferred callback is queued, else until the first deadline (rounded up
// to the next ms: nothing fires early), or no limit; then the ready fds' callbacks (the scan
// stops once poll's count is reached), the clock (CLOCK_MONOTONIC, cached as the loop time),
// the expired timers, then the deferred callbacks queued before the tick began. poll() is
// called on every iteration, as the libraries call epoll_wait on each of theirs, even when no
// fd is registered. run() returns when nothing is left (no fd, timer or deferred callback) or
// after stop().
//
// timers_10m: N timers in one array allocated up front (the heap array grows by doubling, as
//   libev's and libevent's do); timer i is set with peer_timer_delay_ms(i) (1 to 10 ms) from the
//   cached loop time, then run() fires them all (each callback only counts). Result: ms from
//   before the first timer is set to run()'s return.
// timer_churn: the same with peer_churn_delay_ms (60 s on), then each is cancelled in the order
//   they were set (removed from the heap), then run() (returns at once: nothing is left).
//   Result: ms from before the first timer is set to run()'s return.
// loop_tick: one deferred callback that defers itself again: it runs once per iteration.
//   Result: iterations per second (ticks/s).
// fd_pingpong, many_fds: one watcher per socket (its pollfd entry), POLLIN always. A message is
//   sent through the writable event: the sender adds POLLOUT to its entry, its callback writes
//   the byte and clears POLLOUT; the receiver's readable callback reads the byte and sends the
//   answer the same way. many_fds registers 5000 idle socketpairs first, both ends for POLLIN
//   (10k entries), then the active pair (the last two entries). Result: round trips per second.

#include <poll.h>

#include "loop_peer.h"

// ---- the loop --------------------------------------------------------------------------------

struct loop;

struct watcher {
  void (*callback)(struct loop*, struct watcher*, short revents);
  uint32_t slot;  // index in pollfds
};

struct timer {
  void (*callback)(struct loop*, struct timer*);
  uint32_t heap_slot;  // UINT32_MAX when not armed
};

struct deferred {
  void (*callback)(struct loop*, struct deferred*);
};

struct heap_entry {
  uint64_t deadline_ns;
  uint64_t sequence;
  struct timer* timer;
};

struct loop {
  struct pollfd* pollfds;
  struct watcher** watchers;
  uint32_t fd_count, pollfd_capacity, watcher_capacity;
  struct heap_entry* heap;
  uint32_t heap_size, heap_capacity;
  uint64_t sequence;
  struct deferred** queued;   // deferred callbacks for the next tick
  struct deferred** running;  // those of this tick (while it runs)
  uint32_t queued_count, queued_capacity, running_capacity;
  uint64_t now_ns;
  int stopped;
};

static void* grow(void* array, uint32_t* capacity, uint32_t needed, size_t element) {
  if (needed <= *capacity) {
    return array;
  }
  uint32_t wanted = *capacity < 16 ? 16 : *capacity;
  while (wanted < needed) {
    wanted *= 2;
  }
  void* grown = realloc(array, (size_t)wanted * element);
  if (grown == NULL) {
    peer_die("out of memory (%u elements)", wanted);
  }
  *capacity = wanted;
  return grown;
}

static void loop_init(struct loop* loop) {
  memset(loop, 0, sizeof *loop);
  loop->now_ns = peer_now_ns();
}

static void loop_free(struct loop* loop) {
  free(loop->pollfds);
  free(loop->watchers);
  free(loop->heap);
  free(loop->queued);
  free(loop->running);
}

static void loop_stop(struct loop* loop) { loop->stopped = 1; }

// -- fds

static void watcher_start(struct loop* loop, struct watcher* watcher, int fd, short events) {
  loop->pollfds =
      grow(loop->pollfds, &loop->pollfd_capacity, loop->fd_count + 1, sizeof *loop->pollfds);
  loop->watchers =
      grow(loop->watchers, &loop->watcher_capacity, loop->fd_count + 1, sizeof *loop->watchers);
  watcher->slot = loop->fd_count++;
  loop->pollfds[watcher->slot] = (struct pollfd){.fd = fd, .events = events, .revents = 0};
  loop->watchers[watcher->slot] = watcher;
}

static void watcher_set_events(struct loop* loop, struct watcher* watcher, short events) {
  loop->pollfds[watcher->slot].events = events;
}

// -- timers

static int entry_before(const struct heap_entry* left, const struct heap_entry* right) {
  return left->deadline_ns < right->deadline_ns ||
         (left->deadline_ns == right->deadline_ns && left->sequence < right->sequence);
}

static void heap_place(struct loop* loop, uint32_t slot, struct heap_entry entry) {
  loop->heap[slot] = entry;
  entry.timer->heap_slot = slot;
}

static void heap_sift_up(struct loop* loop, uint32_t slot, struct heap_entry entry) {
  while (slot > 0) {
    uint32_t parent = (slot - 1) / 2;
    if (!entry_before(&entry, &loop->heap[parent])) {
      break;
    }
    heap_place(loop, slot, loop->heap[parent]);
    slot = parent;
  }
  heap_place(loop, slot, entry);
}

static void heap_sift_down(struct loop* loop, uint32_t slot, struct heap_entry entry) {
  for (;;) {
    uint32_t child = 2 * slot + 1;
    if (child >= loop->heap_size) {
      break;
    }
    if (child + 1 < loop->heap_size && entry_before(&loop->heap[child + 1], &loop->heap[child])) {
      ++child;
    }
    if (!entry_before(&loop->heap[child], &entry)) {
      break;
    }
    heap_place(loop, slot, loop->heap[child]);
    slot = child;
  }
  heap_place(loop, slot, entry);
}

static void timer_init(struct timer* timer, void (*callback)(struct loop*, struct timer*)) {
  timer->callback = callback;
  timer->heap_slot = UINT32_MAX;
}

// Arms a stopped timer to fire `delay_ms` after the cached loop time.
static void timer_start(struct loop* loop, struct timer* timer, uint64_t delay_ms) {
  loop->heap = grow(loop->heap, &loop->heap_capacity, loop->heap_size + 1, sizeof *loop->heap);
  struct heap_entry entry = {loop->now_ns + delay_ms * 1000000u, loop->sequence++, timer};
  heap_sift_up(loop, loop->heap_size++, entry);
}

static void timer_stop(struct loop* loop, struct timer* timer) {
  uint32_t slot = timer->heap_slot;
  if (slot == UINT32_MAX) {
    return;
  }
  timer->heap_slot = UINT32_MAX;
  struct heap_entry last = loop->heap[--loop->heap_size];
  if (slot == loop->heap_size) {
    return;
  }
  if (slot > 0 && entry_before(&last, &loop->heap[(slot - 1) / 2])) {
    heap_sift_up(loop, slot, last);
  } else {
    heap_sift_down(loop, slot, last);
  }
}

static void run_timers(struct loop* loop) {
  while (loop->heap_size > 0 && loop->heap[0].deadline_ns <= loop->now_ns) {
    struct timer* timer = loop->heap[0].timer;
    timer->heap_slot = UINT32_MAX;
    struct heap_entry last = loop->heap[--loop->heap_size];
    if (loop->heap_size > 0) {
      heap_sift_down(loop, 0, last);
    }
    timer->callback(loop, timer);
  }
}

// -- deferred callbacks

static void defer(struct loop* loop, struct deferred* deferred) {
  // Only the queue for the next tick grows here: the other one may be being run.
  loop->queued =
      grow(loop->queued, &loop->queued_capacity, loop->queued_count + 1, sizeof *loop->queued);
  loop->queued[loop->queued_count++] = deferred;
}

static void run_deferred(struct loop* loop) {
  // Swap the queues: what the callbacks defer now runs on the next tick.
  struct deferred** running = loop->queued;
  uint32_t running_count = loop->queued_count;
  uint32_t running_capacity = loop->queued_capacity;
  loop->queued = loop->running;
  loop->queued_capacity = loop->running_capacity;
  loop->queued_count = 0;
  loop->running = running;
  loop->running_capacity = running_capacity;
  for (uint32_t index = 0; index < running_count; ++index) {
    running[index]->callback(loop, running[index]);
  }
}

// -- the loop

static void loop_run(struct loop* loop) {
  loop->stopped = 0;
  while (!loop->stopped) {
    int timeout_ms = -1;
    if (loop->queued_count > 0) {
      timeout_ms = 0;
    } else if (loop->heap_size > 0) {
      uint64_t deadline = loop->heap[0].deadline_ns;
      timeout_ms =
          deadline <= loop->now_ns ? 0 : (int)((deadline - loop->now_ns + 999999) / 1000000);
    } else if (loop->fd_count == 0) {
      return;  // nothing left
    }
    int ready = poll(loop->pollfds, loop->fd_count, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      peer_die("poll: %s", strerror(errno));
    }
    for (uint32_t slot = 0; ready > 0 && slot < loop->fd_count; ++slot) {
      short revents = loop->pollfds[slot].revents;
      if (revents != 0) {
        --ready;
        loop->watchers[slot]->callback(loop, loop->watchers[slot], revents);
      }
    }
    loop->now_ns = peer_now_ns();
    run_timers(loop);
    run_deferred(loop);
  }
}

// ---- timers_10m, timer_churn -----------------------------------------------------------------

static uint64_t timers_fired;

static void on_timer(struct loop* loop, struct timer* timer) {
  (void)loop;
  (void)timer;
  ++timers_fired;
}

static void timers(const char* name, uint64_t count, uint64_t (*delay_ms)(uint64_t, uint64_t),
                   int cancel) {
  struct loop loop;
  loop_init(&loop);
  struct timer* timers = peer_alloc(count * sizeof *timers);
  timers_fired = 0;
  uint64_t start = peer_now_ns();
  for (uint64_t index = 0; index < count; ++index) {
    timer_init(&timers[index], on_timer);
    timer_start(&loop, &timers[index], delay_ms(index, count));
  }
  if (cancel) {
    for (uint64_t index = 0; index < count; ++index) {
      timer_stop(&loop, &timers[index]);
    }
  }
  loop_run(&loop);
  uint64_t end = peer_now_ns();
  uint64_t expected = cancel ? 0 : count;
  if (timers_fired != expected) {
    peer_die("%llu timers fired, expected %llu", (unsigned long long)timers_fired,
             (unsigned long long)expected);
  }
  peer_report(name, "ms", (double)(end - start) / 1e6);
  loop_free(&loop);
  free(timers);
}

// ---- loop_tick -------------------------------------------------------------------------------

static struct peer_meter meter;

static void on_tick(struct loop* loop, struct deferred* tick) {
  if (!peer_meter_count(&meter)) {
    defer(loop, tick);
  }
}

static void loop_tick(void) {
  struct loop loop;
  loop_init(&loop);
  struct deferred tick = {on_tick};
  peer_meter_start(&meter, 1024);
  defer(&loop, &tick);
  loop_run(&loop);
  peer_report("loop_tick", "ticks/s", peer_meter_rate(&meter));
  loop_free(&loop);
}

// ---- fd_pingpong, many_fds -------------------------------------------------------------------

struct end {
  struct watcher watcher;  // first member: the callback gets &watcher
  int fd;
  int pinger;  // the end that counts round trips
};

static void on_end(struct loop* loop, struct watcher* watcher, short revents) {
  struct end* end = (struct end*)watcher;
  if (revents & (POLLERR | POLLHUP | POLLNVAL)) {
    peer_die("fd %d reported revents %#x", end->fd, (unsigned)revents);
  }
  if (revents & POLLOUT) {
    peer_write_byte(end->fd);
    watcher_set_events(loop, watcher, POLLIN);
  }
  if (revents & POLLIN) {
    peer_read_byte(end->fd);
    if (end->pinger && peer_meter_count(&meter)) {
      loop_stop(loop);  // the idle fds of many_fds keep the loop alive
      return;
    }
    watcher_set_events(loop, watcher, POLLIN | POLLOUT);
  }
}

static void on_idle_fd(struct loop* loop, struct watcher* watcher, short revents) {
  (void)revents;
  peer_die("idle fd %d reported ready", loop->pollfds[watcher->slot].fd);
}

static void pingpong(const char* name, int idle_pairs) {
  peer_reserve_fds(2 * idle_pairs + 2);
  struct loop loop;
  loop_init(&loop);
  // The idle fds are registered first, then the active pair (README: same order everywhere).
  int* idle_fds = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle_fds);
  struct watcher* idle = peer_alloc((size_t)(2 * idle_pairs + 1) * sizeof *idle);
  for (int pair = 0; pair < idle_pairs; ++pair) {
    peer_socketpair(&idle_fds[2 * pair]);
  }
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    idle[index].callback = on_idle_fd;
    watcher_start(&loop, &idle[index], idle_fds[index], POLLIN);
  }
  int fds[2];
  peer_socketpair(fds);
  struct end ends[2];
  for (int side = 0; side < 2; ++side) {
    ends[side].watcher.callback = on_end;
    ends[side].fd = fds[side];
    ends[side].pinger = side == 0;
  }
  peer_meter_start(&meter, 1);
  watcher_start(&loop, &ends[0].watcher, fds[0], POLLIN | POLLOUT);  // the pinger sends first
  watcher_start(&loop, &ends[1].watcher, fds[1], POLLIN);
  loop_run(&loop);
  peer_report(name, "roundtrips/s", peer_meter_rate(&meter));
  loop_free(&loop);
  for (int index = 0; index < 2 * idle_pairs; ++index) {
    close(idle_fds[index]);
  }
  close(fds[0]);
  close(fds[1]);
  free(idle);
  free(idle_fds);
}

int main(int argc, char** argv) {
  peer_parse(argc, argv, "bench_loop_poll");
  if (peer_wants("timers_10m")) timers("timers_10m", peer_timer_count(), peer_timer_delay_ms, 0);
  if (peer_wants("timer_churn")) timers("timer_churn", peer_churn_count(), peer_churn_delay_ms, 1);
  if (peer_wants("loop_tick")) loop_tick();
  if (peer_wants("fd_pingpong")) pingpong("fd_pingpong", 0);
  if (peer_wants("many_fds")) pingpong("many_fds", peer_idle_pairs());
  return 0;
}
