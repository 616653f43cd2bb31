// weft::procs workers: finding work (next slot, local queue, global queue, stealing), running
// a process's step and dispatching its yields, idling without losing a wakeup.
//
// Idle protocol. A worker with nothing to do searches (steals, looks at the global queue) for
// a while, at most half the workers (and half the cores) at once, then parks on its futex word.
// Whoever makes work visible (a push to a local or the global queue) calls notify_work(), which
// wakes one parked worker unless a searcher exists (the searcher will find the work). The two sides
// are the classic store-buffer pattern, closed by seq_cst fences on both:
//   producer: push work;                 fence; read searching_ and parked_count_
//   parker:   parked_count_++, searching_--; fence; re-read every queue (work_visible)
// In the single total order of the two fences, either the producer's fence comes first, and
// the parker's re-read sees the work (it backs out of parking), or the parker's comes first,
// and the producer sees it parked and no searcher left, and wakes one. So whenever work is
// queued, some worker is awake or being woken: no lost wakeup as the last worker parks.
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "procs/engine.hpp"
#include "weft/error.hpp"

namespace weft::procs::detail {

namespace {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

std::uint64_t next_random(worker& self) noexcept {
  std::uint64_t x = self.random_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  self.random_state = x;
  return x;
}

// True when the queue was empty before: only then must the others be told (see schedule).
bool push_local(worker& self, process_record& record, global_queue<process_record>& global) {
  bool was_empty = self.queue.empty_hint();
  if (!self.queue.push_back(&record)) {
    self.queue.push_overflow(&record, global);
  }
  return was_empty;
}

}  // namespace

void worker::sleep_until_woken() noexcept {
  // The kernel re-checks the word against 0 atomically with going to sleep, so a wake() that
  // stored 1 before this call is not missed; acquire pairs with wake()'s release.
  while (wake_word.load(std::memory_order_acquire) == 0) {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&wake_word), FUTEX_WAIT_PRIVATE, 0,
              nullptr, nullptr, 0);
  }
}

void worker::wake() noexcept {
  wake_word.store(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&wake_word), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
}

// An event vector keeps its capacity between uses up to this many events (4 KiB): beyond it,
// the memory goes back. Vectors travel (a run swaps the worker's with the record's inbox), so
// without a cap one burst of messages to one process would leave its capacity in whichever
// record or worker the vector ends up in, for good, and each later burst would pin another.
namespace {

constexpr std::size_t retained_events = 64;

[[gnu::noinline, gnu::cold]] void release_capacity(std::vector<event>& events) noexcept {
  std::vector<event>().swap(events);
}

// After every step: the check inline, the release (rare) out of line.
inline void release_if_large(std::vector<event>& events) noexcept {
  if (events.capacity() > retained_events) [[unlikely]] {
    release_capacity(events);
  }
}

}  // namespace

// --- scheduling -------------------------------------------------------------------------------

void engine::schedule_slow(process_record& record, bool by_event, worker* here) {
  if (here == nullptr) {
    global_.push(&record);
    notify_work();
    return;
  }
  // "next" is taken: the newcomer displaces its holder (see schedule), which goes to the queue,
  // where thieves can see it.
  process_record* queued = std::exchange(here->next, &record);
  here->next_by_event = by_event;
  // Telling the others (a fence, maybe a futex wake) only when the queue turns non-empty is
  // enough: while it stays non-empty, the item that made it so was announced, and a worker
  // about to park re-reads every queue after its fence (see the idle protocol above), so it
  // sees this queue non-empty whichever item it finds there; an item taken meanwhile was
  // taken by an awake worker, which looks again before it parks.
  if (push_local(*here, *queued, global_)) {
    notify_others();
  }
}

