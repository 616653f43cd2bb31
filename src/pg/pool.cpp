// weft::pg::pool: the hooks that make weft::pool manage PostgreSQL sessions.
#include "weft/pg/pool.hpp"

#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include "weft/sched/this_coroutine.hpp"

namespace weft::pg {

weft::pool_options<connection> pool::adapt(pool_options options) {
  weft::pool_options<connection> adapted;
  adapted.min = options.min;
  adapted.max = options.max;
  adapted.healthcheck_interval = options.healthcheck_interval;
  adapted.acquire_timeout = options.acquire_timeout;
  adapted.validate_after_idle = options.validate_after_idle;
  adapted.breaker_strategy = std::move(options.breaker_strategy);
  adapted.name = std::move(options.name);
  auto connect_timeout = options.connect_timeout.get();
  auto reset_timeout = options.reset_timeout.get();
  bool reset_on_release = options.reset_on_release;
  adapted.factory = [conninfo = std::move(options.conninfo), connect_timeout] {
    return connection::connect(conninfo, timeout(connect_timeout));
  };
  adapted.destructor = [](connection& session) { session.close(); };
  adapted.healthcheck = [reset_timeout](connection& session) {
    return session.is_open() && session.query(timeout(reset_timeout), "SELECT 1").value<int>() == 1;
  };
  adapted.before_acquire = [](connection& session) { return session.is_open(); };
  if (options.validate_after_idle) {
    adapted.validate = [reset_timeout](connection& session, const timeout& limit) {
      if (!session.is_open()) {
        return false;
      }
      // Bounded by whichever ends first: the acquire's limit or reset_timeout.
      const timeout bound = limit.capped(reset_timeout);
      // An empty query: one round trip, nothing to parse or plan. A lost session throws
      // pg::error, which the pool reports to the breaker.
      session.query(bound, "");
      return session.is_open();
    };
  }
  adapted.before_release = [reset_on_release, reset_timeout](connection& session) {
    if (!session.is_open()) {
      return false;
    }
    if (!reset_on_release && !session.busy()) {
      return true;
    }
    // Protected: the releasing coroutine may be unwinding from a cancellation, and a reset cut
    // short would hand the next user a dirty session (or none).
    return weft::protect([&] {
      try {
        timeout limit(reset_timeout);
        if (session.in_flight() != 0) {
          // Queries abandoned by a timeout or a cancel still run: a query behind them returns
          // once they are answered, so the next user starts on an idle session.
          session.query(limit, "SELECT 1");
        }
        if (!reset_on_release) {
          return session.is_open() && !session.busy();
        }
        if (session.in_transaction()) {
          session.execute_script("ROLLBACK", limit);
        }
        session.execute_script("DISCARD ALL", limit);
        return session.is_open();
      } catch (const std::exception&) {
        return false;  // the pool drops it and a fresh one takes its slot
      }
    });
  };
  return adapted;
}

pool::pool(pool_options options)
    : pipeline_depth_(options.pipeline_depth),
      acquire_timeout_(options.acquire_timeout),
      name_(options.name),
      connections_(adapt(std::move(options))) {
  if (pipeline_depth_ == 0) {
    throw std::invalid_argument(
        "weft::pg::pool: pipeline_depth must be at least 1 (1: every query gets a connection "
        "of its own)");
  }
}

void pool::describe_shared_waiters(const void* owner, std::string& out) {
  const auto& self = *static_cast<const pool*>(owner);
  out += "a place in a shared session of weft::pg::pool \"" + self.name_ + "\" (" +
         std::to_string(self.shared_.size()) + " shared, " +
         std::to_string(self.shared_connecting_) + " connecting)";
}

pool::shared_session* pool::share(const std::optional<timeout>& limit) {
  // One deadline for the whole call, however often it waits.
  timeout deadline = limit              ? *limit
                     : acquire_timeout_ ? timeout(acquire_timeout_->get())
                                        : timeout::never();
  for (;;) {
    pool_stats stats = connections_.stats();
    bool in_line_for_acquire = stats.waiters > shared_connecting_ || connections_.closed() ||
                               connections_.breaker().state() != circuit_state::closed;
    bool can_take_one = stats.idle != 0 || stats.count() + stats.reserved < stats.max;
    if (in_line_for_acquire || can_take_one) {
      break;  // a connection of its own (now, or in acquire()'s FIFO queue)
    }
    shared_session* least_busy = nullptr;
    for (const std::unique_ptr<shared_session>& each : shared_) {
      if (each->users < pipeline_depth_ && each->lease->is_open() &&
          (least_busy == nullptr || each->users < least_busy->users)) {
        least_busy = each.get();
      }
    }
    if (least_busy != nullptr) {
      ++least_busy->users;
      return least_busy;
    }
    if (shared_.empty() && shared_connecting_ == 0) {
      break;  // every connection is leased for itself: wait in acquire() like them
    }
    // Full, or still connecting: wait until a place frees up or a session opens.
    weft::detail::queued_waiter waiter(shared_waiters_);
    shared_waiters_.wait(waiter, deadline, [this](weft::detail::queued_waiter&) {
      shared_waiters_.grant_front(0);  // cancelled after being told: tell the next one
    });
  }
  ++shared_connecting_;
  struct connected {
    pool& self;
    ~connected() {
      --self.shared_connecting_;
      self.shared_waiters_.grant_all(0);  // a new session to join, or a reason to go to acquire
    }
  } done{*this};
  auto taken = std::make_unique<shared_session>();
  taken->lease = connections_.acquire(deadline);
  taken->users = 1;
  shared_.push_back(std::move(taken));
  return shared_.back().get();
}

void pool::unshare(shared_session* session) noexcept {
  if (--session->users != 0) {
    shared_waiters_.grant_front(0);  // a place to join
    return;
  }
  for (std::unique_ptr<shared_session>& each : shared_) {
    if (each.get() == session) {
      std::unique_ptr<shared_session> last = std::move(each);
      each = std::move(shared_.back());
      shared_.pop_back();
      last.reset();  // out of the list first: nobody joins while the lease is given back
      shared_waiters_.grant_all(0);  // the connection may be theirs to take now
      return;
    }
  }
}

pool::shared_use::shared_use(pool& owner, const std::optional<timeout>& limit)
    : owner_(owner), session_(owner.share(limit)) {}

pool::shared_use::~shared_use() { owner_.unshare(session_); }

}  // namespace weft::pg
