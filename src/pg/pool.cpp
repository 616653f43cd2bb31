// weft::pg::pool: the hooks that make weft::pool manage PostgreSQL sessions.
#include "weft/pg/pool.hpp"

#include <utility>

#include "weft/sched/this_coroutine.hpp"

namespace weft::pg {

weft::pool_options<connection> pool::adapt(pool_options options) {
  weft::pool_options<connection> adapted;
  adapted.min = options.min;
  adapted.max = options.max;
  adapted.healthcheck_interval = options.healthcheck_interval;
  adapted.acquire_timeout = options.acquire_timeout;
  adapted.breaker_strategy = std::move(options.breaker_strategy);
  adapted.name = std::move(options.name);
  auto connect_timeout = options.connect_timeout;
  auto reset_timeout = options.reset_timeout;
  bool reset_on_release = options.reset_on_release;
  adapted.factory = [conninfo = std::move(options.conninfo), connect_timeout] {
    return connection::connect(conninfo, timeout(connect_timeout));
  };
  adapted.destructor = [](connection& session) { session.close(); };
  adapted.healthcheck = [reset_timeout](connection& session) {
    return session.is_open() && session.query(timeout(reset_timeout), "SELECT 1").value<int>() == 1;
  };
  adapted.before_acquire = [](connection& session) { return session.is_open(); };
  adapted.before_release = [reset_on_release, reset_timeout](connection& session) {
    if (!session.is_open() || session.busy()) {
      return false;
    }
    if (!reset_on_release) {
      return true;
    }
    // Protected: the releasing coroutine may be unwinding from a cancellation, and a reset cut
    // short would hand the next user a dirty session (or none).
    return weft::protect([&] {
      try {
        timeout limit(reset_timeout);
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

pool::pool(pool_options options) : connections_(adapt(std::move(options))) {}

}  // namespace weft::pg
