// The engine behind weft::procs::runtime: the process table, the workers and their queues,
// idling and parking, and stop. worker.cpp runs processes; engine.cpp owns the table and
// lifecycle, routing.cpp the routing by pid (deliver, terminate); outcome.cpp the handles,
// completions and step_output; runtime.cpp the public facade.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "procs/global_queue.hpp"
#include "procs/local_queue.hpp"
#include "procs/record.hpp"
#include "weft/procs/runtime.hpp"
#include "weft/reactor/trigger.hpp"

namespace weft::procs::detail {

// "pid 3.1" (index.generation), for messages.
std::string describe_pid(pid id);

// The result of a process, shared by its handles; one allocation per process, so no mutex or
// condition variable: threads wait on `finished` as a futex word, weft coroutines on a trigger
// registered under a spin lock.
struct outcome_state {
  // 0 until settled, then 1 (release: result and error are written before).
  std::atomic<std::uint32_t> finished{0};
  // Threads blocked (or about to block) in wait: settle() wakes the futex only when nonzero.
  // Store-buffer pattern with `finished`, closed by seq_cst on both sides (see settle).
  std::atomic<std::uint32_t> thread_waiters{0};
  // Set (seq_cst, under waiters_lock) by the first awaiting coroutine: settle() takes the lock
  // only then. Same store-buffer pairing as thread_waiters.
  std::atomic<bool> has_coroutine_waiters{false};
  spin_lock waiters_lock;
  std::vector<weft::trigger*> coroutine_waiters;  // weft coroutines in process_handle::await
  std::string result;
  std::exception_ptr error;

  void settle(std::string value, std::exception_ptr failure) noexcept;
  bool is_finished() const noexcept { return finished.load(std::memory_order_acquire) != 0; }
  // Blocks the calling thread until settled or the deadline (nullptr: none). True if settled.
  bool wait_until(const std::chrono::steady_clock::time_point* deadline) noexcept;
};

class engine;
struct dispatch_frame;

struct worker {
  engine* owner = nullptr;
  std::size_t number = 0;
  local_queue<process_record> queue;
  process_record* next = nullptr;     // the process this worker just launched or woke: runs first
  bool next_by_event = false;         // `next` was woken by an event (not launched, not terminated)
  std::size_t next_runs = 0;          // consecutive runs from `next`
  std::size_t until_global_look = 0;  // runs left before the global queue's forced look
  std::uint64_t random_state = 0;
  step_output output;                       // reused for every step on this worker
  std::vector<event> batch;                 // the events of the run in progress (swapped with
                                            // the record's inbox, so buffers are reused)
  std::vector<std::uint32_t> free_records;  // a cache of the table's free list
  std::atomic<std::uint32_t> wake_word{0};  // futex word: 1 once unparked

  // A private futex on wake_word directly: std::atomic::wait in libstdc++ 12 spins and yields
  // first and uses a shared futex through a waiter table, which tripled the wake-up latency.
  void sleep_until_woken() noexcept;
  void wake() noexcept;
  bool searching = false;
  std::thread thread;

  // Counters, written by this worker only (with count(): a load and a store, no RMW: one writer),
  // read by stats().
  std::atomic<std::uint64_t> steps{0};
  std::atomic<std::uint64_t> steals{0};
  std::atomic<std::uint64_t> stolen{0};
  std::atomic<std::uint64_t> global_batches{0};
  std::atomic<std::uint64_t> parks{0};
  // Processes this worker started and finished (engine.cpp: counting live processes).
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> finished{0};

  explicit worker(std::size_t local_capacity) : queue(local_capacity) {}

  // +amount on a counter only this worker writes: a plain load and a store, no RMW. Release,
  // which the live count needs (engine.cpp) and costs nothing on x86 for the statistics.
  static void count(std::atomic<std::uint64_t>& counter, std::uint64_t amount = 1) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + amount, std::memory_order_release);
  }
};

class engine : public std::enable_shared_from_this<engine> {
 public:
  engine(runtime& facade, runtime_options options);
  ~engine();
  void start();

