// fd readiness on uv_poll_t, one handle per fd shared by every waiter of that fd.
#include "weft/reactor/fd.hpp"

#include <uv.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "reactor/uv_driver.hpp"
#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft::detail {
namespace {

class fd_wait;

// One polled fd. Heap-allocated; freed from the handle's close callback, since libuv may still
// touch the handle between uv_close and that callback.
struct fd_watch {
  uv_poll_t poll{};
  int fd = -1;
  int events = 0;  // what the handle is started for
  intrusive_list readers;
  intrusive_list writers;
  std::size_t waiters = 0;
  // fd_registration objects keeping it open between waits (see fd.hpp): a pinned watch is not
  // closed when its last waiter leaves, and keeps polling for what it polled; on_poll drops an
  // interest once it fires with nobody waiting for it.
  int pinned = 0;
};

class fd_registry final : public driver_extension {
 public:
  explicit fd_registry(uv_loop_t& loop) : loop_(loop) {}

  fd_watch& watch(int fd, const char* operation) {
    auto found = watches_.find(fd);
    if (found != watches_.end()) {
      return *found->second;
    }
    auto* created = new fd_watch();
    created->fd = fd;
    int status = uv_poll_init(&loop_, &created->poll, fd);
    if (status < 0) {
      delete created;
      throw_uv_error(status, operation, "fd " + std::to_string(fd));
    }
    created->poll.data = created;
    watches_.emplace(fd, created);
    return *created;
  }

  // Restarts the handle for what its waiters want, or closes it once nobody waits.
  void update(fd_watch& watch) noexcept {
    int wanted =
        (watch.readers.empty() ? 0 : UV_READABLE) | (watch.writers.empty() ? 0 : UV_WRITABLE);
    if (watch.pinned > 0) {
      // Registered for the long run: only ever add interests here (each change of the polled
      // set is a syscall); one nobody waits for goes when it fires (on_poll). Idle, it must not
      // keep the loop alive (nor hide a deadlock): only waiters do.
      set_events(watch, watch.events | wanted);
      if (watch.waiters == 0) {
        uv_unref(reinterpret_cast<uv_handle_t*>(&watch.poll));
      } else {
        uv_ref(reinterpret_cast<uv_handle_t*>(&watch.poll));
      }
      return;
    }
    if (watch.waiters == 0) {
      watches_.erase(watch.fd);
      uv_close(reinterpret_cast<uv_handle_t*>(&watch.poll),
               [](uv_handle_t* handle) { delete static_cast<fd_watch*>(handle->data); });
      return;
    }
    set_events(watch, wanted);
  }

  static void set_events(fd_watch& watch, int wanted) noexcept {
    if (wanted != watch.events) {
      watch.events = wanted;
      if (wanted == 0) {
        uv_poll_stop(&watch.poll);
      } else {
        uv_poll_start(&watch.poll, wanted, &fd_registry::on_poll);
      }
    }
  }

  // fd_registration: pins fd's watch (made if needed) / unpins it, closing it if nobody waits.
  void pin(int fd, const char* operation) { ++watch(fd, operation).pinned; }
  void unpin(int fd) noexcept {
    auto found = watches_.find(fd);
    if (found != watches_.end() && found->second->pinned > 0) {
      --found->second->pinned;
      update(*found->second);
    }
  }

  void close() noexcept override {
    // Only reachable with waiters gone (a waiter keeps its coroutine, hence run(), alive).
    for (auto& [fd, watch] : watches_) {
      uv_close(reinterpret_cast<uv_handle_t*>(&watch->poll),
               [](uv_handle_t* handle) { delete static_cast<fd_watch*>(handle->data); });
    }
    watches_.clear();
  }

 private:
  static void on_poll(uv_poll_t* handle, int status, int events);

  uv_loop_t& loop_;
  std::unordered_map<int, fd_watch*> watches_;
};

class fd_wait final : public wait_source {
 public:
  fd_wait(scheduler_core& core, fd_registry& registry, fd_watch& watch, bool writing)
      : core_(core), registry_(registry), watch_(watch), writing_(writing) {}

