// Misuse reports of weft::pool and weft::lease, and the pool destructor's last report: see
// include/weft/pool/pool.hpp.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "weft/pool/pool.hpp"

namespace weft::detail {

void throw_empty_lease(const char* operation) {
  throw std::logic_error(std::string("weft::lease: ") + operation +
                         " on an empty lease; it was already released or discarded, or moved "
                         "from: a resource is returned to its pool exactly once");
}

void throw_foreign_lease(const std::string& pool_name) {
  std::string label = pool_name.empty() ? "weft::pool" : "weft::pool '" + pool_name + "'";
  throw std::logic_error(label +
                         ": release of a lease from another pool; give a lease back to the pool "
                         "it was acquired from (or just call lease.release())");
}

void throw_moved_from_pool() {
  throw std::logic_error(
      "weft::pool: used after it was moved from; use the pool object it was moved into");
}

void close_on_destruction(pool_core& core) noexcept {
  try {
    core.close();
  } catch (const resource_destroy_error& failure) {
    std::fprintf(stderr, "weft: %s (reported by the pool's destructor)\n", failure.what());
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "weft: closing a pool in its destructor failed: %s\n", failure.what());
  } catch (...) {
    std::fprintf(stderr, "weft: closing a pool in its destructor failed\n");
  }
}

}  // namespace weft::detail
