// fd readiness on the driver's fd watches (src/sched/driver.hpp): one watch per fd, shared by
// every waiter of that fd and its callback subscription (src/reactor/fd_subscription.hpp). The
// same code runs on every driver.
#include "weft/reactor/fd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reactor/fd_subscription.hpp"
#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft::detail {
namespace {

class fd_registry;
class fd_deadline;

// The io_error of a driver that cannot watch fd, out of line (see wait_for).
[[noreturn, gnu::cold, gnu::noinline]] void throw_fd_error(int status, const char* operation,
                                                           int fd) {
  throw_uv_error(status, operation, "fd " + std::to_string(fd));
}

// The deadline of a timed wait on the fd, kept in the timer heap across waits (see
// fd_deadline). background: a deadline left queued after its wait ended must not keep the
// reactor alive; while a wait uses it, the wait's fd watch does.
struct lazy_timer : timer_entry {
  fd_deadline* user = nullptr;  // the wait whose deadline it is now, or null
  scheduler_core* core = nullptr;
};

// One fd's waiters and its watch. Kept for reuse once its fd has been waited on (fd numbers are
// small and dense), so a wait on a fresh fd allocates nothing once the registry has seen that
// number; freed with the registry.
//
// Aligned to a cache line, the watch's fields first and with them what a report reads of a fd
// that only a subscription watches (a hibernating connection: on_ready reads the lists only
// when the waiter counts say someone waits):
// at a thousand connections each report of one costs one cold line of its entry (callgrind,
// /hello at 1000 connections, a 1 MiB last level: 14.4 -> 11.0 read misses per request).
struct alignas(64) fd_entry : fd_watch {
  fd_subscription* subscriber = nullptr;  // the fd's callback watch, if any
  // Waiters for each direction, counted from arm to disarm: unlike the lists, they still count a
  // waiter that was woken and has not run yet (see on_ready). Both 0: both lists are empty.
  std::uint32_t reading = 0;
  std::uint32_t writing = 0;
  // Reports since the last wake that found only such not-yet-run waiters (see on_ready, which
  // stops counting at max_woken_repeats).
  std::uint16_t repeats = 0;
  // Referenced with nobody waiting, and in the registry's list of entries to settle (see
  // fd_registry::settle): here, in the first line, which settle reads anyway.
  bool unsettled = false;
  // fd_registration objects keeping it watched between waits (see fd.hpp): a pinned entry is
  // not unwatched when its last waiter leaves, and keeps polling for what it polled; on_ready
  // drops an interest once it fires with nobody waiting for it.
  int pinned = 0;
  // (The watch's fields and these five: the first 64 bytes.)
  intrusive_list readers;
  intrusive_list writers;
  fd_registry* registry = nullptr;
  lazy_timer timer;

  std::size_t waiters() const noexcept { return std::size_t{reading} + writing; }
  // Whether anyone is in the lists, without reading them when nobody waits at all.
  bool has_readers() const noexcept { return reading != 0 && !readers.empty(); }
  bool has_writers() const noexcept { return writing != 0 && !writers.empty(); }
};
static_assert(sizeof(fd_watch) + sizeof(fd_subscription*) + 2 * sizeof(std::uint32_t) +
                      sizeof(std::uint16_t) + sizeof(bool) + 1 /* padding */ + sizeof(int) <=
                  64,
              "what a report reads no longer fits the fd entry's first cache line");

class fd_registry final : public driver_extension {
 public:
  explicit fd_registry(driver& owner) : driver_(owner) {}

  // fd's entry, watched (not yet polling for anything): io_error naming operation and the fd
  // when the driver cannot watch it (closed, a regular file).
  [[gnu::hot]] fd_entry& entry(int fd, const char* operation) {
    int status = 0;
    fd_entry* found = try_entry(fd, status);
    if (found == nullptr) {
      throw_fd_error(status, operation, fd);
    }
    return *found;
  }