void engine::yield_next_to_queue(worker& self) {
  // Called when a step ended its process. If that step woke a process with an event, "next"
  // was a bet that the woken one answers the waker, who is gone now: nobody awaits its run.
  // With other work queued, it goes to the back of the queue instead, behind that work, and
  // collects whatever else is sent to it meanwhile: a parent hearing from thousands of
  // children runs once per pass of the queue instead of once per child. With nothing queued it
  // keeps "next" (no latency is added, and no other worker is woken for it).
  if (self.next == nullptr || !self.next_by_event || self.queue.empty_hint()) {
    return;
  }
  // A thief may have emptied the queue since the check: then tell the others, as any push that
  // makes the queue non-empty does (schedule explains why that is enough).
  if (push_local(self, *std::exchange(self.next, nullptr), global_)) {
    notify_others();
  }
}

void engine::notify_others() noexcept {
  // Called by a worker: with no other worker, nobody needs telling (this one is awake and
  // looks at every queue before it parks), and the fence is most of the cost of a spawn.
  if (workers_.size() > 1) {
    notify_work();
  }
}

void engine::notify_work() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  chaos_point();
  if (searching_.load(std::memory_order_relaxed) != 0 ||
      parked_count_.load(std::memory_order_relaxed) == 0) {
    return;
  }
  unpark_one();
}

void engine::unpark_one() noexcept {
  worker* target = nullptr;
  {
    std::lock_guard<std::mutex> guard(idle_lock_);
    if (parked_.empty()) {
      return;
    }
    target = parked_.back();
    parked_.pop_back();
    parked_count_.fetch_sub(1, std::memory_order_seq_cst);
    // It wakes up searching: counted now, so that other producers do not wake a second one
    // for the same work.
    searching_.fetch_add(1, std::memory_order_seq_cst);
  }
  target->wake();
}

bool engine::work_visible() const noexcept {
  if (!global_.empty_hint()) {
    return true;
  }
  for (const auto& each : workers_) {
    if (!each->queue.empty_hint()) {
      return true;
    }
  }
  return false;
}

// --- the loop ---------------------------------------------------------------------------------

void engine::worker_main(worker& self) {
  this_worker = &self;
  std::string thread_name = "procs-" + std::to_string(self.number);
  ::pthread_setname_np(::pthread_self(), thread_name.substr(0, 15).c_str());
  for (;;) {
    // The common case inline: "next" is set, its bound not reached, and no look at the global
    // queue due (find_work takes the same branch then, so the order is find_work's). A worker
    // with "next" set has run a process since it last searched, so it is not searching.
    process_record* record = nullptr;
    if (self.next != nullptr && self.until_global_look != 0 &&
        self.next_runs < options_.next_slot_limit) {
      --self.until_global_look;
      ++self.next_runs;
      record = std::exchange(self.next, nullptr);
    } else {
      record = find_work(self);
      if (record == nullptr) {
        break;
      }
      if (self.searching) {
        // Woken (unpark_one counts the woken as searching) and found work before search()
        // did: it is busy now. Left counted, it would be a searcher that never searches, and
        // every producer would rely on it and wake nobody: the other workers would sleep
        // through any amount of queued work.
        leave_searching(self);
      }
    }
    run(self, *record);
  }
  this_worker = nullptr;
}

process_record* engine::find_work(worker& self) {
  for (;;) {
    // Fairness: however busy the local queue is, the global queue gets a look at a fixed
    // interval, so outside submissions are not starved by work the workers generate.
    if (self.until_global_look-- == 0) {
      self.until_global_look = options_.global_queue_interval - 1;
      if (process_record* taken = global_.pop_batch(self.queue, options_.global_batch)) {
        worker::count(self.global_batches);
        if (!self.queue.empty_hint()) {
          notify_others();
        }
        return taken;
      }
    }
    if (self.next != nullptr) {
      // Bounded: two processes waking each other would otherwise run forever through `next`
      // and starve the queue.
      if (self.next_runs < options_.next_slot_limit) {
        ++self.next_runs;
        return std::exchange(self.next, nullptr);
      }
      push_local(self, *std::exchange(self.next, nullptr), global_);
    }
    self.next_runs = 0;
    if (process_record* popped = self.queue.pop()) {
      return popped;
    }
    if (process_record* taken = global_.pop_batch(self.queue, options_.global_batch)) {
      worker::count(self.global_batches);
      if (!self.queue.empty_hint()) {
        notify_others();
      }
      return taken;
    }
    if (process_record* found = search(self)) {
      return found;
    }
    if (!park(self)) {
      return nullptr;
    }
  }
}

