// weft::procs engine: the process table, submission, stop and the count of live processes.
// Routing by pid is routing.cpp, the workers' side worker.cpp, the facade runtime.cpp.
#include "procs/engine.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "weft/detail/blocks.hpp"
#include "weft/error.hpp"

namespace weft::procs::detail {

std::string describe_pid(pid id) {
  return "pid " + std::to_string(index_of(id)) + "." + std::to_string(id >> 32);
}

engine::engine(runtime& facade, runtime_options options)
    : facade_(facade),
      options_(std::move(options)),
      directory_(new std::atomic<process_record*>[max_chunks]) {
  if (options_.workers == 0) {
    options_.workers = std::max(1u, std::thread::hardware_concurrency());
  }
  std::size_t capacity = options_.local_queue_capacity;
  if (capacity < 2 || (capacity & (capacity - 1)) != 0) {
    throw std::invalid_argument(options_.name +
                                ": local_queue_capacity must be a power of two >= 2, got " +
                                std::to_string(capacity));
  }
  if (options_.global_batch == 0 || options_.global_queue_interval == 0) {
    throw std::invalid_argument(options_.name +
                                ": global_batch and global_queue_interval must be at least 1");
  }
  if (options_.workers > 4096) {
    throw std::invalid_argument(options_.name + ": at most 4096 workers, asked for " +
                                std::to_string(options_.workers));
  }
  for (std::uint32_t chunk = 0; chunk < max_chunks; ++chunk) {
    directory_[chunk].store(nullptr, std::memory_order_relaxed);
  }
  for (std::size_t number = 0; number < options_.workers; ++number) {
    auto created = std::make_unique<worker>(capacity);
    created->owner = this;
    created->number = number;
    created->random_state = 0x9e3779b97f4a7c15ull * (number + 1);
    workers_.push_back(std::move(created));
  }
  parked_.reserve(workers_.size());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    cores = static_cast<std::size_t>(std::max(1, CPU_COUNT(&allowed)));
  }
  max_searching_ =
      static_cast<std::uint32_t>(std::max<std::size_t>(1, std::min(workers_.size(), cores) / 2));
  if (cores == 1) {
    // On one core a spinning worker only delays the thread that would give it work (measured:
    // a wake-up from an outside thread took 9.5 us with the spin, 4 us parking at once).
    options_.spin_time = std::chrono::microseconds::zero();
    options_.yield_rounds = 0;
  }
  handler_maps_.push_back(std::make_unique<handler_map>());
  handlers_.store(handler_maps_.back().get(), std::memory_order_release);
}

void engine::start() {
  for (auto& each : workers_) {
    worker* self = each.get();
    self->thread = std::thread([this, self] { worker_main(*self); });
  }
}

engine::~engine() {
  // stop() joined the workers; what is left in the chunks are free records.
  std::uint32_t chunks = chunks_.load(std::memory_order_acquire);
  for (std::uint32_t chunk = 0; chunk < chunks; ++chunk) {
    delete[] directory_[chunk].load(std::memory_order_relaxed);
  }
}

// --- the table --------------------------------------------------------------------------------

inline process_record* engine::allocate_record(worker* here) {
  if (here != nullptr && !here->free_records.empty()) [[likely]] {
    std::uint32_t index = here->free_records.back();
    here->free_records.pop_back();
    if (!here->free_records.empty()) {
      // The next launch's record was most likely freed by another worker (spawned processes
      // usually finish elsewhere), so its line is in that core's cache: ask for it now, for
      // writing, and the miss overlaps this launch instead of stalling the next one.
      __builtin_prefetch(record_at(here->free_records.back()), 1);
    }
    return record_at(index);
  }
  return allocate_record_slow(here);
}