  bool arm(coroutine& waiter) override {
    waiter_ = &waiter;
    link_.wait = this;
    (writing_ ? watch_.writers : watch_.readers).push_back(link_);
    ++watch_.waiters;
    registry_.update(watch_);
    return true;
  }
  void disarm() noexcept override {
    if (link_.linked()) {
      intrusive_list::remove(link_);
    }
    --watch_.waiters;
    registry_.update(watch_);  // may close and free the watch
  }
  void describe(std::string& out) const override {
    out += (writing_ ? "fd " : "fd ") + std::to_string(watch_.fd) +
           (writing_ ? " writable" : " readable");
  }

  void fire() noexcept { core_.wake(*waiter_, this); }

  struct link : list_node {
    fd_wait* wait = nullptr;
  };

 private:
  scheduler_core& core_;
  fd_registry& registry_;
  fd_watch& watch_;
  bool writing_;
  coroutine* waiter_ = nullptr;
  link link_{};
};

void fd_registry::on_poll(uv_poll_t* handle, int status, int events) {
  auto* watch = static_cast<fd_watch*>(handle->data);
  // Wake the waiters the event concerns; each unlinks itself from the lists here, and leaves
  // the watch (possibly closing it) when it resumes and disarms.
  auto wake_all = [](intrusive_list& list) {
    while (list_node* node = list.pop_front()) {
      static_cast<fd_wait::link*>(node)->wait->fire();
    }
  };
  if (status < 0) {
    // An error condition on the fd (POLLERR: libuv reports it as UV_EBADF, whatever the real
    // error, and stops the handle). As poll(2), Go's netpoller and mio do, it counts as ready
    // both ways: the caller's next read or write returns the real error (ECONNRESET, EPIPE)
    // instead of a misleading "bad file descriptor" here. The handle is stopped, so forget what
    // it polled: the next wait starts it again.
    watch->events = 0;
    wake_all(watch->readers);
    wake_all(watch->writers);
    return;
  }
  // A pinned watch drops an interest that fired with nobody waiting (level-triggered: it would
  // fire at every poll); a waiter that comes later adds it back.
  int unwanted = 0;
  if ((events & UV_READABLE) != 0 && watch->readers.empty()) {
    unwanted |= UV_READABLE;
  }
  if ((events & UV_WRITABLE) != 0 && watch->writers.empty()) {
    unwanted |= UV_WRITABLE;
  }
  if ((events & UV_READABLE) != 0) {
    wake_all(watch->readers);
  }
  if ((events & UV_WRITABLE) != 0) {
    wake_all(watch->writers);
  }
  if (watch->pinned > 0 && unwanted != 0) {
    fd_registry::set_events(*watch, watch->events & ~unwanted);
  }
}

fd_registry& registry_of(scheduler_core& core) {
  return core.driver().extension<fd_registry>(uv_loop_of(core.driver(), "weft fd waits"));
}

void wait_for(int fd, bool writing, const timeout& limit) {
  const char* operation = writing ? "weft::wait_writable" : "weft::wait_readable";
  scheduler_core* core = current_core();
  if (core == nullptr) {
    current_uv_loop(operation);  // throws the outside-a-coroutine logic_error
  }
  coroutine& self = core->waiter_or_throw(operation);
  if (fd < 0) {
    throw std::invalid_argument(std::string("weft: ") + operation + " needs an open fd, got " +
                                std::to_string(fd));
  }
  auto& registry = registry_of(*core);
  fd_watch& watch = registry.watch(fd, operation);
  fd_wait ready(*core, registry, watch, writing);
  wait_source* sources[] = {&ready};
  wait_with_limit(*core, self, sources, limit,
                  [&] { return std::string(operation) + " fd " + std::to_string(fd); });
}

}  // namespace
}  // namespace weft::detail

namespace weft {

void wait_readable(int fd, const timeout& limit) { detail::wait_for(fd, false, limit); }

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

void wait_writable(int fd, const timeout& limit) { detail::wait_for(fd, true, limit); }

}  // namespace weft