void engine::leave_searching(worker& self) noexcept {
  self.searching = false;
  // The last searcher found work: if more is queued, wake another to take it. Only then: a
  // woken worker counts as searching before it runs, so waking one for nothing would keep
  // this (hot) worker from searching after its step, and the next item would wait for the
  // woken one's slow futex return. Safe: a producer racing this check either is seen here
  // (fence, then the queues) or sees searching_ at zero (its fence, then searching_) and
  // wakes someone itself.
  if (searching_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (work_visible()) {
      notify_others();
    }
  }
}

process_record* engine::search(worker& self) {
  if (!self.searching) {
    // At most half the workers, and half the cores, search at once (max_searching_): more would
    // only contend on the same queues, and spinners beyond the cores would steal them from the
    // workers with work.
    std::uint32_t now = searching_.load(std::memory_order_relaxed);
    do {
      if (now >= max_searching_) {
        return nullptr;
      }
    } while (!searching_.compare_exchange_weak(now, now + 1, std::memory_order_seq_cst,
                                               std::memory_order_relaxed));
    self.searching = true;
  }
  const std::size_t count = workers_.size();
  const auto spin_until = std::chrono::steady_clock::now() + options_.spin_time;
  std::size_t yields = 0;
  for (;;) {
    std::size_t start = static_cast<std::size_t>(next_random(self) % count);
    for (std::size_t offset = 0; offset < count; ++offset) {
      worker& victim = *workers_[(start + offset) % count];
      if (&victim == &self || victim.queue.empty_hint()) {
        continue;
      }
      if (process_record* stolen = victim.queue.steal_into(self.queue)) {
        worker::count(self.steals);
        worker::count(self.stolen, 1 + self.queue.size_hint());
        leave_searching(self);
        return stolen;
      }
    }
    if (process_record* taken = global_.pop_batch(self.queue, options_.global_batch)) {
      worker::count(self.global_batches);
      leave_searching(self);
      return taken;
    }
    if (shutting_down_.load(std::memory_order_acquire)) {
      break;
    }
    if (std::chrono::steady_clock::now() < spin_until) {
      for (int pause = 0; pause < 16; ++pause) {
        cpu_relax();
      }
    } else if (yields++ < options_.yield_rounds) {
      std::this_thread::yield();
    } else {
      break;
    }
  }
  return nullptr;  // still counted as searching: park() leaves that state
}

