// How static_files (static_files.hpp) keeps its opens under the root: openat2(2) with
// RESOLVE_BENEATH, or the component-by-component O_NOFOLLOW walk used where the kernel has no
// openat2. Not for users: this exists so that the tests can run every confinement case through
// both ways on a kernel that has openat2.
#pragma once

#include <cstdint>

namespace weft::http::detail {

enum class confine_mode : std::uint8_t {
  // openat2 when the kernel accepts it (probed by each static_files constructor), else the walk.
  automatic,
  // The O_NOFOLLOW walk even where openat2 exists.
  walk,
};

// Process-wide; read by every static_files::resolve() (a relaxed atomic). Tests set it before
// resolving and put back automatic after.
void set_confine_mode(confine_mode mode) noexcept;
confine_mode get_confine_mode() noexcept;

// Whether openat2 with RESOLVE_BENEATH works on this kernel for a directory descriptor `dir_fd`
// (false on ENOSYS, or EPERM from a seccomp filter).
bool openat2_works(int dir_fd) noexcept;

}  // namespace weft::http::detail