  // The same, returning null and the driver's negative errno in status when it cannot.
  [[gnu::hot]] fd_entry* try_entry(int fd, int& status) {
    auto index = static_cast<std::size_t>(fd);
    if (index >= entries_.size()) {
      entries_.resize(index + 1);
    }
    std::unique_ptr<fd_entry>& slot = entries_[index];
    if (slot == nullptr) {
      slot = std::make_unique<fd_entry>();
      slot->registry = this;
      slot->fd = fd;
      slot->ready = &fd_registry::on_ready;
    }
    fd_entry& found = *slot;
    if (!found.watched) {
      found.events = 0;
      found.referenced = true;
      status = driver_.watch_fd(found);
      if (status < 0) {
        return nullptr;
      }
    }
    return &found;
  }

  // Polls for what the entry's waiters and its subscriber want, or unwatches it once nobody
  // waits and nothing is subscribed. Returns the driver's status (a negative errno when it
  // could not poll).
  [[gnu::hot]] int update(fd_entry& entry) noexcept {
    const fd_subscription* subscriber = entry.subscriber;
    int wanted = (entry.has_readers() ? fd_watch::readable : 0) |
                 (entry.has_writers() ? fd_watch::writable : 0) |
                 (subscriber != nullptr ? subscriber->events : 0);
    // Waiters keep the driver alive; a subscriber when it says so. Idle, a pinned entry must
    // not (nor hide a deadlock).
    bool referenced = entry.waiters() > 0 || (subscriber != nullptr && subscriber->referenced);
    int status = 0;
    if (entry.pinned > 0) {
      // Registered for the long run: only ever add interests here (each change of the polled
      // set is a syscall); one nobody wants goes when it fires (on_ready).
      status = set_events(entry, entry.events | wanted);
    } else if (entry.waiters() == 0 && subscriber == nullptr) {
      driver_.unwatch_fd(entry);
      return 0;
    } else {
      status = set_events(entry, wanted);
    }
    if (entry.referenced != referenced) {
      driver_.set_fd_referenced(entry, referenced);
    }
    return status;
  }

  // A pinned entry waited on by a served connection in a loop goes from one waiter to none and
  // back at every request, and its reference (what keeps the driver alive(): a waiter does, an
  // idle registration must not) followed, two driver calls a request. The waits of a pinned
  // entry that change nothing it polls for take these two paths instead of update(): a wait
  // finds the entry referenced already and changes nothing; the last waiter leaving keeps the
  // reference and puts the entry on the list that settle() goes through. The scheduler settles
  // its driver's extensions before it asks alive(), the only place a stale reference could
  // matter (whether to block in the poll, or report a deadlock), so alive() answers as if the
  // reference had been dropped at once.
  //
  // Whether a wait for want on entry changes nothing update() would: pinned (update only adds
  // interests), no subscriber, polling for want already and for nothing it was not asked to.
  static bool settled_wait(const fd_entry& entry, int want) noexcept {
    return entry.pinned > 0 && entry.subscriber == nullptr && entry.events == entry.armed &&
           (entry.armed & want) != 0;
  }
  // arm's path for such a wait (entry's waiter counted already).
  void join_settled(fd_entry& entry) noexcept {
    if (!entry.referenced) {
      driver_.set_fd_referenced(entry, true);
    }
  }
  // disarm's path for such a wait (entry's waiter uncounted already). Without memory for the
  // list, the reference is dropped at once instead.
  void leave_settled(fd_entry& entry) noexcept {
    if (entry.waiters() != 0 || !entry.referenced || entry.unsettled) {
      return;
    }
    try {
      unsettled_.push_back(&entry);
      entry.unsettled = true;
    } catch (const std::bad_alloc&) {
      update(entry);
    }
  }
  void settle() noexcept override {
    for (fd_entry* entry : unsettled_) {
      entry->unsettled = false;
      if (entry->watched && entry->referenced && entry->waiters() == 0) {
        update(*entry);  // drops the reference (or unwatches an entry unpinned since)
      }
    }
    unsettled_.clear();
  }