  // runtime's members.
  void on_command(std::string type, command_handler handler);
  process_handle submit(std::unique_ptr<process> body, std::string_view method,
                        std::string_view input);
  pid spawn(std::unique_ptr<process> body, std::string_view method, std::string_view input);
  // An event to `to`'s inbox (a cancel only once per process); false, or unknown_process_error
  // when throw_if_unknown, if `to` is not a live process.
  bool deliver(pid to, event_type type, std::uint64_t tag, std::string&& data,
               std::exception_ptr&& error, pid from, const char* operation, bool throw_if_unknown);
  // runtime::send and try_send: a message, or runtime_stopped_error after stop().
  bool send(pid to, std::string&& message, pid from) {
    if (stopped()) [[unlikely]] {
      refuse_send_after_stop();
    }
    return deliver_message(to, std::move(message), from);
  }
  // deliver for a message: the path of every send, without what only cancels and completions
  // need (the cancel-once flag, an error, the unknown-pid throw).
  bool deliver_message(pid to, std::string&& data, pid from);
  // The errors, built out of line: the send path stays small enough to inline.
  [[noreturn, gnu::cold, gnu::noinline]] void refuse_unknown(pid to, const char* operation) const;
  [[noreturn, gnu::cold, gnu::noinline]] void refuse_send_after_stop() const;
  void cancel(pid target, bool throw_if_unknown);
  void terminate(pid target);
  bool stop(std::chrono::steady_clock::duration grace);
  std::size_t live() const noexcept { return count_live(); }
  std::size_t worker_count() const noexcept { return workers_.size(); }
  runtime::counters stats() const noexcept;
  const std::string& name() const noexcept { return options_.name; }
  bool stopped() const noexcept { return shutting_down_.load(std::memory_order_acquire); }

  // A completion's delivery: the yield_complete event, or nothing if the process is gone.
  void complete_yield(pid target, std::uint64_t tag, std::string data, std::exception_ptr error);

 private:
  friend struct worker_loop;

  // Table.
  process_record* record_at(std::uint32_t index) const noexcept {
    std::uint32_t chunk = index >> chunk_bits;
    if (chunk >= chunks_.load(std::memory_order_acquire)) {
      return nullptr;
    }
    // Published with release after the chunk's records were constructed (allocate_record).
    process_record* records = directory_[chunk].load(std::memory_order_acquire);
    return records == nullptr ? nullptr : &records[index & (chunk_size - 1)];
  }
  // A free record for a launch: from the worker's cache (inline, in engine.cpp), else from the
  // table's free list (allocate_record_slow, which also grows the table).
  process_record* allocate_record(worker* here);
  [[gnu::noinline]] process_record* allocate_record_slow(worker* here);
  // A finished process's record, back to its worker's cache (inline, below the class); half of
  // a full cache goes back to the table (give_back_records).
  void free_record(worker& here, process_record& record) noexcept;
  [[gnu::noinline]] void give_back_records(worker& here) noexcept;
  // The record, unchecked (see deliver).
  process_record* live_record(pid id) const noexcept {
    return id == no_pid ? nullptr : record_at(index_of(id));
  }

  // submit and spawn: starts the process; gives its outcome a second owner in *handle_state,
  // or none when nullptr (detached).
  pid launch(std::unique_ptr<process> body, std::string_view method, std::string_view input,
             std::shared_ptr<outcome_state>* handle_state);
  void report_detached_failure(pid id, const std::exception_ptr& error) const noexcept;

  // Scheduling. Call with the record in phase queued and owned by the caller; by_event: woken
  // by an event, not launched. schedule is inline (below the class) for the common case, a
  // worker whose "next" is free taking the record there; schedule_slow does the rest.
  void schedule(process_record& record, bool by_event);
  void schedule_slow(process_record& record, bool by_event, worker* here);
  void yield_next_to_queue(worker& self);  // worker.cpp: after a step that ended its process
  void notify_work() noexcept;
  void notify_others() noexcept;  // notify_work from a worker: a no-op with a single worker
  // The core of deliver and deliver_message: finds `to`'s record and, under its inbox lock if it
  // holds the live process, calls fill(record), which adds the event and returns true (false:
  // nothing added), then wakes and schedules the process if it was idle. False when `to` is not a
  // live process.
  template <class Fill>
  bool post(pid to, Fill&& fill);
  // Under the record's inbox_lock, with the record accepting: wakes it if idle. True when the
  // caller must schedule it (after unlocking).
  static bool wake_locked(process_record& record) noexcept;