process_record* engine::allocate_record_slow(worker* here) {
  std::lock_guard<std::mutex> guard(table_lock_);
  if (free_list_.empty()) {
    std::uint32_t chunk = chunks_.load(std::memory_order_relaxed);
    if (chunk == max_chunks) {
      throw std::length_error(options_.name + ": too many live processes (" +
                              std::to_string(std::size_t{max_chunks} * chunk_size) + ")");
    }
    auto* records = new process_record[chunk_size];
    for (std::uint32_t slot = 0; slot < chunk_size; ++slot) {
      records[slot].index = (chunk << chunk_bits) | slot;
    }
    directory_[chunk].store(records, std::memory_order_release);
    chunks_.store(chunk + 1, std::memory_order_release);
    // Slot 0 of chunk 0 is never used, so that no pid has index 0 (nor is 0).
    for (std::uint32_t slot = chunk_size; slot-- > (chunk == 0 ? 1u : 0u);) {
      free_list_.push_back((chunk << chunk_bits) | slot);
    }
  }
  // A worker takes a batch for its cache: its next submissions skip this lock.
  std::size_t take = here != nullptr ? std::min<std::size_t>(free_list_.size(), 64) : 1;
  std::uint32_t index = free_list_.back();
  free_list_.pop_back();
  for (std::size_t extra = 1; extra < take; ++extra) {
    here->free_records.push_back(free_list_.back());
    free_list_.pop_back();
  }
  return record_at(index);
}

void engine::give_back_records(worker& here) noexcept {
  // Half back in one lock, so that a burst of finishes costs one lock per 256.
  std::lock_guard<std::mutex> guard(table_lock_);
  free_list_.insert(free_list_.end(), here.free_records.end() - 256, here.free_records.end());
  here.free_records.resize(here.free_records.size() - 256);
}

// --- submission and routing -------------------------------------------------------------------

void engine::on_command(std::string type, command_handler handler) {
  if (!handler) {
    throw std::invalid_argument(options_.name + ": on_command(\"" + type +
                                "\") needs a handler, got an empty function");
  }
  std::lock_guard<std::mutex> guard(handlers_lock_);
  auto replaced = std::make_unique<handler_map>(*handlers_.load(std::memory_order_relaxed));
  (*replaced)[std::move(type)] = std::move(handler);
  // Release: a worker that loads the new map sees it whole.
  handlers_.store(replaced.get(), std::memory_order_release);
  handler_maps_.push_back(std::move(replaced));
}

process_handle engine::submit(std::unique_ptr<process> body, std::string_view method,
                              std::string_view input) {
  if (body == nullptr) {
    throw std::invalid_argument(options_.name + ": submit needs a process, got nullptr");
  }
  std::shared_ptr<outcome_state> state;
  pid id = launch(std::move(body), method, input, &state);
  return process_handle(id, std::move(state));
}

pid engine::spawn(std::unique_ptr<process> body, std::string_view method, std::string_view input) {
  if (body == nullptr) {
    throw std::invalid_argument(options_.name + ": spawn needs a process, got nullptr");
  }
  return launch(std::move(body), method, input, nullptr);
}

pid engine::launch(std::unique_ptr<process> body, std::string_view method, std::string_view input,
                   std::shared_ptr<outcome_state>* handle_state) {
  // Counted before the check, so that either we see stopping_ and back out, or stop() counts
  // this process as live and waits for it (see count_live for why a worker needs no fence).
  worker* here = current_worker(this);
  count_started(here);
  if (stopping_.load(std::memory_order_seq_cst)) {
    uncount_started(here);
    throw runtime_stopped_error(options_.name +
                                ": submit after stop(): the runtime takes no "
                                "new processes");
  }
  process_record* allocated = nullptr;
  try {
    allocated = allocate_record(here);
  } catch (...) {
    uncount_started(here);
    throw;
  }
  process_record& record = *allocated;
  pid id = make_pid(record.generation, record.index);
  record.body = std::move(body);
  // Most processes start at "main" with no input: that is a flag in the record's first line,
  // and the strings (two other lines) are neither written here nor read by init.
  record.default_entry = method == std::string_view("main") && input.empty();
  if (!record.default_entry) {
    if (record.entry == nullptr) {
      record.entry = std::make_unique<entry_point>();
    }
    record.entry->method.assign(method);
    record.entry->input.assign(input);
  }
  record.initialised = false;
  record.waiting = false;
  record.forced.store(false, std::memory_order_relaxed);
  record.has_outcome = handle_state != nullptr;
  if (handle_state != nullptr) {
    record.outcome =
        std::allocate_shared<outcome_state>(weft::detail::block_allocator<outcome_state>{});
    *handle_state = record.outcome;  // before schedule(): from then on a worker may finish it
  }
  process_record_access::bind(*record.body, id, facade_);
  // Queued before it accepts events: a sender that gets in first sees it queued and leaves the
  // waking to us.
  record.state.store(phase_queued, std::memory_order_relaxed);
  record.inbox_lock.lock();
  record.accepting = true;
  record.cancel_sent = false;
  record.inbox_lock.unlock();
  // stop() may have begun after our check and swept the table before this record accepted
  // events: then it is ours to cancel (seq_cst pairs with the store in stop(); see there).
  if (stopping_.load(std::memory_order_seq_cst)) {
    // deliver sends it once (the sweep may have got in first) and never loses it; the record is
    // queued, so deliver does not schedule it.
    cancel(id, false);
  }
  // From a worker, the new process takes the "next" slot, as Go's runqput(next) and Tokio's
  // LIFO slot do: a chain of spawns (or a spawn the spawner then waits on) stays on this core,
  // hot in its cache, instead of being stolen by an idle worker at the cost of a cache-line
  // transfer per hop. The process it displaces goes to the queue, where thieves see it.
  schedule(record, false);
  return id;
}