  // fd_subscription (see fd_subscription.hpp).
  int subscribe(fd_subscription& subscription) {
    auto* found = static_cast<fd_entry*>(subscription.entry);
    if (found == nullptr) {
      int status = 0;
      found = try_entry(subscription.fd, status);
      if (found == nullptr) {
        return status;
      }
      if (found->subscriber != nullptr) {
        update(*found);  // unwatches an entry this call watched
        return -EEXIST;
      }
      found->subscriber = &subscription;
      subscription.entry = found;
      int started = update(*found);
      if (started < 0) {
        unsubscribe(subscription);
      }
      return started;
    }
    return update(*found);
  }
  void unsubscribe(fd_subscription& subscription) noexcept {
    auto* found = static_cast<fd_entry*>(subscription.entry);
    if (found == nullptr) {
      return;
    }
    found->subscriber = nullptr;
    subscription.entry = nullptr;
    if (found->watched) {
      update(*found);
    }
  }

  // Asks the driver to poll for wanted; a call only when that changes what it polls.
  int set_events(fd_entry& entry, int wanted) noexcept {
    entry.events = wanted;
    if (entry.armed == wanted) {
      return 0;
    }
    try {
      return driver_.watch_fd(entry);
    } catch (const std::bad_alloc&) {
      return -ENOMEM;
    }
  }

  // fd_registration: pins fd's entry (watched if needed) / unpins it, unwatching it if nobody
  // waits.
  void pin(int fd, const char* operation) { ++entry(fd, operation).pinned; }
  void unpin(int fd) noexcept {
    auto index = static_cast<std::size_t>(fd);
    if (index < entries_.size() && entries_[index] != nullptr && entries_[index]->pinned > 0) {
      --entries_[index]->pinned;
      update(*entries_[index]);
    }
  }

  void close() noexcept override {
    // Only reachable with waiters gone (a waiter keeps its coroutine, hence run(), alive).
    for (auto& entry : entries_) {
      if (entry != nullptr && entry->watched) {
        driver_.unwatch_fd(*entry);
      }
      if (entry != nullptr && entry->timer.queued()) {
        driver_.remove_timer(entry->timer);  // a deadline left from the fd's last timed wait
      }
    }
    unsettled_.clear();
    entries_.clear();
  }

 private:
  static void on_ready(fd_watch& watch, int events);

  driver& driver_;
  std::vector<std::unique_ptr<fd_entry>> entries_;  // by fd
  std::vector<fd_entry*> unsettled_;                // see settle()
};

class fd_wait final : public wait_source {
 public:
  fd_wait(scheduler_core& core, fd_registry& registry, fd_entry& entry, bool writing,
          const char* operation)
      : core_(core), registry_(registry), entry_(entry), writing_(writing), operation_(operation) {}
  // A wait that ended before it armed (a pending cancel) leaves its entry watched by nobody;
  // one that armed was updated by its disarm already.
  ~fd_wait() {
    if (!armed() && entry_.watched && entry_.waiters() == 0) {
      registry_.update(entry_);
    }
  }
  fd_wait(const fd_wait&) = delete;
  fd_wait& operator=(const fd_wait&) = delete;

  [[gnu::hot]] bool arm(coroutine& waiter) override {
    waiter_ = &waiter;  // also marks the wait as armed (see wait_for)
    link_.wait = this;
    (writing_ ? entry_.writers : entry_.readers).push_back(link_);
    ++(writing_ ? entry_.writing : entry_.reading);
    if (fd_registry::settled_wait(entry_, want())) {
      registry_.join_settled(entry_);
      return true;
    }
    int status = registry_.update(entry_);
    if (status < 0) {
      // The driver could not poll the fd (libevent refusing a fd closed since the last wait).
      // This is the first source of its wait (wait_for), so nothing else is armed yet.
      disarm();
      throw_fd_error(status, operation_, entry_.fd);
    }
    return true;
  }
  [[gnu::hot]] void disarm() noexcept override {
    if (link_.linked()) {
      intrusive_list::remove(link_);
    }
    --(writing_ ? entry_.writing : entry_.reading);
    if (fd_registry::settled_wait(entry_, want())) {
      registry_.leave_settled(entry_);
      return;
    }
    registry_.update(entry_);  // may unwatch the entry
  }
  void describe(std::string& out) const override {
    out += "fd " + std::to_string(entry_.fd) + (writing_ ? " writable" : " readable");
  }