  // The worker side (worker.cpp).
  void worker_main(worker& self);
  process_record* find_work(worker& self);
  process_record* search(worker& self);
  void leave_searching(worker& self) noexcept;  // self found work: one searcher fewer
  bool park(worker& self);                      // false when the engine is shutting down
  void unpark_one() noexcept;
  bool work_visible() const noexcept;
  void run(worker& self, process_record& record);
  void dispatch(worker& self, process_record& record);
  // A command handler threw: fails the yield with its exception (see dispatch_frame).
  void handler_threw(dispatch_frame& frame, const std::string& type,
                     std::exception_ptr error) noexcept;
  void go_idle(worker& self, process_record& record);
  // The result is moved from only for a process with a handle (a detached one drops it).
  void finish(worker& here, process_record& record, std::string&& result,
              std::exception_ptr error) noexcept;
  // finish with cancelled_error("terminated"): terminate() or stop()'s force pass.
  void finish_terminated(worker& here, process_record& record) noexcept;
  // Live processes (engine.cpp explains the counting).
  void count_started(worker* here) noexcept;
  void uncount_started(worker* here) noexcept;
  void count_finished(worker& here) noexcept;
  std::size_t count_live() const noexcept;
  void notify_if_stopping() noexcept;
  static constexpr std::chrono::milliseconds finish_poll{1};

  runtime& facade_;
  runtime_options options_;
  std::vector<std::unique_ptr<worker>> workers_;
  global_queue<process_record> global_;

  // The table: chunks of records, published in `directory_` (never moved or freed before the
  // engine), slots handed out from the free list.
  static constexpr std::uint32_t chunk_bits = 12;
  static constexpr std::uint32_t chunk_size = 1u << chunk_bits;
  static constexpr std::uint32_t max_chunks = 1u << 16;
  std::unique_ptr<std::atomic<process_record*>[]> directory_;
  std::atomic<std::uint32_t> chunks_{0};
  std::mutex table_lock_;
  std::vector<std::uint32_t> free_list_;

  // Command handlers: an immutable map swapped on registration; old maps are kept until the
  // engine goes (registration is rare), so a worker may keep using the one it loaded.
  using handler_map = std::unordered_map<std::string, command_handler>;
  std::atomic<const handler_map*> handlers_{nullptr};
  std::mutex handlers_lock_;
  std::vector<std::unique_ptr<handler_map>> handler_maps_;

  // Idle workers. At most max_searching_ search at once: half the workers, and half the cores
  // this process may run on (searchers spin; more workers than cores must not mean more
  // spinners than cores), at least one.
  std::uint32_t max_searching_ = 1;
  std::atomic<std::uint32_t> searching_{0};
  std::atomic<std::uint32_t> parked_count_{0};
  std::mutex idle_lock_;
  std::vector<worker*> parked_;

  // Lifecycle.
  std::atomic<std::uint64_t> outside_started_{0};   // by threads that are not workers
  std::atomic<std::uint64_t> outside_finished_{0};  // their submits refused after counting
  std::atomic<bool> stopping_{false};               // submit refused; stop's cancel pass under way
  std::atomic<bool> shutting_down_{false};          // workers exit; send refused
  std::mutex stop_lock_;
  std::condition_variable all_finished_;
  bool stop_started_ = false;
  bool stopped_ = false;
  bool all_finished_by_themselves_ = true;
};

// The worker the calling thread is (set by worker_main), if it is one of `owner`'s.
inline thread_local worker* this_worker = nullptr;
inline worker* current_worker(const engine* owner) noexcept {
  worker* here = this_worker;
  return here != nullptr && here->owner == owner ? here : nullptr;
}

// The command whose handler this thread is running (engine::dispatch sets it around the call).
// A pending completion for that command destroyed meanwhile, on this thread (the handler
// dropped it, or threw and it went with the unwinding), is handed back here instead of failing
// the yield at once: dispatch then fails the yield with the handler's exception if it threw, or
// with "dropped its completion" if it returned. A completion the handler handed on to another
// thread is not touched (the frame is this thread's only).
struct dispatch_frame {
  const engine* owner;
  pid target;
  std::uint64_t tag;
  completion held{};  // the completion handed back, if any
};
inline thread_local dispatch_frame* current_dispatch = nullptr;

inline void engine::free_record(worker& here, process_record& record) noexcept {
  ++record.generation;
  if (record.generation == 0) {
    record.generation = 1;  // pids are never 0
  }
  record.state.store(phase_free, std::memory_order_release);
  here.free_records.push_back(record.index);
  if (here.free_records.size() >= 512) [[unlikely]] {
    give_back_records(here);
  }
}

// The process a worker just launched or woke runs next on it (a reply is usually awaited by
// the one that sent it, and a spawned child's data is hot in this core's cache); one scheduled
// from outside the workers goes to the global queue.
inline void engine::schedule(process_record& record, bool by_event) {
  worker* here = current_worker(this);
  if (here != nullptr && here->next == nullptr) [[likely]] {
    here->next = &record;
    here->next_by_event = by_event;
    return;
  }
  schedule_slow(record, by_event, here);
}

}  // namespace weft::procs::detail