void engine::report_detached_failure(pid id, const std::exception_ptr& error) const noexcept {
  if (weft::detail::is_cancellation(error)) {
    return;  // terminated, forced at stop, or it chose to end cancelled: not a failure to report
  }
  if (options_.on_detached_failure) {
    try {
      options_.on_detached_failure(id, error);
      return;
    } catch (...) {
      std::fprintf(stderr, "%s: on_detached_failure threw for %s; the failure was:\n",
                   options_.name.c_str(), describe_pid(id).c_str());
    }
  }
  std::fprintf(stderr, "%s: detached process %s failed: %s\n", options_.name.c_str(),
               describe_pid(id).c_str(), weft::detail::what_of(error).c_str());
}

void engine::handler_threw(dispatch_frame& frame, const std::string& type,
                           std::exception_ptr error) noexcept {
  if (frame.held.pending()) {
    // Its completion went down with it (see dispatch_frame): the yield fails with what the
    // handler threw, exactly as if it had called fail() with it.
    try {
      frame.held.fail(std::move(error));
    } catch (...) {
      // fail() throws only for misuse (a null error, a finished completion): neither here.
    }
    return;
  }
  // It had completed the yield, or handed its completion on, before throwing: the yield is
  // settled by that; the exception has no process to go to, so it is reported, not dropped.
  std::fprintf(stderr,
               "%s: the handler for command \"%s\" of %s threw after completing or handing on "
               "its completion: %s\n",
               options_.name.c_str(), type.c_str(), describe_pid(frame.target).c_str(),
               weft::detail::what_of(error).c_str());
}

// --- stop -------------------------------------------------------------------------------------

bool engine::stop(std::chrono::steady_clock::duration grace) {
  if (current_worker(this) != nullptr) {
    throw std::logic_error(options_.name +
                           ": stop() from one of its own workers (a step or a command handler) "
                           "would wait for itself; call it from another thread");
  }
  std::unique_lock<std::mutex> guard(stop_lock_);
  if (stop_started_) {
    // Nothing is left to finish by the time it returns: a later stop is trivially on time.
    all_finished_.wait(guard, [this] { return stopped_; });
    return true;
  }
  stop_started_ = true;
  // seq_cst, paired with submit's seq_cst load after its record accepts events: either this
  // sweep sees the record accepting, or that submit sees stopping_ and cancels its own record.
  stopping_.store(true, std::memory_order_seq_cst);
  auto for_each_live = [this](auto&& action) {
    std::uint32_t chunks = chunks_.load(std::memory_order_acquire);
    for (std::uint32_t chunk = 0; chunk < chunks; ++chunk) {
      process_record* records = directory_[chunk].load(std::memory_order_acquire);
      for (std::uint32_t slot = 0; slot < chunk_size; ++slot) {
        process_record& record = records[slot];
        record.inbox_lock.lock();
        bool live = record.accepting;
        pid id = live ? pid_of(record) : no_pid;
        record.inbox_lock.unlock();
        if (live) {
          action(id);
        }
      }
    }
  };
  for_each_live([this](pid id) { cancel(id, false); });
  auto finished = [this] { return count_live() == 0; };
  // A finishing worker notifies once it sees stopping_, but it reads stopping_ without a fence
  // (a fence per process would tax every finish for stop's sake), so a finish racing the store
  // above may miss it: the waits below are polls of at most finish_poll, and never sleep
  // through the end.
  auto wait_finished = [&](std::chrono::steady_clock::time_point deadline) {
    while (!finished()) {
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        return false;
      }
      all_finished_.wait_until(guard,
                               std::min(deadline, weft::detail::saturating_add(now, finish_poll)));
    }
    return true;
  };
  const auto never = std::chrono::steady_clock::time_point::max();
  // Saturated: a grace past the clock's end is no deadline (time_point::max()), one before its
  // start a deadline that has passed.
  bool on_time =
      wait_finished(weft::detail::saturating_add(std::chrono::steady_clock::now(), grace));
  if (!on_time) {
    // The ones that ignored the cancel: no more steps; each is closed once by the worker that picks
    // it up (idle ones are woken for that), after its current step if it is running.
    for_each_live([this](pid id) {
      try {
        terminate(id);
      } catch (const unknown_process_error&) {
        // It finished between the sweep and the terminate.
      }
    });
    wait_finished(never);
  }
  all_finished_by_themselves_ = on_time;
  shutting_down_.store(true, std::memory_order_seq_cst);
  guard.unlock();
  for (auto& each : workers_) {
    each->wake();
  }
  for (auto& each : workers_) {
    if (each->thread.joinable()) {
      each->thread.join();
    }
  }
  guard.lock();
  stopped_ = true;
  all_finished_.notify_all();
  return all_finished_by_themselves_;
}