  void fire() noexcept { core_.wake(*waiter_, this); }
  bool armed() const noexcept { return waiter_ != nullptr; }
  int want() const noexcept { return writing_ ? fd_watch::writable : fd_watch::readable; }

  struct link : list_node {
    fd_wait* wait = nullptr;
  };

 private:
  scheduler_core& core_;
  fd_registry& registry_;
  fd_entry& entry_;
  bool writing_;
  const char* operation_;
  coroutine* waiter_ = nullptr;
  link link_{};
};

// The deadline of a wait on an fd, on the fd's own timer entry instead of a fresh one per wait.
// A connection served in a loop waits with a time limit (an idle or keep-alive timeout) before
// every request; a fresh heap entry per wait cost a push and a removal, and the removal sifts
// through about log2(n) entries of other coroutines' stacks (a cache and TLB miss each at a
// thousand connections: timer_queue::sift_down was the costliest function of weft's own in
// bench_http_weft at 1000 connections). Here the entry stays queued when the wait ends: the
// next wait, whose deadline is normally later, leaves it where it is, and when it fires early
// it moves itself to the deadline of the wait then using it (or leaves the heap if none).
// So a connection's deadline costs about one heap operation per timeout period, not two per
// request. A deadline earlier than the queued one re-queues it at once. One wait at a time
// uses an fd's entry; another timed wait on the same fd meanwhile takes a deadline_wait.
class fd_deadline final : public wait_source {
 public:
  fd_deadline(scheduler_core& core, fd_entry& entry, clock::time_point deadline)
      : core_(core), entry_(entry), deadline_(deadline) {}

  [[gnu::hot]] bool arm(coroutine& waiter) override {
    if (expired()) {
      return false;
    }
    waiter_ = &waiter;
    lazy_timer& timer = entry_.timer;
    timer.user = this;
    if (timer.queued()) {
      if (timer.deadline <= deadline_) {
        return true;  // fires early and moves to this deadline then (on_fire)
      }
      core_.driver().remove_timer(timer);
    }
    timer.deadline = deadline_;
    timer.core = &core_;
    timer.background = true;
    timer.fire = &fd_deadline::on_fire;
    core_.driver().add_timer(timer);
    return true;
  }
  [[gnu::hot]] void disarm() noexcept override { entry_.timer.user = nullptr; }
  void describe(std::string& out) const override {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        saturating_remaining(deadline_, clock::now()));
    out += "deadline in " + std::to_string(remaining.count()) + " ms";
  }

 private:
  static void on_fire(timer_entry& fired) {
    auto& timer = static_cast<lazy_timer&>(fired);
    fd_deadline* user = timer.user;
    if (user == nullptr) {
      return;  // the wait it was queued for is over: out of the heap until the next one
    }
    if (user->deadline_ <= timer.deadline) {
      timer.core->wake(*user->waiter_, user);
      return;
    }
    timer.deadline = user->deadline_;
    timer.core->driver().add_timer(timer);
  }

  // Whether the deadline has passed, judged first against the time of the scheduler's last
  // poll (a reading it took anyway; a served connection waits with a deadline before every
  // request, and a clock reading costs 20-30 ns, about 0.4% of a keep-alive request): one
  // before it has passed, and one more than exact_within after it has not unless the thread ran
  // that long without polling, in which case its timer fires at the next poll, as it would had
  // the deadline passed during the wait. Only a deadline near the last poll is checked on the
  // clock, so a zero or tiny limit still gives up without suspending.
  bool expired() const noexcept {
    constexpr auto exact_within = std::chrono::milliseconds(50);
    const clock::time_point polled = core_.last_poll();
    if (deadline_ <= polled) {
      return true;
    }
    return deadline_ - polled <= exact_within && deadline_ <= clock::now();
  }

  scheduler_core& core_;
  fd_entry& entry_;
  clock::time_point deadline_;
  coroutine* waiter_ = nullptr;
};

