// weft::io_error's members and weft::libuv_category (declared in weft/error.hpp).
//
// io_error is declared in the bottom layer so that every layer can catch it, but what it holds
// is a libuv code, and turning that into a std::error_code needs libuv (uv_strerror for the
// libuv-only codes); the bottom layers stay free of libuv, so the definitions live here, in the
// layer that owns the libuv driver and throws most of these errors.
#include <uv.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include "weft/error.hpp"

namespace weft {

namespace {

// libuv on Unix spells an errno value as its negation (UV__ERR(x) is -(x) in uv/errno.h) and
// gives the codes it has of its own fixed values from -3000 down (UV__EAI_ADDRFAMILY is -3000,
// UV__EOF -4095), far below any errno. So a code in (-3000, 0) is a negated errno. Checked here
// at compile time, so that a libuv or a platform that breaks the rule fails the build instead
// of mapping errors to the wrong category.
constexpr int first_libuv_only_code = -3000;
static_assert(UV_ECONNREFUSED == -ECONNREFUSED && UV_ENOENT == -ENOENT && UV_EMFILE == -EMFILE &&
                  UV_ECANCELED == -ECANCELED && UV_EPIPE == -EPIPE,
              "libuv's errno codes are expected to be the negated errno (Unix)");
static_assert(UV_EOF <= first_libuv_only_code && UV_UNKNOWN <= first_libuv_only_code &&
                  UV_EAI_ADDRFAMILY <= first_libuv_only_code &&
                  UV_EAI_SOCKTYPE <= first_libuv_only_code &&
                  UV_ECHARSET <= first_libuv_only_code && UV_EFTYPE <= first_libuv_only_code,
              "libuv's own codes are expected at -3000 and below");

class libuv_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "libuv"; }
  std::string message(int code) const override { return uv_strerror(code); }
};

}  // namespace

const std::error_category& libuv_category() noexcept {
  static const libuv_error_category category;
  return category;
}

io_error::io_error(int uv_code, std::string operation, std::string subject,
                   const std::string& message)
    : error(operation + (subject.empty() ? "" : " " + subject) + ": " + message),
      uv_code_(uv_code),
      operation_(std::move(operation)),
      subject_(std::move(subject)) {}

std::error_code io_error::error_code() const noexcept {
  if (uv_code_ < 0 && uv_code_ > first_libuv_only_code) {
    return {-uv_code_, std::system_category()};
  }
  return {uv_code_, libuv_category()};
}

}  // namespace weft
