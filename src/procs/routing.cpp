// weft::procs engine: routing by pid. deliver and deliver_message put an event in a process's
// inbox and wake it (the path of every send, cancel and completion); terminate forces one to
// end. The table, submission and stop are engine.cpp; the workers' side is worker.cpp.
#include <stdexcept>
#include <utility>

#include "procs/engine.hpp"
#include "weft/error.hpp"

namespace weft::procs::detail {

[[gnu::always_inline]] inline bool engine::wake_locked(process_record& record) noexcept {
  // Acquire: if it reads idle, we take the record over, and its last owner's writes (before the
  // release CAS that made it idle, go_idle) are ours.
  std::uint32_t state = record.state.load(std::memory_order_acquire);
  for (;;) {
    chaos_point();
    std::uint32_t phase = state & phase_mask;
    if (phase == phase_idle) {
      // A plain store, not a CAS: only this function moves a record out of idle, always under
      // the inbox lock, which we hold. The idle we read is the latest value: every earlier
      // lock holder's store happens-before our lock (so we cannot read an idle older than
      // theirs), and the owner's CAS to idle is its last write before it lets go. So nobody
      // can change the word between this load and this store. (One fewer locked instruction
      // per wake-up, on the path from a send to the woken process's step.)
      record.state.store(phase_queued, std::memory_order_relaxed);
      return true;
    }
    if (phase == phase_running) {
      if ((state & notified_bit) != 0 ||
          record.state.compare_exchange_weak(state, state | notified_bit, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
        return false;
      }
      // Failed: `state` is reloaded (acquire, for the idle case above) and we look again.
    } else {
      // Queued: its run drains the inbox after this unlock. Complete or free: not accepting,
      // so not reached.
      return false;
    }
  }
}

template <class Fill>
[[gnu::always_inline]] inline bool engine::post(pid to, Fill&& fill) {
  process_record* record = live_record(to);
  if (record == nullptr) [[unlikely]] {
    return false;
  }
  bool wake = false;
  {
    // A guard: the inbox may fail to grow (bad_alloc), and the lock must not stay held.
    std::lock_guard<spin_lock> guard(record->inbox_lock);
    if (!holds_live(*record, to)) [[unlikely]] {
      return false;
    }
    wake = fill(*record) && wake_locked(*record);
  }
  if (wake) {
    schedule(*record, true);
  }
  return true;
}

bool engine::deliver(pid to, event_type type, std::uint64_t tag, std::string&& data,
                     std::exception_ptr&& error, pid from, const char* operation,
                     bool throw_if_unknown) {
  bool accepted = post(to, [&](process_record& record) {
    if (type == event_type::cancel && record.cancel_sent) {
      return false;  // one cancel per process
    }
    try {
      // Built in its slot: the data string is moved once, from the caller's to the event's.
      record.inbox.emplace_back(type, tag, std::move(data), std::move(error), from);
      record.has_events = true;
    } catch (...) {
      if (type != event_type::cancel) {
        throw;  // the inbox is as it was (emplace_back's strong guarantee); the sender hears
      }
      // A cancel must not be lost (stop relies on it): with no memory for its event, the
      // process is terminated instead, as stop's force pass would do.
      record.forced.store(true, std::memory_order_release);
    }
    record.cancel_sent = record.cancel_sent || type == event_type::cancel;
    return true;
  });
  if (!accepted && throw_if_unknown) {
    refuse_unknown(to, operation);
  }
  return accepted;
}

bool engine::deliver_message(pid to, std::string&& data, pid from) {
  return post(to, [&](process_record& record) {
    record.inbox.emplace_back(event_type::message, 0, std::move(data), std::exception_ptr(), from);
    record.has_events = true;
    return true;
  });
}

void engine::refuse_unknown(pid to, const char* operation) const {
  throw unknown_process_error(options_.name + ": " + operation + " " + describe_pid(to) +
                              ": no such live process (it finished, or never existed)");
}

void engine::refuse_send_after_stop() const {
  throw runtime_stopped_error(options_.name +
                              ": send after stop(): no process is left to receive it");
}

void engine::complete_yield(pid target, std::uint64_t tag, std::string data,
                            std::exception_ptr error) {
  deliver(target, event_type::yield_complete, tag, std::move(data), std::move(error), no_pid,
          "complete to", false);
}

void engine::cancel(pid target, bool throw_if_unknown) {
  deliver(target, event_type::cancel, 0, {}, nullptr, no_pid, "cancel to", throw_if_unknown);
}

void engine::terminate(pid target) {
  process_record* record = live_record(target);
  bool wake = false;
  bool found = false;
  if (record != nullptr) {
    record->inbox_lock.lock();
    if (holds_live(*record, target)) {
      found = true;
      record->forced.store(true, std::memory_order_release);
      wake = wake_locked(*record);
    }
    record->inbox_lock.unlock();
  }
  if (wake) {
    schedule(*record, false);
  }
  if (!found) {
    refuse_unknown(target, "terminate");
  }
}
}  // namespace weft::procs::detail