[[gnu::hot]] void fd_registry::on_ready(fd_watch& watch, int events) {
  auto& entry = static_cast<fd_entry&>(watch);
  // Wake the waiters the event concerns; each unlinks itself from the lists here, and leaves
  // the entry (possibly unwatching it) when it resumes and disarms.
  auto wake_all = [](intrusive_list& list) {
    while (list_node* node = list.pop_front()) {
      static_cast<fd_wait::link*>(node)->wait->fire();
    }
  };
  fd_subscription* subscriber = entry.subscriber;
  if (entry.armed == 0) {
    // The driver stopped polling after an error condition (see fd_watch): forget what was
    // polled, so that the next wait starts it again. Ready both ways: the caller's next read
    // or write returns the real error (ECONNRESET, EPIPE) rather than a misleading one here.
    entry.events = 0;
    if (subscriber != nullptr) {
      subscriber->ready(*subscriber, fd_subscription::readable | fd_subscription::writable |
                                         fd_subscription::stopped);
    }
    wake_all(entry.readers);
    wake_all(entry.writers);
    return;
  }
  if (events == fd_watch::readable && (subscriber == nullptr || subscriber->events == 0) &&
      !entry.readers.empty()) {
    // The common case of a served socket, readable with its reader waiting (and no
    // subscription, or a dormant one): the general path below ends in exactly this (nothing
    // unwanted, the repeats reset, the readers woken).
    entry.repeats = 0;
    wake_all(entry.readers);
    return;
  }
  int subscribed = subscriber != nullptr ? subscriber->events : 0;
  // An interest that fired with nobody waiting or subscribed for it is dropped (level-triggered:
  // it would fire at every poll); a waiter that comes later adds it back. A pinned entry keeps
  // such interests on purpose (update() only adds them there), and a dormant subscription
  // (events 0, no call into the registry) leaves one behind on any entry. A
  // waiter woken earlier that has not run yet (reading/writing count it until it disarms) keeps
  // the interest through a few such reports: a poll between its wake and its read sees the fd
  // ready again, and dropping the interest then costs two epoll_ctl calls per request (drop now,
  // add back at its next wait) for a socket served in a loop. A few, not any number: in a burst
  // of thousands of woken coroutines the scheduler may poll many times before they all run, and
  // each poll reports every such fd again (measured: closing 10,000 connections at once took
  // 2.8 s with no cap, 1.0 s with a cap of one). A server that wakes many coroutines per poll
  // lengthens its reactor_poll_interval instead (net::tcp_server's workers do).
  //
  // The lists are read through the waiter counts (has_readers, has_writers): a fd that only a
  // subscription watches (a hibernating connection's) is then served from the first cache line
  // of its entry.
  const bool woken_pending = entry.repeats < max_woken_repeats;
  const bool readers = (events & fd_watch::readable) != 0 && entry.has_readers();
  const bool writers = (events & fd_watch::writable) != 0 && entry.has_writers();
  int unwanted = 0;
  if ((events & fd_watch::readable) != 0 && !readers && (subscribed & fd_watch::readable) == 0 &&
      !(entry.reading > 0 && woken_pending)) {
    unwanted |= fd_watch::readable;
  }
  if ((events & fd_watch::writable) != 0 && !writers && (subscribed & fd_watch::writable) == 0 &&
      !(entry.writing > 0 && woken_pending)) {
    unwanted |= fd_watch::writable;
  }
  entry.repeats =
      readers || writers
          ? 0
          : static_cast<std::uint16_t>(std::min<unsigned>(entry.repeats + 1u, max_woken_repeats));
  if ((events & subscribed) != 0) {
    subscriber->ready(*subscriber, events & subscribed);
  }
  if (readers) {
    wake_all(entry.readers);
  }
  if (writers) {
    wake_all(entry.writers);
  }
  if (unwanted != 0) {
    entry.registry->set_events(entry, entry.events & ~unwanted);
  }
}

fd_registry& registry_of(scheduler_core& core) {
  return core.driver().extension<fd_registry>(core.driver());
}