bool engine::park(worker& self) {
  // Only stop() sets the word while we are not in parked_: then it is shutdown.
  if (self.wake_word.exchange(0, std::memory_order_acq_rel) != 0 ||
      shutting_down_.load(std::memory_order_acquire)) {
    return false;
  }
  {
    std::lock_guard<std::mutex> guard(idle_lock_);
    parked_.push_back(&self);
    parked_count_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (self.searching) {
    self.searching = false;
    searching_.fetch_sub(1, std::memory_order_seq_cst);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  chaos_point();
  if (work_visible() || shutting_down_.load(std::memory_order_seq_cst)) {
    // Back out. If a producer popped us from parked_ meanwhile, its wake is on the way (and
    // it counted us as searching): take it, so that it is not left pending.
    bool still_parked = false;
    {
      std::lock_guard<std::mutex> guard(idle_lock_);
      auto found = std::find(parked_.begin(), parked_.end(), &self);
      if (found != parked_.end()) {
        parked_.erase(found);
        parked_count_.fetch_sub(1, std::memory_order_seq_cst);
        still_parked = true;
      }
    }
    if (!still_parked) {
      self.sleep_until_woken();
      self.wake_word.store(0, std::memory_order_relaxed);
      self.searching = true;
    }
    return !shutting_down_.load(std::memory_order_acquire);
  }
  worker::count(self.parks);
  self.sleep_until_woken();
  if (shutting_down_.load(std::memory_order_acquire)) {
    return false;
  }
  self.wake_word.store(0, std::memory_order_relaxed);
  self.searching = true;  // unpark_one counted us
  return true;
}

// --- running a process ------------------------------------------------------------------------

[[gnu::always_inline]] inline void engine::go_idle(worker& self, process_record& record) {
  std::uint32_t expected = phase_running;
  chaos_point();
  // Release: once idle, a notifier takes the record over (acquire in wake_locked) and must see
  // everything this run wrote. Fails only when `notified` was set since the drain: an event
  // arrived, so the process runs again instead.
  if (record.state.compare_exchange_strong(expected, phase_idle, std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
    return;
  }
  record.state.exchange(phase_queued, std::memory_order_acq_rel);
  push_local(self, record, global_);
}

void engine::run(worker& self, process_record& record) {
  // Popped from a run queue: ours alone (the pop's acquire pairs with the push's release, so
  // whatever the previous holder wrote is visible). Notifiers only read a queued state and CAS
  // a running one under the inbox lock, so under that lock a plain store suffices: running,
  // with `notified` cleared, since every event that set it is in the batch now; only a later
  // one makes this process run again.
  record.inbox_lock.lock();
  record.state.store(phase_running, std::memory_order_relaxed);
  if (record.has_events) {
    // The worker's empty vector (with its capacity) goes to the record for the next events.
    // Only when there are events: swapping an empty inbox would hand the capacity to a record
    // that never gets any, and leave the next busy one growing a vector from nothing.
    self.batch.swap(record.inbox);
    record.has_events = false;
  }
  record.inbox_lock.unlock();
  chaos_point();
  if (record.forced.load(std::memory_order_acquire)) {
    finish_terminated(self, record);
    return;
  }
  if (!record.initialised) {
    record.initialised = true;
    try {
      context& self_context = process_record_access::context_of(*record.body);
      if (record.default_entry) {
        record.body->init(self_context, "main", {});
      } else {
        record.body->init(self_context, record.entry->method, record.entry->input);
      }
    } catch (...) {
      finish(self, record, {}, std::current_exception());
      return;
    }
    if (record.forced.load(std::memory_order_acquire)) {  // terminated while in init
      finish_terminated(self, record);
      return;
    }
  } else if (record.waiting && self.batch.empty()) {
    // Defensive: a waiting process is only queued by an event, and the event is in the batch.
    go_idle(self, record);
    return;
  }
  step_output& out = self.output;
  out.clear();
  try {
    record.body->step(std::span<event>(self.batch.data(), self.batch.size()), out);
  } catch (...) {
    out.fail(std::current_exception());
  }
  worker::count(self.steps);
  self.batch.clear();
  release_if_large(self.batch);
  // Terminated during the step: it ends here, and the commands it yielded are dropped rather
  // than handed to their handlers (terminate means no further effects; their completions
  // would find no process anyway).
  if (record.forced.load(std::memory_order_acquire)) {
    finish_terminated(self, record);
    return;
  }
  if (!out.commands().empty()) {
    dispatch(self, record);
  }
  if (record.forced.load(std::memory_order_acquire)) {  // terminated by one of its handlers
    finish_terminated(self, record);
    return;
  }
  switch (out.status()) {
    case step_status::done:
      yield_next_to_queue(self);
      finish(self, record, std::move(out.result_), nullptr);
      return;
    case step_status::failed:
      yield_next_to_queue(self);
      finish(self, record, {}, out.error());
      return;
    case step_status::keep_running:
      // To the back of this worker's queue: everything queued before it runs first. A plain
      // store, not an RMW: while the record is running, the only other writer is a notifier's
      // CAS adding `notified` (wake_locked, under the inbox lock). If that CAS comes first, the
      // store drops the bit, which is harmless: the event is in the inbox, and queued means a
      // run that drains it is coming. If it comes after, it fails, reloads, sees queued and
      // leaves the record alone (queued records are not scheduled by notifiers). Nothing the
      // notifier wrote is read through this word (the inbox is read under its lock), so no
      // acquire is needed; release orders this run's writes before the queue's publication
      // anyway. One locked instruction fewer per keep_running step.
      record.waiting = false;
      record.state.store(phase_queued, std::memory_order_release);
      push_local(self, record, global_);
      return;
    case step_status::wait:
      record.waiting = true;
      go_idle(self, record);
      return;
  }
}

void engine::dispatch(worker& self, process_record& record) {
  const handler_map& handlers = *handlers_.load(std::memory_order_acquire);
  const pid id = pid_of(record);
  for (const command& yielded : self.output.commands()) {
    auto found = handlers.find(yielded.type);
    if (found == handlers.end()) {
      complete_yield(
          id, yielded.tag, {},
          std::make_exception_ptr(unknown_command_error(
              options_.name + ": no handler for command \"" + yielded.type + "\" (tag " +
              std::to_string(yielded.tag) + "); register one with runtime::on_command")));
      continue;
    }
    dispatch_frame frame{this, id, yielded.tag};
    dispatch_frame* outer = std::exchange(current_dispatch, &frame);
    try {
      found->second(yielded, completion(shared_from_this(), id, yielded.tag, found->first));
      current_dispatch = outer;
    } catch (...) {
      current_dispatch = outer;
      handler_threw(frame, yielded.type, std::current_exception());
    }
    // A completion the handler returned without completing or keeping is still in frame.held:
    // its destructor (no frame now) fails the yield with "dropped its completion".
  }
}

void engine::finish_terminated(worker& here, process_record& record) noexcept {
  finish(here, record, {}, std::make_exception_ptr(cancelled_error("terminated")));
}

void engine::finish(worker& here, process_record& record, std::string&& result,
                    std::exception_ptr error) noexcept {
  record.inbox_lock.lock();
  record.accepting = false;
  record.cancel_sent = false;
  if (record.has_events) {
    record.inbox.clear();  // events for a finished process are dropped with it
    record.has_events = false;
  }
  record.inbox_lock.unlock();
  // Not accepting any more: no sender touches the inbox now, so no lock is needed to drop a
  // large capacity (a record's next process should not inherit a burst's memory).
  release_if_large(record.inbox);
  record.state.store(phase_complete, std::memory_order_release);
  if (record.body != nullptr) {
    record.body->close();
    record.body.reset();
  }
  here.batch.clear();
  release_if_large(here.batch);
  record.initialised = false;
  record.waiting = false;
  std::shared_ptr<outcome_state> outcome;
  if (record.has_outcome) {
    outcome = std::move(record.outcome);
    record.has_outcome = false;
  }
  const pid id = pid_of(record);
  free_record(here, record);
  if (outcome == nullptr && error != nullptr) {
    report_detached_failure(id, error);
  }
  // Counted finished before the handle is settled, so that live() agrees with what a waiter
  // has seen: once wait() returns, this process is not counted. The ordering: count() is a
  // release store of here.finished, sequenced before settle()'s seq_cst store of `finished`;
  // the waiter's load that sees that store is seq_cst (acquire), so it synchronizes with it,
  // and the counter's store happens-before everything the waiter does next. live() loads
  // here.finished with acquire after that, and by read-write coherence reads this store or a
  // later one: never the old count. (The start was counted before this process ran, so
  // before the finish as well.) stop() may now see the count reach zero before the outcome is
  // settled; it returns only after joining the workers, so by then every outcome is settled.
  count_finished(here);
  // After close(): whoever waits on the handle sees close's effects.
  if (outcome != nullptr) {
    outcome->settle(std::move(result), std::move(error));
  }
}

}  // namespace weft::procs::detail