// --- counting live processes ------------------------------------------------------------------
//
// One shared counter of live processes, incremented by the spawning worker and decremented by
// the one that finishes the process, was the hottest cache line of a spawn on two cores (each
// spawn and each finish moved it between them). Instead each worker counts the processes it
// started and the ones it finished, in counters only it writes (a release store, no RMW);
// submissions from outside the workers use one shared pair. live = started - finished.
//
// count_live reads every `finished` first, then every `started`, all with acquire. A process's
// start happens-before its finish (the run queue's release/acquire is between them), and the
// finish's release store is read by our acquire load, so any finish we count has its start
// counted too: the result is never below the number of processes live when the first load ran,
// and it is 0 only when nothing was live then and nothing started until the last load.
//
// Why a worker's start needs no fence against stop(): a worker starts a process only inside a
// step or a command handler, i.e. while the process it is running is live and not yet counted
// finished; that process's finish is counted later, on this same worker, after the start. So
// while stop() has not seen the spawner finish it sees a nonzero count, and once it has seen
// the finish it sees the start. Outside threads have no such anchor: they use a seq_cst RMW,
// paired with stop()'s seq_cst store of stopping_ (one of the two sees the other).

void engine::count_started(worker* here) noexcept {
  if (here != nullptr) {
    worker::count(here->started);
  } else {
    outside_started_.fetch_add(1, std::memory_order_seq_cst);
  }
}

void engine::uncount_started(worker* here) noexcept {
  // Undoes count_started for a process that never began: counted as finished at once.
  if (here != nullptr) {
    worker::count(here->finished);
  } else {
    outside_finished_.fetch_add(1, std::memory_order_seq_cst);
  }
  notify_if_stopping();
}

std::size_t engine::count_live() const noexcept {
  std::uint64_t finished = outside_finished_.load(std::memory_order_acquire);
  for (const auto& each : workers_) {
    finished += each->finished.load(std::memory_order_acquire);
  }
  std::uint64_t started = outside_started_.load(std::memory_order_acquire);
  for (const auto& each : workers_) {
    started += each->started.load(std::memory_order_acquire);
  }
  return started >= finished ? static_cast<std::size_t>(started - finished) : 0;
}

void engine::count_finished(worker& here) noexcept {
  worker::count(here.finished);
  notify_if_stopping();
}

void engine::notify_if_stopping() noexcept {
  if (stopping_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard(stop_lock_);
    all_finished_.notify_all();
  }
}

runtime::counters engine::stats() const noexcept {
  runtime::counters total;
  for (const auto& each : workers_) {
    total.steps += each->steps.load(std::memory_order_relaxed);
    total.steals += each->steals.load(std::memory_order_relaxed);
    total.stolen += each->stolen.load(std::memory_order_relaxed);
    total.global_batches += each->global_batches.load(std::memory_order_relaxed);
    total.parks += each->parks.load(std::memory_order_relaxed);
  }
  return total;
}

}  // namespace weft::procs::detail