// The cold parts of wait_for, out of line: inline, their strings and the general limit's
// sources gave wait_for a 680-byte frame and six saved registers, on the stack of every
// coroutine waiting for a fd.
[[noreturn, gnu::cold, gnu::noinline]] void throw_negative_fd(const char* operation, int fd) {
  throw std::invalid_argument(std::string("weft: ") + operation + " needs an open fd, got " +
                              std::to_string(fd));
}

[[noreturn, gnu::cold, gnu::noinline]] void throw_fd_timed_out(const char* operation, int fd,
                                                               const timeout& limit) {
  throw timeout_error("weft: " + std::string(operation) + " fd " + std::to_string(fd) + " " +
                      timed_out_after(limit));
}

// A limit with a cancel token, or a second timed wait on the fd meanwhile (its entry's deadline
// is taken): the general sources of sched/deadline_wait.hpp.
[[gnu::noinline]] void wait_for_limited(scheduler_core& core, coroutine& self, fd_wait& ready,
                                        int fd, const char* operation, const timeout& limit) {
  wait_source* sources[] = {&ready};
  auto describe = [&] { return std::string(operation) + " fd " + std::to_string(fd); };
  wait_with_limit(core, self, sources, limit, describe);
}

[[gnu::hot]] void wait_for(int fd, bool writing, const timeout& limit) {
  const char* operation = writing ? "weft::wait_writable" : "weft::wait_readable";
  scheduler_core* core = current_core();
  if (core == nullptr) {
    current_uv_loop(operation);  // throws the outside-a-coroutine logic_error
  }
  coroutine& self = core->waiter_or_throw(operation);
  if (fd < 0) {
    throw_negative_fd(operation, fd);
  }
  auto& registry = registry_of(*core);
  fd_entry& entry = registry.entry(fd, operation);
  fd_wait ready(*core, registry, entry, writing, operation);
  if (!limit.limited()) {
    wait_source* sources[] = {&ready};
    core->wait_as(self, sources, 1);
    return;
  }
  if (limit.bounded() && cancel_token_of(limit) == nullptr && entry.timer.user == nullptr) {
    fd_deadline deadline(*core, entry, limit.deadline());
    wait_source* sources[] = {&ready, &deadline};
    if (&core->wait_as(self, sources, 2) == &deadline) {
      throw_fd_timed_out(operation, fd, limit);
    }
    return;
  }
  wait_for_limited(*core, self, ready, fd, operation, limit);
}

}  // namespace

int subscribe_fd(scheduler_core& core, fd_subscription& subscription) {
  return registry_of(core).subscribe(subscription);
}

void unsubscribe_fd(scheduler_core& core, fd_subscription& subscription) noexcept {
  if (subscription.entry != nullptr) {
    registry_of(core).unsubscribe(subscription);
  }
}

}  // namespace weft::detail

namespace weft {

[[gnu::hot]] void wait_readable(int fd, const timeout& limit) {
  detail::wait_for(fd, false, limit);
}

fd_registration::fd_registration(int fd) {
  detail::scheduler_core* core = detail::current_core();
  if (core == nullptr || core->current() == nullptr) {
    throw std::logic_error(
        "weft::fd_registration made outside a coroutine; make it from weft::run's main or from "
        "a coroutine started with weft::spawn");
  }
  if (fd < 0) {
    throw std::invalid_argument("weft::fd_registration needs an open fd, got " +
                                std::to_string(fd));
  }
  detail::registry_of(*core).pin(fd, "weft::fd_registration");
  fd_ = fd;
}

fd_registration::fd_registration(fd_registration&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

fd_registration& fd_registration::operator=(fd_registration&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

fd_registration::~fd_registration() { reset(); }

void fd_registration::reset() noexcept {
  if (fd_ < 0) {
    return;
  }
  detail::scheduler_core* core = detail::current_core();
  if (core != nullptr) {
    detail::registry_of(*core).unpin(fd_);
  }
  fd_ = -1;
}

[[gnu::hot]] void wait_writable(int fd, const timeout& limit) { detail::wait_for(fd, true, limit); }

}  // namespace weft
